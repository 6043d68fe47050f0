/**
 * A hand-rolled fake `WebSocket` and the scripted peer behind it: what the reference suite runs
 * against without a network or installs. Copy it to test a transport over another channel: only
 * the inner pipe changes.
 *
 * @module carrier-client/testing/fake-socket
 */

import { WsTransport } from "../transport.js";
import { ManualClock } from "./clock.js";
import { decodeChannelFrame } from "../frames.js";

/**
 * A fresh fake WebSocket class; every instance is recorded in `Fake.sockets`. The test plays the
 * server with `serverOpen`, `serverSend`, `serverClose` and `serverFail`.
 */
export function fakeWebSocketClass() {
  class FakeWebSocket extends EventTarget {
    /** @type {FakeWebSocket[]} */
    static sockets = [];
    /** Called with each new socket (the scripted peer hooks in here). */
    static onCreate = (/** @type {FakeWebSocket} */ _socket) => {};

    /**
     * @param {string} url
     * @param {string[]} [protocols]
     */
    constructor(url, protocols) {
      super();
      this.url = url;
      this.protocols = protocols;
      this.readyState = 0;
      this.bufferedAmount = 0;
      this.binaryType = "blob";
      /** @type {(string | Uint8Array)[]} what the client sent, one entry per frame */
      this.sent = [];
      /** @type {{code: number, reason: string} | null} */
      this.closedByClient = null;
      FakeWebSocket.sockets.push(this);
      FakeWebSocket.onCreate(this);
    }

    /** @param {string | ArrayBufferView | ArrayBuffer} data */
    send(data) {
      if (this.readyState !== 1) throw new Error("not open");
      if (typeof data === "string") {
        this.sent.push(data);
      } else {
        // Copy what a real socket would put on the wire: exactly the view's bytes.
        const view = ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data);
        this.sent.push(view.slice());
      }
      this.onClientFrame(this.sent.at(-1));
    }

    close(code = 1000, reason = "") {
      this.closedByClient = { code, reason };
      if (this.readyState === 3) return;
      this.readyState = 2;
      // The server's close answer arrives later, as on a real socket.
      queueMicrotask(() => this.serverClose(code, reason));
    }

    /** Hook for the scripted peer: a frame the client sent. */
    onClientFrame(/** @type {string | Uint8Array} */ _frame) {}

    // -- test side: play the server --

    serverOpen() {
      if (this.readyState !== 0) return;
      this.readyState = 1;
      this.dispatchEvent(new Event("open"));
    }

    /** @param {string | object | ArrayBuffer | Uint8Array} frame text, bytes or an object (sent as JSON) */
    serverSend(frame) {
      if (this.readyState !== 1) return;
      let data = frame;
      if (frame instanceof Uint8Array) data = frame.slice().buffer;
      else if (typeof frame !== "string" && !(frame instanceof ArrayBuffer)) data = JSON.stringify(frame);
      this.dispatchEvent(new MessageEvent("message", { data }));
    }

    serverClose(code = 1006, reason = "") {
      if (this.readyState === 3) return;
      this.readyState = 3;
      this.dispatchEvent(Object.assign(new Event("close"), { code, reason }));
    }

    /** The connection never opens (refused, unreachable): `error`, then `close` 1006. */
    serverFail() {
      if (this.readyState === 3) return;
      this.readyState = 3;
      this.dispatchEvent(new Event("error"));
      this.dispatchEvent(Object.assign(new Event("close"), { code: 1006, reason: "" }));
    }

    sentText() {
      return this.sent.filter((d) => typeof d === "string").map((d) => JSON.parse(/** @type {string} */ (d)));
    }

    lastRequest() {
      return this.sentText().at(-1);
    }
  }
  return FakeWebSocket;
}

/**
 * The scripted peer of the reference suite on a fake socket: it answers every request with
 * `{id, result: {}}` and echoes every channel frame, asynchronously like a network.
 * @param {InstanceType<ReturnType<typeof fakeWebSocketClass>>} socket
 */
export function scriptPeer(socket) {
  socket.onClientFrame = (frame) => {
    queueMicrotask(() => {
      if (typeof frame === "string") {
        const request = JSON.parse(frame);
        if (typeof request.id === "string" && typeof request.method === "string") {
          socket.serverSend({ id: request.id, result: {} });
        }
      } else if (decodeChannelFrame(frame).channel === "echo") {
        socket.serverSend(frame);
      }
    });
  };
}

/**
 * The reference suite's harness for `WsTransport` on the fake socket.
 * @type {import("./suite.js").Harness}
 */
export const fakeSocketHarness = {
  name: "WsTransport on a fake socket",
  start: async () => startFakePeer(),
};

/** Starts a scripted fake peer; also the inner pipe of the MessagePort harness. */
export function startFakePeer() {
  const Fake = fakeWebSocketClass();
  const clock = new ManualClock();
  let admitting = true;
  Fake.onCreate = (socket) => {
    scriptPeer(socket);
    const admit = admitting;
    queueMicrotask(() => (admit ? socket.serverOpen() : socket.serverFail()));
  };
  const open = () => Fake.sockets.filter((s) => s.readyState === 1).at(-1);
  return {
    Fake,
    clock,
    /** @param {{logger: {warn(...args: unknown[]): void}}} options */
    makeTransport: ({ logger }) =>
      new WsTransport("ws://127.0.0.1:7070/", {
        token: "t".repeat(64),
        WebSocket: Fake,
        setTimeout: clock.setTimeout,
        clearTimeout: clock.clearTimeout,
        logger,
      }),
    attempts: () => Fake.sockets.length,
    admit: (/** @type {boolean} */ yes) => {
      admitting = yes;
    },
    breakLink: async () => open()?.serverClose(1006, ""),
    closeLink: async (/** @type {number} */ code, /** @type {string} */ reason) => open()?.serverClose(code, reason),
    inject: async (/** @type {string | Uint8Array} */ frame) => open()?.serverSend(frame),
    stop: async () => {},
  };
}
