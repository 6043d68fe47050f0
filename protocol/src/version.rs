//! Protocol versions: `"MAJOR.MINOR"` strings, their order and the compatibility rules of
//! docs/protocol.md, "Versions".
//!
//! Two peers are compatible when they share the major version and each speaks at least the
//! other's minimum. A different minor is *skew*: the connection works, and features the older
//! side lacks are refused by feature preflight (see [`crate::catalog`]). App versions
//! (`server.version`, `client.version`) are never compared.
//!
//! ```
//! use carrier_protocol::version::{Compatibility, ProtocolVersion, VersionPair};
//!
//! let server = VersionPair::CURRENT;
//! let client = VersionPair::parse("1.3", "1.0").unwrap();
//! assert_eq!(server.check(&client), Compatibility::Compatible { skew: true });
//! let old = VersionPair::parse("0.9", "0.9").unwrap();
//! assert!(matches!(server.check(&old), Compatibility::Incompatible(_)));
//! assert_eq!("1.0".parse::<ProtocolVersion>().unwrap(), ProtocolVersion::new(1, 0));
//! ```

use std::fmt;
use std::str::FromStr;

/// A protocol version `MAJOR.MINOR`. Ordered by major, then minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// Incompatible changes bump the major.
    pub major: u16,
    /// Additive changes bump the minor.
    pub minor: u16,
}

/// The protocol this build speaks.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::new(1, 2);

/// The oldest protocol this build still serves.
pub const MIN_COMPATIBLE_PROTOCOL: ProtocolVersion = ProtocolVersion::new(1, 0);

