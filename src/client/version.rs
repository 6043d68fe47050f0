//! Protocol versions as the client sees them: what it speaks, and how two sides compare
//! (SPEC section 4). App versions are never compared.

use std::fmt;

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: &str = "1.0";
/// The oldest protocol version this client can talk to.
pub const MIN_COMPATIBLE_PROTOCOL: &str = "1.0";

/// A `"MAJOR.MINOR"` protocol version. Ordered by major, then minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// Incompatible changes bump this.
    pub major: u32,
    /// Compatible additions bump this.
    pub minor: u32,
}

impl ProtocolVersion {
    /// Parses `"MAJOR.MINOR"` (decimal digits only); `None` for anything else.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        let (major, minor) = text.split_once('.')?;
        let number = |part: &str| -> Option<u32> {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        Some(ProtocolVersion {
            major: number(major)?,
            minor: number(minor)?,
        })
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One side's protocol version and the oldest version it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// The version it speaks.
    pub protocol: ProtocolVersion,
    /// The oldest version it can talk to.
    pub min_compatible: ProtocolVersion,
}

impl VersionRange {
    /// Parses both strings; `None` when either is not `"MAJOR.MINOR"`.
    pub fn parse(protocol: &str, min_compatible: &str) -> Option<VersionRange> {
        Some(VersionRange {
            protocol: ProtocolVersion::parse(protocol)?,
            min_compatible: ProtocolVersion::parse(min_compatible)?,
        })
    }

    /// This client's range.
    pub fn this_client() -> VersionRange {
        VersionRange {
            protocol: ProtocolVersion { major: 1, minor: 0 },
            min_compatible: ProtocolVersion { major: 1, minor: 0 },
        }
    }
}

/// Which side of a connection should be updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client (this program, a browser console, another client library).
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

/// How a client and a server relate, by the rules of SPEC section 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compatibility {
    /// Same protocol version.
    Compatible,
    /// Same major, different minor: they talk, the older side lacks newer features.
    Skew {
        /// The side with the older minor version.
        update: Side,
    },
    /// Different majors, or one side below the other's minimum: they cannot talk.
    Incompatible {
        /// The side with the older version.
        update: Side,
    },
}

impl Compatibility {
    /// Compares a client's range with a server's.
    pub fn assess(client: VersionRange, server: VersionRange) -> Compatibility {
        let older = if client.protocol < server.protocol {
            Side::Client
        } else {
            Side::Server
        };
        if client.protocol.major != server.protocol.major
            || client.protocol < server.min_compatible
            || server.protocol < client.min_compatible
        {
            Compatibility::Incompatible { update: older }
        } else if client.protocol != server.protocol {
            Compatibility::Skew { update: older }
        } else {
            Compatibility::Compatible
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(protocol: &str, min: &str) -> VersionRange {
        VersionRange::parse(protocol, min).unwrap()
    }

    #[test]
    fn parse_accepts_major_dot_minor_only() {
        assert_eq!(
            ProtocolVersion::parse("1.12"),
            Some(ProtocolVersion {
                major: 1,
                minor: 12
            })
        );
        for bad in ["1", "1.", ".1", "1.0.0", "v1.0", "1.-1", "1.+1", ""] {
            assert_eq!(ProtocolVersion::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn assessment_follows_the_version_rules() {
        let client = range("1.0", "1.0");
        assert_eq!(
            Compatibility::assess(client, range("1.0", "1.0")),
            Compatibility::Compatible
        );
        assert_eq!(
            Compatibility::assess(client, range("1.3", "1.0")),
            Compatibility::Skew {
                update: Side::Client
            }
        );
        assert_eq!(
            Compatibility::assess(range("1.2", "1.0"), range("1.0", "1.0")),
            Compatibility::Skew {
                update: Side::Server
            }
        );
        assert_eq!(
            Compatibility::assess(client, range("2.0", "2.0")),
            Compatibility::Incompatible {
                update: Side::Client
            }
        );
        assert_eq!(
            Compatibility::assess(client, range("1.4", "1.2")),
            Compatibility::Incompatible {
                update: Side::Client
            }
        );
    }

    #[test]
    fn constants_match_this_client_range() {
        assert_eq!(
            VersionRange::parse(PROTOCOL_VERSION, MIN_COMPATIBLE_PROTOCOL),
            Some(VersionRange::this_client())
        );
    }
}
