/**
 * carrier's JavaScript client: the handshake layer over any {@link Transport}.
 *
 * `CarrierClient` speaks the agent protocol on text frames (docs/protocol.md, "Envelope" to
 * "Errors") and the payload channels on binary frames ("Channels"). It sends the handshake first on
 * every new connection, correlates requests with their responses (with timeouts), delivers session
 * events once each (deduplicated by `seq`) and resumes the session after the transport reconnects.
 * Requests that need a feature the server lacks fail locally with `unsupported_feature` and send
 * nothing.
 *
 * This module is also the entry the carrier serves at `GET /client.js`, so it re-exports the
 * whole public API (transport, frames, errors): a page needs one import.
 *
 * Behaviour the protocol reference leaves open, decided here:
 * - The client is `connecting` until its handshake completes on the transport's open pipe;
 *   `disconnected` means it stopped trying (disconnect(), a refused token or role, a refused
 *   handshake, a failed first connect, a handshake without an answer).
 * - Only a break after a successful handshake waits for the transport's reconnect; a break
 *   before the first handshake completes rejects `connect()` and stops.
 * - Requests need a completed handshake (`not_connected` otherwise, nothing queued); on a break,
 *   outstanding requests reject with `connection_closed` and `effectState: "unknown"`.
 * - The `seq` line restarts (dedupe floor 0) when the handshake does not resume the same session
 *   (`new` / `reset`) and when `sessions.start` / `sessions.switch` binds another session.
 * - Outbound channel seq numbering restarts at 0 on every new connection.
 * - Feature preflight trusts an explicit `features[name]` boolean; a feature the server does not
 *   list is judged by comparing its `protocol_version` with the one that introduced the feature.
 * - `role: "observe"` (asked for) or an observe grant makes the client refuse drive-role
 *   methods and channel sends locally with `forbidden`, sending nothing.
 *
 * @example
 * import { CarrierClient } from "/client.js";
 * const client = new CarrierClient("ws://127.0.0.1:7070/", { token });
 * client.onEvent((frame) => console.log(frame.event, frame.payload));
 * await client.connect();
 * const { turn_id } = await client.request("session.submit", { prompt: "hi" });
 *
 * @module carrier-client/client
 */

