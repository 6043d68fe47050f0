// GENERATED FILE: do not edit. Written by `carrier schema --out schemas --ts js/wire.d.ts` from
// the Rust method catalog, the same source as the JSON Schemas in `schemas/`;
// `carrier schema --check schemas --ts js/wire.d.ts` (run by CI) fails when it is stale.
//
// The wire types of the carrier protocol (docs/protocol.md): every method's params and result,
// every event payload, the error codes and the channel descriptor.

/** `session.abort` params. */
export interface AbortParams {
  /** The turn to abort; omitted: the running one. */
  turn_id?: string | null;
}

/**
 * `session.agent_update` (protocol 1.2, feature `agent_updates`): something an agent reports
 * beside its text — an ACP agent's tool call or its update, plan, thought, available
 * commands, mode, usage, … — carried as the agent sent it.
 */
export interface AgentUpdate {
  /** The turn it belongs to; absent for an update outside any turn. */
  turn_id?: string | null;
  /**
   * The agent's update object, byte for byte as the agent sent it (for an ACP agent: the
   * `update` of its `session/update`, `sessionUpdate` naming its kind).
   */
  update: RawObject;
}

/** A program's name and version (`client`, `server`). Never compared for compatibility. */
export interface AppInfo {
  /** Program name. */
  name: string;
  /** Program version, free-form. */
  version: string;
}

/**
 * The payload of `channel.credit`: more bytes of bulk frame bodies this connection may send on
 * a bulk channel (protocol 1.1, feature `bulk_credit`). Grants add up.
 */
export interface ChannelCredit {
  /** Bytes of frame bodies granted, on top of what the connection had. */
  bytes: number;
  /** The bulk channel. */
  channel: string;
}

/** A channel as the host declares it (and as `channels.list` and the handshake show it). */
export interface ChannelDescriptor {
  /** Whether opaque binary frames are accepted. */
  binary: boolean;
  /**
   * A bulk channel's inbound credit for this connection: bytes of frame bodies it may send on
   * the channel before it hears more (`channel.credit`). Only in the handshake result of a
   * connection at protocol 1.1 or later (feature `bulk_credit`); absent elsewhere.
   */
  credit?: number | null;
  /** Outbound delivery class. */
  delivery?: DeliveryClass;
  /**
   * Who may send on the channel: both ways (the default, left out on the wire), or
   * `host_to_clients`, where a client's frame is refused with `forbidden`.
   */
  direction?: ChannelDirection;
  /** Event names the channel carries; `["*"]` declares any event. */
  events: string[];
  /** Unique name on the carrier (1..=255 UTF-8 bytes). */
  name: string;
}

/** Who may send frames on a channel. */
export type ChannelDirection =
  /** The host and its clients both send (the default; absent on the wire). */
  | "both"
  /**
   * Only the host sends: a client's frame on the channel is refused with a `protocol_error`
   * (`forbidden`) and never reaches the host. For what a host publishes (diagnostics,
   * telemetry, a screen stream) and no client should feed.
   */
  | "host_to_clients";

/** The payload of `channel.dropped`: frames of a lossy channel dropped for this receiver. */
export interface ChannelDropped {
  /** The lossy channel. */
  channel: string;
  /** Frames dropped since the last notice. */
  count: number;
}

/** `channels.list` result. */
export interface ChannelsListResult {
  /** The declared channels, sorted by name. */
  channels: ChannelDescriptor[];
}

/** An answer to a permission prompt. */
export type Decision =
  /** Let the tool run. */
  | "allow"
  /** Refuse it. */
  | "deny";

/** Outbound delivery class of a channel. */
export type DeliveryClass =
  /** Never dropped; a reader past the connection budget is failed (1013). */
  | "reliable"
  /**
   * Live media: past the channel's per-connection budget the oldest queued frames of the
   * channel are dropped and the receiver gets `channel.dropped {channel, count}`.
   */
  | "lossy"
  /**
   * Large transfers: reliable and in order, but written only when nothing else waits for the
   * connection, within a window per connection ([`ChannelDescriptor::bulk_window`]) outside
   * its byte budget. Senders wait for room (the server's `ChannelHandle::send_bulk_to`)
   * instead of failing a slow reader.
   */
  | "bulk";

/**
 * Who drives a turn: the identity the host configured for the listener, never a client's
 * claim.
 */
export interface DriverInfo {
  /** Host-configured driver id. */
  driver_id: string;
  /** Host-configured surface name. */
  surface: string;
}

