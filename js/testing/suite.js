/**
 * The reference suite of the transport contract (docs/protocol.md, "Client behaviour"). Every
 * transport in this package runs it — `WsTransport` on a fake socket, on a real WebSocket peer and
 * on a real carrier, and the `MessagePort` pair of `examples/message-port.js` over each — and a new
 * transport should too: write a harness for it (see {@link Harness}) and call
 * `transportSuite(harness)` from a `node --test` file.
 *
 * The peer behind a harness answers every request `{id, method}` with one response carrying
 * that id and echoes binary channel frames of the `echo` channel; a real carrier does both (with
 * `--channel echo:echo`), and so do the scripted peers in `fake-socket.js` and the real-socket
 * tests.
 *
 * @module carrier-client/testing/suite
 */

import { describe, test } from "node:test";
import assert from "node:assert/strict";

import { decodeChannelFrame, encodeChannelFrame } from "../frames.js";
import { waitFor } from "./clock.js";

/**
 * @typedef {object} Harness
 * @property {string} name
 * @property {() => Promise<HarnessRun>} start a fresh peer (and clock) for one test
 *
 * @typedef {object} HarnessRun
 * @property {(options: {logger: {warn(...args: unknown[]): void}}) => import("../transport.js").Transport} makeTransport
 *   an unconnected transport on this run's clock, reporting dropped frames to `logger`
 * @property {import("./clock.js").ManualClock} clock the clock the transport's reconnect timers use
 * @property {() => number} attempts connection attempts the peer has seen
 * @property {(admit: boolean) => void} admit whether new attempts are accepted or refused
 *   (refused: the pipe never opens)
 * @property {() => Promise<void>} breakLink drops the open connection without a close frame
 * @property {(code: number, reason: string) => Promise<void>} closeLink the peer closes with a
 *   close frame
 * @property {(frame: string | Uint8Array) => Promise<void>} inject the peer sends a raw frame
 *   (text or binary) on the open connection
 * @property {() => Promise<void>} stop releases everything
 */

const HANDSHAKE_PARAMS = Object.freeze({ protocol_version: "1.0", min_compatible_protocol: "1.0" });
const BACKOFF_MS = [1000, 2000, 4000, 8000, 16000, 30000, 30000];

