/**
 * carrier browser client.
 *
 * A dependency-free ES module served by the carrier at `GET /client.js`. It speaks the agent
 * protocol on text frames (SPEC sections 4–6), the RBF v1 payload-channel codec on binary frames
 * (section 7), and follows the client transport contract (section 11): the handshake is the first
 * frame, an unexpected break reconnects with capped exponential backoff and resumes the session,
 * and requests that need a feature the server lacks fail locally without sending anything.
 *
 * It runs in browsers and in Node 20+ (tests pass a fake socket class as `WebSocketImpl`).
 *
 * Behaviour the SPEC leaves open, decided here:
 * - While a reconnect is scheduled or under way the state is `connecting`; `disconnected` means
 *   the client has stopped trying (disconnect(), close 1008, a refused handshake, a failed first
 *   connect).
 * - Requests need a completed handshake (`not_connected` otherwise, nothing queued); on a break,
 *   outstanding requests reject with `connection_closed` and `effectState: "unknown"`.
 * - The `seq` line restarts (dedupe floor 0) when the handshake does not resume the same session
 *   (`new` / `reset`) and when `sessions.start` / `sessions.switch` binds another session.
 * - Outbound channel seq numbering restarts at 0 on every new socket.
 * - Feature preflight trusts an explicit `features[name]` boolean; a feature the server does not
 *   list is judged by comparing its `protocol_version` with the one that introduced the feature.
 *
 * @example
 * import { CarrierClient } from "/client.js";
 * const client = new CarrierClient("ws://127.0.0.1:7070/", { token });
 * client.onEvent((frame) => console.log(frame.event, frame.payload));
 * await client.connect();
 * const { turn_id } = await client.request("session.submit", { prompt: "hi" });
 *
 * @module carrier/client
 */

/** Protocol version this client speaks. */
export const PROTOCOL_VERSION = "1.0";
/** Oldest server protocol this client still works with. */
export const MIN_COMPATIBLE_PROTOCOL = "1.0";
/** Version reported in the handshake's `client` field. */
export const CLIENT_VERSION = "0.1.0";

/**
 * Delay before each reconnect attempt, in order; the last one repeats (SPEC section 11).
 * @type {readonly number[]}
 */
export const RECONNECT_DELAYS_MS = Object.freeze([1000, 2000, 4000, 8000, 16000, 30000]);

/**
 * Methods that need an optional protocol feature, with the protocol version that introduced it.
 * Consulted before sending a request (feature preflight). Methods not listed need no feature.
 * @type {Readonly<Record<string, {feature: string, requiredProtocol: string}>>}
 */
export const METHOD_FEATURES = Object.freeze({
  "session.permission.respond": Object.freeze({ feature: "permissions", requiredProtocol: "1.0" }),
  "sessions.list": Object.freeze({ feature: "sessions", requiredProtocol: "1.0" }),
  "sessions.start": Object.freeze({ feature: "sessions", requiredProtocol: "1.0" }),
  "sessions.switch": Object.freeze({ feature: "sessions", requiredProtocol: "1.0" }),
  "channels.list": Object.freeze({ feature: "channels", requiredProtocol: "1.0" }),
});

/** Close code the server uses to refuse a token or role; reconnecting cannot help. */
const CLOSE_POLICY_VIOLATION = 1008;
const CLOSE_NORMAL = 1000;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/**
 * A failed request or connection. `code` is the wire error code (SPEC section 6) or one of the
 * client-side codes `not_connected`, `connection_closed`, `disconnected`, `timeout`.
 */
export class CarrierError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{data?: unknown, effectState?: string}} [details]
   */
  constructor(code, message, { data, effectState } = {}) {
    super(message);
    this.name = "CarrierError";
    /** @type {string} */
    this.code = code;
    /** @type {unknown} */
    this.data = data;
    /** What happened to the requested effect: `none`, `unknown` or `applied` (if known). */
    this.effectState = effectState;
  }
}

/** A byte sequence that is not a valid RBF v1 channel frame, or a frame that cannot be encoded. */
export class ChannelFrameError extends Error {
  /**
   * @param {string} code machine-readable reason, e.g. `bad_magic`, `truncated`, `malformed_json`
   * @param {string} message
   */
  constructor(code, message) {
    super(`channel frame: ${message}`);
    this.name = "ChannelFrameError";
    /** @type {string} */
    this.code = code;
  }
}

