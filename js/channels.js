/**
 * Payload channels on one client (docs/protocol.md, "Channels"): outbound frames numbered per
 * channel from 0 on every connection and sent within their channel's credit (`credit.js`), and
 * inbound binary frames decoded and handed to the channel's subscribers.
 *
 * Not part of the public API.
 *
 * @module carrier-client/channels
 * @internal
 */

import { ChannelCredit } from "./credit.js";
import { decodeChannelFrame, encodeChannelFrame, MAX_CHANNEL_SEQ } from "./frames.js";
import { asBytes, emit, subscribe } from "./internal.js";

/**
 * @typedef {import("./frames.js").ChannelFrame} ChannelFrame
 * @typedef {import("./transport.js").Transport} Transport
 */

/** Bytes of a frame's header besides the channel name: magic, version, kind, name length, seq. */
const HEADER_BYTES = 10;

/**
 * Bytes of a channel frame's body (what credit counts): the frame less its header.
 * @param {{kind: string, channel: string, event?: string, payload?: unknown}} frame
 */
function bodySize(frame) {
  const encoded = encodeChannelFrame(/** @type {ChannelFrame} */ ({ ...frame, seq: 0 }));
  return encoded.byteLength - HEADER_BYTES - new TextEncoder().encode(frame.channel).byteLength;
}

/** Outbound numbering and credit, and inbound routing, of the channels of one client. */
export class Channels {
  /** @type {Transport} */
  #transport;
  /** @type {(channel: string) => void} */
  #guard;
  /** Next outbound seq per channel; numbering restarts on every new connection. */
  #nextSeq = new Map();
  /** @type {Map<string, Set<Function>>} */
  #handlers = new Map();
  /** The bulk channels' credit on the current connection. */
  credit = new ChannelCredit((frame) => this.#sendNow(frame));

  /**
   * @param {Transport} transport
   * @param {(channel: string) => void} guard throws what a send on the channel would throw now
   *   (`not_connected`, `forbidden`)
   */
  constructor(transport, guard) {
    this.#transport = transport;
    this.#guard = guard;
  }

  /** A new connection: every channel's numbering starts at 0 again. */
  restartNumbering() {
    this.#nextSeq.clear();
  }

  /**
   * Sends an event frame now, spending its body's bytes where credit is counted.
   * @param {string} channel
   * @param {string} event
   * @param {unknown} payload
   * @returns {number} the seq it carried
   */
  sendEvent(channel, event, payload) {
    const frame = { kind: "event", channel, event, payload };
    if (this.credit.counts(channel)) {
      this.#guard(channel);
      this.credit.spendNow(channel, bodySize(frame));
    }
    return this.#sendNow(frame);
  }

  /**
   * Sends a binary frame now, spending its bytes where credit is counted.
   * @param {string} channel
   * @param {unknown} bytes
   * @returns {number} the seq it carried
   */
  sendBinary(channel, bytes) {
    const frame = { kind: "binary", channel, payload: asBytes(bytes) };
    if (this.credit.counts(channel)) {
      this.#guard(channel);
      this.credit.spendNow(channel, frame.payload?.byteLength ?? 0);
    }
    return this.#sendNow(frame);
  }

  /**
   * Sends a binary frame once its channel's credit covers it (at once where none is counted).
   * @param {string} channel
   * @param {unknown} bytes
   * @returns {Promise<number>} the seq it carried
   */
  sendBulk(channel, bytes) {
    const frame = { kind: "binary", channel, payload: asBytes(bytes) };
    try {
      this.#guard(channel);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.credit.whenCovered(frame, frame.payload?.byteLength ?? 0);
  }

  /**
   * Encodes `frame` with its channel's next seq and sends it.
   * @param {{kind: string, channel: string, event?: string, payload?: unknown}} frame
   * @returns {number} the seq it carried
   */
  #sendNow(frame) {
    this.#guard(frame.channel);
    const seq = this.#nextSeq.get(frame.channel) ?? 0;
    const bytes = encodeChannelFrame(/** @type {ChannelFrame} */ ({ ...frame, seq }));
    this.#transport.send(bytes);
    this.#nextSeq.set(frame.channel, seq === MAX_CHANNEL_SEQ ? 0 : seq + 1);
    return seq;
  }

  /**
   * @param {string} channel a channel's name, or `"*"` for every channel
   * @param {(frame: ChannelFrame) => void} handler
   */
  subscribe(channel, handler) {
    let handlers = this.#handlers.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.#handlers.set(channel, handlers);
    }
    return subscribe(handlers, handler);
  }

  /**
   * An inbound binary frame: decoded and handed to its channel's subscribers, then to `"*"`'s.
   * One that does not decode is dropped with a warning.
   * @param {Uint8Array} bytes
   */
  deliver(bytes) {
    let frame;
    try {
      frame = decodeChannelFrame(bytes);
    } catch (err) {
      console.warn(`carrier: dropped an inbound binary frame: ${/** @type {Error} */ (err).message}`);
      return;
    }
    emit(this.#handlers.get(frame.channel) ?? new Set(), frame);
    emit(this.#handlers.get("*") ?? new Set(), frame);
  }
}
