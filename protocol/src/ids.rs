//! The ids the protocol names, as types: a session ([`SessionId`]), a turn of a session
//! ([`TurnId`]) and a permission request of a turn ([`RequestId`]).
//!
//! On the wire each is a plain JSON string: serde sees the string itself
//! (`#[serde(transparent)]`), and the JSON Schema is `String`'s. In code, a turn
//! id cannot be passed where a session id belongs.
//!
//! ```
//! use carrier_protocol::ids::TurnId;
//!
//! let turn = TurnId::from("t1");
//! assert_eq!(turn.as_str(), "t1");
//! assert_eq!(serde_json::to_string(&turn).unwrap(), r#""t1""#);
//! ```

use std::borrow::{Borrow, Cow};
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// A session's id (`session_id`), chosen by the host's session directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

/// A turn's id (`turn_id`), chosen by the carrier, unique within its session.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnId(String);

/// A permission request's id (`request_id`), chosen by the agent, unique within its turn.
/// Not the `id` of a request envelope, which the client picks to match its response.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(String);

/// What every id has: its text, `Display`, conversions from and to `String`, `String`'s JSON
/// Schema, and lookups and comparisons by `&str`.
macro_rules! id_impls {
    ($name:ident) => {
        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        /// `String`'s schema, name included (a derive would add the type's docs and name), so
        /// a wire type that holds an id keeps its generated schema.
        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                String::inline_schema()
            }

            fn schema_name() -> Cow<'static, str> {
                String::schema_name()
            }

            fn schema_id() -> Cow<'static, str> {
                String::schema_id()
            }

            fn json_schema(generator: &mut SchemaGenerator) -> Schema {
                String::json_schema(generator)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                $name(id.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Lets a map keyed by the id be looked up with a `&str` (the id hashes as its text).
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

id_impls!(SessionId);
id_impls!(TurnId);
id_impls!(RequestId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_text_on_the_wire_and_in_the_schema() {
        let id = SessionId::from("s1");
        assert_eq!(serde_json::to_value(&id).unwrap(), serde_json::json!("s1"));
        let back: SessionId = serde_json::from_str(r#""s1""#).unwrap();
        assert_eq!(back, id);
        assert_eq!(
            schemars::schema_for!(TurnId),
            schemars::schema_for!(String),
            "an id's JSON Schema is String's, so no generated schema changes"
        );
        assert_eq!(
            schemars::schema_for!(Option<RequestId>),
            schemars::schema_for!(Option<String>)
        );
    }

    #[test]
    fn an_id_displays_compares_and_looks_up_as_its_text() {
        let id = TurnId::from("t1".to_owned());
        assert_eq!(id.to_string(), "t1");
        assert_eq!(id, "t1");
        assert_eq!(String::from(id.clone()), "t1");
        let map = std::collections::HashMap::from([(id, 1)]);
        assert_eq!(map.get("t1"), Some(&1));
    }
}
