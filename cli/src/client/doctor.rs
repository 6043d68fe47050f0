//! `carrier doctor`: what is listening on the local ports and what the runtime files list, its
//! versions and compatibility, and what to update.
//!
//! Every port is probed with a tokenless `GET /healthz`, which also says whose listener it is.
//! Only a listener of this user is handshaken (with `CARRIER_TOKEN` or the runtime file's
//! token); another user's is reported with its owner and nothing more. A carrier whose runtime
//! file lists a Unix socket is probed and handshaken there instead of on its port, and a socket
//! that is not this user's gets nothing at all: its owner is named, and no byte is written.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::time::Duration;

use carrier::client::{
    probe_health_at, redact_url, ClientError, ErrorCode, Health, Listener, TransportError, Verdict,
    VersionPair, WsOptions,
};
use carrier::discovery::listener::Endpoint;
use carrier::discovery::{RuntimeDir, RuntimeEntry};
use carrier::protocol::features::Feature;
use carrier::protocol::version::{ProtocolVersion, PROTOCOL_VERSION};
use carrier::protocol::Role;
use serde_json::{json, Value};

use super::args::DoctorArgs;
use super::failure::explain;
use super::fields::string_field;
use super::session::open_own;

/// `carrier doctor` over `ports` on 127.0.0.1 and every carrier listed in `runtime`, with
/// explicit output streams. Exits 0 when at least one carrier answered and every one checked is
/// usable; 1 when none answered, one is incompatible or refused the token, or a runtime file
/// names a port where no carrier answers.
pub async fn doctor_with(
    args: DoctorArgs,
    ports: RangeInclusive<u16>,
    runtime: &RuntimeDir,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode {
    let (first, last) = (*ports.start(), *ports.end());
    // The URL given first: a bad one is a usage error, before anything is probed.
    let given = match args.url.as_deref().map(given_target).transpose() {
        Ok(given) => given,
        Err(error) => {
            let _ = writeln!(err, "carrier: {error}");
            return ExitCode::from(2);
        }
    };
    let scan = runtime.scan();
    for warning in &scan.warnings {
        let _ = writeln!(err, "carrier: warning: {warning}");
    }
    // The default ports, every port a runtime file names (e.g. a carrier on --port 0), and the
    // URL given, each probed once.
    let mut targets: BTreeMap<SocketAddr, (String, Option<RuntimeEntry>)> = ports
        .map(|port| {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            (addr, (format!("ws://{addr}/"), None))
        })
        .collect();
    for entry in scan.carriers {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, entry.port));
        // Its URL, with the path a carrier mounted in a host's server is served at.
        targets.insert(addr, (entry.url.clone(), Some(entry)));
    }
    if let Some((addr, url)) = given.clone() {
        let entry = targets.remove(&addr).and_then(|(_, entry)| entry);
        targets.insert(addr, (url, entry));
    }
    let named = given.as_ref().map(|(addr, _)| *addr);
    let probes = targets.into_iter().map(|(addr, (url, entry))| async move {
        // A carrier listing its socket is reached there, as every client reaches it; one
        // mounted in a host's server (a path in its URL) is probed at that path.
        let (endpoint, url) = match entry.as_ref().and_then(|e| e.socket.clone()) {
            Some(socket) => (Endpoint::Unix(socket), entry_url(entry.as_ref(), url)),
            None => (Endpoint::Tcp(addr), url),
        };
        let path = mount_path(&url);
        let health = probe_health_at(endpoint, &path, Duration::from_secs(2)).await;
        (addr, url, path, entry, health)
    });
    let found = futures_util::future::join_all(probes).await;
    let _ = writeln!(
        out,
        "this client: {} {}, protocol {} (oldest compatible {})",
        carrier::client::CLIENT_NAME,
        env!("CARGO_PKG_VERSION"),
        carrier::client::PROTOCOL_VERSION,
        carrier::client::MIN_COMPATIBLE_PROTOCOL
    );
    let mut carriers = 0;
    let mut problems = 0;
    for (addr, url, path, entry, health) in found {
        let listed = entry
            .as_ref()
            .map(|e| {
                let socket = e
                    .socket
                    .as_ref()
                    .map(|s| format!(", reached at its socket {}", s.display()))
                    .unwrap_or_default();
                format!(
                    ", pid {}, started {}, role {} (runtime file{socket})",
                    e.pid, e.started, e.role
                )
            })
            .unwrap_or_default();
        let probe = match (health, &entry) {
            (Ok(probe), _) => probe,
            (
                Err(
                    error @ (TransportError::ForeignListener(_)
                    | TransportError::UnattributedListener(_)),
                ),
                _,
            ) => {
                // A socket that is not this user's: nothing was written to it.
                problems += 1;
                let _ = writeln!(out, "{addr}: {error}{listed}");
                continue;
            }
            (Err(error), None) if named == Some(addr) => {
                problems += 1;
                let _ = writeln!(
                    out,
                    "{addr}: nothing answers at {} ({error})",
                    redact_url(&url)
                );
                continue;
            }
            (Err(_), None) => continue,
            (Err(error), Some(entry)) => {
                problems += 1;
                let _ = writeln!(
                    out,
                    "{addr}: the runtime file of pid {} names this port, but nothing answers ({error})",
                    entry.pid
                );
                continue;
            }
        };
        if let Some(whose) = not_yours(&probe.listener) {
            // Only the tokenless health probe went there; it is not a carrier of this user's, so
            // no handshake (which would carry the token) and no place in the count.
            if entry.is_some() || named == Some(addr) {
                problems += 1;
            }
            let answer = match probe.health {
                Health::Carrier => "it answers GET /healthz as a carrier".to_owned(),
                Health::Other { status, .. } => format!("GET /healthz answered HTTP {status}"),
            };
            let _ = writeln!(
                out,
                "{addr}: {whose}: only its health was checked, without a token ({answer}){listed}"
            );
            continue;
        }
        let healthz = format!("{}/healthz", path.trim_end_matches('/'));
        let at = if path == "/" {
            String::new()
        } else {
            format!(" at {path}")
        };
        // Without a token, try anyway: a carrier started with --open lists none.
        let token = entry
            .as_ref()
            .and_then(|e| e.token.as_deref())
            .or(args.token.as_deref());
        let session = match probe.health {
            Health::Carrier => {
                // `healthz` alone at the root, as before; the path it was asked at otherwise.
                let checked = if path == "/" {
                    "healthz"
                } else {
                    healthz.as_str()
                };
                let _ = writeln!(out, "{addr}: carrier server{at} ({checked} ok){listed}");
                open_for_versions(&url, token).await
            }
            // A carrier mounted on a route of its own (the socket alone) has no healthz beside
            // it: the host's server answers that. The WebSocket handshake at the path decides.
            Health::Other { status, .. }
                if path != "/" && (entry.is_some() || named == Some(addr)) =>
            {
                match open_own(&url, token, Some(Role::Observe)).await {
                    Ok(session) => {
                        let _ = writeln!(
                            out,
                            "{addr}: carrier server{at} (GET {healthz} answered HTTP {status}: mounted without its other routes; the WebSocket handshake answered){listed}"
                        );
                        Opened::Session(session)
                    }
                    // Refused for its token (1008): a carrier answered; say why below.
                    Err(error @ ClientError::Refused { .. }) => {
                        let _ = writeln!(
                            out,
                            "{addr}: carrier server{at} (GET {healthz} answered HTTP {status}: mounted without its other routes; the WebSocket handshake refused this client){listed}"
                        );
                        Opened::Failed(error)
                    }
                    Err(_) => {
                        problems += 1;
                        let _ = writeln!(
                            out,
                            "{addr}: not a carrier{at} (GET {healthz} answered HTTP {status}, and no carrier handshake answers at {}){listed}",
                            redact_url(&url)
                        );
                        continue;
                    }
                }
            }
            Health::Other { status, .. } => {
                if entry.is_some() || named == Some(addr) {
                    problems += 1;
                }
                let _ = writeln!(
                    out,
                    "{addr}: not a carrier (GET {healthz} answered HTTP {status}){listed}"
                );
                continue;
            }
        };
        carriers += 1;
        if !check_versions(session, &url, token, out).await {
            problems += 1;
        }
    }
    if carriers == 0 {
        let _ = writeln!(
            err,
            "carrier: no carrier server is listening on 127.0.0.1:{first}-{last} or listed in {}; start one with `carrier serve`",
            runtime.path().display()
        );
        return ExitCode::FAILURE;
    }
    if problems > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Where doctor reaches a carrier its runtime file lists: the socket when there is one.
