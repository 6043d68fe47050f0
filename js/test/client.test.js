// CarrierClient keeps the client contract of docs/protocol.md, "Client behaviour" (handshake first,
// correlation, drops, preflight, resume, dedupe, backoff) built from a URL on a fake socket and
// clock, and over any object that keeps the Transport contract.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CarrierClient, CLIENT_VERSION, decodeChannelFrame, encodeChannelFrame, RECONNECT_DELAYS_MS } from "../client.js";
import { fakeWebSocketClass } from "../testing/fake-socket.js";

const URL_ = "ws://127.0.0.1:7070/";
const TOKEN = "a".repeat(64);
const REQUEST_TIMEOUT_MS = 99_000; // distinct from every backoff delay, so timers are told apart

/** A clock the test advances by hand. */
function fakeTimers() {
  const timers = [];
  return {
    setTimeout: (fn, ms) => {
      const timer = { fn, ms, done: false };
      timers.push(timer);
      return timer;
    },
    clearTimeout: (timer) => {
      if (timer) timer.done = true;
    },
    pending: () => timers.filter((t) => !t.done),
    reconnectTimers: () => timers.filter((t) => !t.done && t.ms !== REQUEST_TIMEOUT_MS),
    fire(timer) {
      timer.done = true;
      timer.fn();
    },
  };
}

function setup(options = {}) {
  const Fake = fakeWebSocketClass();
  const clock = fakeTimers();
  const client = new CarrierClient(URL_, {
    token: TOKEN,
    WebSocket: Fake,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    setTimeout: clock.setTimeout,
    clearTimeout: clock.clearTimeout,
    ...options,
  });
  return { client, Fake, clock };
}

const HANDSHAKE_RESULT = {
  protocol_version: "1.2",
  min_compatible_protocol: "1.0",
  server: { name: "carrier", version: "0.1.0" },
  role: "drive",
  session_id: "s1",
  epoch: "e1",
  version_skew: false,
  features: { sessions: true, channels: true, permissions: true, resume: true },
  channels: [],
  limits: {},
  resume: { outcome: "new" },
};

/** Opens the socket at `index`, answers its handshake, and returns the handshake request. */
function completeHandshake(Fake, index, result = HANDSHAKE_RESULT) {
  const socket = Fake.sockets[index];
  socket.serverOpen();
  const handshake = socket.sentText()[0];
  socket.serverSend({ id: handshake.id, result });
  return handshake;
}

async function connected(options) {
  const ctx = setup(options);
  const done = ctx.client.connect();
  completeHandshake(ctx.Fake, 0);
  await done;
  return { ...ctx, socket: ctx.Fake.sockets[0] };
}

const delta = (seq, text) => ({ event: "session.text_delta", seq, payload: { turn_id: "t1", delta: text } });

test("the token travels only as the subprotocol and the handshake is the first frame", async () => {
  const { client, Fake } = setup({ clientName: "console-test" });
  const states = [];
  client.onStateChange((state) => states.push(state));
  const done = client.connect();
  const socket = Fake.sockets[0];
  assert.deepEqual(socket.protocols, [TOKEN]);
  assert.ok(!socket.url.includes(TOKEN));
  assert.equal(client.state, "connecting");
  assert.equal(socket.sent.length, 0, "nothing is sent before the socket opens");

  const handshake = completeHandshake(Fake, 0);
  assert.equal(handshake.method, "system.handshake");
  assert.equal(typeof handshake.id, "string");
  assert.deepEqual(handshake.params, {
    protocol_version: "1.2",
    min_compatible_protocol: "1.0",
    client: { name: "console-test", version: CLIENT_VERSION },
  });
  assert.deepEqual(await done, HANDSHAKE_RESULT);
  assert.equal(client.state, "connected");
  assert.deepEqual(client.handshakeResult, HANDSHAKE_RESULT);
  assert.deepEqual(states, ["connecting", "connected"]);
});

test("observe role is asked for in the URL, never the token", () => {
  const { client, Fake } = setup({ role: "observe" });
  client.connect().catch(() => {});
  const url = new URL(Fake.sockets[0].url);
  assert.equal(url.searchParams.get("role"), "observe");
  assert.equal(url.searchParams.get("token"), null);
  assert.throws(() => new CarrierClient(URL_, { role: "admin", WebSocket: Fake }), TypeError);
});