/** What happened to the requested effect. */
export type EffectState =
  /** Nothing happened; safe to retry. */
  | "none"
  /** May or may not have happened. */
  | "unknown"
  /** It happened. */
  | "applied";

/** An empty params or result object, `{}`. */
export type Empty = Record<string, never>;

/** `error.code` of a response. */
export type ErrorCode =
  /** Not a valid envelope, or params failed validation (`data.reason = "invalid_params"`). */
  | "protocol_error"
  /** A request before the handshake. */
  | "handshake_required"
  /** Incompatible protocol versions. */
  | "version_incompatible"
  /** Unknown method. */
  | "method_not_found"
  /** The connection's role is below the method's least role. */
  | "forbidden"
  /** The peer's protocol lacks a feature the request needs. */
  | "unsupported_feature"
  /** A turn is already running. */
  | "busy"
  /** A text message over the soft limit. */
  | "too_large"
  /** Unknown session, turn or request id. */
  | "not_found"
  /**
   * The request would pass a bound published in the handshake `limits`
   * (`data: {limit, value}`: the limit's name and its value).
   */
  | "limit_exceeded"
  /** A host or session failure. */
  | "internal";

/** The `error` object of a response. */
export interface ErrorObject {
  /** Machine-readable code. */
  code: ErrorCode;
  /** Code-specific details. */
  data?: unknown;
  /** What happened to the requested effect, when it matters. */
  effect_state?: EffectState | null;
  /** Human-readable explanation. */
  message: string;
}

/** A feature as `system.status` reports it for the asking client. */
export interface FeatureCompatibility {
  /** Whether this client can use it now. */
  available: boolean;
  /** The protocol version that introduced it. */
  required_protocol: ProtocolVersion;
}

/** `system.handshake` params. */
export interface HandshakeParams {
  /** The client program, for logs. */
  client?: AppInfo | null;
  /**
   * Deprecated: accepted and ignored (logged).
   * @deprecated
   */
  min_compatible_peer?: unknown;
  /** The oldest protocol the client accepts. */
  min_compatible_protocol: ProtocolVersion;
  /** The protocol the client speaks. */
  protocol_version: ProtocolVersion;
  /** Resume a session after a reconnect. */
  resume?: ResumeRequest | null;
}

/** `system.handshake` result. */
export interface HandshakeResult {
  /** The declared payload channels. */
  channels: ChannelDescriptor[];
  /** Changes whenever the server restarts. */
  epoch: string;
  /** Feature name → available to this client. */
  features: { [key: string]: boolean };
  /** The server's limits. */
  limits: LimitsInfo;
  /** The oldest protocol the server accepts. */
  min_compatible_protocol: ProtocolVersion;
  /** The protocol the server speaks. */
  protocol_version: ProtocolVersion;
  /** What happened to the requested resume. */
  resume: ResumeOutcome;
  /** The connection's effective role. */
  role: Role;
  /** The server program. */
  server: AppInfo;
  /** The session this connection is bound to. */
  session_id: string;
  /** Same major, different minor. */
  version_skew: boolean;
}

/** One history entry. */
export interface HistoryEntry {
  /** Who said it. */
  role: HistoryRole;
  /** What was said (a reply: at most `limits.max_reply_bytes`). */
  text: string;
  /** `true` when `text` is a reply cut to `limits.max_reply_bytes`; absent otherwise. */
  truncated?: boolean | null;
  /** The turn it belongs to. */
  turn_id: string;
}

/** `session.history` params. */
export interface HistoryParams {
  /** At most this many of the newest entries; omitted: all. */
  limit?: number | null;
}

/** `session.history` result. */
export interface HistoryResult {
  /** Oldest first. */
  entries: HistoryEntry[];
}

/** Who said a history entry. */
export type HistoryRole =
  /** The user's prompt. */
  | "user"
  /** The agent's reply. */
  | "assistant";

