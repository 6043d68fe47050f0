//! The method catalog: the single source of every wire name (docs/protocol.md, "Methods"
//! and "Events" are generated from it).
//!
//! For each method it records the direction, the owner, the effect (`read` / `mutate`), the
//! least role, the params and result types, the feature it needs and whether its success
//! rebinds the connection's session. Dispatch ([`Method::from_name`], [`MethodDef`]), role
//! checks ([`MethodSpec::least_role`]), feature preflight
//! ([`Peers::preflight`](super::features::Peers::preflight)), the clients' session rebinding
//! ([`MethodSpec::rebinds_session`]) and the JSON Schemas are all derived from the [`METHODS`]
//! table built by one macro invocation below; the events are listed the same way, beside their
//! payload types ([`EVENTS`](super::events::EVENTS), named by
//! [`EventName`](super::events::EventName)). `carrier schema` generates the JSON Schemas, the
//! TypeScript declarations, the JavaScript package's tables and the protocol reference's tables
//! from the two lists.
//!
//! ```
//! use carrier_protocol::catalog::{Effect, Method};
//! use carrier_protocol::Role;
//!
//! let submit = Method::from_name("session.submit").unwrap().spec();
//! assert_eq!((submit.least_role, submit.effect), (Role::Drive, Effect::Mutate));
//! assert!(Method::from_name("session.nope").is_none());
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::envelope::Rejection;
use super::features::Feature;
use super::methods::*;
use super::Role;

/// Who sends the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A client calls the server (every method today).
    ClientToServer,
}

/// The part of the server that answers a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The carrier itself (handshake, ping, status).
    Carrier,
    /// The connection's surface (its role).
    Surface,
    /// The bound session: the hub and its agent.
    Session,
    /// The host's session directory.
    Directory,
    /// The payload-channel registry.
    Channels,
    /// The host's usage reporter.
    Usage,
}

/// What a method does to state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    Read,
    /// Changes state (a turn, a binding, a session).
    Mutate,
}

/// A JSON Schema generator for one type.
pub type SchemaFn = fn() -> schemars::Schema;

pub(crate) fn schema_of<T: schemars::JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(T)
}

/// The feature a request's params need beyond the method's own ([`Params::required_feature`]),
/// read from its JSON as the server reads it; params that do not parse need none (the server
/// answers them with `invalid_params`).
pub type ParamsFeatureFn = fn(&serde_json::Value) -> Option<Feature>;

fn params_feature_of<P: DeserializeOwned + Params>(params: &serde_json::Value) -> Option<Feature> {
    P::deserialize(params).ok()?.required_feature()
}

/// Everything the catalog knows about one method.
#[derive(Debug, Clone, Copy)]
pub struct MethodSpec {
    /// The method.
    pub method: Method,
    /// Its wire name.
    pub name: &'static str,
    /// Who calls it.
    pub direction: Direction,
    /// Who answers it.
    pub owner: Owner,
    /// Read or mutate.
    pub effect: Effect,
    /// The least role allowed to call it.
    pub least_role: Role,
    /// The feature it needs, if it is not part of the core protocol.
    pub feature: Option<Feature>,
    /// The feature its params need beyond that, if any (a `usage.report` scope).
    pub params_feature: ParamsFeatureFn,
    /// Whether its success rebinds this connection to another session, so the connection
    /// follows that session's events and `seq` restarts (`sessions.start`, `sessions.switch`).
    pub rebinds_session: bool,
    /// The Rust name of its params type.
    pub params_type: &'static str,
    /// The Rust name of its result type.
    pub result_type: &'static str,
    /// The params' JSON Schema.
    pub params_schema: SchemaFn,
    /// The result's JSON Schema.
    pub result_schema: SchemaFn,
}

/// Ties a method marker type to its params and result types.
pub trait MethodDef {
    /// The method.
    const METHOD: Method;
    /// Its params.
    type Params: DeserializeOwned + Params;
    /// Its result.
    type Result: Serialize + DeserializeOwned;
}

/// Params that need a feature depending on their values (e.g. a `usage.report` scope).
pub trait Params {
    /// The feature these params need beyond the method's own, if any.
    fn required_feature(&self) -> Option<Feature> {
        None
    }
}

macro_rules! impl_params {
    ($($t:ty),* $(,)?) => { $( impl Params for $t {} )* };
}
impl_params!(
    Empty,
    SubmitParams,
    AbortParams,
    HistoryParams,
    SessionsStartParams,
    SessionsSwitchParams,
);