test("requests are correlated by unique string ids, in any response order", async () => {
  const { client, socket } = await connected();
  const first = client.request("session.status");
  const second = client.request("session.history", { limit: 5 });
  const [reqA, reqB] = socket.sentText().slice(1);
  assert.equal(typeof reqA.id, "string");
  assert.notEqual(reqA.id, reqB.id);
  assert.deepEqual(reqA.params, {});
  assert.deepEqual(reqB.params, { limit: 5 });
  socket.serverSend({ id: reqB.id, result: { entries: [] } });
  socket.serverSend({ id: reqA.id, result: { session_id: "s1", state: "idle" } });
  assert.deepEqual(await first, { session_id: "s1", state: "idle" });
  assert.deepEqual(await second, { entries: [] });
});

test("an error response rejects with code, data and effectState", async () => {
  const { client, socket } = await connected();
  const pending = client.request("session.submit", { prompt: "hi" });
  const { id } = socket.lastRequest();
  socket.serverSend({ id, error: { code: "busy", message: "a turn is running", effect_state: "none", data: { turn_id: "t0" } } });
  await assert.rejects(pending, (err) => {
    assert.ok(err instanceof Error);
    assert.equal(err.code, "busy");
    assert.equal(err.message, "a turn is running");
    assert.deepEqual(err.data, { turn_id: "t0" });
    assert.equal(err.effectState, "none");
    return true;
  });
});

test("a request without a response times out", async () => {
  const { client, clock } = await connected();
  const pending = client.request("system.ping");
  const timer = clock.pending().find((t) => t.ms === REQUEST_TIMEOUT_MS);
  clock.fire(timer);
  await assert.rejects(pending, { code: "timeout", effectState: "unknown" });
});

test("non-JSON and non-envelope text is dropped with a warning, never thrown", async (t) => {
  const warn = t.mock.method(console, "warn", () => {});
  const { client, socket } = await connected();
  const events = [];
  client.onEvent((frame) => events.push(frame));
  assert.doesNotThrow(() => socket.serverSend("this is {not json"));
  assert.doesNotThrow(() => socket.serverSend("[1,2]"));
  assert.doesNotThrow(() => socket.serverSend("{\"neither\":1}"));
  assert.equal(warn.mock.callCount(), 3);
  socket.serverSend(delta(1, "still alive"));
  assert.equal(events.length, 1);
  assert.equal(client.state, "connected");
});

test("every text event reaches onEvent, and a disposed handler gets nothing more", async () => {
  const { client, socket } = await connected();
  const events = [];
  const subscription = client.onEvent((frame) => events.push(frame.event));
  socket.serverSend({ event: "protocol_error", payload: { code: "unknown_channel", message: "no such channel" } });
  socket.serverSend({ event: "channel.dropped", payload: { channel: "mic", count: 3 } });
  socket.serverSend(delta(1, "a"));
  subscription.dispose();
  socket.serverSend(delta(2, "b"));
  assert.deepEqual(events, ["protocol_error", "channel.dropped", "session.text_delta"]);
});

test("a request needing a feature the server lacks fails locally and sends nothing", async () => {
  const lacking = setup();
  const done = lacking.client.connect();
  completeHandshake(lacking.Fake, 0, { ...HANDSHAKE_RESULT, features: { sessions: false } });
  await done;
  const lackingSocket = lacking.Fake.sockets[0];
  const before = lackingSocket.sent.length;
  await assert.rejects(lacking.client.request("sessions.list", {}), (err) => {
    assert.equal(err.code, "unsupported_feature");
    assert.equal(err.effectState, "none");
    assert.equal(err.data.feature, "sessions");
    assert.equal(err.data.component, "server");
    return true;
  });
  assert.equal(lackingSocket.sent.length, before);

  // The same method goes out to a server that announces the feature.
  const { client, socket } = await connected();
  client.request("sessions.list", {}).catch(() => {});
  assert.equal(socket.lastRequest().method, "sessions.list");
});

test("an unlisted feature is judged by the server's protocol version", async () => {
  const { client, Fake } = setup({ methodFeatures: { "future.method": { feature: "future", requiredProtocol: "1.3" } } });
  const done = client.connect();
  completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, features: {} });
  await done;
  const before = Fake.sockets[0].sent.length;
  await assert.rejects(client.request("future.method"), (err) => {
    assert.equal(err.code, "unsupported_feature");
    const { recovery, ...data } = err.data;
    assert.deepEqual(data, { feature: "future", component: "server", required_protocol: "1.3", actual_protocol: "1.2" });
    assert.match(recovery, /update the carrier server/);
    return true;
  });
  assert.equal(Fake.sockets[0].sent.length, before);
});

