//! `carrier status`: a server's `system.status`, readable or as one JSON line.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{json, Value};

use carrier::discovery::RuntimeDir;

use super::args::StatusArgs;
use super::failure::{explain, Failure};
use super::fields::string_field;
use super::session::open;
use super::target::{resolve_target, Target};

/// `carrier status` with explicit output streams.
pub async fn status_with(args: StatusArgs, out: &mut impl Write, err: &mut impl Write) -> ExitCode {
    let runtime = RuntimeDir::for_user();
    let target = match resolve_target(
        args.url.as_deref(),
        args.token.as_deref(),
        args.any_owner,
        &runtime,
        err,
    ) {
        Ok(target) => target,
        Err(failure) => return failure.report(err),
    };
    match status(&args, &target, out, err).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(err),
    }
}

async fn status(
    args: &StatusArgs,
    target: &Target,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), Failure> {
    let session = open(target, None, err).await?;
    let status = session
        .client
        .request("system.status", json!({}))
        .await
        .map_err(|error| explain(&target.url, &error));
    session.client.disconnect().await;
    let mut status = status?;
    if args.json {
        let Some(fields) = status.as_object_mut() else {
            return Err(Failure::runtime("the server's status is not a JSON object"));
        };
        fields.insert("url".into(), json!(target.url));
        let _ = writeln!(out, "{status}");
        return Ok(());
    }
    let text = |value: &Value, key: &str| string_field(value, key).unwrap_or("?").to_owned();
    let server = status.get("server").cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "{} {} at {}",
        text(&server, "name"),
        text(&server, "version"),
        target.url
    );
    let _ = writeln!(
        out,
        "protocol {} (oldest compatible {}), epoch {}",
        text(&status, "protocol_version"),
        text(&status, "min_compatible_protocol"),
        text(&status, "epoch")
    );
    if let Some(connections) = status.get("connections") {
        let _ = writeln!(out, "connections: {connections}");
    }
    let channels: Vec<String> = status
        .get("channels")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .map(|name| {
                    name.as_str()
                        .map_or_else(|| name.to_string(), str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "channels: {}",
        if channels.is_empty() {
            "(none)".to_owned()
        } else {
            channels.join(", ")
        }
    );
    if let Some(features) = status.get("compatibility").and_then(Value::as_object) {
        for (feature, detail) in features {
            let available = detail.get("available").and_then(Value::as_bool) == Some(true);
            let _ = writeln!(
                out,
                "feature {feature}: {} (needs protocol {})",
                if available {
                    "available"
                } else {
                    "unavailable"
                },
                text(detail, "required_protocol")
            );
        }
    }
    Ok(())
}
