//! Protocol features, the version that introduced each, and feature preflight (docs/protocol.md,
//! "Features").
//!
//! A feature is available to a connection when the server has it (the protocol it speaks
//! includes it and the host wired it) and the client's announced protocol includes it. A
//! request that needs an unavailable feature is refused before dispatch with
//! `unsupported_feature`, `effect_state: "none"`, naming the component to update.
//!
//! Features announced today (all introduced in protocol 1.0 but `bulk_credit`, 1.1, and
//! `agent_updates`, 1.2):
//!
//! | feature | what it covers | available when |
//! |---|---|---|
//! | `sessions` | `sessions.list` / `start` / `switch` | always (the host's directory) |
//! | `resume` | `resume` in `system.handshake` | always |
//! | `permissions` | `session.permission.respond` | always |
//! | `channels` | `channels.list`, binary payload channels | always |
//! | `usage.session` | `usage.report` with `scope: "session"` | the host wired that scope |
//! | `usage.personal` | `usage.report` with `scope: "personal"` | the host wired that scope |
//! | `usage.stored` | `usage.report` with `scope: "stored"` | the host wired that scope |
//! | `bulk_credit` | inbound credit on bulk channels (`credit`, `channel.credit`) | both sides speak 1.1 |
//! | `agent_updates` | the `session.agent_update` event; `option_id` in `session.permission.respond` | both sides speak 1.2 |

use std::collections::BTreeMap;

use super::error::{EffectState, ErrorCode, ErrorObject};
use super::methods::{FeatureCompatibility, UsageScope};
use super::version::{ProtocolVersion, PROTOCOL_VERSION};

/// A protocol feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// The session directory: `sessions.list`, `sessions.start`, `sessions.switch`.
    Sessions,
    /// Resuming a session in the handshake.
    Resume,
    /// Answering permission prompts.
    Permissions,
    /// Payload channels and `channels.list`.
    Channels,
    /// `usage.report` for one session.
    UsageSession,
    /// `usage.report` across the user's sessions.
    UsagePersonal,
    /// `usage.report` for usage the host stored.
    UsageStored,
    /// Inbound credit on bulk channels: `credit` in a bulk channel's descriptor,
    /// `channel.credit` grants, `credit_exceeded` (protocol 1.1).
    BulkCredit,
    /// What an agent reports beside its text (an ACP agent's tool calls, plans, …): the
    /// `session.agent_update` event, and answering a prompt with one of its `options`
    /// (`option_id`) (protocol 1.2).
    AgentUpdates,
}

impl Feature {
    /// Every feature, in the order they are announced.
    pub const ALL: [Feature; 9] = [
        Feature::Sessions,
        Feature::Resume,
        Feature::Permissions,
        Feature::Channels,
        Feature::UsageSession,
        Feature::UsagePersonal,
        Feature::UsageStored,
        Feature::BulkCredit,
        Feature::AgentUpdates,
    ];

    /// The wire name (a key of `features` and `compatibility`).
    pub fn name(self) -> &'static str {
        match self {
            Feature::Sessions => "sessions",
            Feature::Resume => "resume",
            Feature::Permissions => "permissions",
            Feature::Channels => "channels",
            Feature::UsageSession => "usage.session",
            Feature::UsagePersonal => "usage.personal",
            Feature::UsageStored => "usage.stored",
            Feature::BulkCredit => "bulk_credit",
            Feature::AgentUpdates => "agent_updates",
        }
    }

    /// The protocol version that introduced it, as written on the wire ("MAJOR.MINOR").
    pub fn introduced_str(self) -> &'static str {
        match self {
            Feature::Sessions
            | Feature::Resume
            | Feature::Permissions
            | Feature::Channels
            | Feature::UsageSession
            | Feature::UsagePersonal
            | Feature::UsageStored => "1.0",
            Feature::BulkCredit => "1.1",
            Feature::AgentUpdates => "1.2",
        }
    }

    /// The protocol version that introduced it.
    pub fn introduced(self) -> ProtocolVersion {
        self.introduced_str()
            .parse()
            .unwrap_or(ProtocolVersion::new(1, 0))
    }

    /// The feature behind a `usage.report` scope.
    pub fn for_usage_scope(scope: UsageScope) -> Feature {
        match scope {
            UsageScope::Session => Feature::UsageSession,
            UsageScope::Personal => Feature::UsagePersonal,
            UsageScope::Stored => Feature::UsageStored,
        }
    }
}

/// The features a server has wired. A small bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureSet(u32);

impl FeatureSet {
    /// No feature.
    pub const fn empty() -> Self {
        FeatureSet(0)
    }

    /// Adds a feature.
    pub fn with(mut self, f: Feature) -> Self {
        self.0 |= 1 << f as u32;
        self
    }

    /// Whether it holds `f`.
    pub fn contains(self, f: Feature) -> bool {
        self.0 & (1 << f as u32) != 0
    }
}

/// What preflight compares: what the server has and speaks, and what the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// The features the host wired.
    pub server_features: FeatureSet,
    /// The protocol the server speaks.
    pub server_protocol: ProtocolVersion,
    /// The protocol the client announced in its handshake.
    pub client_protocol: ProtocolVersion,
}