test("a request before the handshake is refused locally", async () => {
  const { client, Fake } = setup();
  client.connect().catch(() => {});
  Fake.sockets[0].serverOpen();
  await assert.rejects(client.request("system.ping"), { code: "not_connected", effectState: "none" });
  assert.equal(Fake.sockets[0].sent.length, 1, "only the handshake went out");
});

test("session events with seq <= the last delivered one are dropped", async () => {
  const { client, socket } = await connected();
  const seen = [];
  client.onEvent((frame) => seen.push(frame.seq));
  for (const seq of [1, 2, 2, 1, 3]) socket.serverSend(delta(seq, "x"));
  assert.deepEqual(seen, [1, 2, 3]);
  assert.equal(client.lastSeq, 3);
});

test("a reconnect resumes from the last delivered seq and skips replayed duplicates", async () => {
  const { client, Fake, clock, socket } = await connected();
  const seen = [];
  client.onEvent((frame) => seen.push(frame.seq));
  socket.serverSend(delta(1, "a"));
  socket.serverSend(delta(2, "b"));

  socket.serverClose(1006);
  assert.equal(client.state, "connecting");
  clock.fire(clock.reconnectTimers()[0]);
  const resumeResult = { ...HANDSHAKE_RESULT, resume: { outcome: "resumed", replayed: 2 } };
  const handshake = completeHandshake(Fake, 1, resumeResult);
  assert.deepEqual(handshake.params.resume, { session_id: "s1", epoch: "e1", after_seq: 2 });
  assert.equal(client.state, "connected");

  const again = Fake.sockets[1];
  for (const seq of [2, 3, 4]) again.serverSend(delta(seq, "c"));
  assert.deepEqual(seen, [1, 2, 3, 4]);
});

test("a reset or a new session restarts the seq line", async () => {
  const { client, Fake, clock, socket } = await connected();
  const seen = [];
  client.onEvent((frame) => seen.push(frame.seq));
  socket.serverSend(delta(7, "old epoch"));
  socket.serverClose(1006);
  clock.fire(clock.reconnectTimers()[0]);
  completeHandshake(Fake, 1, { ...HANDSHAKE_RESULT, epoch: "e2", resume: { outcome: "reset" } });
  assert.equal(client.lastSeq, 0);
  Fake.sockets[1].serverSend(delta(1, "new epoch"));
  assert.deepEqual(seen, [7, 1]);

  // Switching session follows the other session's numbering too.
  const switching = client.request("sessions.switch", { session_id: "s2" });
  Fake.sockets[1].serverSend({ id: Fake.sockets[1].lastRequest().id, result: { session_id: "s2" } });
  await switching;
  assert.equal(client.sessionId, "s2");
  assert.equal(client.lastSeq, 0);
});

test("reconnect backoff is 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s capped, and resets after success", async () => {
  const { client, Fake, clock, socket } = await connected();
  socket.serverClose(1006);
  const delays = [];
  for (let attempt = 0; attempt < 8; attempt += 1) {
    const [timer] = clock.reconnectTimers();
    delays.push(timer.ms);
    clock.fire(timer);
    assert.equal(client.state, "connecting");
    Fake.sockets.at(-1).serverClose(1006); // the attempt fails before the handshake
  }
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.deepEqual(RECONNECT_DELAYS_MS, [1000, 2000, 4000, 8000, 16000, 30000]);

  const [timer] = clock.reconnectTimers();
  clock.fire(timer);
  completeHandshake(Fake, Fake.sockets.length - 1);
  assert.equal(client.state, "connected");
  assert.equal(clock.reconnectTimers().length, 0);

  Fake.sockets.at(-1).serverClose(1006);
  assert.deepEqual(clock.reconnectTimers().map((t) => t.ms), [1000]);
});

