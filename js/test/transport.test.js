// The reference suite of the transport contract on a fake socket (no network, no installs), for
// WsTransport and for the MessagePort pair bridged to it; then what is WsTransport's own.
import { test } from "node:test";
import assert from "node:assert/strict";

import { RECONNECT_DELAYS_MS, WsTransport } from "../transport.js";
import { fakeSocketHarness, fakeWebSocketClass } from "../testing/fake-socket.js";
import { portHarness } from "../testing/port-harness.js";
import { transportSuite } from "../testing/suite.js";

transportSuite(fakeSocketHarness);
transportSuite(portHarness(fakeSocketHarness));

test("the token travels only as the subprotocol, and binary arrives as ArrayBuffer", async () => {
  const Fake = fakeWebSocketClass();
  Fake.onCreate = (socket) => queueMicrotask(() => socket.serverOpen());
  const transport = new WsTransport("ws://127.0.0.1:7070/?role=observe", { token: "secret-token", WebSocket: Fake });
  await transport.connect();
  const [socket] = Fake.sockets;
  assert.deepEqual(socket.protocols, ["secret-token"]);
  assert.equal(socket.url, "ws://127.0.0.1:7070/?role=observe");
  assert.ok(!socket.url.includes("secret-token"));
  assert.equal(socket.binaryType, "arraybuffer");
  assert.equal(transport.url, socket.url);
  await transport.disconnect();
  assert.deepEqual(socket.closedByClient, { code: 1000, reason: "client disconnect" });
});

test("with no token, no subprotocol is offered", async () => {
  const Fake = fakeWebSocketClass();
  const transport = new WsTransport("ws://127.0.0.1:7070/", { WebSocket: Fake });
  transport.connect().catch(() => {});
  assert.equal(Fake.sockets[0].protocols, undefined);
  await transport.disconnect();
});

test("a URL or WebSocket class that cannot work is refused at construction", () => {
  assert.throws(() => new WsTransport("not a url", { WebSocket: fakeWebSocketClass() }), TypeError);
  assert.throws(() => new WsTransport("ws://127.0.0.1:1/", { WebSocket: undefined }), TypeError);
});

test("a WebSocket constructor that throws stops the first connect", async () => {
  class Refusing {
    constructor() {
      throw new SyntaxError("bad subprotocol");
    }
  }
  const transport = new WsTransport("ws://127.0.0.1:7070/", { token: "x", WebSocket: Refusing });
  await assert.rejects(transport.connect(), { code: "connection_closed", message: /bad subprotocol/ });
  assert.equal(transport.state, "disconnected");
});

test("frames of a socket being replaced are ignored", async () => {
  const Fake = fakeWebSocketClass();
  Fake.onCreate = (socket) => queueMicrotask(() => socket.serverOpen());
  const transport = new WsTransport("ws://127.0.0.1:7070/", { WebSocket: Fake });
  const seen = [];
  transport.onMessage((frame) => seen.push(frame));
  await transport.connect();
  await transport.disconnect();
  await transport.connect();
  Fake.sockets[0].readyState = 1; // the old socket still talks
  Fake.sockets[0].serverSend({ event: "old" });
  Fake.sockets[1].serverSend({ event: "new" });
  assert.deepEqual(seen, [{ event: "new" }]);
  await transport.disconnect();
});

test("with the default global timers (mocked by node:test), the backoff is 1 s, 2 s, 4 s … 30 s", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const Fake = fakeWebSocketClass();
  let admit = true;
  Fake.onCreate = (socket) => {
    const open = admit;
    queueMicrotask(() => (open ? socket.serverOpen() : socket.serverFail()));
  };
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  const transport = new WsTransport("ws://127.0.0.1:7070/", { WebSocket: Fake });
  await transport.connect();
  admit = false;
  Fake.sockets[0].serverClose(1006);
  assert.equal(transport.state, "connecting");
  const attemptsAt = [];
  let elapsed = 0;
  while (attemptsAt.length < 7) {
    const before = Fake.sockets.length;
    t.mock.timers.tick(1000);
    await settle();
    elapsed += 1000;
    if (Fake.sockets.length > before) attemptsAt.push(elapsed);
  }
  // Each attempt fails at once, so attempt k starts at the sum of the first k delays.
  assert.deepEqual(attemptsAt, [1000, 3000, 7000, 15000, 31000, 61000, 91000]);
  assert.deepEqual(RECONNECT_DELAYS_MS, [1000, 2000, 4000, 8000, 16000, 30000]);
  await transport.disconnect();
});