// ---------------------------------------------------------------------------------------------
// Channel-frame codec (RBF v1, SPEC section 7)
// ---------------------------------------------------------------------------------------------

const MAGIC = Object.freeze([0x52, 0x42, 0x46]); // "RBF"
const FORMAT_VERSION = 1;
const KIND_BINARY = 0x01;
const KIND_EVENT = 0x02;
const FIXED_HEADER_BYTES = 6; // magic (3), version (1), kind (1), name length (1)
const SEQ_BYTES = 4;
const MAX_CHANNEL_NAME_BYTES = 255;
const MAX_SEQ = 0xffff_ffff;

const utf8Encoder = new TextEncoder();
// `ignoreBOM` keeps a leading U+FEFF as data, so decoding is byte-exact.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A decoded channel frame. Binary frames carry `payload` bytes; event frames carry `event` and a
 * JSON `payload` (`null` when the body had none).
 * @typedef {{kind: "binary", channel: string, seq: number, payload: Uint8Array}} BinaryFrame
 * @typedef {{kind: "event", channel: string, seq: number, event: string, payload: unknown}} EventFrame
 * @typedef {BinaryFrame | EventFrame} ChannelFrame
 */

/**
 * Views bytes given as a Uint8Array, an ArrayBuffer or any other ArrayBufferView, without copying.
 * @param {unknown} value
 * @returns {Uint8Array | null}
 */
function asBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return null;
}

/**
 * Encodes one channel frame into the exact bytes of one binary WebSocket message.
 * @param {ChannelFrame} frame `{kind: "binary", channel, seq, payload: Uint8Array | ArrayBuffer}`
 *   or `{kind: "event", channel, seq, event, payload}` (payload: any JSON value; omitted = null)
 * @returns {Uint8Array}
 * @throws {ChannelFrameError} when the frame cannot be represented (bad name, seq, kind, payload)
 */
export function encodeChannelFrame(frame) {
  if (frame === null || typeof frame !== "object") {
    throw new ChannelFrameError("invalid_frame", "frame must be an object");
  }
  const name = encodeChannelName(frame.channel);
  const seq = frame.seq;
  if (!Number.isInteger(seq) || seq < 0 || seq > MAX_SEQ) {
    throw new ChannelFrameError("invalid_seq", "seq must be an integer in 0..2^32-1");
  }
  let kind;
  let body;
  if (frame.kind === "binary") {
    kind = KIND_BINARY;
    body = asBytes(frame.payload);
    if (body === null) {
      throw new ChannelFrameError("invalid_payload", "binary payload must be a Uint8Array or ArrayBuffer");
    }
  } else if (frame.kind === "event") {
    kind = KIND_EVENT;
    body = encodeEventBody(frame.event, frame.payload);
  } else {
    throw new ChannelFrameError("unknown_kind", `unknown kind ${JSON.stringify(frame.kind)}`);
  }

  const seqOffset = FIXED_HEADER_BYTES + name.length;
  const out = new Uint8Array(seqOffset + SEQ_BYTES + body.length);
  out.set(MAGIC, 0);
  out[3] = FORMAT_VERSION;
  out[4] = kind;
  out[5] = name.length;
  out.set(name, FIXED_HEADER_BYTES);
  new DataView(out.buffer).setUint32(seqOffset, seq, false);
  out.set(body, seqOffset + SEQ_BYTES);
  return out;
}

/** @param {unknown} channel */
function encodeChannelName(channel) {
  if (typeof channel !== "string" || channel.length === 0) {
    throw new ChannelFrameError("empty_channel_name", "channel name must be a non-empty string");
  }
  if (typeof channel.isWellFormed === "function" && !channel.isWellFormed()) {
    throw new ChannelFrameError("invalid_utf8", "channel name contains a lone surrogate");
  }
  const name = utf8Encoder.encode(channel);
  if (name.length > MAX_CHANNEL_NAME_BYTES) {
    throw new ChannelFrameError("channel_name_too_long", `channel name is ${name.length} bytes (max 255)`);
  }
  return name;
}