test("no reconnect after disconnect(), a 1008 close, or version_incompatible", async () => {
  {
    const { client, clock, socket } = await connected();
    const pending = client.request("system.ping");
    await client.disconnect();
    await assert.rejects(pending, { code: "disconnected" });
    assert.equal(socket.closedByClient.code, 1000);
    socket.serverClose(1000);
    assert.equal(client.state, "disconnected");
    assert.equal(clock.reconnectTimers().length, 0);
  }
  {
    const { client, clock, socket } = await connected();
    socket.serverClose(1008, "unauthorized");
    assert.equal(client.state, "disconnected");
    assert.equal(clock.reconnectTimers().length, 0);
  }
  {
    const { client, Fake, clock } = setup();
    const done = client.connect();
    const socket = Fake.sockets[0];
    socket.serverOpen();
    socket.serverSend({
      id: socket.sentText()[0].id,
      error: { code: "version_incompatible", message: "major differs", data: { server: "2.0", client: "1.0" } },
    });
    await assert.rejects(done, { code: "version_incompatible", data: { server: "2.0", client: "1.0" } });
    socket.serverClose(1002);
    assert.equal(client.state, "disconnected");
    assert.equal(clock.reconnectTimers().length, 0);
    assert.equal(Fake.sockets.length, 1);
  }
});

test("connect() rejects when the socket closes before the handshake", async () => {
  const { client, Fake, clock } = setup();
  const done = client.connect();
  Fake.sockets[0].serverClose(1008, "unauthorized");
  await assert.rejects(done, { code: "connection_closed", data: { code: 1008, reason: "unauthorized" } });
  assert.equal(client.state, "disconnected");
  assert.equal(clock.reconnectTimers().length, 0);
});

test("version skew is a state of its own", async () => {
  const { client, Fake } = setup();
  const done = client.connect();
  completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, protocol_version: "1.0", version_skew: true });
  await done;
  assert.equal(client.state, "version_skew");
  client.request("system.ping").catch(() => {});
  assert.equal(Fake.sockets[0].lastRequest().method, "system.ping", "requests still flow");
});

test("channel frames are numbered per channel from 0 and decoded for onChannel", async (t) => {
  const warn = t.mock.method(console, "warn", () => {});
  const { client, socket } = await connected();
  assert.equal(client.sendChannelBinary("mic", new Uint8Array([1, 2])), 0);
  assert.equal(client.sendChannelBinary("mic", new Uint8Array([3]).buffer), 1);
  assert.equal(client.sendChannelEvent("ui", "resize", { w: 1 }), 0);
  assert.equal(client.sendChannelEvent("mic", "mute", null), 2);
  const sent = socket.sent.filter((d) => typeof d !== "string").map((d) => decodeChannelFrame(d));
  assert.deepEqual(
    sent.map((f) => [f.channel, f.seq, f.kind]),
    [["mic", 0, "binary"], ["mic", 1, "binary"], ["ui", 0, "event"], ["mic", 2, "event"]],
  );
  assert.deepEqual([...sent[0].payload], [1, 2]);

  const mic = [];
  const all = [];
  client.onChannel("mic", (frame) => mic.push(frame));
  client.onChannel("*", (frame) => all.push(frame.channel));
  const inbound = encodeChannelFrame({ kind: "event", channel: "mic", seq: 40, event: "level", payload: -3 });
  socket.serverSend(inbound.slice().buffer);
  socket.serverSend(encodeChannelFrame({ kind: "binary", channel: "ui", seq: 1, payload: new Uint8Array(1) }).buffer);
  socket.serverSend(new Uint8Array([1, 2, 3]).buffer); // malformed: dropped with a warning
  assert.deepEqual(mic, [{ kind: "event", channel: "mic", seq: 40, event: "level", payload: -3 }]);
  assert.deepEqual(all, ["mic", "ui"]);
  assert.equal(warn.mock.callCount(), 1);
});

test("channel sends before the handshake throw not_connected", () => {
  const { client } = setup();
  assert.throws(() => client.sendChannelEvent("ui", "x", 1), { code: "not_connected" });
});

test("a request from the server is answered with method_not_found", async () => {
  const { socket } = await connected();
  socket.serverSend({ id: "s-1", method: "client.poke", params: {} });
  assert.deepEqual(socket.lastRequest(), {
    id: "s-1",
    error: { code: "method_not_found", message: "this client does not serve client.poke", effect_state: "none" },
  });
});

test("a handshake without an answer rejects connect() with timeout and stops the transport", async () => {
  const { client, Fake, clock } = setup();
  const done = client.connect();
  const socket = Fake.sockets[0];
  socket.serverOpen();
  clock.fire(clock.pending().find((t) => t.ms === REQUEST_TIMEOUT_MS));
  await assert.rejects(done, { code: "timeout" });
  assert.equal(socket.closedByClient.code, 1000);
  assert.equal(client.state, "disconnected");
  assert.equal(client.transport.state, "disconnected");
  assert.equal(client.lastError.code, "timeout");
  assert.equal(clock.reconnectTimers().length, 0);
});

