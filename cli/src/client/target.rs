//! [`Target`]: where a client command connects, with which token, and to whose listener —
//! the URL given, or the one running carrier's runtime file.

use std::io::Write;

use carrier::client::{split_url_token, Listener, WsOptions};
use carrier::discovery::listener::OwnerPolicy;
use carrier::discovery::RuntimeDir;

use super::failure::Failure;

/// Where a client command connects, with which token, and to whose listener.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    /// [`OwnerPolicy::AnyOwner`] only for a URL the user named with `--any-owner`.
    pub(crate) owners: OwnerPolicy,
}

/// The URL and token given, or, without a URL, those of the one carrier whose runtime file is in
/// `runtime` (a token given still wins): its Unix socket (`unix:PATH`) when the file lists one,
/// its `ws://` URL only when it does not. Warnings about files that were ignored go to `err`.
/// `--any-owner` needs a URL: a carrier found through a runtime file is always the user's own.
///
/// A token written into the URL (`?token=`) is taken out of it and is the token (as the server
/// would read it first), so the URL a command shows never carries it and the token goes only
/// where the owner check lets a token go. A URL that cannot be dialled (`user:password@`
/// included) is a usage error, shown without its secrets.
pub(crate) fn resolve_target(
    url: Option<&str>,
    token: Option<&str>,
    any_owner: bool,
    runtime: &RuntimeDir,
    err: &mut impl Write,
) -> Result<Target, Failure> {
    if let Some(url) = url {
        WsOptions::new(url)
            .validate()
            .map_err(|error| Failure::usage(error.to_string()))?;
        let (url, url_token) = split_url_token(url);
        return Ok(Target {
            url,
            token: url_token.or_else(|| token.map(str::to_owned)),
            owners: if any_owner {
                OwnerPolicy::AnyOwner
            } else {
                OwnerPolicy::OwnUser
            },
        });
    }
    if any_owner {
        return Err(Failure::usage(
            "--any-owner needs the URL of the listener you mean; a carrier found through its runtime file is always your own",
        ));
    }
    let scan = runtime.scan();
    for warning in &scan.warnings {
        let _ = writeln!(err, "carrier: warning: {warning}");
    }
    match scan.carriers.as_slice() {
        [] => Err(Failure::usage(format!(
            "no running carrier found (no runtime file in {}): start one with `carrier serve`, or give its URL and --token",
            runtime.path().display()
        ))),
        // The carrier's socket when it lists one: its peer credentials are checked, no table read.
        [one] => Ok(Target {
            url: one.client_url(),
            token: token.map(str::to_owned).or_else(|| one.token.clone()),
            owners: OwnerPolicy::OwnUser,
        }),
        several => {
            let names: Vec<String> = several.iter().map(|c| c.describe()).collect();
            Err(Failure::usage(format!(
                "{} carriers are running: {}; give the URL of one (and its --token)",
                several.len(),
                names.join(", ")
            )))
        }
    }
}

/// The warning for a listener that `--any-owner` let a command talk to without the token;
/// `None` for the user's own.
pub(crate) fn tokenless_warning(url: &str, listener: &Listener) -> Option<String> {
    let whose = match listener {
        Listener::Own | Listener::Unchecked => return None,
        Listener::Foreign(owner) => format!("belongs to {owner}, not to you"),
        Listener::Unattributed(reason) => format!("cannot be attributed to a user ({reason})"),
    };
    Some(format!(
        "warning: the listener at {url} {whose}: talking to it without a token (--any-owner)"
    ))
}