import { CLIENT_VERSION, FEATURE_PROTOCOLS, METHOD_CATALOG, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "./catalog.js";
import { CarrierError } from "./errors.js";
import { decodeChannelFrame, encodeChannelFrame, MAX_CHANNEL_SEQ } from "./frames.js";
import { asBytes, deferred, emit, isObject, subscribe } from "./internal.js";
import { WsTransport } from "./transport.js";

// The protocol's tables, generated from the Rust method catalog by `carrier schema --js`.
export { CLIENT_VERSION, FEATURE_PROTOCOLS, METHOD_CATALOG, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "./catalog.js";
export { CarrierError } from "./errors.js";
export { ChannelFrameError, decodeChannelFrame, encodeChannelFrame, MAX_CHANNEL_SEQ } from "./frames.js";
export { CLOSE_POLICY_VIOLATION, RECONNECT_DELAYS_MS, WsTransport } from "./transport.js";

/**
 * Methods that need an optional protocol feature, with the protocol version that introduced it:
 * what feature preflight consults before sending a request. Derived from the catalog.
 * @type {Readonly<Record<string, {feature: string, requiredProtocol: string}>>}
 */
export const METHOD_FEATURES = Object.freeze(
  Object.fromEntries(
    Object.entries(METHOD_CATALOG)
      .filter(([, spec]) => spec.feature !== null)
      .map(([method, { feature }]) => [
        method,
        Object.freeze({ feature: /** @type {string} */ (feature), requiredProtocol: FEATURE_PROTOCOLS[feature ?? ""] }),
      ]),
  ),
);

/**
 * @typedef {"disconnected" | "connecting" | "connected" | "version_skew"} ConnectionState
 * @typedef {{dispose(): void}} Disposable
 * @typedef {{event: string, seq?: number, payload?: unknown}} EventFrameText
 * @typedef {import("./transport.js").Transport} Transport
 * @typedef {import("./frames.js").ChannelFrame} ChannelFrame
 */

/**
 * @typedef {object} CarrierClientOptions
 * @property {string} [token] URL form only: sent as the WebSocket subprotocol, never in the URL;
 *   omit for an `--open` carrier
 * @property {"drive" | "observe"} [role] `observe`: ask for the read-only role (URL form:
 *   `?role=observe`) and refuse drive-role requests locally
 * @property {boolean} [reconnect=true] URL form only: reconnect and resume after a break
 * @property {any} [WebSocket] URL form only: the WebSocket class (default `globalThis.WebSocket`)
 * @property {number} [requestTimeoutMs=30000] a request (or handshake) without a response by
 *   then rejects with `timeout`
 * @property {string} [clientName="carrier-web"] the handshake's `client.name`
 * @property {(fn: () => void, ms: number) => unknown} [setTimeout] timer hook (tests)
 * @property {(handle: any) => void} [clearTimeout] timer hook (tests)
 * @property {Record<string, {feature: string, requiredProtocol: string}>} [methodFeatures]
 *   overrides {@link METHOD_FEATURES}
 */

const TRANSPORT_METHODS = ["connect", "disconnect", "send", "onMessage", "onStateChange"];
const ROLE_RANK = { observe: 0, drive: 1 };

/**
 * One client session with a carrier: request correlation, session events (deduplicated by
 * `seq`), payload channels, resume after the transport reconnects.
 */
export class CarrierClient {
  /** @type {Transport} */
  #transport;
  /** @type {"drive" | "observe" | undefined} */
  #role;
  #requestTimeoutMs;
  #clientName;
  #setTimeout;
  #clearTimeout;
  #methodFeatures;

  /** @type {ConnectionState} */
  #state = "disconnected";
  /** True from connect() until disconnect() or a failure that reconnecting cannot fix. */
  #wanted = false;
  /** A handshake succeeded since connect(): only then does a break wait for the reconnect. */
  #established = false;
  /** @type {ReturnType<typeof deferred> | null} */
  #connectWaiter = null;
  /** @type {{id: string, timer: unknown} | null} the handshake in flight */
  #handshake = null;
  /** A handshake went out since connect(): a break before it completes is a failed connect. */
  #handshakeStarted = false;

  /** @type {any} */
  #handshakeResult = null;
  /** @type {CarrierError | null} why the client last stopped trying; null once connected */
  #lastError = null;
  /** @type {string | null} */
  #sessionId = null;
  /** @type {string | null} */
  #epoch = null;
  /** Highest session-event seq delivered for #sessionId; 0 when none. */
  #lastSeq = 0;

  #nextRequestNumber = 1;
  /** @type {Map<string, {method: string, resolve: Function, reject: Function, timer: unknown}>} */
  #pending = new Map();
  /** Next outbound seq per channel; numbering restarts on every new connection. */
  #channelSeq = new Map();
  /**
   * Inbound credit per bulk channel (protocol 1.1, `bulk_credit`): bytes of frame bodies this
   * client may still send, the channel's whole credit, and the bulk sends waiting for more, in
   * order. Filled from the handshake's descriptors, so empty against a server that gives none.
   * @type {Map<string, {available: number, limit: number, waiting: Array<{frame: any, size: number, resolve: Function, reject: Function}>}>}
   */
  #credit = new Map();

  #eventHandlers = new Set();
  #stateHandlers = new Set();
  /** @type {Map<string, Set<Function>>} */
  #channelHandlers = new Map();

  /**
   * @param {string | URL | Transport} target the carrier's WebSocket URL (e.g.
   *   `ws://127.0.0.1:7070/`, dialled by a {@link WsTransport} the client builds), or any object
   *   that keeps the {@link Transport} contract
   * @param {CarrierClientOptions} [options]
   * @throws {TypeError} for an unknown role, a URL that does not parse, an object that is not a
   *   transport, or URL-only options given with a transport
   */
  constructor(target, options = {}) {
    const {
      token,
      role,
      reconnect = true,
      WebSocket,
      requestTimeoutMs = 30_000,
      clientName = "carrier-web",
      setTimeout = (fn, ms) => globalThis.setTimeout(fn, ms),
      clearTimeout = (handle) => globalThis.clearTimeout(handle),
      methodFeatures = METHOD_FEATURES,
    } = options;
    if (role !== undefined && role !== "drive" && role !== "observe") {
      throw new TypeError(`role must be "drive" or "observe", not ${JSON.stringify(role)}`);
    }
    if (typeof target === "string" || target instanceof URL) {
      const url = new URL(target);
      if (role === "observe") url.searchParams.set("role", "observe");
      this.#transport = new WsTransport(url, { token, reconnect, WebSocket, setTimeout, clearTimeout });
    } else if (isTransport(target)) {
      if (token !== undefined || WebSocket !== undefined) {
        throw new TypeError("token and WebSocket belong to the transport: pass them to it, not to CarrierClient");
      }
      this.#transport = target;
    } else {
      throw new TypeError(`CarrierClient needs a URL or a transport (an object with ${TRANSPORT_METHODS.join(", ")})`);
    }
    this.#role = role;
    this.#requestTimeoutMs = requestTimeoutMs;
    this.#clientName = clientName;
    this.#setTimeout = setTimeout;
    this.#clearTimeout = clearTimeout;
    this.#methodFeatures = methodFeatures;
    this.#transport.onStateChange((state) => this.#onTransportState(state));
    this.#transport.onMessage((frame) => this.#onFrame(frame));
  }

  /** The transport this client runs over. */
  get transport() {
    return this.#transport;
  }

  /** @returns {ConnectionState} */
  get state() {
    return this.#state;
  }

  /** The latest `system.handshake` result (its `resume` says what the last resume did). */
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

  /** Bytes queued by the transport but not yet sent (for pacing large channel uploads). */
  get bufferedAmount() {
    return this.#transport.bufferedAmount ?? 0;
  }

  /**
   * Connects the transport (if it is not open yet) and performs the handshake. After an earlier
   * connection it asks to resume the last session, so `connect()` after `disconnect()`
   * continues where the client left off.
   * @returns {Promise<any>} the handshake result
   * @throws {CarrierError} `version_incompatible` or another handshake error, `timeout`, or
   *   `connection_closed` when the pipe closed before the handshake completed
   */
  connect() {
    if (this.#connectWaiter) return this.#connectWaiter.promise;
    if (this.#isReady()) return Promise.resolve(this.#handshakeResult);
    const waiter = deferred();
    this.#connectWaiter = waiter;
    this.#wanted = true;
    this.#established = false;
    this.#setState("connecting");
    const transportState = this.#transport.state;
    if (transportState === "connected") {
      this.#sendHandshake();
    } else if (transportState === "disconnected") {
      this.#transport.connect().catch((err) => {
        if (this.#connectWaiter !== waiter) return;
        this.#shutDown(err instanceof CarrierError ? err : this.#closedError(String(err?.message ?? err)));
      });
    }
    return waiter.promise;
  }

  /**
   * Disconnects the transport and stops. Outstanding requests reject with `disconnected`.
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
   *   `unsupported_feature` or `forbidden` (nothing was sent), `not_connected`, `timeout`,
   *   `connection_closed`
   */
  request(method, params) {
    if (typeof method !== "string" || method.length === 0) {
      return Promise.reject(new TypeError("method must be a non-empty string"));
    }
    if (method === "system.handshake") {
      return Promise.reject(new TypeError("the client performs system.handshake itself"));
    }
    if (!this.#isReady()) {
      return Promise.reject(new CarrierError("not_connected", `cannot send ${method}: not connected`, { effectState: "none" }));
    }
    const refused = this.#roleGuard(method, METHOD_CATALOG[method]?.leastRole) ?? this.#preflight(method, params);
    if (refused) return Promise.reject(refused);
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
   * @throws {CarrierError} `not_connected`, `forbidden`; {@link ChannelFrameError} for an
   *   unencodable frame
   */
  sendChannelEvent(channel, event, payload) {
    const frame = { kind: "event", channel, event, payload };
    if (this.#credit.has(channel)) this.#spendNow(frame, bodySize(frame));
    return this.#sendChannelFrame(frame);
  }

  /**
   * Sends opaque bytes on a declared binary channel.
   * @param {string} channel
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
   * @returns {number} the seq the frame carried
   * @throws {CarrierError} `not_connected`, `forbidden`; {@link ChannelFrameError} for an
   *   unencodable frame
   */
  sendChannelBinary(channel, bytes) {
    const frame = { kind: "binary", channel, payload: asBytes(bytes) };
    this.#spendNow(frame, frame.payload.byteLength);
    return this.#sendChannelFrame(frame);
  }

  /**
   * Sends opaque bytes on a `bulk` channel, within the channel's credit: against a server that
   * gave this connection credit (protocol 1.1), waits until the credit covers the bytes, and
   * never sends past it; sends keep their order. Against a server that gives none (1.0), sends
   * at once, paced by the socket as any other frame.
   * @param {string} channel
   * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
   * @returns {Promise<number>} the seq the frame carried, once it was sent
   * @throws {CarrierError} `not_connected`, `forbidden`; `too_large` when the bytes exceed the
   *   channel's whole credit (they could never be sent: split them); `connection_closed` when
   *   the pipe broke while the send waited for credit (nothing was sent)
   */
  sendChannelBulk(channel, bytes) {
    const frame = { kind: "binary", channel, payload: asBytes(bytes) };
    const size = frame.payload.byteLength;
    const credit = this.#credit.get(channel);
    try {
      if (!credit) return Promise.resolve(this.#sendChannelFrame(frame));
      this.#checkSendable(channel);
    } catch (err) {
      return Promise.reject(err);
    }
    if (size > credit.limit) {
      return Promise.reject(
        new CarrierError("too_large", `a bulk frame of ${size} bytes is over channel ${channel}'s whole credit of ${credit.limit} bytes: send it in smaller frames`, {
          data: { limit: credit.limit, size },
          effectState: "none",
        }),
      );
    }
    return new Promise((resolve, reject) => {
      credit.waiting.push({ frame, size, resolve, reject });
      this.#drainCredit(credit);
    });
  }

  /**
   * Bytes this client may send on `channel` now, or `null` when the server gave it no credit there.
   * @param {string} channel
   * @returns {number | null}
   */
  creditOf(channel) {
    return this.#credit.get(channel)?.available ?? null;
  }

  // -- connection lifecycle ------------------------------------------------------------------

  #isReady() {
    return this.#state === "connected" || this.#state === "version_skew";
  }

  /** @param {ConnectionState} next */
  #setState(next) {
    const previous = this.#state;
    if (previous === next) return;
    this.#state = next;
    emit(this.#stateHandlers, next, previous);
  }

  /** @param {import("./transport.js").TransportState} state */
  #onTransportState(state) {
    if (!this.#wanted) return;
    if (state === "connected") {
      // A new pipe: the handshake is its first frame.
      this.#sendHandshake();
      return;
    }
    const closed = this.#closedError();
    this.#clearHandshake();
    this.#rejectPending(closed);
    this.#rejectBulk(closed);
    if (state === "connecting" && this.#established) {
      // The transport redials; the next `connected` resumes the session.
      this.#setState("connecting");
    } else if (state === "disconnected" || this.#handshakeStarted) {
      this.#shutDown(closed);
    }
  }

  #sendHandshake() {
    this.#channelSeq.clear();
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
    const timer = this.#setTimeout(() => {
      if (this.#handshake?.id !== id) return;
      this.#handshake = null;
      this.#shutDown(new CarrierError("timeout", `the carrier did not answer the handshake within ${this.#requestTimeoutMs} ms`, {
        effectState: "unknown",
      }));
    }, this.#requestTimeoutMs);
    this.#handshake = { id, timer };
    this.#handshakeStarted = true;
    try {
      this.#transport.send({ id, method: "system.handshake", params });
    } catch (err) {
      this.#shutDown(err instanceof CarrierError ? err : this.#closedError(String(err?.message ?? err)));
    }
  }

  #onHandshakeResponse(frame) {
    this.#clearHandshake();
    if (frame.error !== undefined) {
      // version_incompatible (or any refusal of the handshake itself) will not change on retry.
      this.#shutDown(toCarrierError(frame.error));
      return;
    }
    // The handshake layer judges the versions itself (docs/protocol.md, "Versions"): a result this
    // client cannot talk to is refused as the server refuses a client, and version_skew is ours.
    const verdict = judgeVersions(isObject(frame.result) ? frame.result : {});
    if (verdict instanceof CarrierError) {
      this.#shutDown(verdict);
      return;
    }
    const result = { ...frame.result, version_skew: verdict.skew };
    const outcome = result.resume?.outcome;
    const sameSession = result.session_id === this.#sessionId && result.epoch === this.#epoch;
    // Only a resumed (or gapped) session continues the old seq numbering.
    if (!(sameSession && (outcome === "resumed" || outcome === "gap"))) this.#lastSeq = 0;
    this.#handshakeResult = result;
    this.#resetCredit(result.channels);
    this.#sessionId = typeof result.session_id === "string" ? result.session_id : null;
    this.#epoch = typeof result.epoch === "string" ? result.epoch : null;
    this.#established = true;
    this.#lastError = null;
    this.#setState(result.version_skew === true ? "version_skew" : "connected");
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.resolve(result);
  }

  #clearHandshake() {
    if (this.#handshake !== null) {
      this.#clearTimeout(this.#handshake.timer);
      this.#handshake = null;
    }
  }

  /** @param {string} [detail] */
  #closedError(detail) {
    const close = this.#transport.lastClose ?? { code: 1006, reason: detail ?? "" };
    const reason = close.reason ? `: ${close.reason}` : "";
    return new CarrierError("connection_closed", `connection closed (${close.code}${reason})`, {
      data: { code: close.code, reason: close.reason },
      effectState: "unknown",
    });
  }

  /** Stops for good (until the next connect()): transport down, no timers, nothing pending. */
  #shutDown(error) {
    this.#wanted = false;
    this.#established = false;
    this.#handshakeStarted = false;
    this.#clearHandshake();
    this.#rejectPending(error);
    this.#rejectBulk(error);
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.reject(error);
    this.#lastError = error;
    if (this.#transport.state !== "disconnected") {
      this.#transport.disconnect().catch(() => {});
    }
    this.#setState("disconnected");
  }

  // -- requests ------------------------------------------------------------------------------

  #newRequestId() {
    return `c${this.#nextRequestNumber++}`;
  }

  /**
   * @param {string} what
   * @param {string | undefined} leastRole
   * @returns {CarrierError | null} the local `forbidden` error when this client may not do it
   */
  #roleGuard(what, leastRole) {
    const granted = this.#handshakeResult?.role === "observe" ? "observe" : "drive";
    const asked = this.#role ?? "drive";
    const effective = ROLE_RANK[asked] < ROLE_RANK[granted] ? asked : granted;
    if (leastRole === undefined || ROLE_RANK[effective] >= ROLE_RANK[leastRole]) return null;
    return new CarrierError("forbidden", `${what} needs the ${leastRole} role; this client has the ${effective} role`, {
      effectState: "none",
      data: { least_role: leastRole, role: effective },
    });
  }

  /**
   * The local `unsupported_feature` error, if the server lacks what `method` needs — or what its
   * params need: a `usage.report` scope is the feature `usage.<scope>` (`session` when omitted).
   * @returns {CarrierError | null}
   */
  #preflight(method, params) {
    return this.#preflightFeature(method, this.#methodFeatures[method]) ?? this.#preflightFeature(method, paramsFeature(method, params));
  }

  /**
   * @param {string} method
   * @param {{feature: string, requiredProtocol: string} | undefined} need
   * @returns {CarrierError | null}
   */
  #preflightFeature(method, need) {
    if (!need) return null;
    const serverProtocol = String(this.#handshakeResult?.protocol_version ?? "0.0");
    const announced = this.#handshakeResult?.features?.[need.feature];
    // An explicit flag wins; a server that does not list the feature is judged by its version.
    const available =
      typeof announced === "boolean" ? announced : compareParsed(parseVersion(serverProtocol) ?? [0, 0], parseVersion(need.requiredProtocol) ?? [0, 0]) >= 0;
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
        this.#transport.send({ id, method, params: params ?? {} });
      } catch (err) {
        this.#pending.delete(id);
        this.#clearTimeout(timer);
        reject(err instanceof CarrierError ? err : new CarrierError("connection_closed", `cannot send ${method}: ${err.message}`, {
          effectState: "none",
        }));
      }
    });
  }

  #onResponse(frame) {
    if (frame.id === this.#handshake?.id) {
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

  /**
   * After a method that rebinds the session (the catalog's `rebindsSession`: sessions.start,
   * sessions.switch) the connection follows another session's seq line.
   */
  #noteSessionBinding(method, result) {
    if (!METHOD_CATALOG[method]?.rebindsSession) return;
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
    try {
      this.#transport.send({
        id: frame.id,
        error: { code: "method_not_found", message: `this client does not serve ${frame.method}`, effect_state: "none" },
      });
    } catch {
      // The pipe closed meanwhile; the peer's request dies with it.
    }
  }

  // -- inbound -------------------------------------------------------------------------------

  /** @param {import("./transport.js").InboundFrame} frame */
  #onFrame(frame) {
    if (!this.#wanted) return;
    if (frame instanceof Uint8Array) {
      this.#onBinary(frame);
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
    if (frame.event === "channel.credit" && isObject(frame.payload)) {
      this.#grant(frame.payload.channel, frame.payload.bytes);
    }
    if (typeof frame.seq === "number") {
      // Session events: replays after a resume may repeat what was already delivered.
      if (frame.seq <= this.#lastSeq) return;
      this.#lastSeq = frame.seq;
    }
    emit(this.#eventHandlers, frame);
  }

  /** @param {Uint8Array} bytes */
  #onBinary(bytes) {
    let frame;
    try {
      frame = decodeChannelFrame(bytes);
    } catch (err) {
      console.warn(`carrier: dropped an inbound binary frame: ${err.message}`);
      return;
    }
    emit(this.#channelHandlers.get(frame.channel) ?? new Set(), frame);
    emit(this.#channelHandlers.get("*") ?? new Set(), frame);
  }

  // -- channels ------------------------------------------------------------------------------

  /** Throws what a send on `channel` would throw now (`not_connected`, `forbidden`). */
  #checkSendable(channel) {
    if (!this.#isReady()) {
      throw new CarrierError("not_connected", `cannot send on channel ${channel}: not connected`, {
        effectState: "none",
      });
    }
    const refused = this.#roleGuard(`sending on channel ${channel}`, "drive");
    if (refused) throw refused;
  }

  /** The credit of each bulk channel the handshake result gives some (none from a 1.0 server). */
  #resetCredit(channels) {
    const previous = this.#credit;
    this.#credit = new Map();
    for (const c of Array.isArray(channels) ? channels : []) {
      if (isObject(c) && typeof c.name === "string" && Number.isSafeInteger(c.credit) && c.credit >= 0) {
        this.#credit.set(c.name, { available: c.credit, limit: c.credit, waiting: [] });
      }
    }
    // Sends still waiting were rejected when the pipe broke; none is carried over.
    for (const credit of previous.values()) credit.waiting.length = 0;
  }

  /** A `channel.credit` grant: more bytes, and the sends it lets go, in order. */
  #grant(channel, bytes) {
    const credit = typeof channel === "string" ? this.#credit.get(channel) : undefined;
    if (!credit || !Number.isSafeInteger(bytes) || bytes <= 0) return;
    credit.available += bytes;
    this.#drainCredit(credit);
  }

  #drainCredit(credit) {
    while (credit.waiting.length > 0 && credit.available >= credit.waiting[0].size) {
      const next = /** @type {any} */ (credit.waiting.shift());
      credit.available -= next.size;
      try {
        next.resolve(this.#sendChannelFrame(next.frame));
      } catch (err) {
        next.reject(err);
      }
    }
  }

  /** A synchronous send on a channel with credit: spends it, or throws when it does not cover the frame. */
  #spendNow(frame, size) {
    const credit = this.#credit.get(frame.channel);
    if (!credit) return;
    this.#checkSendable(frame.channel);
    if (credit.waiting.length > 0 || credit.available < size) {
      throw new CarrierError("credit_exhausted", `channel ${frame.channel} has ${credit.available} bytes of credit for a frame of ${size} (use sendChannelBulk, which waits for credit)`, {
        data: { available: credit.available, size },
        effectState: "none",
      });
    }
    credit.available -= size;
  }

  #rejectBulk(error) {
    for (const credit of this.#credit.values()) {
      const waiting = credit.waiting.splice(0);
      for (const w of waiting) w.reject(error);
    }
  }

  #sendChannelFrame(frame) {
    if (!this.#isReady()) {
      throw new CarrierError("not_connected", `cannot send on channel ${frame.channel}: not connected`, {
        effectState: "none",
      });
    }
    const refused = this.#roleGuard(`sending on channel ${frame.channel}`, "drive");
    if (refused) throw refused;
    const seq = this.#channelSeq.get(frame.channel) ?? 0;
    const bytes = encodeChannelFrame({ ...frame, seq });
    this.#transport.send(bytes);
    this.#channelSeq.set(frame.channel, seq === MAX_CHANNEL_SEQ ? 0 : seq + 1);
    return seq;
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/** Bytes of a channel frame's body (what credit counts): the frame less its header. */
function bodySize(frame) {
  const encoded = encodeChannelFrame({ ...frame, seq: 0 });
  return encoded.byteLength - 10 - new TextEncoder().encode(frame.channel).byteLength;
}