/**
 * @param {unknown} event
 * @param {unknown} payload
 */
function encodeEventBody(event, payload) {
  if (typeof event !== "string" || event.length === 0) {
    throw new ChannelFrameError("missing_event_name", "event name must be a non-empty string");
  }
  let json;
  try {
    json = JSON.stringify({ event, payload: payload === undefined ? null : payload });
  } catch (err) {
    throw new ChannelFrameError("invalid_payload", `event payload is not JSON-serialisable (${err.message})`);
  }
  return utf8Encoder.encode(json);
}

/**
 * Decodes one binary WebSocket message into a channel frame. A binary frame's `payload` is a view
 * into `bytes` (no copy).
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
 * @returns {ChannelFrame}
 * @throws {ChannelFrameError} for anything that is not a valid RBF v1 frame
 */
export function decodeChannelFrame(bytes) {
  const buf = asBytes(bytes);
  if (buf === null) throw new ChannelFrameError("invalid_input", "input must be bytes");
  if (buf.length < MAGIC.length || MAGIC.some((b, i) => buf[i] !== b)) {
    throw new ChannelFrameError("bad_magic", "bad magic (not a channel frame)");
  }
  if (buf.length < FIXED_HEADER_BYTES) throw new ChannelFrameError("truncated", "truncated header");
  if (buf[3] !== FORMAT_VERSION) {
    throw new ChannelFrameError("unsupported_version", `unsupported version ${buf[3]}`);
  }
  const kind = buf[4];
  if (kind !== KIND_BINARY && kind !== KIND_EVENT) {
    throw new ChannelFrameError("unknown_kind", `unknown kind ${kind}`);
  }
  const nameLength = buf[5];
  if (nameLength === 0) throw new ChannelFrameError("empty_channel_name", "empty channel name");
  const seqOffset = FIXED_HEADER_BYTES + nameLength;
  const bodyOffset = seqOffset + SEQ_BYTES;
  if (buf.length < bodyOffset) {
    throw new ChannelFrameError("truncated", "truncated (header longer than the frame)");
  }
  const channel = decodeUtf8(buf.subarray(FIXED_HEADER_BYTES, seqOffset), "channel name");
  const seq = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(seqOffset, false);
  const body = buf.subarray(bodyOffset);

  if (kind === KIND_BINARY) return { kind: "binary", channel, seq, payload: body };

  let parsed;
  try {
    parsed = JSON.parse(decodeUtf8(body, "event body"));
  } catch (err) {
    if (err instanceof ChannelFrameError) throw err;
    throw new ChannelFrameError("malformed_json", "malformed JSON body");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ChannelFrameError("body_not_object", "event body must be a JSON object");
  }
  if (typeof parsed.event !== "string" || parsed.event.length === 0) {
    throw new ChannelFrameError("missing_event_name", "event body has no non-empty `event` name");
  }
  const payload = parsed.payload === undefined ? null : parsed.payload;
  return { kind: "event", channel, seq, event: parsed.event, payload };
}

/**
 * @param {Uint8Array} bytes
 * @param {string} what
 */
function decodeUtf8(bytes, what) {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new ChannelFrameError("invalid_utf8", `${what} is not valid UTF-8`);
  }
}

// ---------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------

/**
 * @typedef {"disconnected" | "connecting" | "connected" | "version_skew"} ConnectionState
 * @typedef {{dispose(): void}} Disposable
 * @typedef {{event: string, seq?: number, payload?: unknown}} EventFrameText
 */

/**
 * @typedef {object} CarrierClientOptions
 * @property {string} [token] sent only as the WebSocket subprotocol; omit for an `--open` server
 * @property {"drive" | "observe"} [role] `observe` asks the server for the read-only role
 * @property {boolean} [reconnect=true] reconnect and resume after an unexpected break
 * @property {number} [requestTimeoutMs=30000] a request without a response by then rejects
 * @property {string} [clientName="carrier-web"] the handshake's `client.name`
 * @property {typeof WebSocket} [WebSocketImpl] defaults to `globalThis.WebSocket`
 * @property {(fn: () => void, ms: number) => unknown} [setTimeoutImpl] timer hook (tests)
 * @property {(handle: unknown) => void} [clearTimeoutImpl] timer hook (tests)
 * @property {Record<string, {feature: string, requiredProtocol: string}>} [methodFeatures]
 *   overrides {@link METHOD_FEATURES}
 */