fn entry_url(entry: Option<&RuntimeEntry>, url: String) -> String {
    entry.map_or(url, RuntimeEntry::client_url)
}

/// The address and URL of the carrier named on the command line: a loopback `ws://` URL.
fn given_target(url: &str) -> Result<(SocketAddr, String), ClientError> {
    let addr = WsOptions::new(url).socket_addr()?;
    Ok((addr, url.to_owned()))
}

/// Whose a listener is when it is not this user's: the words for doctor's line.
fn not_yours(listener: &Listener) -> Option<String> {
    match listener {
        Listener::Own | Listener::Unchecked => None,
        Listener::Foreign(owner) => Some(format!("its listener belongs to {owner}, not to you")),
        Listener::Unattributed(reason) => Some(format!(
            "its listener cannot be attributed to a user ({reason})"
        )),
    }
}

/// The path of a `ws://` or `unix:` URL (`/` when it names none): where a carrier is mounted.
fn mount_path(url: &str) -> String {
    let Some((_, rest)) = url.split_once("://") else {
        // `unix:PATH` and `unix:PATH:/robota`: the carrier's own socket, served from its root.
        return "/".to_owned();
    };
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    let path = path.split(['?', '#']).next().unwrap_or("/");
    if path.is_empty() {
        "/".to_owned()
    } else {
        path.to_owned()
    }
}

