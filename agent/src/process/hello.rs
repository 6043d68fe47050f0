//! The child's handshake: what the carrier announces (as a client would) and the version
//! rules (docs/protocol.md, "Versions") applied to the child's answer.

use super::codec::{ChildHello, HandshakeToChild};
use super::error::AgentProcessError;
use carrier_protocol::methods::AppInfo;
use carrier_protocol::version::{Compatibility, Incompatibility, VersionPair};

/// `system.handshake` params for the child.
pub(crate) fn hello() -> HandshakeToChild {
    HandshakeToChild {
        protocol_version: VersionPair::CURRENT.version,
        min_compatible_protocol: VersionPair::CURRENT.min_compatible,
        client: AppInfo {
            name: "carrier".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
    }
}

/// The child's `server`, or why it cannot serve: an invalid result or incompatible versions
/// (a minor skew is only logged).
pub(crate) fn check_hello(value: serde_json::Value) -> Result<AppInfo, AgentProcessError> {
    let hello: ChildHello = serde_json::from_value(value)
        .map_err(|e| AgentProcessError::Handshake(format!("invalid result: {e}")))?;
    let theirs = VersionPair::new(hello.protocol_version, hello.min_compatible_protocol)
        .map_err(|e| AgentProcessError::Handshake(e.to_string()))?;
    let ours = VersionPair::CURRENT;
    match ours.check(&theirs) {
        Compatibility::Compatible { skew } => {
            if skew {
                tracing::info!(agent = %theirs.version, carrier = %ours.version, "agent process protocol minor differs");
            }
            Ok(AppInfo {
                name: hello.server.name,
                version: hello.server.version.unwrap_or_default(),
            })
        }
        Compatibility::Incompatible(why) => Err(AgentProcessError::Incompatible {
            agent_version: theirs.version,
            agent_min: theirs.min_compatible,
            ours: ours.version,
            ours_min: ours.min_compatible,
            why,
            update: match why {
                Incompatibility::PeerTooOld => "agent",
                Incompatibility::SelfTooOld => "carrier",
                Incompatibility::MajorMismatch if theirs.version > ours.version => "carrier",
                Incompatibility::MajorMismatch => "agent",
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(version: &str, min: &str) -> serde_json::Value {
        json!({"protocol_version": version, "min_compatible_protocol": min, "server": {"name": "a"}})
    }

    #[test]
    fn versions_follow_the_section_4_rules() {
        assert_eq!(check_hello(answer("1.0", "1.0")).unwrap().name, "a");
        assert!(
            check_hello(answer("1.7", "1.0")).is_ok(),
            "a minor skew is fine"
        );
        let err = check_hello(answer("2.0", "2.0")).unwrap_err().to_string();
        assert!(err.contains("update the carrier"), "{err}");
        let err = check_hello(answer("0.9", "0.9")).unwrap_err().to_string();
        assert!(err.contains("update the agent"), "{err}");
        assert!(
            check_hello(answer("1.0", "1.1")).is_err(),
            "min above version"
        );
        assert!(check_hello(json!({"protocol_version": "1.0"})).is_err());
    }
}
