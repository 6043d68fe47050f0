/**
 * A second transport, written only against the `Transport` contract: `PortTransport` carries
 * frames over a `MessagePort` (a `MessageChannel` in a page, a worker, an extension's offscreen
 * document), and `bridgeTransport` serves such a port from any other transport — here a
 * `WsTransport` — on the far side. Neither half knows a WebSocket exists, so the same pair works
 * over `chrome.runtime` ports or native messaging by replacing `postMessage` and the
 * `message` listener.
 *
 * The package's reference suite runs against it (`test/message-port.test.js`), and a full prompt
 * turn goes through `CarrierClient` over it.
 *
 * @example
 * import { CarrierClient, WsTransport } from "carrier-client";
 * import { PortTransport, bridgeTransport } from "carrier-client/examples/message-port.js";
 * const { port1, port2 } = new MessageChannel();
 * bridgeTransport(port2, new WsTransport("ws://127.0.0.1:7070/", { token })); // e.g. in a worker
 * const client = new CarrierClient(new PortTransport(port1));
 * await client.connect();
 *
 * @module carrier-client/examples/message-port
 */

import { CarrierError } from "../errors.js";

/*
 * Messages on the port (structured clones; a Uint8Array frame arrives as a Uint8Array):
 *   near → far: {op: "connect", id} {op: "disconnect", id} {op: "send", frame}
 *   far → near: {op: "done", id, error?: {code, message, data}} {op: "state", state, lastClose}
 *               {op: "message", frame}
 */

/**
 * @typedef {"disconnected" | "connecting" | "connected"} TransportState
 * @typedef {{code: number, reason: string}} CloseInfo
 */

/** The near half: a `Transport` whose pipe is a `MessagePort`. */
export class PortTransport {
  #port;
  /** @type {TransportState} the far side's state, as last reported */
  #state = "disconnected";
  /** @type {CloseInfo | null} */
  #lastClose = null;
  #nextId = 1;
  /** @type {Map<number, {resolve: Function, reject: Function}>} */
  #calls = new Map();
  #messageHandlers = new Set();
  #stateHandlers = new Set();

  /** @param {MessagePort} port */
  constructor(port) {
    this.#port = port;
    port.addEventListener("message", (event) => this.#onPortMessage(event.data));
    port.start();
  }

  /** @returns {TransportState} */
  get state() {
    return this.#state;
  }

  /** How the far side's pipe last closed, as it reported. */
  get lastClose() {
    return this.#lastClose;
  }

  /** @returns {Promise<void>} */
  connect() {
    return this.#call("connect");
  }

  /** @returns {Promise<void>} */
  disconnect() {
    return this.#call("disconnect");
  }

  /** @param {object | Uint8Array | ArrayBuffer} frame */
  send(frame) {
    if (this.#state !== "connected") {
      throw new CarrierError("not_connected", "cannot send: the transport is not connected", { effectState: "none" });
    }
    const bytes = frame instanceof ArrayBuffer ? new Uint8Array(frame) : frame;
    if (bytes === null || typeof bytes !== "object" || Array.isArray(bytes)) {
      throw new CarrierError("invalid_frame", "a text frame must be a JSON object", { effectState: "none" });
    }
    this.#port.postMessage({ op: "send", frame: bytes });
  }

  /** @param {(frame: object | Uint8Array) => void} handler */
  onMessage(handler) {
    return subscribe(this.#messageHandlers, handler);
  }

  /** @param {(state: TransportState, previous: TransportState) => void} handler */
  onStateChange(handler) {
    return subscribe(this.#stateHandlers, handler);
  }

  /** Closes the port; the far side's bridge disconnects its transport. */
  close() {
    this.#port.postMessage({ op: "disconnect", id: 0 });
    this.#port.close();
    for (const call of this.#calls.values()) call.reject(new CarrierError("disconnected", "the port was closed"));
    this.#calls.clear();
  }

  /** @param {"connect" | "disconnect"} op */
  #call(op) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#calls.set(id, { resolve, reject });
      this.#port.postMessage({ op, id });
    });
  }

  #onPortMessage(message) {
    if (message?.op === "message") {
      for (const handler of [...this.#messageHandlers]) safely(handler, message.frame);
    } else if (message?.op === "state") {
      this.#lastClose = message.lastClose ?? null;
      const previous = this.#state;
      if (previous === message.state) return;
      this.#state = message.state;
      for (const handler of [...this.#stateHandlers]) safely(handler, message.state, previous);
    } else if (message?.op === "done") {
      const call = this.#calls.get(message.id);
      this.#calls.delete(message.id);
      if (!call) return;
      if (message.error) {
        const { code, message: text, data } = message.error;
        call.reject(new CarrierError(code, text, { data }));
      } else {
        call.resolve(undefined);
      }
    }
  }
}

/**
 * The far half: serves `port` from `inner` (any `Transport`). Returns a function that stops
 * serving and disconnects `inner`.
 * @param {MessagePort} port
 * @param {import("../transport.js").Transport} inner
 * @returns {() => void}
 */
export function bridgeTransport(port, inner) {
  const report = () => port.postMessage({ op: "state", state: inner.state, lastClose: inner.lastClose ?? null });
  const subscriptions = [
    inner.onStateChange(report),
    inner.onMessage((frame) => port.postMessage({ op: "message", frame })),
  ];
  const done = (id, err) => {
    if (id === 0) return;
    const error = err ? { code: err.code ?? "connection_closed", message: String(err.message ?? err), data: err.data } : undefined;
    port.postMessage({ op: "done", id, error });
  };
  const onPortMessage = (event) => {
    const message = event.data;
    if (message?.op === "connect") {
      inner.connect().then(() => done(message.id), (err) => done(message.id, err));
    } else if (message?.op === "disconnect") {
      inner.disconnect().then(() => done(message.id), (err) => done(message.id, err));
    } else if (message?.op === "send") {
      try {
        inner.send(message.frame);
      } catch (err) {
        // The pipe dropped while the frame was on the port: lost like bytes in a socket buffer.
        console.warn(`carrier bridge: dropped a frame: ${err.message}`);
      }
    }
  };
  port.addEventListener("message", onPortMessage);
  port.start();
  report();
  return () => {
    for (const subscription of subscriptions) subscription.dispose();
    port.removeEventListener("message", onPortMessage);
    inner.disconnect().catch(() => {});
    port.close();
  };
}

/**
 * @param {Set<Function>} set
 * @param {Function} handler
 */
function subscribe(set, handler) {
  set.add(handler);
  return { dispose: () => void set.delete(handler) };
}

/**
 * @param {Function} handler
 * @param {...unknown} args
 */
function safely(handler, ...args) {
  try {
    handler(...args);
  } catch (err) {
    console.error("carrier: a subscriber threw", err);
  }
}