/**
 * One client connection to a carrier server, with request correlation, session-event delivery
 * (deduplicated by `seq`), payload channels, reconnect with backoff and resume.
 */
export class CarrierClient {
  #url;
  #token;
  #requestTimeoutMs;
  #reconnectEnabled;
  #clientName;
  #WebSocketImpl;
  #setTimeout;
  #clearTimeout;
  #methodFeatures;

  /** @type {ConnectionState} */
  #state = "disconnected";
  /** @type {WebSocket | null} the live socket; events from any other socket are ignored */
  #ws = null;
  /** True from connect() until disconnect() or a failure that reconnecting cannot fix. */
  #wanted = false;
  /** A handshake succeeded since connect(); only then is a break "unexpected" and retried. */
  #established = false;
  #reconnectAttempt = 0;
  #reconnectTimer = null;
  /** @type {{promise: Promise<object>, resolve: Function, reject: Function} | null} */
  #connectWaiter = null;
  #handshakeId = null;
  #handshakeTimer = null;

  /** @type {object | null} */
  #handshakeResult = null;
  /** @type {CarrierError | null} why the client last stopped trying; null once connected */
  #lastError = null;
  #sessionId = null;
  #epoch = null;
  /** Highest session-event seq delivered for #sessionId; 0 when none. */
  #lastSeq = 0;

  #nextRequestNumber = 1;
  /** @type {Map<string, {method: string, resolve: Function, reject: Function, timer: unknown}>} */
  #pending = new Map();
  /** Next outbound seq per channel; numbering restarts on every new socket. */
  #channelSeq = new Map();

  #eventHandlers = new Set();
  #stateHandlers = new Set();
  /** @type {Map<string, Set<Function>>} */
  #channelHandlers = new Map();

  /**
   * @param {string} url the server's WebSocket URL, e.g. `ws://127.0.0.1:7070/`
   * @param {CarrierClientOptions} [options]
   */
  constructor(url, options = {}) {
    const {
      token,
      role,
      reconnect = true,
      requestTimeoutMs = 30_000,
      clientName = "carrier-web",
      WebSocketImpl = globalThis.WebSocket,
      setTimeoutImpl = globalThis.setTimeout.bind(globalThis),
      clearTimeoutImpl = globalThis.clearTimeout.bind(globalThis),
      methodFeatures = METHOD_FEATURES,
    } = options;
    if (role !== undefined && role !== "drive" && role !== "observe") {
      throw new TypeError(`role must be "drive" or "observe", not ${JSON.stringify(role)}`);
    }
    if (typeof WebSocketImpl !== "function") {
      throw new TypeError("no WebSocket implementation: pass options.WebSocketImpl");
    }
    const target = new URL(url);
    if (role === "observe") target.searchParams.set("role", "observe");
    this.#url = target.toString();
    this.#token = token || null;
    this.#reconnectEnabled = reconnect;
    this.#requestTimeoutMs = requestTimeoutMs;
    this.#clientName = clientName;
    this.#WebSocketImpl = WebSocketImpl;
    this.#setTimeout = setTimeoutImpl;
    this.#clearTimeout = clearTimeoutImpl;
    this.#methodFeatures = methodFeatures;
  }

  /** @returns {ConnectionState} */
  get state() {
    return this.#state;
  }

  /** The latest `system.handshake` result, or null before the first handshake. */
  get handshakeResult() {
    return this.#handshakeResult;
  }

  /**
   * Why the client last went `disconnected` on its own — a refused token (`connection_closed`
   * with `data.code` 1008), a server that is gone (`data.code` 1006), `version_incompatible`, … —
   * so a page can say what to do even when no `connect()` call is waiting (a failed reconnect).
   * `null` after a successful handshake; `disconnected` after `disconnect()`.
   * @returns {CarrierError | null}
   */
  get lastError() {
    return this.#lastError;
  }

  /** Highest session-event `seq` delivered for the current session (0 when none yet). */
  get lastSeq() {
    return this.#lastSeq;
  }

