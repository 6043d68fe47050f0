// The reference suite for WsTransport (and the MessagePort pair over it) on real sockets on
// 127.0.0.1, against a scripted peer served by the `ws` package (a dev dependency): the peer
// answers every request, echoes `echo` channel frames, and breaks, refuses, closes and injects
// on the test's command.
import http from "node:http";

import { WebSocketServer } from "ws";

import { WsTransport } from "../transport.js";
import { decodeChannelFrame } from "../frames.js";
import { ManualClock } from "../testing/clock.js";
import { portHarness } from "../testing/port-harness.js";
import { transportSuite } from "../testing/suite.js";
import { webSocketClass } from "../testing/websocket-class.js";

const WebSocket = await webSocketClass();

async function startPeer() {
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => [...protocols][0] ?? false });
  const server = http.createServer();
  let admitting = true;
  let attempts = 0;
  const sockets = new Set();
  server.on("connection", (tcp) => {
    attempts += 1;
    if (!admitting) tcp.destroy();
  });
  server.on("upgrade", (request, tcp, head) => {
    wss.handleUpgrade(request, tcp, head, (ws) => {
      sockets.add(ws);
      ws.on("close", () => sockets.delete(ws));
      ws.on("message", (data, isBinary) => {
        if (!isBinary) {
          const frame = JSON.parse(data.toString("utf8"));
          if (typeof frame.id === "string" && typeof frame.method === "string") ws.send(JSON.stringify({ id: frame.id, result: {} }));
        } else if (decodeChannelFrame(new Uint8Array(data)).channel === "echo") {
          ws.send(data, { binary: true });
        }
      });
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const { port } = /** @type {import("node:net").AddressInfo} */ (server.address());
  const newest = () => [...sockets].at(-1);
  return {
    port,
    attempts: () => attempts,
    admit: (/** @type {boolean} */ yes) => {
      admitting = yes;
    },
    breakLink: async () => {
      for (const ws of sockets) ws.terminate();
    },
    closeLink: async (/** @type {number} */ code, /** @type {string} */ reason) => newest()?.close(code, reason),
    inject: async (/** @type {string | Uint8Array} */ frame) => {
      const ws = newest();
      await new Promise((resolve) => ws.send(frame, { binary: typeof frame !== "string" }, resolve));
    },
    stop: async () => {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}

/** @type {import("../testing/suite.js").Harness} */
const wsPeer = {
  name: "WsTransport on a real socket (scripted ws peer)",
  start: async () => {
    const peer = await startPeer();
    const clock = new ManualClock();
    return {
      ...peer,
      clock,
      makeTransport: ({ logger }) =>
        new WsTransport(`ws://127.0.0.1:${peer.port}/`, {
          token: "peer-token",
          WebSocket,
          setTimeout: clock.setTimeout,
          clearTimeout: clock.clearTimeout,
          logger,
        }),
    };
  },
};

transportSuite(wsPeer);
transportSuite(portHarness(wsPeer));