impl Peers {
    /// The peers as a client of this build sees them after the handshake, from the server's
    /// `protocol_version` and `features`. A feature announced `false` is missing. One the
    /// server does not mention is missing only when its protocol predates the feature: an older
    /// server cannot know a newer feature's name, while a current one may simply not list
    /// features it always has.
    pub fn announced(server_protocol: ProtocolVersion, features: &BTreeMap<String, bool>) -> Peers {
        let server_features = Feature::ALL
            .iter()
            .filter(|f| match features.get(f.name()) {
                Some(&available) => available,
                None => server_protocol >= f.introduced(),
            })
            .fold(FeatureSet::empty(), |set, &f| set.with(f));
        Peers {
            server_features,
            server_protocol,
            client_protocol: PROTOCOL_VERSION,
        }
    }

    /// Preflight as a client of this build runs it after the handshake: a feature the server
    /// announced as available is (the server already judged it for this client's protocol);
    /// any other is judged by [`Peers::preflight`] over [`Peers::announced`], so the error is
    /// the one the server answers with.
    pub fn preflight_announced(
        server_protocol: ProtocolVersion,
        features: &BTreeMap<String, bool>,
        f: Feature,
    ) -> Result<(), ErrorObject> {
        if features.get(f.name()) == Some(&true) {
            return Ok(());
        }
        Peers::announced(server_protocol, features).preflight(f)
    }

    /// Whether `f` can be used on this connection.
    pub fn available(&self, f: Feature) -> bool {
        self.preflight(f).is_ok()
    }

    /// `Ok` when `f` is available; otherwise the `unsupported_feature` error to answer with.
    pub fn preflight(&self, f: Feature) -> Result<(), ErrorObject> {
        let required = f.introduced();
        let (component, actual, recovery) =
            if self.server_protocol < required || !self.server_features.contains(f) {
                let recovery = if self.server_protocol < required {
                    format!("update the carrier server to protocol {required} or later")
                } else {
                    format!(
                        "the host did not enable {}; ask the host to wire it, or update the \
                         carrier server to a build that has it",
                        f.name()
                    )
                };
                ("server", self.server_protocol, recovery)
            } else if self.client_protocol < required {
                let recovery = format!("update the client to protocol {required} or later");
                ("client", self.client_protocol, recovery)
            } else {
                return Ok(());
            };
        Err(ErrorObject::new(
            ErrorCode::UnsupportedFeature,
            format!("feature {} is not available: {recovery}", f.name()),
        )
        .effect(EffectState::None)
        .with_data(serde_json::json!({
            "feature": f.name(),
            "component": component,
            "required_protocol": required.to_string(),
            "actual_protocol": actual.to_string(),
            "recovery": recovery,
        })))
    }

    /// The handshake's `features`: feature name → available to this client.
    pub fn features(&self) -> BTreeMap<String, bool> {
        Feature::ALL
            .iter()
            .map(|&f| (f.name().to_owned(), self.available(f)))
            .collect()
    }

    /// `system.status`'s `compatibility` for this client.
    pub fn compatibility(&self) -> BTreeMap<String, FeatureCompatibility> {
        Feature::ALL
            .iter()
            .map(|&f| {
                (
                    f.name().to_owned(),
                    FeatureCompatibility {
                        required_protocol: f.introduced(),
                        available: self.available(f),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(server: (u16, u16), client: (u16, u16), set: FeatureSet) -> Peers {
        Peers {
            server_features: set,
            server_protocol: ProtocolVersion::new(server.0, server.1),
            client_protocol: ProtocolVersion::new(client.0, client.1),
        }
    }

    #[test]
    fn unwired_feature_names_the_server() {
        let p = peers(
            (1, 0),
            (1, 0),
            FeatureSet::empty().with(Feature::UsageSession),
        );
        assert!(p.preflight(Feature::UsageSession).is_ok());
        let err = p.preflight(Feature::UsageStored).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnsupportedFeature);
        assert_eq!(err.effect_state, Some(EffectState::None));
        let data = err.data.unwrap();
        assert_eq!(data["component"], "server");
        assert_eq!(data["feature"], "usage.stored");
        assert_eq!(data["required_protocol"], "1.0");
        assert_eq!(data["actual_protocol"], "1.0");
    }

    #[test]
    fn an_old_client_is_told_to_update() {
        // Every feature is 1.0 today; an (impossible today) 0.9 client shows the rule.
        let all = Feature::ALL
            .iter()
            .fold(FeatureSet::empty(), |s, &f| s.with(f));
        let p = peers((1, 0), (0, 9), all);
        let data = p.preflight(Feature::Sessions).unwrap_err().data.unwrap();
        assert_eq!(data["component"], "client");
        assert_eq!(data["actual_protocol"], "0.9");
        assert!(!p.features()["sessions"]);
        let p = peers((0, 9), (1, 0), all);
        assert_eq!(
            p.preflight(Feature::Resume).unwrap_err().data.unwrap()["component"],
            "server"
        );
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = Feature::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Feature::ALL.len());
    }
}