  /** The session this connection is bound to, as last reported by the server. */
  get sessionId() {
    return this.#sessionId;
  }

  /** Bytes queued on the socket but not yet sent (for pacing large channel uploads). */
  get bufferedAmount() {
    return this.#ws?.bufferedAmount ?? 0;
  }

  /**
   * Opens the socket and performs the handshake. After an earlier connection it asks to resume
   * the last session (`resume` in the handshake), so `connect()` after `disconnect()` continues
   * where the client left off. Only a break after a successful handshake is retried; a first
   * connect that fails rejects and stays `disconnected`.
   * @returns {Promise<object>} the handshake result
   * @throws {CarrierError} `version_incompatible` or another handshake error, or
   *   `connection_closed` when the socket closed before the handshake completed
   */
  connect() {
    if (this.#connectWaiter) return this.#connectWaiter.promise;
    if (this.#isReady()) return Promise.resolve(this.#handshakeResult);
    this.#connectWaiter = deferred();
    this.#wanted = true;
    if (this.#ws === null) {
      this.#cancelReconnect();
      this.#reconnectAttempt = 0;
      this.#openSocket();
    }
    return this.#connectWaiter.promise;
  }

  /**
   * Closes the connection and stops reconnecting. Outstanding requests reject with `disconnected`.
   * @returns {Promise<void>}
   */
  disconnect() {
    this.#shutDown(new CarrierError("disconnected", "the client disconnected", { effectState: "unknown" }));
    return Promise.resolve();
  }

  /**
   * Sends a request and resolves with its `result`.
   * @param {string} method e.g. `session.submit`
   * @param {object} [params]
   * @returns {Promise<any>}
   * @throws {CarrierError} the server's error (`code`, `data`, `effectState`), or a local one:
   *   `unsupported_feature` (nothing was sent), `not_connected`, `timeout`, `connection_closed`
   */
  request(method, params) {
    if (typeof method !== "string" || method.length === 0) {
      return Promise.reject(new TypeError("method must be a non-empty string"));
    }
    if (method === "system.handshake") {
      return Promise.reject(new TypeError("the client performs system.handshake itself"));
    }
    if (!this.#isReady()) {
      return Promise.reject(
        new CarrierError("not_connected", `cannot send ${method}: not connected`, { effectState: "none" }),
      );
    }
    const unsupported = this.#preflight(method);
    if (unsupported) return Promise.reject(unsupported);
    return this.#call(method, params);
  }

  /**
   * Subscribes to every inbound text event: `session.*` (deduplicated by `seq`),
   * `protocol_error`, `channel.dropped`, … The handler gets the frame `{event, seq?, payload}`;
   * `session.turn_started` carries `{turn_id, driver, prompt}`, so every connection sees what
   * was asked, whoever asked it.
   * @param {(frame: EventFrameText) => void} handler
   * @returns {Disposable}
   */
  onEvent(handler) {
    return subscribe(this.#eventHandlers, handler);
  }

  /**
   * Subscribes to state changes; the handler gets `(state, previousState)`.
   * @param {(state: ConnectionState, previous: ConnectionState) => void} handler
   * @returns {Disposable}
   */
  onStateChange(handler) {
    return subscribe(this.#stateHandlers, handler);
  }

  /**
   * Subscribes to decoded inbound frames of one channel; `"*"` receives every channel.
   * @param {string} channel
   * @param {(frame: ChannelFrame) => void} handler
   * @returns {Disposable}
   */
  onChannel(channel, handler) {
    let handlers = this.#channelHandlers.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.#channelHandlers.set(channel, handlers);
    }
    return subscribe(handlers, handler);
  }

  /**
   * Sends an event frame on a declared channel.
   * @param {string} channel
   * @param {string} event
   * @param {unknown} [payload]
   * @returns {number} the seq the frame carried
   * @throws {CarrierError} `not_connected`; {@link ChannelFrameError} for an unencodable frame
   */
  sendChannelEvent(channel, event, payload) {
    return this.#sendChannelFrame({ kind: "event", channel, event, payload });
  }

  /**
   * Sends opaque bytes on a declared binary channel.
   * @param {string} channel
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
   * @returns {number} the seq the frame carried
   * @throws {CarrierError} `not_connected`; {@link ChannelFrameError} for an unencodable frame
   */
  sendChannelBinary(channel, bytes) {
    return this.#sendChannelFrame({ kind: "binary", channel, payload: asBytes(bytes) });
  }

  // -- connection lifecycle ------------------------------------------------------------------

  #isReady() {
    return this.#state === "connected" || this.#state === "version_skew";
  }

  #setState(next) {
    const previous = this.#state;
    if (previous === next) return;
    this.#state = next;
    for (const handler of [...this.#stateHandlers]) callSafely(handler, next, previous);
  }

  #openSocket() {
    this.#setState("connecting");
    this.#channelSeq.clear();
    let ws;
    try {
      ws = this.#token ? new this.#WebSocketImpl(this.#url, [this.#token]) : new this.#WebSocketImpl(this.#url);
    } catch (err) {
      // A URL or token the WebSocket constructor refuses will be refused again: stop.
      this.#shutDown(new CarrierError("connection_closed", `cannot open the socket: ${err.message}`));
      return;
    }
    ws.binaryType = "arraybuffer";
    this.#ws = ws;
    ws.addEventListener("open", () => {
      if (this.#ws === ws) this.#sendHandshake();
    });
    ws.addEventListener("message", (event) => {
      if (this.#ws === ws) this.#onSocketData(event.data);
    });
    ws.addEventListener("close", (event) => {
      if (this.#ws === ws) this.#onSocketClosed(event.code ?? 1006, event.reason ?? "");
    });
    // An `error` event is always followed by `close`, which does the work.
    ws.addEventListener("error", () => {});
  }

  #sendHandshake() {
    /** @type {Record<string, unknown>} */
    const params = {
      protocol_version: PROTOCOL_VERSION,
      min_compatible_protocol: MIN_COMPATIBLE_PROTOCOL,
      client: { name: this.#clientName, version: CLIENT_VERSION },
    };
    if (this.#sessionId !== null && this.#epoch !== null) {
      params.resume = { session_id: this.#sessionId, epoch: this.#epoch, after_seq: this.#lastSeq };
    }
    const id = this.#newRequestId();
    this.#handshakeId = id;
    this.#handshakeTimer = this.#setTimeout(() => {
      this.#handshakeTimer = null;
      // Closing leads to #onSocketClosed: rejects connect() or schedules the next attempt.
      this.#ws?.close(CLOSE_NORMAL, "handshake timeout");
    }, this.#requestTimeoutMs);
    this.#sendText({ id, method: "system.handshake", params });
  }

  #onHandshakeResponse(frame) {
    this.#clearHandshake();
    if (frame.error !== undefined) {
      // version_incompatible (or any refusal of the handshake itself) will not change on retry.
      this.#shutDown(toCarrierError(frame.error));
      return;
    }
    const result = isObject(frame.result) ? frame.result : {};
    const outcome = result.resume?.outcome;
    const sameSession = result.session_id === this.#sessionId && result.epoch === this.#epoch;
    // Only a resumed (or gapped) session continues the old seq numbering.
    if (!(sameSession && (outcome === "resumed" || outcome === "gap"))) this.#lastSeq = 0;
    this.#handshakeResult = result;
    this.#sessionId = result.session_id ?? null;
    this.#epoch = result.epoch ?? null;
    this.#established = true;
    this.#reconnectAttempt = 0;
    this.#lastError = null;
    this.#setState(result.version_skew === true ? "version_skew" : "connected");
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.resolve(result);
  }

  #onSocketClosed(code, reason) {
    this.#ws = null;
    this.#clearHandshake();
    const closed = new CarrierError("connection_closed", `connection closed (${code}${reason ? `: ${reason}` : ""})`, {
      data: { code, reason },
      effectState: "unknown",
    });
    this.#rejectPending(closed);
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.reject(closed);

    const retry = this.#wanted && this.#reconnectEnabled && this.#established && code !== CLOSE_POLICY_VIOLATION;
    if (retry) {
      this.#scheduleReconnect();
    } else {
      this.#wanted = false;
      this.#established = false;
      this.#lastError = closed;
      this.#setState("disconnected");
    }
  }

  #scheduleReconnect() {
    const delay = RECONNECT_DELAYS_MS[Math.min(this.#reconnectAttempt, RECONNECT_DELAYS_MS.length - 1)];
    this.#reconnectAttempt += 1;
    this.#setState("connecting");
    this.#reconnectTimer = this.#setTimeout(() => {
      this.#reconnectTimer = null;
      if (this.#wanted && this.#ws === null) this.#openSocket();
    }, delay);
  }

  #cancelReconnect() {
    if (this.#reconnectTimer !== null) {
      this.#clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = null;
    }
  }

  #clearHandshake() {
    this.#handshakeId = null;
    if (this.#handshakeTimer !== null) {
      this.#clearTimeout(this.#handshakeTimer);
      this.#handshakeTimer = null;
    }
  }

  /** Stops for good (until the next connect()): no socket, no timers, nothing pending. */
  #shutDown(error) {
    this.#wanted = false;
    this.#established = false;
    this.#cancelReconnect();
    this.#clearHandshake();
    const ws = this.#ws;
    this.#ws = null;
    if (ws) {
      try {
        ws.close(CLOSE_NORMAL, "client disconnect");
      } catch {
        // Already closing; nothing more to do.
      }
    }
    this.#rejectPending(error);
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.reject(error);
    this.#lastError = error;
    this.#setState("disconnected");
  }