test("lastError says why the client stopped, also after a failed reconnect, and clears on success", async () => {
  const { client, Fake, clock, socket } = await connected();
  assert.equal(client.lastError, null);
  socket.serverClose(1006);
  assert.equal(client.state, "connecting", "an unexpected break is retried");
  assert.equal(client.lastError, null, "still trying: nothing to report yet");
  clock.fire(clock.reconnectTimers()[0]);
  // The server came back with another token: the redial is refused with 1008, and no connect()
  // call is waiting to hear it.
  Fake.sockets[1].serverClose(1008, "unauthorized");
  assert.equal(client.state, "disconnected");
  assert.equal(client.lastError.code, "connection_closed");
  assert.deepEqual(client.lastError.data, { code: 1008, reason: "unauthorized" });

  const done = client.connect();
  completeHandshake(Fake, 2);
  await done;
  assert.equal(client.lastError, null);

  const failed = setup();
  const attempt = failed.client.connect();
  const refused = failed.Fake.sockets[0];
  refused.serverOpen();
  refused.serverSend({ id: refused.sentText()[0].id, error: { code: "version_incompatible", message: "major differs" } });
  await assert.rejects(attempt, { code: "version_incompatible" });
  assert.equal(failed.client.lastError.code, "version_incompatible");
});

// -- over any Transport ---------------------------------------------------------------------------

/**
 * The smallest object that keeps the Transport contract, with the server played by the test:
 * what an extension's own transport looks like to CarrierClient.
 */
function memoryTransport() {
  const messageHandlers = new Set();
  const stateHandlers = new Set();
  const transport = {
    state: "disconnected",
    lastClose: null,
    sent: [],
    connects: 0,
    async connect() {
      transport.connects += 1;
      transport.setState("connecting");
      transport.setState("connected");
    },
    async disconnect() {
      transport.setState("disconnected");
    },
    send(frame) {
      if (transport.state !== "connected") throw Object.assign(new Error("not connected"), { code: "not_connected" });
      transport.sent.push(frame instanceof Uint8Array ? frame : structuredClone(frame));
    },
    onMessage(handler) {
      messageHandlers.add(handler);
      return { dispose: () => messageHandlers.delete(handler) };
    },
    onStateChange(handler) {
      stateHandlers.add(handler);
      return { dispose: () => stateHandlers.delete(handler) };
    },
    // -- test side --
    setState(next) {
      const previous = transport.state;
      if (previous === next) return;
      transport.state = next;
      for (const handler of [...stateHandlers]) handler(next, previous);
    },
    deliver(frame) {
      for (const handler of [...messageHandlers]) handler(frame);
    },
    text() {
      return transport.sent.filter((f) => !(f instanceof Uint8Array));
    },
  };
  return transport;
}

async function onMemory(options = {}, result = HANDSHAKE_RESULT) {
  const transport = memoryTransport();
  const clock = fakeTimers();
  const client = new CarrierClient(transport, {
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    setTimeout: clock.setTimeout,
    clearTimeout: clock.clearTimeout,
    ...options,
  });
  const done = client.connect();
  await new Promise((resolve) => setImmediate(resolve));
  const [handshake] = transport.text();
  transport.deliver({ id: handshake.id, result });
  await done;
  return { client, transport, handshake };
}

test("over a custom transport: the handshake is the first frame and requests are correlated", async () => {
  const { client, transport, handshake } = await onMemory();
  assert.equal(transport.connects, 1);
  assert.equal(handshake.method, "system.handshake");
  assert.equal(client.state, "connected");
  assert.equal(client.transport, transport);
  const submitted = client.request("session.submit", { prompt: "hi" });
  const request = transport.text().at(-1);
  assert.deepEqual([request.method, request.params], ["session.submit", { prompt: "hi" }]);
  transport.deliver({ id: request.id, result: { turn_id: "t1" } });
  assert.deepEqual(await submitted, { turn_id: "t1" });

  const events = [];
  client.onEvent((frame) => events.push(frame.payload.delta));
  transport.deliver(delta(1, "echo:"));
  transport.deliver(delta(1, "echo:"));
  transport.deliver(delta(2, " hi"));
  assert.deepEqual(events, ["echo:", " hi"]);

  assert.equal(client.sendChannelEvent("ui", "resize", { w: 1 }), 0);
  const frame = decodeChannelFrame(transport.sent.at(-1));
  assert.deepEqual([frame.channel, frame.event, frame.payload], ["ui", "resize", { w: 1 }]);
  const inbound = [];
  client.onChannel("ui", (f) => inbound.push(f.event));
  transport.deliver(encodeChannelFrame({ kind: "event", channel: "ui", seq: 5, event: "focus", payload: null }));
  assert.deepEqual(inbound, ["focus"]);
});

