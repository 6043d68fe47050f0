// The reference suite and full prompt turns against a real `carrier serve` child on 127.0.0.1,
// through a TCP proxy that can break, refuse, close and inject like a network. Needs a WebSocket
// class: Node 22's global one, or the `ws` dev dependency on Node 20 (`npm ci`).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { CarrierClient, WsTransport } from "../index.js";
import { bridgeTransport, PortTransport } from "../examples/message-port.js";
import { startCarrier } from "../testing/carrier.js";
import { ManualClock, waitFor } from "../testing/clock.js";
import { portHarness } from "../testing/port-harness.js";
import { startProxy } from "../testing/proxy.js";
import { transportSuite } from "../testing/suite.js";
import { webSocketClass } from "../testing/websocket-class.js";

const WebSocket = await webSocketClass();
/** @type {Awaited<ReturnType<typeof startCarrier>>} */
let carrier;
before(async () => {
  carrier = await startCarrier(["--channel", "echo:echo", "--channel", "bulk:echo:bulk", "--demo-delay-ms", "20"]);
});
after(async () => {
  await carrier?.stop();
});

/** @type {import("../testing/suite.js").Harness} */
const throughProxy = {
  name: "WsTransport on a real carrier (through a TCP proxy)",
  start: async () => {
    const proxy = await startProxy(carrier.port);
    const clock = new ManualClock();
    return {
      clock,
      makeTransport: ({ logger }) =>
        new WsTransport(`ws://127.0.0.1:${proxy.port}/`, {
          token: carrier.token,
          WebSocket,
          setTimeout: clock.setTimeout,
          clearTimeout: clock.clearTimeout,
          logger,
        }),
      attempts: proxy.attempts,
      admit: proxy.admit,
      breakLink: proxy.breakAll,
      closeLink: proxy.close,
      inject: proxy.inject,
      stop: proxy.stop,
    };
  },
};

transportSuite(throughProxy);
transportSuite(portHarness(throughProxy));

/**
 * Submits `prompt` and collects the turn's events until `turn_completed`.
 * @param {CarrierClient} client
 * @param {string} prompt
 */
async function runTurn(client, prompt) {
  const events = [];
  const subscription = client.onEvent((frame) => events.push(frame));
  const { turn_id: turnId } = await client.request("session.submit", { prompt });
  assert.equal(typeof turnId, "string");
  await waitFor("turn_completed", () => events.some((e) => e.event === "session.turn_completed" && e.payload.turn_id === turnId));
  subscription.dispose();
  const ofTurn = events.filter((e) => e.payload?.turn_id === turnId);
  return {
    turnId,
    events: ofTurn,
    text: ofTurn.filter((e) => e.event === "session.text_delta").map((e) => e.payload.delta).join(""),
    completed: ofTurn.find((e) => e.event === "session.turn_completed")?.payload,
  };
}

