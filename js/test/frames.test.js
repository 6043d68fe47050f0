// The JS RBF v1 codec matches every valid shared vector byte for byte and refuses every invalid one with a typed error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { ChannelFrameError, decodeChannelFrame, encodeChannelFrame } from "../frames.js";

// The vectors live with the protocol crate (protocol/tests/vectors/, with their origin);
// CARRIER_VECTORS points a copy of this package tested outside the repository at them.
const vectorsPath = process.env.CARRIER_VECTORS ?? new URL("../../protocol/tests/vectors/channel-frames.json", import.meta.url);
const vectors = JSON.parse(readFileSync(vectorsPath, "utf8"));

const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (byte) => Number.parseInt(byte, 16));
const toHex = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

/** The vector's `frame` in the codec's shape (binary payloads as bytes instead of hex). */
function frameOf(vector) {
  const { payload_hex: payloadHex, ...rest } = vector.frame;
  return rest.kind === "binary" ? { ...rest, payload: fromHex(payloadHex) } : rest;
}

test("the vector file has valid and invalid cases", () => {
  assert.ok(vectors.valid.length > 0);
  assert.ok(vectors.invalid.length > 0);
});

for (const vector of vectors.valid) {
  test(`encodes valid vector: ${vector.description}`, () => {
    assert.equal(toHex(encodeChannelFrame(frameOf(vector))), vector.bytes_hex);
  });

  test(`decodes valid vector: ${vector.description}`, () => {
    const decoded = decodeChannelFrame(fromHex(vector.bytes_hex));
    if (vector.frame.kind === "binary") {
      const { payload, ...header } = decoded;
      assert.ok(payload instanceof Uint8Array);
      assert.deepEqual({ ...header, payload_hex: toHex(payload) }, vector.frame);
    } else {
      assert.deepEqual(decoded, vector.frame);
    }
  });
}

for (const vector of vectors.invalid) {
  test(`refuses invalid vector: ${vector.description}`, () => {
    assert.throws(
      () => decodeChannelFrame(fromHex(vector.bytes_hex)),
      (err) => err instanceof ChannelFrameError && err instanceof Error && typeof err.code === "string",
    );
  });
}

test("decoding accepts an ArrayBuffer and a view with an offset", () => {
  const bytes = encodeChannelFrame({ kind: "binary", channel: "mic", seq: 5, payload: new Uint8Array([1, 2, 3]) });
  const padded = new Uint8Array(bytes.length + 4);
  padded.set(bytes, 2);
  const view = padded.subarray(2, 2 + bytes.length);
  for (const input of [bytes.slice().buffer, view]) {
    const frame = decodeChannelFrame(input);
    assert.equal(frame.channel, "mic");
    assert.equal(frame.seq, 5);
    assert.deepEqual([...frame.payload], [1, 2, 3]);
  }
});

test("an event frame without a payload encodes payload null", () => {
  const bytes = encodeChannelFrame({ kind: "event", channel: "ui", seq: 0, event: "ping" });
  assert.deepEqual(decodeChannelFrame(bytes), { kind: "event", channel: "ui", seq: 0, event: "ping", payload: null });
});

test("a channel name that is not UTF-8 is refused", () => {
  const bytes = fromHex("5242460101" + "01" + "ff" + "00000000");
  assert.throws(() => decodeChannelFrame(bytes), { name: "ChannelFrameError", code: "invalid_utf8" });
});

test("the encoder refuses frames the layout cannot carry", () => {
  const ok = { kind: "binary", channel: "a", seq: 0, payload: new Uint8Array() };
  const cases = [
    [{ ...ok, channel: "" }, "empty_channel_name"],
    [{ ...ok, channel: "x".repeat(256) }, "channel_name_too_long"],
    [{ ...ok, channel: "é".repeat(128) }, "channel_name_too_long"],
    [{ ...ok, seq: -1 }, "invalid_seq"],
    [{ ...ok, seq: 2 ** 32 }, "invalid_seq"],
    [{ ...ok, seq: 1.5 }, "invalid_seq"],
    [{ ...ok, payload: "text" }, "invalid_payload"],
    [{ ...ok, kind: "other" }, "unknown_kind"],
    [{ kind: "event", channel: "a", seq: 0, event: "" }, "missing_event_name"],
    [{ kind: "event", channel: "a", seq: 0, event: "e", payload: 1n }, "invalid_payload"],
  ];
  for (const [frame, code] of cases) {
    assert.throws(() => encodeChannelFrame(frame), { name: "ChannelFrameError", code }, JSON.stringify(code));
  }
  assert.equal(encodeChannelFrame({ ...ok, channel: "x".repeat(255) }).length, 6 + 255 + 4);
});
