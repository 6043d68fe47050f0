//! [`Failure`]: how a client command ends when it cannot go on — its exit code and the one
//! line that says why, and what to do about it where that is known ([`explain`]).

use std::io::Write;
use std::process::ExitCode;

use carrier::client::{ClientError, ErrorCode, TransportError};

/// A command that cannot go on: the exit code and the one line that explains it.
pub(crate) struct Failure {
    pub(crate) code: ExitCode,
    pub(crate) line: String,
}

impl Failure {
    pub(crate) fn runtime(line: impl Into<String>) -> Failure {
        Failure {
            code: ExitCode::FAILURE,
            line: line.into(),
        }
    }

    pub(crate) fn usage(line: impl Into<String>) -> Failure {
        Failure {
            code: ExitCode::from(2),
            line: line.into(),
        }
    }

    pub(crate) fn report(self, err: &mut impl Write) -> ExitCode {
        let _ = writeln!(err, "carrier: {}", self.line);
        self.code
    }
}

/// One clear line for a client error, saying what to do about it where that is known.
pub(crate) fn explain(url: &str, error: &ClientError) -> Failure {
    let line = match error {
        ClientError::Transport(TransportError::InvalidUrl { .. }) => {
            return Failure {
                code: ExitCode::from(2),
                line: error.to_string(),
            }
        }
        ClientError::Transport(TransportError::Connect { reason, .. }) => format!(
            "cannot reach {url}: {reason}; is `carrier serve` running? (`carrier doctor` lists local servers)"
        ),
        ClientError::Transport(TransportError::UpgradeRejected { status: 403 }) => format!(
            "{url} refused the connection (HTTP 403): this host or origin is not allowed"
        ),
        ClientError::Transport(TransportError::UpgradeRejected { status: 503 }) => {
            format!("{url} refused the connection (HTTP 503): too many connections")
        }
        ClientError::Refused { close } => format!(
            "{url} refused this client ({close}): check --token / CARRIER_TOKEN and the requested role"
        ),
        ClientError::Remote { error: wire, .. } | ClientError::Preflight { error: wire, .. }
            if wire.code == ErrorCode::VersionIncompatible =>
        {
            format!(
                "{url} speaks an incompatible protocol: {}; run `carrier doctor` to see which side to update",
                wire.message
            )
        }
        other => other.to_string(),
    };
    Failure::runtime(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier::client::{ForeignListener, UnattributedListener};
    use carrier::discovery::User;

    #[test]
    fn a_refused_listener_is_one_runtime_line_naming_the_port() {
        let addr: carrier::discovery::listener::Endpoint = "127.0.0.1:7090"
            .parse::<std::net::SocketAddr>()
            .expect("addr")
            .into();
        let refusals: [TransportError; 2] = [
            ForeignListener {
                addr: addr.clone(),
                owner: User {
                    uid: 65534,
                    name: Some("nobody".into()),
                },
                you: 1000,
            }
            .into(),
            UnattributedListener {
                addr,
                reason: "cannot read /proc/net/tcp: Permission denied (os error 13)".into(),
            }
            .into(),
        ];
        let lines = refusals.map(|refusal| {
            let failure = explain("ws://127.0.0.1:7090/", &ClientError::Transport(refusal));
            assert_eq!(failure.code, ExitCode::FAILURE);
            failure.line
        });
        assert_eq!(
            lines,
            [
                "refusing to talk to 127.0.0.1:7090: its listener belongs to uid 65534 (nobody), not to you (uid 1000); nothing was sent",
                "refusing to talk to 127.0.0.1:7090: the port cannot be attributed to a user (cannot read /proc/net/tcp: Permission denied (os error 13)); nothing was sent",
            ]
        );
    }
}