test("a transport that is already open gets the handshake at once; one without the methods is refused", async () => {
  const transport = memoryTransport();
  await transport.connect();
  const client = new CarrierClient(transport, { requestTimeoutMs: 1000 });
  const done = client.connect();
  assert.equal(transport.connects, 1, "not connected twice");
  const [handshake] = transport.text();
  assert.equal(handshake.method, "system.handshake");
  transport.deliver({ id: handshake.id, result: HANDSHAKE_RESULT });
  await done;
  assert.throws(() => new CarrierClient({ send() {} }), TypeError);
  assert.throws(() => new CarrierClient(memoryTransport(), { token: "t" }), TypeError);
});

test("a transport that redials is resumed, with each typed outcome", async () => {
  const { client, transport } = await onMemory();
  const seen = [];
  client.onEvent((frame) => seen.push(frame.seq));
  transport.deliver(delta(1, "a"));
  transport.deliver(delta(2, "b"));
  const pending = client.request("system.ping");
  transport.setState("connecting");
  await assert.rejects(pending, { code: "connection_closed", effectState: "unknown" });
  assert.equal(client.state, "connecting");

  // gap: events 3..4 are lost, the seq line continues.
  transport.setState("connected");
  let handshake = transport.text().at(-1);
  assert.deepEqual(handshake.params.resume, { session_id: "s1", epoch: "e1", after_seq: 2 });
  transport.deliver({ id: handshake.id, result: { ...HANDSHAKE_RESULT, resume: { outcome: "gap", from: 3, to: 4 } } });
  assert.equal(client.state, "connected");
  assert.deepEqual(client.handshakeResult.resume, { outcome: "gap", from: 3, to: 4 });
  for (const seq of [2, 5]) transport.deliver(delta(seq, "c"));
  assert.deepEqual(seen, [1, 2, 5]);

  // reset: the server restarted; numbering starts over.
  transport.setState("connecting");
  transport.setState("connected");
  handshake = transport.text().at(-1);
  assert.deepEqual(handshake.params.resume, { session_id: "s1", epoch: "e1", after_seq: 5 });
  transport.deliver({ id: handshake.id, result: { ...HANDSHAKE_RESULT, epoch: "e2", resume: { outcome: "reset" } } });
  assert.equal(client.lastSeq, 0);
  transport.deliver(delta(1, "d"));
  assert.deepEqual(seen, [1, 2, 5, 1]);

  // The transport gives up (a refusal): the client stops and says why.
  transport.lastClose = { code: 1008, reason: "unauthorized" };
  transport.setState("disconnected");
  assert.equal(client.state, "disconnected");
  assert.deepEqual(client.lastError.data, { code: 1008, reason: "unauthorized" });
});

test("a break before the first handshake completes fails connect() and stops the transport", async () => {
  const transport = memoryTransport();
  const client = new CarrierClient(transport, { requestTimeoutMs: 1000 });
  const done = client.connect();
  await new Promise((resolve) => setImmediate(resolve));
  transport.lastClose = { code: 1011, reason: "internal" };
  transport.setState("connecting");
  await assert.rejects(done, { code: "connection_closed", data: { code: 1011, reason: "internal" } });
  assert.equal(client.state, "disconnected");
  assert.equal(transport.state, "disconnected", "the client told the transport to stop redialling");
});

