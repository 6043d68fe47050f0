//! Connection roles.

use serde::{Deserialize, Serialize};

/// What a connection may do. `Observe` < `Drive`: a listener grants one, a client may ask for
/// less, never more.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read-only: receives every session event and channel frame, may call `observe` methods.
    Observe,
    /// May also submit prompts, abort turns, answer permission prompts and send channel frames.
    Drive,
}

impl Role {
    /// The wire name (`"drive"` / `"observe"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Observe => "observe",
            Role::Drive => "drive",
        }
    }

    /// Parses a wire name; `None` for anything else (including different case).
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "drive" => Some(Role::Drive),
            "observe" => Some(Role::Observe),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