/** @param {any} value */
function isTransport(value) {
  return value !== null && typeof value === "object" && TRANSPORT_METHODS.every((name) => typeof value[name] === "function");
}

/** @param {unknown} error the wire `error` object */
function toCarrierError(error) {
  const wire = isObject(error) ? error : {};
  const code = typeof wire.code === "string" ? wire.code : "internal";
  const message = typeof wire.message === "string" && wire.message ? wire.message : code;
  return new CarrierError(code, message, { data: wire.data, effectState: wire.effect_state });
}

/**
 * A `MAJOR.MINOR` protocol version as the protocol reads it (no sign, no leading zeros, each
 * part at most 65535), or null.
 * @param {unknown} text
 * @returns {[number, number] | null}
 */
function parseVersion(text) {
  const match = typeof text === "string" ? /^(0|[1-9][0-9]{0,4})\.(0|[1-9][0-9]{0,4})$/.exec(text) : null;
  if (!match) return null;
  const version = /** @type {[number, number]} */ ([Number(match[1]), Number(match[2])]);
  return version[0] <= 65535 && version[1] <= 65535 ? version : null;
}

/** @param {[number, number]} a @param {[number, number]} b */
function compareParsed(a, b) {
  return a[0] - b[0] || a[1] - b[1];
}

/** This client's pair, parsed once. */
const OUR_VERSIONS = Object.freeze({
  version: /** @type {[number, number]} */ (parseVersion(PROTOCOL_VERSION)),
  min: /** @type {[number, number]} */ (parseVersion(MIN_COMPATIBLE_PROTOCOL)),
});

