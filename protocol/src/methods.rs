//! Params and result types of every method (docs/protocol.md, "Methods"). The method catalog
//! ([`super::catalog`]) names which type belongs to which method; dispatch, validation and the
//! JSON Schemas all come from these definitions.
//!
//! Decoding rules, shared by every type here:
//! - an optional field sent as `null` is the same as an omitted one (`Option` + `default`);
//! - unknown params fields are **ignored** (tolerant reader): a client a minor version ahead may
//!   send optional params this server does not know, and an omitted optional parameter always
//!   keeps the old behaviour (docs/protocol.md, "Features"). A client-claimed identity (e.g. a
//!   `driver` field on `session.submit`) is therefore ignored too;
//! - required fields must have the right JSON type; numbers must fit (no negatives, no
//!   fractions).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::channel::ChannelDescriptor;
use super::channel_info::ChannelInfo;
use super::version::ProtocolVersion;
use super::Role;

/// An empty params or result object, `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Empty {}

/// A program's name and version (`client`, `server`). Never compared for compatibility.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppInfo {
    /// Program name.
    pub name: String,
    /// Program version, free-form.
    pub version: String,
}

/// `resume` of a handshake: where the client left off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResumeRequest {
    /// The session the client was bound to.
    pub session_id: String,
    /// The server epoch the client last saw.
    pub epoch: String,
    /// The last `seq` the client received.
    pub after_seq: u64,
}

/// `system.handshake` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HandshakeParams {
    /// The protocol the client speaks.
    pub protocol_version: ProtocolVersion,
    /// The oldest protocol the client accepts.
    pub min_compatible_protocol: ProtocolVersion,
    /// The client program, for logs.
    #[serde(default)]
    pub client: Option<AppInfo>,
    /// Resume a session after a reconnect.
    #[serde(default)]
    pub resume: Option<ResumeRequest>,
    /// Deprecated: accepted and ignored (logged).
    #[serde(default)]
    #[schemars(extend("deprecated" = true))]
    pub min_compatible_peer: Option<Value>,
}

/// The typed outcome of a handshake's `resume` (docs/protocol.md, "Sessions and resume").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum ResumeOutcome {
    /// No resume was asked for.
    #[default]
    New,
    /// Every missed event is replayed after the result, before any new one.
    Resumed {
        /// How many events are replayed.
        replayed: u64,
    },
    /// Events `from..=to` are lost (refetch history); the ones held after them are replayed.
    Gap {
        /// The first lost seq (`after_seq` + 1).
        from: u64,
        /// The last lost seq.
        to: u64,
    },
    /// Unknown session or another epoch (the server restarted): bound afresh, nothing replayed.
    Reset,
}

impl ResumeOutcome {
    /// True when events were lost, so the application should rebuild from history.
    pub fn needs_history(self) -> bool {
        matches!(self, ResumeOutcome::Gap { .. } | ResumeOutcome::Reset)
    }
}

/// Every limit, published in the handshake result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LimitsInfo {
    /// Soft limit on a text message (`too_large` above it).
    pub max_text_bytes: u64,
    /// Hard cap on any message (close 1009 above it).
    pub max_message_bytes: u64,
    /// Memory for the messages all clients send, together; a message that does not fit waits.
    pub max_inbound_bytes: u64,
    /// Connections admitted at once.
    pub max_connections: u64,
    /// Outbound bytes queued per connection before it is failed (1013).
    pub queue_bytes: u64,
    /// Time allowed for the handshake, in milliseconds.
    pub handshake_timeout_ms: u64,
    /// Server ping interval, in milliseconds.
    pub ping_interval_ms: u64,
    /// Time allowed for a pong, in milliseconds.
    pub pong_timeout_ms: u64,
    /// The longest request `id` accepted, in bytes.
    pub max_id_bytes: u64,
    /// Events held per session for resume.
    pub resume_max_events: u64,
    /// Bytes held per session for resume.
    pub resume_max_bytes: u64,
    /// The longest `sessions.start` title, in bytes (`invalid_params` above it).
    pub max_title_bytes: u64,
    /// Sessions the host may hold; `sessions.start` past it is `limit_exceeded`.
    pub max_sessions: u64,
    /// Bytes of a reply kept in `turn_completed.text` and history (more is `truncated`).
    pub max_reply_bytes: u64,
    /// Bytes every session's history and resume ring hold together; past it the least
    /// recently used sessions lose their oldest entries first (a resume past them is a `gap`).
    pub max_session_bytes: u64,
}

