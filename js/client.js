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
 * whole public API (transport, frames, errors): a page needs one import. Behind `CarrierClient`,
 * each concern has a module of its own, none public: `connection.js` (lifecycle, handshake),
 * `versions.js`, `requests.js`, `preflight.js` (feature and role refusals), `resume.js`,
 * `channels.js` and `credit.js`. They decide with tables generated from the Rust catalog
 * (`catalog.js`); the rules they share with the Rust client run the same cases on both sides
 * (`protocol/tests/vectors/client-rules.json`).
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

import { Channels } from "./channels.js";
import { Connection, transportFor } from "./connection.js";
import { CarrierError } from "./errors.js";
import { emit, isObject, subscribe } from "./internal.js";
import { leastRoleOf, METHOD_FEATURES, preflight, roleRefusal } from "./preflight.js";
import { Requests } from "./requests.js";
import { SessionCursor } from "./resume.js";

// The protocol's tables, generated from the Rust method catalog by `carrier schema --js`.
export { CLIENT_VERSION, FEATURE_PROTOCOLS, METHOD_CATALOG, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "./catalog.js";
export { CarrierError } from "./errors.js";
export { ChannelFrameError, decodeChannelFrame, encodeChannelFrame, MAX_CHANNEL_SEQ } from "./frames.js";
export { METHOD_FEATURES } from "./preflight.js";
export { CLOSE_POLICY_VIOLATION, RECONNECT_DELAYS_MS, WsTransport } from "./transport.js";

/**
 * @typedef {import("./connection.js").ConnectionState} ConnectionState
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

/**
 * One client session with a carrier: request correlation, session events (deduplicated by
 * `seq`), payload channels, resume after the transport reconnects.
 */
export class CarrierClient {
  /** @type {Transport} */
  #transport;
  /** @type {"drive" | "observe" | undefined} */
  #role;
  #methodFeatures;
  /** @type {Connection} */
  #connection;
  /** @type {Requests} */
  #requests;
  #cursor = new SessionCursor();
  /** @type {Channels} */
  #channels;
  #eventHandlers = new Set();
  #stateHandlers = new Set();

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
    this.#transport = transportFor(target, { token, role, reconnect, WebSocket, setTimeout, clearTimeout });
    this.#role = role;
    this.#methodFeatures = methodFeatures;
    const transport = this.#transport;
    const timers = { setTimeout, clearTimeout };
    this.#requests = new Requests({
      ...timers,
      send: (frame) => transport.send(frame),
      timeoutMs: requestTimeoutMs,
      onResult: (method, result) => this.#cursor.answered(method, result),
    });
    this.#channels = new Channels(transport, (channel) => this.#checkSendable(channel));
    this.#connection = new Connection(transport, { ...timers, clientName, timeoutMs: requestTimeoutMs }, {
      newId: () => this.#requests.newId(),
      resumePoint: () => this.#cursor.resumePoint(),
      onOpen: () => this.#channels.restartNumbering(),
      onReady: (result) => {
        this.#cursor.bind(result);
        this.#channels.credit.reset(result);
      },
      onBreak: (error) => {
        this.#requests.rejectAll(error);
        this.#channels.credit.rejectWaiting(error);
      },
      onState: (next, previous) => emit(this.#stateHandlers, next, previous),
    });
    transport.onMessage((frame) => this.#onFrame(frame));
  }

  /** The transport this client runs over. */
  get transport() {
    return this.#transport;
  }

  /** @returns {ConnectionState} */
  get state() {
    return this.#connection.state;
  }

  /** The latest `system.handshake` result (its `resume` says what the last resume did). */
  get handshakeResult() {
    return this.#connection.handshakeResult;
  }

  /**
   * Why the client last went `disconnected` on its own — a refused token (`connection_closed`
   * with `data.code` 1008), a server that is gone (`data.code` 1006), `version_incompatible`, … —
   * so a page can say what to do even when no `connect()` call is waiting (a failed reconnect).
   * `null` after a successful handshake; `disconnected` after `disconnect()`.
   * @returns {CarrierError | null}
   */
  get lastError() {
    return this.#connection.lastError;
  }

  /** Highest session-event `seq` delivered for the current session (0 when none yet). */
  get lastSeq() {
    return this.#cursor.lastSeq;
  }

  /** The session this connection is bound to, as last reported by the server. */
  get sessionId() {
    return this.#cursor.sessionId;
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
    return this.#connection.connect();
  }

  /**
   * Disconnects the transport and stops. Outstanding requests reject with `disconnected`.
   * @returns {Promise<void>}
   */
  disconnect() {
    this.#connection.stop(new CarrierError("disconnected", "the client disconnected", { effectState: "unknown" }));
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
    if (!this.#connection.ready) {
      return Promise.reject(new CarrierError("not_connected", `cannot send ${method}: not connected`, { effectState: "none" }));
    }
    const server = this.#connection.handshakeResult ?? {};
    const refused = this.#roleRefusal(method, leastRoleOf(method)) ?? preflight(method, params, server, this.#methodFeatures);
    if (refused) return Promise.reject(refused);
    return this.#requests.call(method, params);
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
    return this.#channels.subscribe(channel, handler);
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
    return this.#channels.sendEvent(channel, event, payload);
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
    return this.#channels.sendBinary(channel, bytes);
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
    return this.#channels.sendBulk(channel, bytes);
  }

  /**
   * Bytes this client may send on `channel` now, or `null` when the server gave it no credit there.
   * @param {string} channel
   * @returns {number | null}
   */
  creditOf(channel) {
    return this.#channels.credit.available(channel);
  }

  // -- inbound -------------------------------------------------------------------------------

  /** @param {import("./transport.js").InboundFrame} frame */
  #onFrame(frame) {
    if (!this.#connection.wanted) return;
    if (frame instanceof Uint8Array) {
      this.#channels.deliver(frame);
    } else if (typeof frame.event === "string") {
      this.#onEventFrame(frame);
    } else if (typeof frame.id === "string" && typeof frame.method === "string") {
      this.#answerRequest(frame);
    } else if (typeof frame.id === "string" && ("result" in frame || "error" in frame)) {
      if (this.#connection.awaits(frame.id)) this.#connection.answered(frame);
      else this.#requests.settle(/** @type {any} */ (frame));
    } else {
      console.warn("carrier: dropped a text frame that is not a valid envelope");
    }
  }

  /** @param {any} frame */
  #onEventFrame(frame) {
    if (frame.event === "channel.credit" && isObject(frame.payload)) {
      this.#channels.credit.grant(frame.payload.channel, frame.payload.bytes);
    }
    // Session events: replays after a resume may repeat what was already delivered.
    if (typeof frame.seq === "number" && !this.#cursor.accept(frame.seq)) return;
    emit(this.#eventHandlers, frame);
  }

  /**
   * The server sends no requests today; answer any so the peer is not left waiting.
   * @param {any} frame
   */
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

  // -- local refusals --------------------------------------------------------------------------

  /**
   * @param {string} what
   * @param {"observe" | "drive" | undefined} leastRole
   */
  #roleRefusal(what, leastRole) {
    const granted = this.#connection.handshakeResult?.role === "observe" ? "observe" : "drive";
    return roleRefusal(what, leastRole, this.#role ?? "drive", granted);
  }

  /**
   * Throws what a send on `channel` would throw now (`not_connected`, `forbidden`).
   * @param {string} channel
   */
  #checkSendable(channel) {
    if (!this.#connection.ready) {
      throw new CarrierError("not_connected", `cannot send on channel ${channel}: not connected`, { effectState: "none" });
    }
    const refused = this.#roleRefusal(`sending on channel ${channel}`, "drive");
    if (refused) throw refused;
    // A channel only the host sends on (or in a direction this client does not know): the
    // server would refuse the frame with `forbidden`, so nothing is sent.
    const descriptor = this.#connection.handshakeResult?.channels?.find((c) => c.name === channel);
    if (descriptor?.direction !== undefined && descriptor.direction !== "both") {
      throw new CarrierError("forbidden", `channel ${channel} carries frames from the host to clients only`, { effectState: "none" });
    }
  }
}