/**
 * The rules of docs/protocol.md, "Versions", from this client's side: `{skew}` when it can talk to
 * the server whose handshake result this is, else the `version_incompatible` error (or
 * `protocol_error` when the result's versions cannot be read).
 * @param {Record<string, unknown>} result
 * @returns {{skew: boolean} | CarrierError}
 */
function judgeVersions(result) {
  const server = { version: parseVersion(result.protocol_version), min: parseVersion(result.min_compatible_protocol) };
  const ours = OUR_VERSIONS;
  if (!server.version || !server.min || compareParsed(server.min, server.version) > 0) {
    return new CarrierError("protocol_error", `the carrier's handshake result has unreadable versions (protocol_version ${JSON.stringify(result.protocol_version)}, min_compatible_protocol ${JSON.stringify(result.min_compatible_protocol)})`, { effectState: "none" });
  }
  let why = null;
  if (server.version[0] !== ours.version[0]) why = "protocol major versions differ";
  else if (compareParsed(server.version, ours.min) < 0) why = "the server's protocol is older than this client accepts";
  else if (compareParsed(ours.version, server.min) < 0) why = "this client's protocol is older than the server accepts";
  if (why === null) return { skew: server.version[1] !== ours.version[1] };
  return new CarrierError(
    "version_incompatible",
    `${why}: server speaks ${result.protocol_version} (accepts ${result.min_compatible_protocol} or later), client speaks ${PROTOCOL_VERSION} (accepts ${MIN_COMPATIBLE_PROTOCOL} or later)`,
    {
      effectState: "none",
      data: {
        server: { protocol_version: result.protocol_version, min_compatible_protocol: result.min_compatible_protocol },
        client: { protocol_version: PROTOCOL_VERSION, min_compatible_protocol: MIN_COMPATIBLE_PROTOCOL },
      },
    },
  );
}

/**
 * The feature a request's params need beyond its method's: a `usage.report` scope.
 * @param {string} method
 * @param {unknown} params
 * @returns {{feature: string, requiredProtocol: string} | undefined}
 */
function paramsFeature(method, params) {
  if (method !== "usage.report") return undefined;
  const scope = isObject(params) && params.scope !== undefined ? params.scope : "session";
  const feature = `usage.${scope}`;
  // A scope the protocol does not know is the server's to refuse (invalid_params).
  return typeof scope === "string" && FEATURE_PROTOCOLS[feature] !== undefined
    ? { feature, requiredProtocol: FEATURE_PROTOCOLS[feature] }
    : undefined;
}

