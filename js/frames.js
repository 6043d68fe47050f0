/**
 * The payload-channel frame codec (docs/protocol.md, "Channels"): one RBF v1 frame per binary
 * WebSocket message. Pure functions with no I/O; the shared vectors (`vectors/channel-frames.json`
 * of the project's shared folder) are its test.
 *
 * ```text
 * 0..2 "RBF"  3 version = 1  4 kind: 0x01 binary, 0x02 event  5 name length N (1..255)
 * 6..6+N channel name (UTF-8)  +4 seq (u32, big-endian)  rest: body
 * ```
 *
 * @module carrier-client/frames
 */

import { asBytes } from "./internal.js";

/** The largest channel seq; a sender's numbering wraps to 0 after it. */
export const MAX_CHANNEL_SEQ = 0xffff_ffff;

/** A byte sequence that is not a valid RBF v1 channel frame, or a frame that cannot be encoded. */
export class ChannelFrameError extends Error {
  /**
   * @param {string} code machine-readable reason, e.g. `bad_magic`, `truncated`, `malformed_json`
   * @param {string} message
   */
  constructor(code, message) {
    super(`channel frame: ${message}`);
    this.name = "ChannelFrameError";
    /** @type {string} */
    this.code = code;
  }
}

const MAGIC = Object.freeze([0x52, 0x42, 0x46]); // "RBF"
const FORMAT_VERSION = 1;
const KIND_BINARY = 0x01;
const KIND_EVENT = 0x02;
const FIXED_HEADER_BYTES = 6; // magic (3), version (1), kind (1), name length (1)
const SEQ_BYTES = 4;
const MAX_CHANNEL_NAME_BYTES = 255;

const utf8Encoder = new TextEncoder();
// `ignoreBOM` keeps a leading U+FEFF as data, so decoding is byte-exact.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A decoded channel frame. Binary frames carry `payload` bytes; event frames carry `event` and a
 * JSON `payload` (`null` when the body had none).
 * @typedef {{kind: "binary", channel: string, seq: number, payload: Uint8Array}} BinaryFrame
 * @typedef {{kind: "event", channel: string, seq: number, event: string, payload: unknown}} EventFrame
 * @typedef {BinaryFrame | EventFrame} ChannelFrame
 */

/**
 * Encodes one channel frame into the exact bytes of one binary WebSocket message.
 * @param {ChannelFrame} frame `{kind: "binary", channel, seq, payload: Uint8Array | ArrayBuffer}`
 *   or `{kind: "event", channel, seq, event, payload}` (payload: any JSON value; omitted = null)
 * @returns {Uint8Array}
 * @throws {ChannelFrameError} when the frame cannot be represented (bad name, seq, kind, payload)
 */
export function encodeChannelFrame(frame) {
  if (frame === null || typeof frame !== "object") {
    throw new ChannelFrameError("invalid_frame", "frame must be an object");
  }
  const name = encodeChannelName(frame.channel);
  const seq = frame.seq;
  if (!Number.isInteger(seq) || seq < 0 || seq > MAX_CHANNEL_SEQ) {
    throw new ChannelFrameError("invalid_seq", "seq must be an integer in 0..2^32-1");
  }
  let kind;
  let body;
  if (frame.kind === "binary") {
    kind = KIND_BINARY;
    body = asBytes(frame.payload);
    if (body === null) {
      throw new ChannelFrameError("invalid_payload", "binary payload must be a Uint8Array or ArrayBuffer");
    }
  } else if (frame.kind === "event") {
    kind = KIND_EVENT;
    body = encodeEventBody(frame.event, frame.payload);
  } else {
    throw new ChannelFrameError("unknown_kind", `unknown kind ${JSON.stringify(frame.kind)}`);
  }

  const seqOffset = FIXED_HEADER_BYTES + name.length;
  const out = new Uint8Array(seqOffset + SEQ_BYTES + body.length);
  out.set(MAGIC, 0);
  out[3] = FORMAT_VERSION;
  out[4] = kind;
  out[5] = name.length;
  out.set(name, FIXED_HEADER_BYTES);
  new DataView(out.buffer).setUint32(seqOffset, seq, false);
  out.set(body, seqOffset + SEQ_BYTES);
  return out;
}

