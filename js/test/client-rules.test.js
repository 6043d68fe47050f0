// The client rules both clients implement, run on the JavaScript side: the cases of
// protocol/tests/vectors/client-rules.json against the version judgement and feature preflight
// functions and, over a transport played by the test, against CarrierClient itself (versions at
// the handshake, preflight after it, the seq line across reconnects and session switches, bulk
// credit). The Rust client runs the same file (client/tests/it/rules.rs).
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { CarrierClient, decodeChannelFrame, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "../client.js";
import { preflight } from "../preflight.js";
import { assessVersions } from "../versions.js";

// A copy of the package elsewhere (the no-installs run) points CARRIER_CLIENT_RULES at the file.
const rulesPath = process.env.CARRIER_CLIENT_RULES ?? new URL("../../protocol/tests/vectors/client-rules.json", import.meta.url);
const rules = JSON.parse(readFileSync(rulesPath, "utf8"));

/** The base handshake result with `overrides`' top-level fields in place of its own. */
const handshakeResult = (overrides = {}) => ({ ...structuredClone(rules.handshake_result), ...structuredClone(overrides) });

/** A transport whose server is the test: what CarrierClient sees of any Transport. */
function scriptedTransport() {
  const messages = new Set();
  const states = new Set();
  const transport = {
    state: "disconnected",
    lastClose: null,
    sent: [],
    async connect() {
      transport.setState("connecting");
      transport.setState("connected");
    },
    async disconnect() {
      transport.setState("disconnected");
    },
    send(frame) {
      if (transport.state !== "connected") throw new Error("not connected");
      transport.sent.push(frame instanceof Uint8Array ? frame : structuredClone(frame));
    },
    onMessage: (handler) => (messages.add(handler), { dispose: () => messages.delete(handler) }),
    onStateChange: (handler) => (states.add(handler), { dispose: () => states.delete(handler) }),
    setState(next) {
      const previous = transport.state;
      transport.state = next;
      for (const handler of [...states]) handler(next, previous);
    },
    deliver(frame) {
      for (const handler of [...messages]) handler(frame);
    },
    lastText: () => transport.sent.filter((f) => !(f instanceof Uint8Array)).at(-1),
    binary: () => transport.sent.filter((f) => f instanceof Uint8Array).map((f) => decodeChannelFrame(f)),
  };
  return transport;
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

/** A client over a scripted transport, and a way to open a pipe and answer its handshake. */
function scriptedClient() {
  const transport = scriptedTransport();
  // No timer ever fires here: the rules do not depend on time, and none keeps the run alive.
  const client = new CarrierClient(transport, { setTimeout: () => null, clearTimeout: () => {} });
  client.connect().catch(() => {});
  let opened = false;
  /** Opens a new pipe (a reconnect after the first), returns the handshake's params, and answers it with `result`. */
  async function handshake(result) {
    if (opened) {
      transport.setState("connecting");
      transport.setState("connected");
    }
    opened = true;
    await settled();
    const request = transport.lastText();
    assert.equal(request.method, "system.handshake");
    transport.deliver({ id: request.id, result });
    await settled();
    return request.params;
  }
  return { client, transport, handshake };
}

const name = (c) => c.case;
const isOurs = (pair) => pair.protocol_version === PROTOCOL_VERSION && pair.min_compatible_protocol === MIN_COMPATIBLE_PROTOCOL;
/** The error as the cases compare it: code, effect and data (messages are each client's). */
const wire = (err) => (err === null ? null : { code: err.code, effect_state: err.effectState, data: err.data });

describe("shared client rules", () => {
  test("the rule file has cases of every kind", () => {
    for (const kind of ["versions", "preflight", "sessions", "credit"]) assert.ok(rules[kind].length > 0, kind);
  });

  for (const c of rules.versions) {
    test(`versions: ${name(c)}`, async () => {
      const verdict = assessVersions(c.client, c.server) ?? { verdict: "unreadable" };
      assert.deepEqual(verdict, c.expect);
      if (!isOurs(c.client)) return;
      // This build's client judges the server's handshake result the same way.
      const { client, handshake } = scriptedClient();
      const done = client.connect();
      await handshake(handshakeResult(c.server));
      const outcome = await done.then(() => null, (err) => err);
      if (c.expect.verdict === "compatible" || c.expect.verdict === "skew") {
        assert.equal(outcome, null);
        assert.equal(client.state, c.expect.verdict === "skew" ? "version_skew" : "connected");
        assert.equal(client.handshakeResult.version_skew, c.expect.verdict === "skew");
      } else if (c.expect.verdict === "incompatible") {
        assert.deepEqual(wire(outcome), { code: "version_incompatible", effect_state: "none", data: { server: c.server, client: c.client } });
        assert.equal(client.state, "disconnected");
      } else {
        assert.equal(outcome?.code, "protocol_error");
        assert.equal(client.state, "disconnected");
      }
    });
  }

  for (const c of rules.preflight) {
    test(`preflight: ${name(c)}`, async () => {
      assert.deepEqual(wire(preflight(c.method, c.params, c.server)), c.expect);
      const verdict = assessVersions({ protocol_version: PROTOCOL_VERSION, min_compatible_protocol: MIN_COMPATIBLE_PROTOCOL }, {
        protocol_version: c.server.protocol_version,
        min_compatible_protocol: c.server.protocol_version,
      });
      if (verdict?.verdict === "incompatible") return;
      // Against a server this build can talk to, the client refuses the same after its handshake.
      const { client, transport, handshake } = scriptedClient();
      await handshake(handshakeResult(c.server));
      const before = transport.sent.length;
      const request = client.request(c.method, c.params);
      if (c.expect === null) {
        request.catch(() => {});
        assert.equal(transport.lastText().method, c.method, "the request went out");
      } else {
        assert.deepEqual(wire(await request.then(() => null, (err) => err)), c.expect);
        assert.equal(transport.sent.length, before, "nothing was sent");
      }
    });
  }

  for (const c of rules.sessions) {
    test(`sessions: ${name(c)}`, async () => {
      const { client, transport, handshake } = scriptedClient();
      const delivered = [];
      client.onEvent((frame) => delivered.push(frame.seq));
      for (const step of c.steps) {
        if (step.connect) {
          const params = await handshake(handshakeResult(step.connect));
          assert.deepEqual(params.resume ?? null, step.asks);
        } else if (step.events) {
          delivered.length = 0;
          for (const seq of step.events) transport.deliver({ event: "session.text_delta", seq, payload: { turn_id: "t", delta: "x" } });
          assert.deepEqual(delivered, step.delivered);
        } else if (step.answered) {
          const call = client.request(step.answered, step.params);
          transport.deliver({ id: transport.lastText().id, result: step.result });
          await call;
        } else {
          assert.fail(`unknown step ${JSON.stringify(step)}`);
        }
      }
    });
  }

  for (const c of rules.credit) {
    test(`credit: ${name(c)}`, async () => {
      const { client, transport, handshake } = scriptedClient();
      await handshake(handshakeResult(c.connect));
      /** What the one waiting send came to: "waits", {sent: seq} or an error code. */
      let waiting = null;
      const outcomeOf = (step, state) => {
        const expected = step.then === "sent" ? { sent: step.seq } : step.then;
        assert.deepEqual(state, expected, JSON.stringify(step));
      };
      for (const step of c.steps) {
        if (step.send) {
          assert.equal(waiting, null, "one waiting send at a time");
          const send = { state: "waits" };
          client.sendChannelBulk(step.send.channel, new Uint8Array(step.send.bytes)).then(
            (seq) => (send.state = { sent: seq }),
            (err) => (send.state = err.code),
          );
          await settled();
          outcomeOf(step, send.state);
          if (send.state === "waits") waiting = send;
        } else if (step.grant) {
          transport.deliver({ event: "channel.credit", payload: step.grant });
          await settled();
          if (waiting) {
            outcomeOf(step, waiting.state);
            if (waiting.state !== "waits") waiting = null;
          }
        } else if (step.credit) {
          for (const [channel, left] of Object.entries(step.credit)) assert.equal(client.creditOf(channel), left, channel);
        } else if (step.reconnect) {
          await handshake(handshakeResult(c.connect));
        } else {
          assert.fail(`unknown step ${JSON.stringify(step)}`);
        }
      }
      // What went out is what the cases say went out: each sent frame's seq and size.
      const sent = c.steps.filter((s) => s.then === "sent" && s.send).length + c.steps.filter((s) => s.grant && s.then === "sent").length;
      assert.equal(transport.binary().length, sent);
    });
  }
});