test("a channel only the host sends on (or in an unknown direction) refuses sends locally", async () => {
  const channels = [
    { name: "diagnostics", events: ["report"], binary: true, direction: "host_to_clients" },
    { name: "future", events: ["*"], binary: true, direction: "sideways" },
    { name: "mic", events: ["*"], binary: true },
    { name: "both", events: ["*"], binary: true, direction: "both" },
  ];
  const { client, transport } = await onMemory({}, { ...HANDSHAKE_RESULT, channels });
  const before = transport.sent.length;
  for (const channel of ["diagnostics", "future"]) {
    assert.throws(() => client.sendChannelBinary(channel, new Uint8Array(1)), { code: "forbidden" });
    assert.throws(() => client.sendChannelEvent(channel, "report", {}), { code: "forbidden" });
    await assert.rejects(client.sendChannelBulk(channel, new Uint8Array(1)), { code: "forbidden" });
  }
  assert.equal(transport.sent.length, before, "nothing was sent");
  assert.equal(client.sendChannelBinary("mic", new Uint8Array(1)), 0);
  assert.equal(client.sendChannelBinary("both", new Uint8Array(1)), 0);
});

test("role observe refuses drive methods and channel sends locally, sending nothing", async () => {
  for (const [options, granted] of [[{ role: "observe" }, "drive"], [{}, "observe"]]) {
    const { client, transport } = await onMemory(options, { ...HANDSHAKE_RESULT, role: granted });
    const before = transport.sent.length;
    await assert.rejects(client.request("session.submit", { prompt: "hi" }), (err) => {
      assert.equal(err.code, "forbidden");
      assert.equal(err.effectState, "none");
      assert.deepEqual(err.data, { least_role: "drive", role: "observe" });
      return true;
    });
    assert.throws(() => client.sendChannelBinary("mic", new Uint8Array(1)), { code: "forbidden" });
    assert.equal(transport.sent.length, before);
    client.request("session.history", { limit: 1 }).catch(() => {});
    assert.equal(transport.text().at(-1).method, "session.history", "observe methods still go out");
  }
});

test("the client judges the server's versions itself, whatever version_skew says", async () => {
  for (const [result, state] of [
    [{ ...HANDSHAKE_RESULT, protocol_version: "1.3", version_skew: false }, "version_skew"],
    [{ ...HANDSHAKE_RESULT, version_skew: true }, "connected"],
  ]) {
    const { client, Fake } = setup();
    const done = client.connect();
    completeHandshake(Fake, 0, result);
    const got = await done;
    assert.equal(client.state, state, JSON.stringify(result));
    assert.equal(got.version_skew, state === "version_skew");
  }
  // A successful answer this client cannot talk to is refused like the server refuses a client.
  for (const [version, min] of [["2.0", "2.0"], ["1.3", "1.3"], ["0.9", "0.9"]]) {
    const { client, Fake, clock } = setup();
    const done = client.connect();
    completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, protocol_version: version, min_compatible_protocol: min });
    await assert.rejects(done, (err) => {
      assert.equal(err.code, "version_incompatible");
      assert.equal(err.effectState, "none");
      assert.deepEqual(err.data.server, { protocol_version: version, min_compatible_protocol: min });
      assert.deepEqual(err.data.client, { protocol_version: "1.2", min_compatible_protocol: "1.0" });
      return true;
    });
    assert.equal(client.state, "disconnected", version);
    assert.equal(clock.reconnectTimers().length, 0, version);
    assert.equal(Fake.sockets.length, 1, version);
  }
  // Versions the protocol cannot read ("01.0") are not taken for 1.0.
  {
    const { client, Fake } = setup();
    const done = client.connect();
    completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, protocol_version: "01.0" });
    await assert.rejects(done, { code: "protocol_error" });
    assert.equal(client.state, "disconnected");
  }
});

test("a usage.report scope the server lacks is refused locally and sends nothing", async () => {
  const features = { ...HANDSHAKE_RESULT.features, "usage.session": true, "usage.stored": false };
  const { client, Fake } = setup();
  const done = client.connect();
  completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, features });
  await done;
  const socket = Fake.sockets[0];
  const before = socket.sent.length;
  await assert.rejects(client.request("usage.report", { scope: "stored" }), (err) => {
    assert.equal(err.code, "unsupported_feature");
    assert.equal(err.effectState, "none");
    assert.equal(err.data.feature, "usage.stored");
    return true;
  });
  assert.equal(socket.sent.length, before);
  // The scopes it has (and the default, session) go out.
  client.request("usage.report", {}).catch(() => {});
  assert.equal(socket.lastRequest().method, "usage.report");
  client.request("usage.report", { scope: "session" }).catch(() => {});
  assert.equal(socket.sent.length, before + 2);
});