/** @param {unknown} channel */
function encodeChannelName(channel) {
  if (typeof channel !== "string" || channel.length === 0) {
    throw new ChannelFrameError("empty_channel_name", "channel name must be a non-empty string");
  }
  if (typeof channel.isWellFormed === "function" && !channel.isWellFormed()) {
    throw new ChannelFrameError("invalid_utf8", "channel name contains a lone surrogate");
  }
  const name = utf8Encoder.encode(channel);
  if (name.length > MAX_CHANNEL_NAME_BYTES) {
    throw new ChannelFrameError("channel_name_too_long", `channel name is ${name.length} bytes (max 255)`);
  }
  return name;
}

/**
 * @param {unknown} event
 * @param {unknown} payload
 */
function encodeEventBody(event, payload) {
  if (typeof event !== "string" || event.length === 0) {
    throw new ChannelFrameError("missing_event_name", "event name must be a non-empty string");
  }
  let json;
  try {
    json = JSON.stringify({ event, payload: payload === undefined ? null : payload });
  } catch (err) {
    throw new ChannelFrameError("invalid_payload", `event payload is not JSON-serialisable (${err.message})`);
  }
  return utf8Encoder.encode(json);
}

/**
 * Decodes one binary WebSocket message into a channel frame. A binary frame's `payload` is a view
 * into `bytes` (no copy).
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
 * @returns {ChannelFrame}
 * @throws {ChannelFrameError} for anything that is not a valid RBF v1 frame
 */
export function decodeChannelFrame(bytes) {
  const buf = asBytes(bytes);
  if (buf === null) throw new ChannelFrameError("invalid_input", "input must be bytes");
  if (buf.length < MAGIC.length || MAGIC.some((b, i) => buf[i] !== b)) {
    throw new ChannelFrameError("bad_magic", "bad magic (not a channel frame)");
  }
  if (buf.length < FIXED_HEADER_BYTES) throw new ChannelFrameError("truncated", "truncated header");
  if (buf[3] !== FORMAT_VERSION) {
    throw new ChannelFrameError("unsupported_version", `unsupported version ${buf[3]}`);
  }
  const kind = buf[4];
  if (kind !== KIND_BINARY && kind !== KIND_EVENT) {
    throw new ChannelFrameError("unknown_kind", `unknown kind ${kind}`);
  }
  const nameLength = buf[5];
  if (nameLength === 0) throw new ChannelFrameError("empty_channel_name", "empty channel name");
  const seqOffset = FIXED_HEADER_BYTES + nameLength;
  const bodyOffset = seqOffset + SEQ_BYTES;
  if (buf.length < bodyOffset) {
    throw new ChannelFrameError("truncated", "truncated (header longer than the frame)");
  }
  const channel = decodeUtf8(buf.subarray(FIXED_HEADER_BYTES, seqOffset), "channel name");
  const seq = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(seqOffset, false);
  const body = buf.subarray(bodyOffset);

  if (kind === KIND_BINARY) return { kind: "binary", channel, seq, payload: body };

  let parsed;
  try {
    parsed = JSON.parse(decodeUtf8(body, "event body"));
  } catch (err) {
    if (err instanceof ChannelFrameError) throw err;
    throw new ChannelFrameError("malformed_json", "malformed JSON body");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ChannelFrameError("body_not_object", "event body must be a JSON object");
  }
  if (typeof parsed.event !== "string" || parsed.event.length === 0) {
    throw new ChannelFrameError("missing_event_name", "event body has no non-empty `event` name");
  }
  const payload = parsed.payload === undefined ? null : parsed.payload;
  return { kind: "event", channel, seq, event: parsed.event, payload };
}

/**
 * @param {Uint8Array} bytes
 * @param {string} what
 */
function decodeUtf8(bytes, what) {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new ChannelFrameError("invalid_utf8", `${what} is not valid UTF-8`);
  }
}