/// `system.handshake` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HandshakeResult {
    /// The protocol the server speaks.
    pub protocol_version: ProtocolVersion,
    /// The oldest protocol the server accepts.
    pub min_compatible_protocol: ProtocolVersion,
    /// The server program.
    pub server: AppInfo,
    /// The connection's effective role.
    pub role: Role,
    /// The session this connection is bound to.
    pub session_id: String,
    /// Changes whenever the server restarts.
    pub epoch: String,
    /// Same major, different minor.
    pub version_skew: bool,
    /// Feature name → available to this client.
    pub features: BTreeMap<String, bool>,
    /// The declared payload channels.
    pub channels: Vec<ChannelDescriptor>,
    /// The server's limits.
    pub limits: LimitsInfo,
    /// What happened to the requested resume.
    pub resume: ResumeOutcome,
}

/// The `system.handshake` result as a client reads it: the tolerant reader of
/// [`HandshakeResult`]. The versions are parsed strictly (a server announcing `"01.0"` fails
/// the handshake, as a client announcing it does on the server); the channels are typed
/// ([`ChannelInfo`]), what a client only shows or passes on
/// (`limits`) stays JSON, and what an older server may leave out has a default.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HandshakeInfo {
    /// The protocol version the server speaks.
    pub protocol_version: ProtocolVersion,
    /// The oldest protocol version the server accepts.
    pub min_compatible_protocol: ProtocolVersion,
    /// The server program.
    pub server: AppInfo,
    /// The role this connection was granted.
    pub role: Role,
    /// The session this connection is bound to.
    pub session_id: String,
    /// Changes whenever the server process restarts.
    pub epoch: String,
    /// True when the minor protocol versions differ.
    #[serde(default)]
    pub version_skew: bool,
    /// Feature → available, for this connection's protocol.
    #[serde(default)]
    pub features: BTreeMap<String, bool>,
    /// The declared channels, typed (a bulk channel's inbound `credit` included).
    #[serde(default)]
    pub channels: Vec<ChannelInfo>,
    /// The server's limits (message sizes, timeouts …).
    #[serde(default)]
    pub limits: Value,
    /// How the connection was bound to its session.
    #[serde(default)]
    pub resume: ResumeOutcome,
}

impl HandshakeInfo {
    /// The declared channel called `name`, if the server has one.
    pub fn channel(&self, name: &str) -> Option<&ChannelInfo> {
        self.channels.iter().find(|channel| channel.name == name)
    }

    /// `limits.max_message_bytes`: the largest message the server accepts, when it says.
    pub fn max_message_bytes(&self) -> Option<usize> {
        self.limits
            .get("max_message_bytes")
            .and_then(serde_json::Value::as_u64)
            .and_then(|max| usize::try_from(max).ok())
    }
}

/// A feature as `system.status` reports it for the asking client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FeatureCompatibility {
    /// The protocol version that introduced it.
    pub required_protocol: ProtocolVersion,
    /// Whether this client can use it now.
    pub available: bool,
}

/// `system.status` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SystemStatusResult {
    /// The server program.
    pub server: AppInfo,
    /// The protocol the server speaks.
    pub protocol_version: ProtocolVersion,
    /// The oldest protocol the server accepts.
    pub min_compatible_protocol: ProtocolVersion,
    /// Changes whenever the server restarts.
    pub epoch: String,
    /// Admitted connections now.
    pub connections: u64,
    /// Names of the declared payload channels.
    pub channels: Vec<String>,
    /// Feature name → its compatibility for this client.
    pub compatibility: BTreeMap<String, FeatureCompatibility>,
}

/// `surface.role` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RoleResult {
    /// The effective role of this connection.
    pub role: Role,
}

/// `session.submit` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubmitParams {
    /// The user prompt.
    pub prompt: String,
    /// Agent-specific options, passed through to the session.
    #[serde(default)]
    pub options: Option<Map<String, Value>>,
}

/// `session.submit` result, sent before the turn's events stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnIdResult {
    /// The turn started by the submit.
    pub turn_id: String,
}