/** @param {Harness} harness */
export function transportSuite(harness) {
  describe(`transport contract: ${harness.name}`, () => {
    /**
     * Runs `body` with a started harness, a transport, what it received and what it logged.
     * @param {string} name
     * @param {(ctx: Awaited<ReturnType<typeof setUp>>) => Promise<void>} body
     */
    const contract = (name, body) =>
      test(name, async () => {
        const ctx = await setUp(harness);
        try {
          await body(ctx);
        } finally {
          await ctx.transport.disconnect().catch(() => {});
          if (typeof ctx.transport.close === "function") ctx.transport.close();
          await ctx.run.stop();
        }
      });

    contract("starts disconnected, reports connecting then connected, and disconnect() stays down", async (ctx) => {
      const { transport, run, states } = ctx;
      assert.equal(transport.state, "disconnected");
      await transport.connect();
      assert.equal(transport.state, "connected");
      assert.deepEqual(states, ["connecting", "connected"]);
      assert.equal(run.attempts(), 1);
      await transport.connect();
      assert.equal(run.attempts(), 1, "connect() while connected does nothing");

      await transport.disconnect();
      await waitFor("disconnected", () => transport.state === "disconnected");
      assert.deepEqual(states, ["connecting", "connected", "disconnected"]);
      assert.equal(run.clock.pending().length, 0, "no reconnect after disconnect()");
      run.clock.advance(60_000);
      assert.equal(run.attempts(), 1);
      await transport.disconnect();
      assert.equal(transport.state, "disconnected", "disconnect() twice is fine");
    });

    contract("a first connect that is refused rejects, ends disconnected and is not retried", async (ctx) => {
      const { transport, run, states } = ctx;
      run.admit(false);
      await assert.rejects(transport.connect(), (err) => {
        assert.equal(err.code, "connection_closed");
        return true;
      });
      await waitFor("disconnected", () => transport.state === "disconnected");
      assert.deepEqual(states, ["connecting", "disconnected"]);
      assert.equal(run.clock.pending().length, 0);
      run.clock.advance(60_000);
      assert.equal(run.attempts(), 1);
    });

    contract("send() before connect() throws not_connected and sends nothing", async (ctx) => {
      const { transport, run } = ctx;
      assert.throws(() => transport.send({ id: "x", method: "system.ping", params: {} }), { code: "not_connected" });
      assert.throws(() => transport.send(new Uint8Array([1])), { code: "not_connected" });
      assert.equal(run.attempts(), 0);
    });

    contract("one send is one frame: each request gets its own response, in order", async (ctx) => {
      const { transport, received } = ctx;
      await transport.connect();
      const ids = ["h1", "p1", "p2", "p3"];
      transport.send({ id: "h1", method: "system.handshake", params: { ...HANDSHAKE_PARAMS, client: { name: "multi\nline", version: "0" } } });
      for (const id of ids.slice(1)) transport.send({ id, method: "system.ping", params: {} });
      await waitFor("four responses", () => received.length >= 4);
      assert.deepEqual(received.map((f) => f.id), ids);
      for (const frame of received) assert.ok("result" in frame, JSON.stringify(frame));
    });

    contract("bytes go out as one binary frame and binary frames come in as Uint8Array", async (ctx) => {
      const { transport, received } = ctx;
      await transport.connect();
      await handshake(ctx);
      const payload = Uint8Array.from({ length: 3000 }, (_, i) => (i * 7) & 0xff);
      transport.send(encodeChannelFrame({ kind: "binary", channel: "echo", seq: 0, payload }));
      // An ArrayBuffer and a view into a larger buffer are bytes too; only the view's range goes.
      transport.send(encodeChannelFrame({ kind: "event", channel: "echo", seq: 1, event: "note", payload: { n: 1 } }).slice().buffer);
      const padded = new Uint8Array(64);
      const frame = encodeChannelFrame({ kind: "binary", channel: "echo", seq: 2, payload: new Uint8Array([9, 9]) });
      padded.set(frame, 8);
      transport.send(padded.subarray(8, 8 + frame.length));
      await waitFor("three echoed frames", () => received.filter((f) => f instanceof Uint8Array).length >= 3);
      const echoed = received.filter((f) => f instanceof Uint8Array).map((f) => decodeChannelFrame(f));
      assert.equal(echoed.length, 3);
      assert.deepEqual([...echoed[0].payload], [...payload]);
      assert.deepEqual([echoed[1].event, echoed[1].payload], ["note", { n: 1 }]);
      assert.deepEqual([...echoed[2].payload], [9, 9]);
    });

    contract("send() refuses what is neither a JSON object nor bytes, sending nothing", async (ctx) => {
      const { transport, received } = ctx;
      await transport.connect();
      for (const bad of [[1, 2], "text", 42, null]) {
        assert.throws(() => transport.send(/** @type {any} */ (bad)), { code: "invalid_frame" });
      }
      await handshake(ctx);
      transport.send({ id: "p1", method: "system.ping", params: {} });
      await waitFor("the ping's response", () => received.length >= 2);
      assert.deepEqual(received.map((f) => f.id), ["h0", "p1"], "nothing else reached the peer");
    });

    contract("inbound text that is not a JSON object is dropped with a log line, never thrown", async (ctx) => {
      const { transport, run, received, warnings } = ctx;
      await transport.connect();
      await handshake(ctx);
      for (const junk of ["this is {not json", "[1,2]", "42", '"a string"', "null"]) await run.inject(junk);
      await run.inject(JSON.stringify({ event: "probe", payload: { ok: true } }));
      await waitFor("the valid frame after the junk", () => received.some((f) => f.event === "probe"));
      assert.deepEqual(received.slice(1), [{ event: "probe", payload: { ok: true } }]);
      assert.equal(warnings.length, 5, warnings.join("\n"));
      assert.equal(transport.state, "connected");
      transport.send({ id: "p1", method: "system.ping", params: {} });
      await waitFor("a response after the junk", () => received.some((f) => f.id === "p1"));
    });

    contract("a disposed subscription gets nothing more; the others still do", async (ctx) => {
      const { transport, run } = ctx;
      const first = [];
      const second = [];
      const states = [];
      const one = transport.onMessage((frame) => first.push(frame));
      transport.onMessage((frame) => second.push(frame));
      const watch = transport.onStateChange((state) => states.push(state));
      await transport.connect();
      await run.inject(JSON.stringify({ event: "a" }));
      await waitFor("a", () => second.length === 1);
      one.dispose();
      one.dispose();
      watch.dispose();
      await run.inject(JSON.stringify({ event: "b" }));
      await waitFor("b", () => second.length === 2);
      assert.deepEqual(first.map((f) => f.event), ["a"]);
      assert.deepEqual(second.map((f) => f.event), ["a", "b"]);
      await transport.disconnect();
      await waitFor("disconnected", () => transport.state === "disconnected");
      assert.deepEqual(states, ["connecting", "connected"]);
    });

    contract("an unexpected break reconnects after 1, 2, 4, 8, 16, 30, 30 s, reset after success", async (ctx) => {
      const { transport, run, states } = ctx;
      await transport.connect();
      run.admit(false);
      await run.breakLink();
      await waitFor("connecting after the break", () => transport.state === "connecting");
      for (const delay of BACKOFF_MS) {
        const before = run.attempts();
        const [timer] = await waitFor(`a reconnect timer (${delay} ms)`, () => run.clock.pending().length === 1 && run.clock.pending());
        assert.equal(timer.ms, delay);
        run.clock.advance(delay - 1);
        assert.equal(run.clock.pending().length, 1, `no attempt before ${delay} ms`);
        run.clock.advance(1);
        await waitFor(`attempt after ${delay} ms`, () => run.attempts() === before + 1);
        assert.equal(transport.state, "connecting", "still trying");
      }
      run.admit(true);
      const [timer] = await waitFor("the next timer", () => run.clock.pending().length === 1 && run.clock.pending());
      assert.equal(timer.ms, 30_000, "capped");
      run.clock.advance(30_000);
      await waitFor("connected again", () => transport.state === "connected");

      // After a successful reconnect the schedule starts over.
      await run.breakLink();
      await waitFor("connecting after the second break", () => transport.state === "connecting");
      const [again] = await waitFor("a timer after the second break", () => run.clock.pending().length === 1 && run.clock.pending());
      assert.equal(again.ms, 1000);
      run.clock.advance(1000);
      await waitFor("connected once more", () => transport.state === "connected");
      assert.deepEqual(states, ["connecting", "connected", "connecting", "connected", "connecting", "connected"], JSON.stringify(states));
    });

    contract("a peer's normal close (1001 going away) is retried", async (ctx) => {
      const { transport, run } = ctx;
      await transport.connect();
      await run.closeLink(1001, "going away");
      await waitFor("connecting", () => transport.state === "connecting");
      const [timer] = await waitFor("a timer", () => run.clock.pending().length === 1 && run.clock.pending());
      assert.equal(timer.ms, 1000);
      run.clock.advance(1000);
      await waitFor("connected again", () => transport.state === "connected");
      assert.equal(run.attempts(), 2);
    });

    contract("a refusal (close 1008) is never retried and is reported in lastClose", async (ctx) => {
      const { transport, run } = ctx;
      await transport.connect();
      await run.closeLink(1008, "unauthorized");
      await waitFor("disconnected", () => transport.state === "disconnected");
      if ("lastClose" in transport) assert.deepEqual(transport.lastClose, { code: 1008, reason: "unauthorized" });
      assert.equal(run.clock.pending().length, 0);
      run.clock.advance(60_000);
      assert.equal(run.attempts(), 1);
    });

    contract("disconnect() while waiting to reconnect cancels the attempt", async (ctx) => {
      const { transport, run } = ctx;
      await transport.connect();
      await run.breakLink();
      await waitFor("a timer", () => run.clock.pending().length === 1);
      await transport.disconnect();
      await waitFor("disconnected", () => transport.state === "disconnected");
      await waitFor("the timer cleared", () => run.clock.pending().length === 0);
      run.clock.advance(60_000);
      assert.equal(run.attempts(), 1);
    });
  });
}

/** @param {Harness} harness */
async function setUp(harness) {
  const run = await harness.start();
  /** @type {string[]} */
  const warnings = [];
  const transport = run.makeTransport({ logger: { warn: (...args) => warnings.push(args.join(" ")) } });
  /** @type {any[]} */
  const received = [];
  /** @type {string[]} */
  const states = [];
  transport.onMessage((frame) => received.push(frame));
  transport.onStateChange((state) => states.push(state));
  return { run, transport, received, states, warnings };
}

/**
 * Sends the handshake (a real carrier wants it first) and waits for its response.
 * @param {{transport: import("../transport.js").Transport, received: any[]}} ctx
 */
async function handshake({ transport, received }) {
  transport.send({ id: "h0", method: "system.handshake", params: HANDSHAKE_PARAMS });
  await waitFor("the handshake response", () => received.some((f) => f.id === "h0"));
}