/// A handshake already made (to tell a mounted carrier from another server), or still to make.
enum Opened {
    Session(super::session::Session),
    Failed(ClientError),
}

/// Handshakes with the carrier at `url` for [`check_versions`].
async fn open_for_versions(url: &str, token: Option<&str>) -> Opened {
    // The dial checks the listener's owner again: the port may have changed hands since the
    // probe.
    match open_own(url, token, Some(Role::Observe)).await {
        Ok(session) => Opened::Session(session),
        Err(error) => Opened::Failed(error),
    }
}

/// Reports the versions, compatibility and missing features of the carrier `opened` reached.
/// Returns false when something needs fixing; a carrier that refuses a client without a token
/// only gets the hint to give one.
async fn check_versions(
    opened: Opened,
    url: &str,
    token: Option<&str>,
    out: &mut impl Write,
) -> bool {
    let ours = VersionPair::CURRENT;
    let session = match opened {
        Opened::Session(session) => session,
        Opened::Failed(ClientError::Refused { .. }) if token.is_none() => {
            let _ = writeln!(
                out,
                "  set CARRIER_TOKEN (or --token) to check versions and compatibility"
            );
            return true;
        }
        Opened::Failed(error) => {
            match error.wire() {
                Some(wire) if wire.code == ErrorCode::VersionIncompatible => {
                    let update = wire
                        .data
                        .as_ref()
                        .and_then(server_range)
                        .map(|theirs| Verdict::assess(ours, theirs));
                    let advice = match update {
                        Some(Verdict::Incompatible { update }) => {
                            format!("update the {}", update.as_str())
                        }
                        _ => "update whichever side is older".to_owned(),
                    };
                    let _ = writeln!(out, "  incompatible: {}; {advice}", wire.message);
                }
                _ => {
                    let _ = writeln!(out, "  {}", explain(&redact_url(url), &error).line);
                }
            }
            return false;
        }
    };
    let info = &session.info;
    let _ = writeln!(
        out,
        "  server {} {}, protocol {} (oldest compatible {}), session {}",
        info.server.name,
        info.server.version,
        info.protocol_version,
        info.min_compatible_protocol,
        info.session_id
    );
    // connect() refuses a server this client cannot talk to (the error above): here the versions
    // are compatible, at most skewed.
    match VersionPair::new(info.protocol_version, info.min_compatible_protocol)
        .map(|theirs| Verdict::assess(ours, theirs))
    {
        Ok(Verdict::Skew { update }) => {
            let _ = writeln!(
                out,
                "  compatible with version skew: update the {} to get the newest features",
                update.as_str()
            );
        }
        _ => {
            let _ = writeln!(out, "  compatible");
        }
    }
    if let Ok(status) = session.client.request("system.status", json!({})).await {
        // The status's protocol, else the handshake's (an older server's status may not say).
        let server = string_field(&status, "protocol_version")
            .and_then(|v| v.parse().ok())
            .or(Some(info.protocol_version));
        let features = status.get("compatibility").and_then(Value::as_object);
        if let Some(features) = features {
            for (feature, detail) in features {
                if detail.get("available").and_then(Value::as_bool) == Some(false) {
                    let needs = string_field(detail, "required_protocol").unwrap_or("?");
                    let advice = feature_advice(needs.parse().ok(), server);
                    let _ = writeln!(
                        out,
                        "  feature {feature} unavailable (needs protocol {needs}): {advice}"
                    );
                }
            }
        }
        // A server older than a feature does not list it at all: name what this client knows
        // and the server's protocol predates.
        if let Some(server) = server {
            for feature in Feature::ALL {
                let listed = features.is_some_and(|f| f.contains_key(feature.name()));
                if !listed && server < feature.introduced() {
                    let _ = writeln!(
                        out,
                        "  feature {} unavailable (needs protocol {}): {}",
                        feature.name(),
                        feature.introduced_str(),
                        feature_advice(Some(feature.introduced()), Some(server))
                    );
                }
            }
        }
    }
    session.client.disconnect().await;
    true
}