impl ProtocolVersion {
    /// A version from its parts.
    pub const fn new(major: u16, minor: u16) -> Self {
        ProtocolVersion { major, minor }
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A string that is not `"MAJOR.MINOR"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid protocol version {0:?}: expected \"MAJOR.MINOR\" with decimal numbers, e.g. \"1.0\""
)]
pub struct VersionParseError(pub String);

impl FromStr for ProtocolVersion {
    type Err = VersionParseError;

    /// Accepts exactly two dot-separated decimal numbers without sign, padding or leading zeros
    /// (`"1.0"`, `"2.13"`); anything else (`"1"`, `"1.0.0"`, `" 1.0"`, `"01.0"`) is refused.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || VersionParseError(s.chars().take(32).collect());
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        Ok(ProtocolVersion {
            major: parse_part(major).ok_or_else(bad)?,
            minor: parse_part(minor).ok_or_else(bad)?,
        })
    }
}

fn parse_part(part: &str) -> Option<u16> {
    let digits_only = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let padded = part.len() > 1 && part.starts_with('0');
    if !digits_only || padded {
        return None;
    }
    part.parse().ok()
}

impl serde::Serialize for ProtocolVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ProtocolVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProtocolVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A protocol version \"MAJOR.MINOR\".",
            "type": "string",
            "pattern": "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)$"
        })
    }
}

/// What one peer announces: the version it speaks and the oldest it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionPair {
    /// `protocol_version`.
    pub version: ProtocolVersion,
    /// `min_compatible_protocol`.
    pub min_compatible: ProtocolVersion,
}

/// Why two peers cannot talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Incompatibility {
    /// The majors differ.
    #[error("protocol major versions differ")]
    MajorMismatch,
    /// The peer speaks a version below our minimum: the peer must be updated.
    #[error("the peer's protocol is older than this side's minimum compatible protocol")]
    PeerTooOld,
    /// We speak a version below the peer's minimum: this side must be updated.
    #[error("this side's protocol is older than the peer's minimum compatible protocol")]
    SelfTooOld,
}

/// The outcome of [`VersionPair::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compatibility {
    /// The peers can talk; `skew` when their minors differ.
    Compatible {
        /// Same major, different minor.
        skew: bool,
    },
    /// They cannot: the connection is refused (`version_incompatible`, close 1002).
    Incompatible(Incompatibility),
}

/// An announced pair whose minimum is above its own version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("min_compatible_protocol {min} is above protocol_version {version}")]
pub struct InconsistentPair {
    /// The announced version.
    pub version: ProtocolVersion,
    /// The announced minimum.
    pub min: ProtocolVersion,
}

impl VersionPair {
    /// What this build announces.
    pub const CURRENT: VersionPair = VersionPair {
        version: PROTOCOL_VERSION,
        min_compatible: MIN_COMPATIBLE_PROTOCOL,
    };

    /// A pair, refusing one whose minimum is above its version.
    pub fn new(
        version: ProtocolVersion,
        min_compatible: ProtocolVersion,
    ) -> Result<Self, InconsistentPair> {
        if min_compatible > version {
            return Err(InconsistentPair {
                version,
                min: min_compatible,
            });
        }
        Ok(VersionPair {
            version,
            min_compatible,
        })
    }

    /// Parses both strings; `None` when either is malformed or the pair is inconsistent.
    pub fn parse(version: &str, min_compatible: &str) -> Option<Self> {
        VersionPair::new(version.parse().ok()?, min_compatible.parse().ok()?).ok()
    }

    /// The rules of docs/protocol.md, "Versions", from this side's point of view.
    pub fn check(&self, peer: &VersionPair) -> Compatibility {
        if self.version.major != peer.version.major {
            return Compatibility::Incompatible(Incompatibility::MajorMismatch);
        }
        if peer.version < self.min_compatible {
            return Compatibility::Incompatible(Incompatibility::PeerTooOld);
        }
        if self.version < peer.min_compatible {
            return Compatibility::Incompatible(Incompatibility::SelfTooOld);
        }
        Compatibility::Compatible {
            skew: self.version.minor != peer.version.minor,
        }
    }
}

/// The `version_incompatible` error (docs/protocol.md, "Versions") for a `server` and a `client`
/// that cannot talk (`why`, from [`VersionPair::check`]): both pairs in its message and its `data`.
/// The server answers a handshake with it; a client refuses a server's handshake result with it.
pub fn incompatible_error(
    server: VersionPair,
    client: VersionPair,
    why: Incompatibility,
) -> crate::error::ErrorObject {
    use crate::error::{EffectState, ErrorCode, ErrorObject};
    ErrorObject::new(
        ErrorCode::VersionIncompatible,
        format!(
            "{why}: server speaks {} (accepts {} or later), client speaks {} (accepts {} or later)",
            server.version, server.min_compatible, client.version, client.min_compatible
        ),
    )
    .effect(EffectState::None)
    .with_data(serde_json::json!({
        "server": {
            "protocol_version": server.version,
            "min_compatible_protocol": server.min_compatible,
        },
        "client": {
            "protocol_version": client.version,
            "min_compatible_protocol": client.min_compatible,
        },
    }))
}

/// Which side of a connection should be updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client (a program, a browser console, another client library).
    Client,
    /// The carrier server.
    Server,
}

impl Side {
    /// `"client"` or `"server"`, as in `unsupported_feature`'s `component`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// [`VersionPair::check`] as a client reports it to a person: whether the two talk, and which
/// side to update when they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Same protocol version.
    Compatible,
    /// Same major, different minor: they talk, the older side lacks newer features.
    Skew {
        /// The side with the older version.
        update: Side,
    },
    /// They cannot talk.
    Incompatible {
        /// The side with the older version.
        update: Side,
    },
}

impl Verdict {
    /// Compares a client's pair with a server's by the rules of [`VersionPair::check`].
    pub fn assess(client: VersionPair, server: VersionPair) -> Verdict {
        let update = if client.version < server.version {
            Side::Client
        } else {
            Side::Server
        };
        match client.check(&server) {
            Compatibility::Compatible { skew: false } => Verdict::Compatible,
            Compatibility::Compatible { skew: true } => Verdict::Skew { update },
            Compatibility::Incompatible(_) => Verdict::Incompatible { update },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ProtocolVersion {
        s.parse().unwrap()
    }

    #[test]
    fn parse_accepts_only_major_dot_minor() {
        assert_eq!(v("1.0"), ProtocolVersion::new(1, 0));
        assert_eq!(v("10.20"), ProtocolVersion::new(10, 20));
        for bad in [
            "", "1", "1.", ".1", "1.0.0", "v1.0", " 1.0", "1.0 ", "01.0", "1.00", "-1.0", "+1.0",
            "1.x", "99999.0", "1,0",
        ] {
            assert!(bad.parse::<ProtocolVersion>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn ordering_is_major_then_minor() {
        assert!(v("1.10") > v("1.9"));
        assert!(v("2.0") > v("1.99"));
        assert_eq!(v("1.2").to_string(), "1.2");
    }

    #[test]
    fn compatibility_rules() {
        let server = VersionPair::CURRENT;
        let pair = |a, b| VersionPair::parse(a, b).unwrap();
        assert_eq!(
            server.check(&pair("1.2", "1.0")),
            Compatibility::Compatible { skew: false }
        );
        // A 1.0 client of this 1.2 server: same major, different minor.
        assert_eq!(
            server.check(&pair("1.0", "1.0")),
            Compatibility::Compatible { skew: true }
        );
        assert_eq!(
            server.check(&pair("1.4", "1.0")),
            Compatibility::Compatible { skew: true }
        );
        assert_eq!(
            server.check(&pair("2.0", "2.0")),
            Compatibility::Incompatible(Incompatibility::MajorMismatch)
        );
        assert_eq!(
            server.check(&pair("1.4", "1.3")),
            Compatibility::Incompatible(Incompatibility::SelfTooOld)
        );
        let newer_server = pair("1.5", "1.3");
        assert_eq!(
            newer_server.check(&pair("1.2", "1.0")),
            Compatibility::Incompatible(Incompatibility::PeerTooOld)
        );
        assert_eq!(VersionPair::parse("1.0", "1.1"), None);
    }

    #[test]
    fn verdict_names_the_side_to_update() {
        let pair = |a, b| VersionPair::parse(a, b).unwrap();
        let client = pair("1.0", "1.0");
        assert_eq!(
            Verdict::assess(client, pair("1.0", "1.0")),
            Verdict::Compatible
        );
        assert_eq!(
            Verdict::assess(client, pair("1.3", "1.0")),
            Verdict::Skew {
                update: Side::Client
            }
        );
        assert_eq!(
            Verdict::assess(pair("1.2", "1.0"), pair("1.0", "1.0")),
            Verdict::Skew {
                update: Side::Server
            }
        );
        assert_eq!(
            Verdict::assess(client, pair("2.0", "2.0")),
            Verdict::Incompatible {
                update: Side::Client
            }
        );
        assert_eq!(
            Verdict::assess(client, pair("1.4", "1.2")),
            Verdict::Incompatible {
                update: Side::Client
            }
        );
    }

    #[test]
    fn serde_round_trip() {
        let json = serde_json::to_string(&v("1.7")).unwrap();
        assert_eq!(json, "\"1.7\"");
        assert_eq!(
            serde_json::from_str::<ProtocolVersion>(&json).unwrap(),
            v("1.7")
        );
        assert!(serde_json::from_str::<ProtocolVersion>("1.7").is_err());
    }
}