describe("CarrierClient on a real carrier", () => {
  test("built from a URL: handshake, a full prompt turn, the status, a channel echo", async () => {
    const client = new CarrierClient(`ws://127.0.0.1:${carrier.port}/`, { token: carrier.token, WebSocket, clientName: "node-test" });
    try {
      const result = await client.connect();
      assert.equal(client.state, "connected");
      assert.equal(result.role, "drive");
      assert.deepEqual(result.resume, { outcome: "new" });
      assert.ok(result.channels.some((c) => c.name === "echo"));

      const turn = await runTurn(client, "hello from node");
      assert.deepEqual(turn.events[0].payload, { turn_id: turn.turnId, driver: turn.events[0].payload.driver, prompt: "hello from node" });
      assert.equal(turn.text, "echo: hello from node");
      assert.equal(turn.completed.text, "echo: hello from node");
      assert.equal(turn.completed.aborted, false);

      const status = await client.request("session.status");
      assert.equal(status.state, "idle");
      const echoed = [];
      client.onChannel("echo", (frame) => echoed.push(frame));
      assert.equal(client.sendChannelEvent("echo", "ping", { n: 7 }), 0);
      await waitFor("the echo", () => echoed.length === 1);
      assert.deepEqual([echoed[0].event, echoed[0].payload], ["ping", { n: 7 }]);
    } finally {
      await client.disconnect();
    }
  });

  test("bulk sends count credit: 8 MiB through a 1 MiB credit, nothing refused, all echoed in order", async () => {
    const client = new CarrierClient(`ws://127.0.0.1:${carrier.port}/`, { token: carrier.token, WebSocket, clientName: "bulk-test" });
    try {
      const result = await client.connect();
      assert.equal(client.state, "connected");
      assert.equal(result.features.bulk_credit, true);
      assert.equal(result.channels.find((c) => c.name === "bulk")?.credit, 1 << 20);
      const refused = [];
      const grants = [];
      client.onEvent((frame) => {
        if (frame.event === "protocol_error") refused.push(frame.payload);
        if (frame.event === "channel.credit") grants.push(frame.payload.bytes);
      });
      const echoed = [];
      client.onChannel("bulk", (frame) => echoed.push(frame.payload[0]));
      const chunk = 64 * 1024;
      const sends = [];
      for (let i = 0; i < 128; i++) sends.push(client.sendChannelBulk("bulk", new Uint8Array(chunk).fill(i)));
      assert.ok(client.creditOf("bulk") < chunk, "the first 1 MiB went, the rest waits for credit");
      assert.deepEqual(await Promise.all(sends), [...Array(128).keys()]);
      await waitFor("every echo", () => echoed.length === 128, 20_000);
      assert.deepEqual(echoed, [...Array(128).keys()]);
      assert.deepEqual(refused, []);
      assert.ok(grants.reduce((a, b) => a + b, 0) >= 7 * (1 << 20), "credit came back as the host took the frames");
    } finally {
      await client.disconnect();
    }
  });

  test("over a MessageChannel pair bridged to a WsTransport: a full prompt turn", async () => {
    const { port1, port2 } = new MessageChannel();
    const stopBridge = bridgeTransport(port2, new WsTransport(`ws://127.0.0.1:${carrier.port}/`, { token: carrier.token, WebSocket }));
    const transport = new PortTransport(port1);
    const client = new CarrierClient(transport, { clientName: "port-test" });
    try {
      const result = await client.connect();
      assert.equal(client.state, "connected");
      assert.equal(transport.state, "connected");
      assert.equal(typeof result.session_id, "string");
      const turn = await runTurn(client, "through a message port");
      assert.equal(turn.text, "echo: through a message port");
      assert.equal(turn.completed.text, turn.text);
      const history = await client.request("session.history", { limit: 2 });
      assert.deepEqual(history.entries.map((e) => e.text), ["through a message port", "echo: through a message port"]);
    } finally {
      await client.disconnect();
      transport.close();
      stopBridge();
    }
  });

  test("a link that breaks mid-turn is resumed: every delta once, in order, outcome resumed", async () => {
    const proxy = await startProxy(carrier.port);
    const clock = new ManualClock();
    const transport = new WsTransport(`ws://127.0.0.1:${proxy.port}/`, {
      token: carrier.token,
      WebSocket,
      setTimeout: clock.setTimeout,
      clearTimeout: clock.clearTimeout,
    });
    const client = new CarrierClient(transport);
    try {
      await client.connect();
      const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ");
      const deltas = [];
      const seqs = [];
      client.onEvent((frame) => {
        if (frame.event === "session.text_delta") deltas.push(frame.payload.delta);
        if (typeof frame.seq === "number") seqs.push(frame.seq);
      });
      await client.request("session.submit", { prompt: words });
      await waitFor("a few deltas", () => deltas.length >= 3);
      await proxy.breakAll();
      await waitFor("the client to notice", () => client.state === "connecting");
      const [timer] = await waitFor("the reconnect timer", () => clock.pending().length === 1 && clock.pending());
      assert.equal(timer.ms, 1000);
      // Let the turn run on while the link is down, so there is something to replay.
      const missedFrom = deltas.length;
      await new Promise((resolve) => setTimeout(resolve, 200));
      clock.advance(1000);
      await waitFor("connected again", () => client.state === "connected");
      const { resume } = client.handshakeResult;
      assert.equal(resume.outcome, "resumed");
      assert.ok(resume.replayed > 0, JSON.stringify(resume));
      await waitFor("the turn to finish", () => deltas.join("") === `echo: ${words}`, 20_000);
      assert.ok(deltas.length > missedFrom);
      assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => seqs[0] + i), "no seq twice, none missing");
    } finally {
      await client.disconnect();
      await proxy.stop();
    }
  });

  test("a wrong token ends disconnected with the 1008 close in lastError, and no retry", async () => {
    const clock = new ManualClock();
    const client = new CarrierClient(`ws://127.0.0.1:${carrier.port}/`, {
      token: "not-the-token",
      WebSocket,
      setTimeout: clock.setTimeout,
      clearTimeout: clock.clearTimeout,
    });
    await assert.rejects(client.connect(), (err) => {
      assert.equal(err.code, "connection_closed");
      assert.equal(err.data.code, 1008);
      return true;
    });
    assert.equal(client.state, "disconnected");
    assert.equal(client.lastError.data.code, 1008);
    assert.equal(clock.pending().length, 0, "no reconnect timer, no handshake timer");
  });
});