/** Every limit, published in the handshake result. */
export interface LimitsInfo {
  /** Time allowed for the handshake, in milliseconds. */
  handshake_timeout_ms: number;
  /** Connections admitted at once. */
  max_connections: number;
  /** The longest request `id` accepted, in bytes. */
  max_id_bytes: number;
  /** Memory for the messages all clients send, together; a message that does not fit waits. */
  max_inbound_bytes: number;
  /** Hard cap on any message (close 1009 above it). */
  max_message_bytes: number;
  /** Bytes of a reply kept in `turn_completed.text` and history (more is `truncated`). */
  max_reply_bytes: number;
  /**
   * Bytes every session's history and resume ring hold together; past it the least
   * recently used sessions lose their oldest entries first (a resume past them is a `gap`).
   */
  max_session_bytes: number;
  /** Sessions the host may hold; `sessions.start` past it is `limit_exceeded`. */
  max_sessions: number;
  /** Soft limit on a text message (`too_large` above it). */
  max_text_bytes: number;
  /** The longest `sessions.start` title, in bytes (`invalid_params` above it). */
  max_title_bytes: number;
  /** Server ping interval, in milliseconds. */
  ping_interval_ms: number;
  /** Time allowed for a pong, in milliseconds. */
  pong_timeout_ms: number;
  /** Outbound bytes queued per connection before it is failed (1013). */
  queue_bytes: number;
  /** Bytes held per session for resume. */
  resume_max_bytes: number;
  /** Events held per session for resume. */
  resume_max_events: number;
}

/** One choice of a permission prompt, as an ACP agent offers it (ACP's `PermissionOption`). */
export interface PermissionOption {
  /** What choosing it means. */
  kind: PermissionOptionKind;
  /** The label to show. */
  name: string;
  /** What `session.permission.respond` names as `option_id`. */
  optionId: string;
}

/** What choosing a [`PermissionOption`] means. */
export type PermissionOptionKind =
  /** Allow this once. */
  | "allow_once"
  /** Allow this and remember it. */
  | "allow_always"
  /** Refuse this once. */
  | "reject_once"
  /** Refuse this and remember it. */
  | "reject_always";

/** `session.permission_request`: the agent waits for `session.permission.respond`. */
export interface PermissionRequest {
  /** The tool's input. */
  input: unknown;
  /**
   * The choices an ACP agent offers (protocol 1.2): answer with one of their `optionId`s
   * (`option_id`) or with `allow`/`deny`, which pick the `allow_once`/`reject_once` option.
   * Absent for other agents.
   */
  options?: PermissionOption[] | null;
  /** Answer with this id. */
  request_id: string;
  /** The tool that wants to run. */
  tool: string;
  /** The turn. */
  turn_id: string;
}

/** `session.permission_resolved`: a permission request was answered. */
export interface PermissionResolved {
  /** The answer. */
  decision: Decision;
  /** The answered request. */
  request_id: string;
}

/**
 * `session.permission.respond` params: `decision`, or (protocol 1.2, feature
 * `agent_updates`) `option_id` — exactly one of them.
 */
export interface PermissionRespondParams {
  /**
   * The answer: `allow` or `deny` (for an ACP agent's prompt, its `allow_once` or
   * `reject_once` option).
   */
  decision?: Decision | null;
  /**
   * The `optionId` of one of the prompt's `options` (an ACP agent's prompt only; any
   * other prompt refuses it as `invalid_params`).
   */
  option_id?: string | null;
  /** The `request_id` of the `session.permission_request` event. */
  request_id: string;
}

/** `payload.code` of a `protocol_error` event: the answer to a frame with no usable `id`. */
export type ProtocolErrorCode =
  /** Not JSON, not an object, or a binary frame that is not a channel frame. */
  | "malformed_frame"
  /** A channel frame for a channel that is not registered (or was closed). */
  | "unknown_channel"
  /** A channel event the channel did not declare. */
  | "undeclared_event"
  /** Binary on a channel that did not declare binary. */
  | "binary_not_declared"
  /**
   * The sender may not do this: an observer sending channel frames, or any client
   * sending on a channel that is host → clients only.
   */
  | "forbidden"
  /** A frame before the handshake. */
  | "handshake_required"
  /** A JSON object that is not a valid request (an event or response from a client, …). */
  | "invalid_envelope"
  /** A message over the soft limit. */
  | "too_large"
  /**
   * A bulk channel frame whose body is larger than the sender's remaining credit
   * (protocol 1.1): not delivered, the connection stays open.
   */
  | "credit_exceeded";

/** The payload of the `protocol_error` event: the answer to a frame with no usable id. */
export interface ProtocolErrorPayload {
  /** The channel of a refused channel frame. */
  channel?: string | null;
  /** What was wrong. */
  code: ProtocolErrorCode;
  /** For `too_large`: the soft limit. */
  limit?: number | null;
  /** Human-readable explanation. */
  message: string;
  /** The client's seq of a refused channel frame. */
  seq?: number | null;
  /** For `too_large`: the message size. */
  size?: number | null;
}

/** A protocol version "MAJOR.MINOR". */
export type ProtocolVersion = string;

/** A JSON object, carried byte for byte as its sender wrote it. */
export type RawObject = { [key: string]: unknown };