  // -- requests ------------------------------------------------------------------------------

  #newRequestId() {
    return `c${this.#nextRequestNumber++}`;
  }

  /** @returns {CarrierError | null} the local `unsupported_feature` error, if the server lacks it */
  #preflight(method) {
    const need = this.#methodFeatures[method];
    if (!need) return null;
    const serverProtocol = String(this.#handshakeResult?.protocol_version ?? "0.0");
    const announced = this.#handshakeResult?.features?.[need.feature];
    // An explicit flag wins; a server that does not list the feature is judged by its version.
    const available = typeof announced === "boolean" ? announced : compareVersions(serverProtocol, need.requiredProtocol) >= 0;
    if (available) return null;
    return new CarrierError("unsupported_feature", `${method} needs the server feature "${need.feature}"`, {
      effectState: "none",
      data: {
        feature: need.feature,
        component: "server",
        required_protocol: need.requiredProtocol,
        actual_protocol: serverProtocol,
        recovery: `update the carrier server to protocol ${need.requiredProtocol} or later`,
      },
    });
  }

  #call(method, params) {
    const id = this.#newRequestId();
    return new Promise((resolve, reject) => {
      const timer = this.#setTimeout(() => {
        if (this.#pending.delete(id)) {
          reject(new CarrierError("timeout", `${method} got no response within ${this.#requestTimeoutMs} ms`, {
            effectState: "unknown",
          }));
        }
      }, this.#requestTimeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      try {
        this.#sendText({ id, method, params: params ?? {} });
      } catch (err) {
        this.#pending.delete(id);
        this.#clearTimeout(timer);
        reject(new CarrierError("connection_closed", `cannot send ${method}: ${err.message}`, { effectState: "none" }));
      }
    });
  }

  #onResponse(frame) {
    if (frame.id === this.#handshakeId) {
      this.#onHandshakeResponse(frame);
      return;
    }
    const pending = this.#pending.get(frame.id);
    if (!pending) {
      console.warn(`carrier: dropped a response for unknown request id ${JSON.stringify(frame.id)}`);
      return;
    }
    this.#pending.delete(frame.id);
    this.#clearTimeout(pending.timer);
    if (frame.error !== undefined) {
      pending.reject(toCarrierError(frame.error));
      return;
    }
    this.#noteSessionBinding(pending.method, frame.result);
    pending.resolve(frame.result);
  }

  /** After sessions.start / sessions.switch the connection follows another session's seq line. */
  #noteSessionBinding(method, result) {
    if (method !== "sessions.start" && method !== "sessions.switch") return;
    const sessionId = result?.session_id;
    if (typeof sessionId === "string" && sessionId !== this.#sessionId) {
      this.#sessionId = sessionId;
      this.#lastSeq = 0;
    }
  }

  #rejectPending(error) {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const entry of pending) {
      this.#clearTimeout(entry.timer);
      entry.reject(error);
    }
  }

  /** The server sends no requests today; answer any so the peer is not left waiting. */
  #answerRequest(frame) {
    this.#sendText({
      id: frame.id,
      error: { code: "method_not_found", message: `this client does not serve ${frame.method}`, effect_state: "none" },
    });
  }

  #sendText(frame) {
    if (!this.#ws) throw new Error("no open socket");
    this.#ws.send(JSON.stringify(frame));
  }

  // -- inbound -------------------------------------------------------------------------------

  #onSocketData(data) {
    if (typeof data === "string") {
      this.#onText(data);
      return;
    }
    const bytes = asBytes(data);
    if (bytes) {
      this.#onBinary(bytes);
    } else {
      console.warn("carrier: dropped an inbound message of unexpected type");
    }
  }

  #onText(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      console.warn("carrier: dropped a text frame that is not JSON");
      return;
    }
    if (!isObject(frame)) {
      console.warn("carrier: dropped a text frame that is not a JSON object");
    } else if (typeof frame.event === "string") {
      this.#onEventFrame(frame);
    } else if (typeof frame.id === "string" && typeof frame.method === "string") {
      this.#answerRequest(frame);
    } else if (typeof frame.id === "string" && ("result" in frame || "error" in frame)) {
      this.#onResponse(frame);
    } else {
      console.warn("carrier: dropped a text frame that is not a valid envelope");
    }
  }

  #onEventFrame(frame) {
    if (typeof frame.seq === "number") {
      // Session events: replays after a resume may repeat what was already delivered.
      if (frame.seq <= this.#lastSeq) return;
      this.#lastSeq = frame.seq;
    }
    for (const handler of [...this.#eventHandlers]) callSafely(handler, frame);
  }

  #onBinary(bytes) {
    let frame;
    try {
      frame = decodeChannelFrame(bytes);
    } catch (err) {
      console.warn(`carrier: dropped an inbound binary frame: ${err.message}`);
      return;
    }
    const handlers = [...(this.#channelHandlers.get(frame.channel) ?? []), ...(this.#channelHandlers.get("*") ?? [])];
    for (const handler of handlers) callSafely(handler, frame);
  }

  // -- channels ------------------------------------------------------------------------------

  #sendChannelFrame(frame) {
    if (!this.#isReady() || !this.#ws) {
      throw new CarrierError("not_connected", `cannot send on channel ${frame.channel}: not connected`, {
        effectState: "none",
      });
    }
    const seq = this.#channelSeq.get(frame.channel) ?? 0;
    const bytes = encodeChannelFrame({ ...frame, seq });
    this.#ws.send(bytes);
    this.#channelSeq.set(frame.channel, seq === MAX_SEQ ? 0 : seq + 1);
    return seq;
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/** @param {unknown} value */
function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** @param {unknown} error the wire `error` object */
function toCarrierError(error) {
  const wire = isObject(error) ? error : {};
  const code = typeof wire.code === "string" ? wire.code : "internal";
  const message = typeof wire.message === "string" && wire.message ? wire.message : code;
  return new CarrierError(code, message, { data: wire.data, effectState: wire.effect_state });
}

/**
 * Compares "MAJOR.MINOR" strings numerically.
 * @param {string} a
 * @param {string} b
 */
function compareVersions(a, b) {
  const [aMajor = 0, aMinor = 0] = a.split(".").map((part) => Number.parseInt(part, 10) || 0);
  const [bMajor = 0, bMinor = 0] = b.split(".").map((part) => Number.parseInt(part, 10) || 0);
  return aMajor - bMajor || aMinor - bMinor;
}

/**
 * @param {Set<Function>} set
 * @param {Function} handler
 * @returns {Disposable}
 */
function subscribe(set, handler) {
  if (typeof handler !== "function") throw new TypeError("handler must be a function");
  set.add(handler);
  return { dispose: () => void set.delete(handler) };
}

/** A throwing subscriber must not break delivery to the others or the client itself. */
function callSafely(handler, ...args) {
  try {
    handler(...args);
  } catch (err) {
    console.error("carrier: a subscriber threw", err);
  }
}

function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