impl Params for HandshakeParams {
    fn required_feature(&self) -> Option<Feature> {
        self.resume.as_ref().map(|_| Feature::Resume)
    }
}

impl Params for PermissionRespondParams {
    fn required_feature(&self) -> Option<Feature> {
        self.option_id.as_ref().map(|_| Feature::AgentUpdates)
    }
}

impl Params for UsageReportParams {
    fn required_feature(&self) -> Option<Feature> {
        Some(Feature::for_usage_scope(
            self.scope.unwrap_or(UsageScope::Session),
        ))
    }
}

macro_rules! catalog {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $wire:literal {
            owner: $owner:ident, effect: $effect:ident, role: $role:ident, feature: $feature:expr,
            $(rebinds_session: $rebinds:literal,)?
            params: $params:ty, result: $result:ty $(,)?
        }
    ),* $(,)?) => {
        /// Every method a client may call.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
        }

        /// Marker types, one per method, implementing [`MethodDef`].
        pub mod def {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$doc])*
                #[derive(Debug, Clone, Copy)]
                pub struct $variant;
                impl MethodDef for $variant {
                    const METHOD: Method = Method::$variant;
                    type Params = $params;
                    type Result = $result;
                }
            )*
        }

        impl Method {
            /// Looks a wire name up: a `match` on the names (the compiler's length switch and
            /// comparisons), not a walk of [`METHODS`] comparing each entry's name in turn.
            pub fn from_name(name: &str) -> Option<Method> {
                match name {
                    $( $wire => Some(Method::$variant), )*
                    _ => None,
                }
            }
        }

        /// The catalog, in the order the generated "Methods" table of docs/protocol.md lists it.
        pub static METHODS: &[MethodSpec] = &[
            $( MethodSpec {
                method: Method::$variant,
                name: $wire,
                direction: Direction::ClientToServer,
                owner: Owner::$owner,
                effect: Effect::$effect,
                least_role: Role::$role,
                feature: $feature,
                params_feature: params_feature_of::<$params>,
                // Only the methods that say so rebind the session.
                rebinds_session: false $(|| $rebinds)?,
                params_type: stringify!($params),
                result_type: stringify!($result),
                params_schema: schema_of::<$params>,
                result_schema: schema_of::<$result>,
            }, )*
        ];
    };
}

catalog! {
    /// `system.handshake`: the first frame of every connection.
    SystemHandshake = "system.handshake" {
        owner: Carrier, effect: Mutate, role: Observe, feature: None,
        params: HandshakeParams, result: HandshakeResult,
    },
    /// `system.ping`: liveness, result `{}`.
    SystemPing = "system.ping" {
        owner: Carrier, effect: Read, role: Observe, feature: None,
        params: Empty, result: Empty,
    },
    /// `system.status`: versions, epoch, connections, channels, compatibility.
    SystemStatus = "system.status" {
        owner: Carrier, effect: Read, role: Observe, feature: None,
        params: Empty, result: SystemStatusResult,
    },
    /// `surface.role`: the connection's effective role.
    SurfaceRole = "surface.role" {
        owner: Surface, effect: Read, role: Observe, feature: None,
        params: Empty, result: RoleResult,
    },
    /// `session.submit`: start a turn.
    SessionSubmit = "session.submit" {
        owner: Session, effect: Mutate, role: Drive, feature: None,
        params: SubmitParams, result: TurnIdResult,
    },
    /// `session.abort`: end the running turn.
    SessionAbort = "session.abort" {
        owner: Session, effect: Mutate, role: Drive, feature: None,
        params: AbortParams, result: TurnIdResult,
    },
    /// `session.permission.respond`: answer a permission prompt.
    SessionPermissionRespond = "session.permission.respond" {
        owner: Session, effect: Mutate, role: Drive, feature: Some(Feature::Permissions),
        params: PermissionRespondParams, result: Empty,
    },
    /// `session.history`: the session's prompts and replies.
    SessionHistory = "session.history" {
        owner: Session, effect: Read, role: Observe, feature: None,
        params: HistoryParams, result: HistoryResult,
    },
    /// `session.status`: what the bound session is doing.
    SessionStatus = "session.status" {
        owner: Session, effect: Read, role: Observe, feature: None,
        params: Empty, result: SessionStatusResult,
    },
    /// `sessions.list`: the host's sessions.
    SessionsList = "sessions.list" {
        owner: Directory, effect: Read, role: Observe, feature: Some(Feature::Sessions),
        params: Empty, result: SessionsListResult,
    },
    /// `sessions.start`: a new session, bound to this connection.
    SessionsStart = "sessions.start" {
        owner: Directory, effect: Mutate, role: Drive, feature: Some(Feature::Sessions),
        rebinds_session: true,
        params: SessionsStartParams, result: SessionIdResult,
    },
    /// `sessions.switch`: bind this connection to another session.
    SessionsSwitch = "sessions.switch" {
        owner: Directory, effect: Mutate, role: Observe, feature: Some(Feature::Sessions),
        rebinds_session: true,
        params: SessionsSwitchParams, result: SessionIdResult,
    },
    /// `channels.list`: the declared payload channels.
    ChannelsList = "channels.list" {
        owner: Channels, effect: Read, role: Observe, feature: Some(Feature::Channels),
        params: Empty, result: ChannelsListResult,
    },
    /// `usage.report`: the host's usage read model for a scope.
    UsageReport = "usage.report" {
        owner: Usage, effect: Read, role: Observe, feature: None,
        params: UsageReportParams, result: UsageReportResult,
    },
}