test("each subscription is its own: the same handler twice is called twice, disposing one keeps the other", async () => {
  const { client, socket } = await connected();
  const seen = [];
  const handler = (frame) => seen.push(frame.seq);
  const first = client.onEvent(handler);
  const second = client.onEvent(handler);
  socket.serverSend(delta(1, "a"));
  assert.deepEqual(seen, [1, 1]);
  first.dispose();
  first.dispose();
  socket.serverSend(delta(2, "b"));
  assert.deepEqual(seen, [1, 1, 2]);
  second.dispose();
  socket.serverSend(delta(3, "c"));
  assert.deepEqual(seen, [1, 1, 2]);
});

// -- inbound credit on bulk channels (protocol 1.1) -------------------------------------------

const BULK = { name: "up", events: ["*"], binary: true, delivery: "bulk" };

/** Binary frames sent so far on `channel`, decoded. */
function sentFrames(socket, channel) {
  return socket.sent
    .filter((d) => typeof d !== "string")
    .map((d) => decodeChannelFrame(d))
    .filter((f) => f.channel === channel);
}

test("a bulk send waits for credit, never sends past it, and keeps its order", async () => {
  const { client, Fake } = setup();
  const done = client.connect();
  completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, channels: [{ ...BULK, credit: 100 }] });
  await done;
  const socket = Fake.sockets[0];
  assert.equal(client.creditOf("up"), 100);
  const first = client.sendChannelBulk("up", new Uint8Array(60));
  const second = client.sendChannelBulk("up", new Uint8Array(60));
  const third = client.sendChannelBulk("up", new Uint8Array(10));
  assert.equal(await first, 0);
  assert.deepEqual(sentFrames(socket, "up").map((f) => f.payload.length), [60], "40 left: the second waits, and the third behind it");
  // A synchronous send may not jump the queue or pass the credit.
  assert.throws(() => client.sendChannelBinary("up", new Uint8Array(1)), { code: "credit_exhausted" });
  socket.serverSend({ event: "channel.credit", payload: { channel: "up", bytes: 10 } });
  assert.equal(sentFrames(socket, "up").length, 1, "50 < 60: still waiting");
  socket.serverSend({ event: "channel.credit", payload: { channel: "other", bytes: 1000 } });
  assert.equal(sentFrames(socket, "up").length, 1, "another channel's credit is not this one's");
  socket.serverSend({ event: "channel.credit", payload: { channel: "up", bytes: 20 } });
  assert.equal(await second, 1);
  assert.equal(await third, 2);
  assert.deepEqual(sentFrames(socket, "up").map((f) => [f.seq, f.payload.length]), [[0, 60], [1, 60], [2, 10]]);
  assert.equal(client.creditOf("up"), 0);
  // Over the whole credit: could never go, refused at once.
  await assert.rejects(client.sendChannelBulk("up", new Uint8Array(101)), { code: "too_large" });
});

test("bulk sends waiting for credit are rejected when the pipe breaks, nothing sent", async () => {
  const { client, Fake } = setup();
  const done = client.connect();
  completeHandshake(Fake, 0, { ...HANDSHAKE_RESULT, channels: [{ ...BULK, credit: 10 }] });
  await done;
  const socket = Fake.sockets[0];
  const waiting = client.sendChannelBulk("up", new Uint8Array(8));
  const blocked = client.sendChannelBulk("up", new Uint8Array(8));
  assert.equal(await waiting, 0);
  client.disconnect();
  await assert.rejects(blocked, (err) => ["disconnected", "connection_closed"].includes(err.code));
  assert.equal(sentFrames(socket, "up").length, 1);
});

test("against a 1.0 server no credit is expected: bulk sends go at once", async () => {
  const { client, Fake } = setup();
  const done = client.connect();
  completeHandshake(Fake, 0, {
    ...HANDSHAKE_RESULT,
    protocol_version: "1.0",
    version_skew: true,
    features: { ...HANDSHAKE_RESULT.features, bulk_credit: false },
    channels: [BULK],
  });
  await done;
  assert.equal(client.state, "version_skew");
  assert.equal(client.creditOf("up"), null);
  const socket = Fake.sockets[0];
  const seqs = await Promise.all([0, 1, 2, 3].map(() => client.sendChannelBulk("up", new Uint8Array(1 << 20))));
  assert.deepEqual(seqs, [0, 1, 2, 3]);
  assert.equal(sentFrames(socket, "up").length, 4, "4 MiB sent without any grant");
  assert.equal(client.sendChannelBinary("up", new Uint8Array(5)), 4);
});
