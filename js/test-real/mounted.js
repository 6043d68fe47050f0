// The package against a carrier that a host mounted inside its own web server at a path of its
// choosing (`examples/axum_mount.rs`, started by the Rust test that runs this file:
// cli/tests/it/js_client.rs). CARRIER_MOUNTED_HTTP is the host's base address
// (`http://127.0.0.1:PORT`), CARRIER_MOUNTED_TOKEN the token. Without them every test fails:
// this file is only meant to run from that test.
import { describe, test } from "node:test";
import assert from "node:assert/strict";

import { CarrierClient } from "../index.js";
import { waitFor } from "../testing/clock.js";
import { webSocketClass } from "../testing/websocket-class.js";

const WebSocket = await webSocketClass();
const base = process.env.CARRIER_MOUNTED_HTTP;
const token = process.env.CARRIER_MOUNTED_TOKEN;

/**
 * A turn whose permission prompt is allowed, and a channel event echoed, over `url`.
 * @param {string} url
 */
async function driveThrough(url) {
  assert.ok(base && token, "CARRIER_MOUNTED_HTTP and CARRIER_MOUNTED_TOKEN are set");
  const client = new CarrierClient(url, { token, WebSocket, clientName: "node-mounted" });
  try {
    const hello = await client.connect();
    assert.equal(client.state, "connected");
    assert.ok(hello.channels.some((c) => c.name === "echo"));

    const events = [];
    const subscription = client.onEvent((frame) => {
      events.push(frame);
      if (frame.event === "session.permission_request") {
        client.request("session.permission.respond", { request_id: frame.payload.request_id, decision: "allow" });
      }
    });
    const { turn_id: turnId } = await client.request("session.submit", { prompt: "/tool list the inbox" });
    await waitFor("turn_completed", () => events.some((e) => e.event === "session.turn_completed" && e.payload.turn_id === turnId));
    subscription.dispose();
    const names = events.map((e) => e.event);
    assert.ok(names.includes("session.permission_request"), names.join());
    assert.ok(names.includes("session.permission_resolved"), names.join());
    const completed = events.find((e) => e.event === "session.turn_completed");
    assert.equal(completed.payload.text, "tool ran: list the inbox");

    const echoed = [];
    client.onChannel("echo", (frame) => echoed.push(frame));
    client.sendChannelEvent("echo", "ping", { n: 7 });
    await waitFor("the echo", () => echoed.length === 1);
    assert.deepEqual([echoed[0].event, echoed[0].payload], ["ping", { n: 7 }]);
  } finally {
    await client.disconnect();
  }
}

describe("a carrier mounted in a host's server", () => {
  test("under a prefix (nest_service): a permission turn and a channel echo at /agent", async () => {
    await driveThrough(`${base?.replace(/^http/, "ws")}/agent`);
  });
  test("at one route (route_service): a permission turn and a channel echo at /ws", async () => {
    await driveThrough(`${base?.replace(/^http/, "ws")}/ws`);
  });
  test("the console and every module it imports are served under the prefix", async () => {
    const page = await fetch(`${base}/agent/console`);
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /from "\.\/client\.js"/);
    const module = await fetch(new URL("client.js", `${base}/agent/console`));
    assert.equal(module.status, 200);
    assert.equal(module.headers.get("content-type"), "text/javascript");
    // The module graph loads as a browser would resolve it: relative to the served URL.
    const text = await module.text();
    for (const [, name] of text.matchAll(/from "\.\/([a-z]+\.js)"/g)) {
      const imported = await fetch(new URL(name, `${base}/agent/client.js`));
      assert.equal(imported.status, 200, name);
    }
  });
});