/** The typed outcome of a handshake's `resume` (docs/protocol.md, "Sessions and resume"). */
export type ResumeOutcome =
  /** No resume was asked for. */
  | {
    outcome: "new";
  }
  /** Every missed event is replayed after the result, before any new one. */
  | {
    outcome: "resumed";
    /** How many events are replayed. */
    replayed: number;
  }
  /** Events `from..=to` are lost (refetch history); the ones held after them are replayed. */
  | {
    /** The first lost seq (`after_seq` + 1). */
    from: number;
    outcome: "gap";
    /** The last lost seq. */
    to: number;
  }
  /** Unknown session or another epoch (the server restarted): bound afresh, nothing replayed. */
  | {
    outcome: "reset";
  };

/** `resume` of a handshake: where the client left off. */
export interface ResumeRequest {
  /** The last `seq` the client received. */
  after_seq: number;
  /** The server epoch the client last saw. */
  epoch: string;
  /** The session the client was bound to. */
  session_id: string;
}

/**
 * What a connection may do. `Observe` < `Drive`: a listener grants one, a client may ask for
 * less, never more.
 */
export type Role =
  /** Read-only: receives every session event and channel frame, may call `observe` methods. */
  | "observe"
  /** May also submit prompts, abort turns, answer permission prompts and send channel frames. */
  | "drive";

/** `surface.role` result. */
export interface RoleResult {
  /** The effective role of this connection. */
  role: Role;
}

/** `session.error`: something went wrong in the session. */
export interface SessionErrorEvent {
  /** Machine-readable code (e.g. `agent_timeout`, `agent_exited`, `internal`). */
  code: string;
  /** Human-readable explanation. */
  message: string;
  /** The turn, when the error belongs to one. */
  turn_id?: string | null;
}

/** `sessions.start` and `sessions.switch` result. */
export interface SessionIdResult {
  /** The session this connection is now bound to. */
  session_id: string;
}

/** What a session is doing. */
export type SessionState =
  /** No turn runs. */
  | "idle"
  /** A turn runs. */
  | "running"
  /** A turn waits for a permission answer. */
  | "awaiting_permission";

/** `session.status` result. */
export interface SessionStatusResult {
  /** The bound session. */
  session_id: string;
  /** What it is doing. */
  state: SessionState;
  /** The running turn, when there is one. */
  turn_id?: string | null;
}

/** One session of the host's directory. */
export interface SessionSummary {
  /** Its id. */
  session_id: string;
  /** What it is doing. */
  state: SessionState;
  /** Its title. */
  title: string;
}

/** `sessions.list` result. */
export interface SessionsListResult {
  /** The default session first. */
  sessions: SessionSummary[];
}

/** `sessions.start` params. */
export interface SessionsStartParams {
  /** A title; omitted: the directory picks one. */
  title?: string | null;
}

/** `sessions.switch` params. */
export interface SessionsSwitchParams {
  /** The session to bind this connection to. */
  session_id: string;
}

/** `session.submit` params. */
export interface SubmitParams {
  /** Agent-specific options, passed through to the session. */
  options?: { [key: string]: unknown } | null;
  /** The user prompt. */
  prompt: string;
}

/** `system.status` result. */
export interface SystemStatusResult {
  /** Names of the declared payload channels. */
  channels: string[];
  /** Feature name → its compatibility for this client. */
  compatibility: { [key: string]: FeatureCompatibility };
  /** Admitted connections now. */
  connections: number;
  /** Changes whenever the server restarts. */
  epoch: string;
  /** The oldest protocol the server accepts. */
  min_compatible_protocol: ProtocolVersion;
  /** The protocol the server speaks. */
  protocol_version: ProtocolVersion;
  /** The server program. */
  server: AppInfo;
}

/** `session.text_delta`: the next piece of the reply. */
export interface TextDelta {
  /** Text to append. */
  delta: string;
  /** The turn. */
  turn_id: string;
}

/** `session.turn_completed`: the turn ended. */
export interface TurnCompleted {
  /** Whether it was aborted. */
  aborted: boolean;
  /**
   * Why an ACP agent ended the turn (its `stopReason`: `end_turn`, `max_tokens`,
   * `max_turn_requests`, `refusal`, `cancelled`); absent for other agents, and when the
   * carrier ended the turn itself (an abort, a timeout, an exit).
   */
  stop_reason?: string | null;
  /** The whole reply (what was streamed, when aborted), at most `limits.max_reply_bytes`. */
  text: string;
  /**
   * `true` when `text` was cut to `limits.max_reply_bytes` (the deltas hold all of it);
   * absent otherwise. An agent process may set it on a reply it cut itself.
   */
  truncated?: boolean | null;
  /** The turn. */
  turn_id: string;
}

