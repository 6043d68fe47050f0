/**
 * The transport seam (docs/protocol.md, "Client behaviour"): the `Transport` interface that
 * {@link CarrierClient} runs over, and `WsTransport`, its WebSocket implementation.
 *
 * A transport is a frame pipe and nothing more. It does not read method names, match responses
 * to requests or reorder anything: the handshake, correlation and resume live one layer up, in
 * the client. So an extension can replace the WebSocket with native messaging, `chrome.runtime`
 * ports or a `MessageChannel` by writing one small class, and the reference suite in `test/`
 * (which runs every transport against the same fake peer) tells it whether it got the contract
 * right.
 *
 * @example
 * import { WsTransport } from "carrier-client";
 * const transport = new WsTransport("ws://127.0.0.1:7070/", { token });
 * transport.onMessage((frame) => console.log(frame));
 * await transport.connect();
 * transport.send({ id: "h1", method: "system.handshake", params: { protocol_version: "1.0", min_compatible_protocol: "1.0" } });
 *
 * @module carrier-client/transport
 */

import { CarrierError } from "./errors.js";
import { asBytes, deferred, emit, isObject, subscribe } from "./internal.js";

/**
 * @typedef {"disconnected" | "connecting" | "connected"} TransportState
 *   A bare transport never reports `version_skew`: only the handshake layer knows versions.
 * @typedef {{dispose(): void}} Disposable
 * @typedef {{code: number, reason: string}} CloseInfo
 * @typedef {Record<string, unknown>} JsonObject
 * @typedef {JsonObject | Uint8Array} InboundFrame
 *   A text frame parsed into its JSON object, or a binary frame's bytes.
 * @typedef {JsonObject | Uint8Array | ArrayBuffer | ArrayBufferView} OutboundFrame
 *   An object goes out as one JSON text frame; bytes as one binary frame.
 */

/**
 * The contract every transport keeps (the `.d.ts` states it as an interface):
 *
 * - `state`: `disconnected` → `connecting` → `connected`, reported to `onStateChange`
 *   handlers on every change, never twice in a row with the same state;
 * - `connect()` resolves once the pipe is open (state `connected`) and rejects when the first
 *   attempt fails (state back to `disconnected`, no retry in the background);
 * - `disconnect()` closes on purpose and stops every retry; state `disconnected`;
 * - `send(frame)` puts exactly one frame on the wire: an object as one JSON text frame, bytes
 *   as one binary frame; it throws a `not_connected` {@link CarrierError} unless `connected`;
 * - `onMessage(handler)` delivers each inbound text frame as one JSON object and each binary
 *   frame as one `Uint8Array`; inbound text that is not a JSON object is dropped (logged), never
 *   thrown;
 * - after an unexpected break of an open pipe it reconnects with backoff
 *   ({@link RECONNECT_DELAYS_MS}), reset after a successful reconnect, and never after a
 *   refusal (close 1008) or `disconnect()`;
 * - optional: `lastClose` (how the peer last closed, so the client can tell "refused" from
 *   "lost") and `bufferedAmount` (bytes queued, for pacing uploads).
 *
 * @typedef {object} Transport
 * @property {TransportState} state
 * @property {() => Promise<void>} connect
 * @property {() => Promise<void>} disconnect
 * @property {(frame: OutboundFrame) => void} send
 * @property {(handler: (frame: InboundFrame) => void) => Disposable} onMessage
 * @property {(handler: (state: TransportState, previous: TransportState) => void) => Disposable} onStateChange
 * @property {CloseInfo | null} [lastClose]
 * @property {number} [bufferedAmount]
 */

/**
 * Delay before each reconnect attempt, in order; the last one repeats (docs/protocol.md,
 * "Client behaviour").
 * @type {readonly number[]}
 */
export const RECONNECT_DELAYS_MS = Object.freeze([1000, 2000, 4000, 8000, 16000, 30000]);

/** Close code of a refused token or role: reconnecting cannot help. */
export const CLOSE_POLICY_VIOLATION = 1008;
const CLOSE_NORMAL = 1000;
/** What a socket reports when it ended without a close frame (RFC 6455 section 7.1.5). */
const CLOSE_ABNORMAL = 1006;

/**
 * @typedef {object} WsTransportOptions
 * @property {string} [token] sent as the WebSocket subprotocol (never in the URL); omit for an
 *   `--open` carrier
 * @property {string[]} [protocols] subprotocols to offer instead of `[token]`
 * @property {boolean} [reconnect=true] reconnect after an unexpected break
 * @property {readonly number[]} [reconnectDelaysMs] defaults to {@link RECONNECT_DELAYS_MS}
 * @property {any} [WebSocket] the WebSocket class; defaults to `globalThis.WebSocket` (browsers,
 *   Node 22+). On Node 20 pass the `ws` package's class.
 * @property {(fn: () => void, ms: number) => unknown} [setTimeout] timer hook (tests)
 * @property {(handle: any) => void} [clearTimeout] timer hook (tests)
 * @property {{warn(...args: unknown[]): void}} [logger=console] where dropped frames are reported
 */