impl Method {
    /// The catalog entry.
    pub fn spec(self) -> &'static MethodSpec {
        // The table is built from the same list as the enum, in the same order.
        &METHODS[self as usize]
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// Decodes a request's params into the method's params type, or the `invalid_params`
/// rejection to answer with.
pub fn parse_params<M: MethodDef>(
    id: &str,
    params: serde_json::Map<String, serde_json::Value>,
) -> Result<M::Params, Rejection> {
    serde_json::from_value(serde_json::Value::Object(params)).map_err(|e| {
        Rejection::invalid_params(id, format!("invalid params for {}: {e}", M::METHOD.name()))
    })
}

/// Checks a result produced outside the type system (e.g. by an agent process) against the
/// method's result type, returning it re-encoded. A result that fails is never sent.
pub fn validate_result<M: MethodDef>(
    result: serde_json::Value,
) -> Result<serde_json::Value, serde_json::Error> {
    let typed: M::Result = serde_json::from_value(result)?;
    serde_json::to_value(typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_enum_agree() {
        for (i, spec) in METHODS.iter().enumerate() {
            assert_eq!(spec.method as usize, i);
            assert_eq!(Method::from_name(spec.name), Some(spec.method));
        }
        let mut names: Vec<_> = METHODS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len(), "duplicate wire name");
    }

    #[test]
    fn drive_methods_are_exactly_the_mutating_session_ones() {
        let drive: Vec<_> = METHODS
            .iter()
            .filter(|s| s.least_role == Role::Drive)
            .map(|s| s.name)
            .collect();
        assert_eq!(
            drive,
            [
                "session.submit",
                "session.abort",
                "session.permission.respond",
                "sessions.start"
            ]
        );
    }

    #[test]
    fn params_decode_null_as_omitted_and_ignore_unknown_fields() {
        let map = |v: serde_json::Value| v.as_object().cloned().unwrap();
        let p = parse_params::<def::SessionAbort>("r", map(serde_json::json!({"turn_id": null})))
            .unwrap();
        assert_eq!(p.turn_id, None);
        let p = parse_params::<def::SessionSubmit>(
            "r",
            map(serde_json::json!({"prompt": "hi", "driver": {"driver_id": "me"}})),
        )
        .unwrap();
        assert_eq!(p.prompt, "hi");
        let err = parse_params::<def::SessionSubmit>("r", map(serde_json::json!({"prompt": 5})))
            .unwrap_err();
        assert_eq!(
            err.kind,
            super::super::envelope::RejectionKind::InvalidParams
        );
        assert!(
            parse_params::<def::SessionHistory>("r", map(serde_json::json!({"limit": -1})))
                .is_err()
        );
    }

    #[test]
    fn result_validation_refuses_wrong_shapes() {
        assert!(
            validate_result::<def::SessionsStart>(serde_json::json!({"session_id": "s"})).is_ok()
        );
        assert!(validate_result::<def::SessionsStart>(serde_json::json!({"session": 1})).is_err());
    }

    #[test]
    fn only_sessions_start_and_switch_rebind_the_session() {
        let rebinding: Vec<_> = METHODS
            .iter()
            .filter(|s| s.rebinds_session)
            .map(|s| s.name)
            .collect();
        assert_eq!(rebinding, ["sessions.start", "sessions.switch"]);
    }
}
