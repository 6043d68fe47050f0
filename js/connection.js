/**
 * The client's connection lifecycle over its transport: the handshake first on every new pipe
 * (with a resume point after a reconnect), its answer judged (versions), and what a break
 * means — wait for the transport's reconnect after a successful handshake, stop before one.
 *
 * States: `connecting` until the handshake completes on the transport's open pipe, then
 * `connected` (or `version_skew`); `disconnected` when the client stopped trying
 * (`disconnect()`, a refused token or role, a refused handshake, a failed first connect, a
 * handshake without an answer).
 *
 * Not part of the public API.
 *
 * @module carrier-client/connection
 * @internal
 */

import { CLIENT_VERSION, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "./catalog.js";
import { CarrierError } from "./errors.js";
import { deferred, isObject } from "./internal.js";
import { toCarrierError } from "./requests.js";
import { WsTransport } from "./transport.js";
import { judgeVersions } from "./versions.js";

/**
 * @typedef {"disconnected" | "connecting" | "connected" | "version_skew"} ConnectionState
 * @typedef {import("./transport.js").Transport} Transport
 * @typedef {object} ConnectionHooks what the rest of the client does at each step
 * @property {() => string} newId a fresh request id for the handshake
 * @property {() => object | null} resumePoint the handshake's `resume` param, if any
 * @property {() => void} onOpen a new pipe opened; its handshake goes out next
 * @property {(result: Record<string, any>) => void} onReady a handshake succeeded with `result`
 * @property {(error: CarrierError) => void} onBreak the pipe broke or the client stopped:
 *   whatever waits on it fails with `error`
 * @property {(state: ConnectionState, previous: ConnectionState) => void} onState
 * @typedef {object} ConnectionOptions
 * @property {string} clientName the handshake's `client.name`
 * @property {number} timeoutMs a handshake without an answer by then stops the client
 * @property {(fn: () => void, ms: number) => unknown} setTimeout
 * @property {(handle: any) => void} clearTimeout
 */

const TRANSPORT_METHODS = ["connect", "disconnect", "send", "onMessage", "onStateChange"];

/**
 * The transport a client runs over: a {@link WsTransport} dialling `target` when it is a URL
 * (`?role=observe` added when that role is asked for), else `target` itself when it keeps the
 * Transport contract.
 * @param {string | URL | Transport} target
 * @param {{token?: string, role?: string, reconnect?: boolean, WebSocket?: any,
 *   setTimeout: (fn: () => void, ms: number) => unknown, clearTimeout: (handle: any) => void}} options
 * @returns {Transport}
 * @throws {TypeError} for a URL that does not parse, an object that is not a transport, or
 *   URL-only options given with a transport
 */
export function transportFor(target, { token, role, reconnect, WebSocket, setTimeout, clearTimeout }) {
  if (typeof target === "string" || target instanceof URL) {
    const url = new URL(target);
    if (role === "observe") url.searchParams.set("role", "observe");
    return new WsTransport(url, { token, reconnect, WebSocket, setTimeout, clearTimeout });
  }
  if (!isTransport(target)) {
    throw new TypeError(`CarrierClient needs a URL or a transport (an object with ${TRANSPORT_METHODS.join(", ")})`);
  }
  if (token !== undefined || WebSocket !== undefined) {
    throw new TypeError("token and WebSocket belong to the transport: pass them to it, not to CarrierClient");
  }
  return target;
}

/** @param {any} value */
function isTransport(value) {
  return value !== null && typeof value === "object" && TRANSPORT_METHODS.every((name) => typeof value[name] === "function");
}

/** The lifecycle of one client's connection (see the module docs). */
export class Connection {
  /** @type {ConnectionState} */
  state = "disconnected";
  /** @type {Record<string, any> | null} the latest handshake result, with `version_skew` as judged here */
  handshakeResult = null;
  /** @type {CarrierError | null} why the client last stopped trying; null once connected */
  lastError = null;
  /** True from connect() until disconnect() or a failure that reconnecting cannot fix. */
  wanted = false;

  #transport;
  #hooks;
  #options;
  /** A handshake succeeded since connect(): only then does a break wait for the reconnect. */
  #established = false;
  /** A handshake went out since connect(): a break before it completes is a failed connect. */
  #handshakeStarted = false;
  /** @type {ReturnType<typeof deferred> | null} */
  #connectWaiter = null;
  /** @type {{id: string, timer: unknown} | null} the handshake in flight */
  #handshake = null;

  /**
   * @param {Transport} transport
   * @param {ConnectionOptions} options
   * @param {ConnectionHooks} hooks
   */
  constructor(transport, options, hooks) {
    this.#transport = transport;
    this.#options = options;
    this.#hooks = hooks;
    transport.onStateChange((state) => this.#onTransportState(state));
  }

  /** Whether requests and channel frames may go: the handshake completed on the open pipe. */
  get ready() {
    return this.state === "connected" || this.state === "version_skew";
  }

  /**
   * Connects the transport if needed and performs the handshake.
   * @returns {Promise<any>} the handshake result
   */
  connect() {
    if (this.#connectWaiter) return this.#connectWaiter.promise;
    if (this.ready) return Promise.resolve(this.handshakeResult);
    const waiter = deferred();
    this.#connectWaiter = waiter;
    this.wanted = true;
    this.#established = false;
    this.#setState("connecting");
    const transportState = this.#transport.state;
    if (transportState === "connected") {
      this.#sendHandshake();
    } else if (transportState === "disconnected") {
      this.#transport.connect().catch((err) => {
        if (this.#connectWaiter !== waiter) return;
        this.stop(err instanceof CarrierError ? err : this.#closedError(String(err?.message ?? err)));
      });
    }
    return waiter.promise;
  }

  /**
   * Stops for good (until the next connect()): transport down, no timers, nothing pending, a
   * waiting connect() rejected with `error`.
   * @param {CarrierError} error
   */
  stop(error) {
    this.wanted = false;
    this.#established = false;
    this.#handshakeStarted = false;
    this.#clearHandshake();
    this.#hooks.onBreak(error);
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.reject(error);
    this.lastError = error;
    if (this.#transport.state !== "disconnected") {
      this.#transport.disconnect().catch(() => {});
    }
    this.#setState("disconnected");
  }

  /**
   * Whether `id` is the handshake in flight.
   * @param {unknown} id
   */
  awaits(id) {
    return this.#handshake !== null && id === this.#handshake.id;
  }

  /**
   * The handshake's answer: ready on a result this client can talk to, stopped otherwise
   * (a refusal of the handshake, version_incompatible, will not change on retry).
   * @param {{result?: unknown, error?: unknown}} frame
   */
  answered(frame) {
    this.#clearHandshake();
    if (frame.error !== undefined) {
      this.stop(toCarrierError(frame.error));
      return;
    }
    // The client judges the versions itself (docs/protocol.md, "Versions"): a result it cannot
    // talk to is refused as the server refuses a client, and version_skew is its own.
    const verdict = judgeVersions(isObject(frame.result) ? /** @type {Record<string, unknown>} */ (frame.result) : {});
    if (verdict instanceof CarrierError) {
      this.stop(verdict);
      return;
    }
    const result = { .../** @type {object} */ (frame.result), version_skew: verdict.skew };
    this.#hooks.onReady(result);
    this.handshakeResult = result;
    this.#established = true;
    this.lastError = null;
    this.#setState(verdict.skew ? "version_skew" : "connected");
    const waiter = this.#connectWaiter;
    this.#connectWaiter = null;
    waiter?.resolve(result);
  }

  /** @param {ConnectionState} next */
  #setState(next) {
    const previous = this.state;
    if (previous === next) return;
    this.state = next;
    this.#hooks.onState(next, previous);
  }

  /** @param {import("./transport.js").TransportState} state */
  #onTransportState(state) {
    if (!this.wanted) return;
    if (state === "connected") {
      // A new pipe: the handshake is its first frame.
      this.#sendHandshake();
      return;
    }
    const closed = this.#closedError();
    this.#clearHandshake();
    this.#hooks.onBreak(closed);
    if (state === "connecting" && this.#established) {
      // The transport redials; the next `connected` resumes the session.
      this.#setState("connecting");
    } else if (state === "disconnected" || this.#handshakeStarted) {
      this.stop(closed);
    }
  }

  #sendHandshake() {
    this.#hooks.onOpen();
    const { clientName, timeoutMs, setTimeout } = this.#options;
    /** @type {Record<string, unknown>} */
    const params = {
      protocol_version: PROTOCOL_VERSION,
      min_compatible_protocol: MIN_COMPATIBLE_PROTOCOL,
      client: { name: clientName, version: CLIENT_VERSION },
    };
    const resume = this.#hooks.resumePoint();
    if (resume !== null) params.resume = resume;
    const id = this.#hooks.newId();
    const timer = setTimeout(() => {
      if (this.#handshake?.id !== id) return;
      this.#handshake = null;
      this.stop(new CarrierError("timeout", `the carrier did not answer the handshake within ${timeoutMs} ms`, { effectState: "unknown" }));
    }, timeoutMs);
    this.#handshake = { id, timer };
    this.#handshakeStarted = true;
    try {
      this.#transport.send({ id, method: "system.handshake", params });
    } catch (err) {
      this.stop(err instanceof CarrierError ? err : this.#closedError(String(/** @type {Error} */ (err)?.message ?? err)));
    }
  }

  #clearHandshake() {
    if (this.#handshake !== null) {
      this.#options.clearTimeout(this.#handshake.timer);
      this.#handshake = null;
    }
  }

  /**
   * `connection_closed` with the close the transport last saw (1006 when it saw none).
   * @param {string} [detail]
   */
  #closedError(detail) {
    const close = this.#transport.lastClose ?? { code: 1006, reason: detail ?? "" };
    const reason = close.reason ? `: ${close.reason}` : "";
    return new CarrierError("connection_closed", `connection closed (${close.code}${reason})`, {
      data: { code: close.code, reason: close.reason },
      effectState: "unknown",
    });
  }
}