/**
 * A {@link Transport} over one WebSocket at a time, reconnecting after unexpected breaks.
 *
 * Decisions the protocol reference leaves open:
 * - While a reconnect is scheduled or dialling, the state is `connecting`; `disconnected` means
 *   it stopped trying (disconnect(), close 1008, a failed first connect).
 * - Only a break of a socket that was open is retried: a first connect that fails rejects.
 * - `disconnect()` resolves at once; the closing socket's late events are ignored.
 */
export class WsTransport {
  #url;
  #protocols;
  #reconnectEnabled;
  #delays;
  #WebSocket;
  #setTimeout;
  #clearTimeout;
  #logger;

  /** @type {TransportState} */
  #state = "disconnected";
  /** The live socket; events from any other (older, closing) socket are ignored. */
  #ws = null;
  /** True from connect() until disconnect() or a failure that reconnecting cannot fix. */
  #wanted = false;
  /** A socket opened since connect(): only then is a close "unexpected" and retried. */
  #opened = false;
  #attempt = 0;
  #reconnectTimer = null;
  /** @type {ReturnType<typeof deferred> | null} */
  #connectWaiter = null;
  /** @type {CloseInfo | null} */
  #lastClose = null;
  #messageHandlers = new Set();
  #stateHandlers = new Set();

  /**
   * @param {string | URL} url e.g. `ws://127.0.0.1:7070/` (`?role=observe` to ask for less)
   * @param {WsTransportOptions} [options]
   * @throws {TypeError} for a URL that does not parse or a missing WebSocket class
   */
  constructor(url, options = {}) {
    const {
      token,
      protocols = token ? [token] : [],
      reconnect = true,
      reconnectDelaysMs = RECONNECT_DELAYS_MS,
      WebSocket = globalThis.WebSocket,
      setTimeout = (fn, ms) => globalThis.setTimeout(fn, ms),
      clearTimeout = (handle) => globalThis.clearTimeout(handle),
      logger = console,
    } = options;
    if (typeof WebSocket !== "function") {
      throw new TypeError("no WebSocket class: pass options.WebSocket (on Node 20, the `ws` package's)");
    }
    if (!Array.isArray(reconnectDelaysMs) || reconnectDelaysMs.length === 0) {
      throw new TypeError("reconnectDelaysMs must be a non-empty array");
    }
    this.#url = new URL(url).toString();
    this.#protocols = [...protocols];
    this.#reconnectEnabled = reconnect;
    this.#delays = reconnectDelaysMs;
    this.#WebSocket = WebSocket;
    this.#setTimeout = setTimeout;
    this.#clearTimeout = clearTimeout;
    this.#logger = logger;
  }

  /** @returns {TransportState} */
  get state() {
    return this.#state;
  }

  /** The URL dialled (the token is never part of it). */
  get url() {
    return this.#url;
  }

  /** How the last socket closed (`{code, reason}`), or null; cleared by `connect()`. */
  get lastClose() {
    return this.#lastClose;
  }

  /** Bytes queued on the socket but not yet sent. */
  get bufferedAmount() {
    return this.#ws?.bufferedAmount ?? 0;
  }

