// The JavaScript package (js/) against the host of examples/embedded_agent.rs, which the Rust
// test tests/it/example_embedded_agent.rs starts and names in CARRIER_URL and CARRIER_TOKEN:
// a turn whose permission prompt is answered, a `cpu` event of `telemetry`, and the `ack`s of
// `audio`. Without those variables every test fails: it is only meant to run from that test.
import { describe, test } from "node:test";
import assert from "node:assert/strict";

import { CarrierClient } from "../../js/index.js";
import { waitFor } from "../../js/testing/clock.js";
import { webSocketClass } from "../../js/testing/websocket-class.js";

const WebSocket = await webSocketClass();
const url = process.env.CARRIER_URL;
const token = process.env.CARRIER_TOKEN;

/** @param {(client: CarrierClient) => Promise<void>} body */
async function withClient(body) {
  assert.ok(url && token, "CARRIER_URL and CARRIER_TOKEN are set");
  const client = new CarrierClient(url, { token, WebSocket, clientName: "node-embedded-agent" });
  try {
    const hello = await client.connect();
    const names = hello.channels.map((c) => c.name).sort();
    assert.deepEqual(names, ["audio", "telemetry"]);
    await body(client);
  } finally {
    await client.disconnect();
  }
}

describe("the embedded_agent example's host, from the JavaScript package", () => {
  test("a prompt with rm asks first; allowed, it streams back reversed", () =>
    withClient(async (client) => {
      const events = [];
      const subscription = client.onEvent((frame) => {
        events.push(frame);
        if (frame.event === "session.permission_request") {
          client.request("session.permission.respond", { request_id: frame.payload.request_id, decision: "allow" });
        }
      });
      const { turn_id: turnId } = await client.request("session.submit", { prompt: "rm -rf build" });
      const done = () => events.find((e) => e.event === "session.turn_completed" && e.payload.turn_id === turnId);
      await waitFor("turn_completed", done);
      subscription.dispose();
      const ask = events.find((e) => e.event === "session.permission_request");
      assert.equal(ask.payload.request_id, `${turnId}.p1`);
      assert.equal(ask.payload.tool, "shell");
      assert.ok(events.some((e) => e.event === "session.permission_resolved"));
      const deltas = events.filter((e) => e.event === "session.text_delta").map((e) => e.payload.delta).join("");
      assert.equal(deltas, "dliub fr- mr");
      assert.equal(done().payload.text, "dliub fr- mr");
    }));

  test("telemetry: a cpu event every second", () =>
    withClient(async (client) => {
      const cpu = [];
      client.onChannel("telemetry", (frame) => {
        if (frame.kind === "event" && frame.event === "cpu") cpu.push(frame.payload);
      });
      await waitFor("two cpu events", () => cpu.length >= 2, 5_000);
      assert.equal(cpu[1].tick, cpu[0].tick + 1);
    }));

  test("audio: each frame is acked with the running byte count", () =>
    withClient(async (client) => {
      const acks = [];
      client.onChannel("audio", (frame) => {
        if (frame.kind === "event" && frame.event === "ack") acks.push(frame.payload.bytes);
      });
      client.sendChannelBinary("audio", new Uint8Array(100));
      await waitFor("the first ack", () => acks.length === 1);
      client.sendChannelBinary("audio", new Uint8Array(50));
      await waitFor("the second ack", () => acks.length === 2);
      // Acks count every byte the host received so far; these two frames add 150.
      assert.equal(acks[1] - acks[0], 50);
      assert.ok(acks[0] >= 100);
    }));
});