/// What to do about a feature the server reports unavailable: update the side whose protocol
/// is below the one the feature needs; when both speak it, the host simply does not offer it.
fn feature_advice(needs: Option<ProtocolVersion>, server: Option<ProtocolVersion>) -> &'static str {
    match (needs, server) {
        (Some(needs), Some(server)) if server < needs => "update the server",
        (Some(needs), _) if PROTOCOL_VERSION < needs => "update this client",
        (Some(_), Some(_)) => "this carrier's host does not offer it (no update helps)",
        _ => "update the side below it",
    }
}

/// The server's versions from a `version_incompatible` error's `data`, when it names them
/// (`{server: {protocol_version, min_compatible_protocol}}` or the same keys at the top).
fn server_range(data: &Value) -> Option<VersionPair> {
    let server = data.get("server").filter(|v| v.is_object()).unwrap_or(data);
    let protocol = string_field(server, "protocol_version")?;
    let min = string_field(server, "min_compatible_protocol").unwrap_or(protocol);
    VersionPair::parse(protocol, min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_features_name_the_side_to_update_or_none() {
        let v = |s: &str| s.parse::<ProtocolVersion>().ok();
        assert_eq!(feature_advice(v("1.1"), v("1.0")), "update the server");
        assert_eq!(
            feature_advice(v("1.0"), v("1.0")),
            "this carrier's host does not offer it (no update helps)"
        );
        assert_eq!(feature_advice(v("9.0"), v("9.0")), "update this client");
        assert_eq!(feature_advice(None, v("1.0")), "update the side below it");
    }
}