/// `session.abort` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AbortParams {
    /// The turn to abort; omitted: the running one.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// An answer to a permission prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Let the tool run.
    Allow,
    /// Refuse it.
    Deny,
}

impl Decision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

/// `session.permission.respond` params: `decision`, or (protocol 1.2, feature
/// `agent_updates`) `option_id` — exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRespondParams {
    /// The `request_id` of the `session.permission_request` event.
    pub request_id: String,
    /// The answer: `allow` or `deny` (for an ACP agent's prompt, its `allow_once` or
    /// `reject_once` option).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// The `optionId` of one of the prompt's `options` (an ACP agent's prompt only; any
    /// other prompt refuses it as `invalid_params`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
}

impl PermissionRespondParams {
    /// An answer by decision.
    pub fn decide(request_id: impl Into<String>, decision: Decision) -> Self {
        PermissionRespondParams {
            request_id: request_id.into(),
            decision: Some(decision),
            option_id: None,
        }
    }

    /// An answer naming one of the prompt's options.
    pub fn choose(request_id: impl Into<String>, option_id: impl Into<String>) -> Self {
        PermissionRespondParams {
            request_id: request_id.into(),
            decision: None,
            option_id: Some(option_id.into()),
        }
    }
}

/// `session.history` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryParams {
    /// At most this many of the newest entries; omitted: all.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Who said a history entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HistoryRole {
    /// The user's prompt.
    User,
    /// The agent's reply.
    Assistant,
}

/// One history entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEntry {
    /// Who said it.
    pub role: HistoryRole,
    /// What was said (a reply: at most `limits.max_reply_bytes`).
    pub text: String,
    /// The turn it belongs to.
    pub turn_id: String,
    /// `true` when `text` is a reply cut to `limits.max_reply_bytes`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// One `session.history` entry as a client reads it: the tolerant reader of [`HistoryEntry`]
/// (a role this build does not know is kept as sent; an entry without a turn still reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedHistoryEntry {
    /// Who said it (`user`, `assistant`, …).
    pub role: String,
    /// What was said.
    pub text: String,
    /// The turn it belongs to.
    #[serde(default)]
    pub turn_id: Option<String>,
    /// True when `text` is a reply the server cut to its `max_reply_bytes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// `session.history` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryResult {
    /// Oldest first.
    pub entries: Vec<HistoryEntry>,
}

/// What a session is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// No turn runs.
    Idle,
    /// A turn runs.
    Running,
    /// A turn waits for a permission answer.
    AwaitingPermission,
}

/// `session.status` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStatusResult {
    /// The bound session.
    pub session_id: String,
    /// What it is doing.
    pub state: SessionState,
    /// The running turn, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// One session of the host's directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSummary {
    /// Its id.
    pub session_id: String,
    /// Its title.
    pub title: String,
    /// What it is doing.
    pub state: SessionState,
}

/// `sessions.list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionsListResult {
    /// The default session first.
    pub sessions: Vec<SessionSummary>,
}

/// `sessions.start` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionsStartParams {
    /// A title; omitted: the directory picks one.
    #[serde(default)]
    pub title: Option<String>,
}

/// `sessions.switch` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionsSwitchParams {
    /// The session to bind this connection to.
    pub session_id: String,
}

/// `sessions.start` and `sessions.switch` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionIdResult {
    /// The session this connection is now bound to.
    #[schemars(length(min = 1))]
    pub session_id: String,
}

/// `channels.list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChannelsListResult {
    /// The declared channels, sorted by name.
    pub channels: Vec<ChannelDescriptor>,
}

/// Which usage read model `usage.report` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UsageScope {
    /// One session (default: the bound one).
    Session,
    /// The user's usage across sessions.
    Personal,
    /// Usage the host has stored (e.g. across restarts).
    Stored,
}

/// `usage.report` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageReportParams {
    /// The scope; omitted: `session`.
    #[serde(default)]
    pub scope: Option<UsageScope>,
    /// For the `session` scope; omitted: the bound session.
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `usage.report` result: the host's usage read model for one scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageReportResult {
    /// The scope reported.
    pub scope: UsageScope,
    /// The session, for the `session` scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Tokens the agent consumed.
    pub tokens_in: u64,
    /// Tokens the agent produced.
    pub tokens_out: u64,
    /// Completed turns.
    pub turns: u64,
}