  /**
   * Opens the socket. Resolves once it is open; while a reconnect is under way it resolves when
   * that succeeds. Rejects with a `connection_closed` {@link CarrierError} (`data`: the close
   * code and reason) when the first attempt fails, or `disconnected` when disconnect() comes first.
   * @returns {Promise<void>}
   */
  connect() {
    if (this.#state === "connected") return Promise.resolve();
    this.#connectWaiter ??= deferred();
    const { promise } = this.#connectWaiter;
    if (this.#state === "disconnected") {
      this.#wanted = true;
      this.#opened = false;
      this.#attempt = 0;
      this.#lastClose = null;
      this.#openSocket();
    }
    return promise;
  }

  /**
   * Closes the socket (close 1000) and stops reconnecting. Safe to call more than once.
   * @returns {Promise<void>}
   */
  disconnect() {
    this.#wanted = false;
    this.#cancelReconnect();
    const ws = this.#ws;
    this.#ws = null;
    if (ws) {
      try {
        ws.close(CLOSE_NORMAL, "client disconnect");
      } catch {
        // Already closing.
      }
    }
    this.#settleWaiter(new CarrierError("disconnected", "the transport was disconnected", { effectState: "unknown" }));
    this.#setState("disconnected");
    return Promise.resolve();
  }

  /**
   * Sends exactly one frame: an object as one JSON text frame, bytes as one binary frame.
   * @param {OutboundFrame} frame
   * @throws {CarrierError} `not_connected` unless `connected`; `invalid_frame` for anything that
   *   is neither a JSON-serialisable object nor bytes
   */
  send(frame) {
    if (this.#state !== "connected" || this.#ws === null) {
      throw new CarrierError("not_connected", "cannot send: the transport is not connected", { effectState: "none" });
    }
    const bytes = asBytes(frame);
    if (bytes !== null) {
      this.#ws.send(bytes);
      return;
    }
    if (!isObject(frame)) {
      throw new CarrierError("invalid_frame", "a text frame must be a JSON object", { effectState: "none" });
    }
    let text;
    try {
      text = JSON.stringify(frame);
    } catch (err) {
      throw new CarrierError("invalid_frame", `the frame is not JSON-serialisable (${err.message})`, { effectState: "none" });
    }
    this.#ws.send(text);
  }

  /**
   * Subscribes to inbound frames: JSON objects (text) and `Uint8Array`s (binary).
   * @param {(frame: InboundFrame) => void} handler
   * @returns {Disposable}
   */
  onMessage(handler) {
    return subscribe(this.#messageHandlers, handler);
  }

  /**
   * Subscribes to state changes; the handler gets `(state, previousState)`.
   * @param {(state: TransportState, previous: TransportState) => void} handler
   * @returns {Disposable}
   */
  onStateChange(handler) {
    return subscribe(this.#stateHandlers, handler);
  }

  #setState(next) {
    const previous = this.#state;
    if (previous === next) return;
    this.#state = next;
    emit(this.#stateHandlers, next, previous);
  }

  #settleWaiter(error) {
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    if (!waiter) return;
    if (error) waiter.reject(error);
    else waiter.resolve(undefined);
  }

  #openSocket() {
    this.#setState("connecting");
    let ws;
    try {
      ws = this.#protocols.length > 0 ? new this.#WebSocket(this.#url, this.#protocols) : new this.#WebSocket(this.#url);
    } catch (err) {
      // A URL or subprotocol the WebSocket class refuses will be refused again: stop.
      this.#stop(new CarrierError("connection_closed", `cannot open the socket: ${err.message}`, {
        data: { code: CLOSE_ABNORMAL, reason: "" },
        effectState: "none",
      }));
      return;
    }
    ws.binaryType = "arraybuffer";
    this.#ws = ws;
    ws.addEventListener("open", () => {
      if (this.#ws !== ws) return;
      this.#opened = true;
      this.#attempt = 0;
      this.#setState("connected");
      this.#settleWaiter(null);
    });
    ws.addEventListener("message", (event) => {
      if (this.#ws === ws) this.#deliver(event.data);
    });
    ws.addEventListener("close", (event) => {
      if (this.#ws === ws) this.#onClose({ code: event.code ?? CLOSE_ABNORMAL, reason: event.reason ?? "" });
    });
    // An `error` event is always followed by `close`, which does the work.
    ws.addEventListener("error", () => {});
  }

  /** @param {CloseInfo} close */
  #onClose(close) {
    this.#ws = null;
    this.#lastClose = close;
    const retry = this.#wanted && this.#reconnectEnabled && this.#opened && close.code !== CLOSE_POLICY_VIOLATION;
    if (retry) {
      this.#scheduleReconnect();
      return;
    }
    const reason = close.reason ? `: ${close.reason}` : "";
    this.#stop(new CarrierError("connection_closed", `connection closed (${close.code}${reason})`, {
      data: { ...close },
      effectState: "unknown",
    }));
  }

  #stop(error) {
    this.#wanted = false;
    this.#cancelReconnect();
    this.#ws = null;
    this.#settleWaiter(error);
    this.#setState("disconnected");
  }

  #scheduleReconnect() {
    const delay = this.#delays[Math.min(this.#attempt, this.#delays.length - 1)];
    this.#attempt += 1;
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

  #deliver(data) {
    if (typeof data === "string") {
      let frame;
      try {
        frame = JSON.parse(data);
      } catch {
        this.#logger.warn("carrier: dropped an inbound text frame that is not JSON");
        return;
      }
      if (!isObject(frame)) {
        this.#logger.warn("carrier: dropped an inbound text frame that is not a JSON object");
        return;
      }
      emit(this.#messageHandlers, frame);
      return;
    }
    const bytes = asBytes(data);
    if (bytes === null) {
      this.#logger.warn("carrier: dropped an inbound message of unexpected type");
      return;
    }
    emit(this.#messageHandlers, bytes);
  }
}