/** `session.submit` result, sent before the turn's events stream. */
export interface TurnIdResult {
  /** The turn started by the submit. */
  turn_id: string;
}

/** `session.turn_started`. */
export interface TurnStarted {
  /** Who submitted it. */
  driver: DriverInfo;
  /** The submitted prompt, so an observer or a second driver sees what was asked. */
  prompt: string;
  /** The new turn. */
  turn_id: string;
}

/** `usage.report` params. */
export interface UsageReportParams {
  /** The scope; omitted: `session`. */
  scope?: UsageScope | null;
  /** For the `session` scope; omitted: the bound session. */
  session_id?: string | null;
}

/** `usage.report` result: the host's usage read model for one scope. */
export interface UsageReportResult {
  /** The scope reported. */
  scope: UsageScope;
  /** The session, for the `session` scope. */
  session_id?: string | null;
  /** Tokens the agent consumed. */
  tokens_in: number;
  /** Tokens the agent produced. */
  tokens_out: number;
  /** Completed turns. */
  turns: number;
}

/** Which usage read model `usage.report` asks for. */
export type UsageScope =
  /** One session (default: the bound one). */
  | "session"
  /** The user's usage across sessions. */
  | "personal"
  /** Usage the host has stored (e.g. across restarts). */
  | "stored";

/**
 * Every method of the catalog: its params, result, the least role allowed to call it and the
 * protocol feature it needs (`null`: the core protocol).
 */
export interface Methods {
  "system.handshake": { params: HandshakeParams; result: HandshakeResult; leastRole: "observe"; feature: null };
  "system.ping": { params: Empty; result: Empty; leastRole: "observe"; feature: null };
  "system.status": { params: Empty; result: SystemStatusResult; leastRole: "observe"; feature: null };
  "surface.role": { params: Empty; result: RoleResult; leastRole: "observe"; feature: null };
  "session.submit": { params: SubmitParams; result: TurnIdResult; leastRole: "drive"; feature: null };
  "session.abort": { params: AbortParams; result: TurnIdResult; leastRole: "drive"; feature: null };
  "session.permission.respond": { params: PermissionRespondParams; result: Empty; leastRole: "drive"; feature: "permissions" };
  "session.history": { params: HistoryParams; result: HistoryResult; leastRole: "observe"; feature: null };
  "session.status": { params: Empty; result: SessionStatusResult; leastRole: "observe"; feature: null };
  "sessions.list": { params: Empty; result: SessionsListResult; leastRole: "observe"; feature: "sessions" };
  "sessions.start": { params: SessionsStartParams; result: SessionIdResult; leastRole: "drive"; feature: "sessions" };
  "sessions.switch": { params: SessionsSwitchParams; result: SessionIdResult; leastRole: "observe"; feature: "sessions" };
  "channels.list": { params: Empty; result: ChannelsListResult; leastRole: "observe"; feature: "channels" };
  "usage.report": { params: UsageReportParams; result: UsageReportResult; leastRole: "observe"; feature: null };
}

/** A method's wire name. */
export type MethodName = keyof Methods;
/** The params of a method. */
export type MethodParams<M extends MethodName> = Methods[M]["params"];
/** The result of a method. */
export type MethodResult<M extends MethodName> = Methods[M]["result"];

/** Every event the server sends, with its payload. */
export interface Events {
  "session.turn_started": TurnStarted;
  "session.text_delta": TextDelta;
  "session.permission_request": PermissionRequest;
  "session.permission_resolved": PermissionResolved;
  "session.turn_completed": TurnCompleted;
  "session.error": SessionErrorEvent;
  "session.agent_update": AgentUpdate;
  "protocol_error": ProtocolErrorPayload;
  "channel.dropped": ChannelDropped;
  "channel.credit": ChannelCredit;
}

/** An event's wire name. */
export type EventName = keyof Events;
/** The session events: numbered with `seq`, replayed on resume. */
export type SessionEventName = "session.turn_started" | "session.text_delta" | "session.permission_request" | "session.permission_resolved" | "session.turn_completed" | "session.error" | "session.agent_update";
/** The optional protocol features (`features` of the handshake result). */
export type FeatureName = "sessions" | "resume" | "permissions" | "channels" | "usage.session" | "usage.personal" | "usage.stored" | "bulk_credit" | "agent_updates";
