/**
 * Inbound credit on bulk channels (protocol 1.1, `bulk_credit`; docs/protocol.md, "Channels"):
 * the bytes of frame bodies this client may still send on each counted channel, and the bulk
 * sends waiting for more, in order. Counted only on a bulk channel whose descriptor carries
 * `credit`, where the server has `bulk_credit`; against a server that gives none nothing waits.
 * The same rules as the Rust client's machine (`client/src/machine.rs`); the cases in
 * `protocol/tests/vectors/client-rules.json` hold both to them.
 *
 * Not part of the public API.
 *
 * @module carrier-client/credit
 * @internal
 */

import { FEATURE_PROTOCOLS } from "./catalog.js";
import { CarrierError } from "./errors.js";
import { isObject } from "./internal.js";
import { featureRefusal } from "./preflight.js";

/**
 * @typedef {{frame: any, size: number, resolve: (seq: number) => void, reject: (err: unknown) => void}} WaitingSend
 * @typedef {{available: number, limit: number, waiting: WaitingSend[]}} Lane
 */

const BULK_CREDIT = { feature: "bulk_credit", requiredProtocol: FEATURE_PROTOCOLS.bulk_credit };

/** The credit of one connection's bulk channels. */
export class ChannelCredit {
  /** @type {Map<string, Lane>} */
  #lanes = new Map();
  /** @type {(frame: any) => number} */
  #send;

  /** @param {(frame: any) => number} send sends a frame now and returns its seq (throws when it cannot) */
  constructor(send) {
    this.#send = send;
  }

  /**
   * A new connection's credit, from its handshake result: each bulk channel whose descriptor
   * carries `credit`, when the server has `bulk_credit` for this client. Sends still waiting
   * were rejected when the pipe broke; none is carried over.
   * @param {Record<string, any>} result
   */
  reset(result) {
    for (const lane of this.#lanes.values()) lane.waiting.length = 0;
    this.#lanes = new Map();
    if (featureRefusal("bulk_credit", BULK_CREDIT, result) !== null) return;
    for (const c of Array.isArray(result.channels) ? result.channels : []) {
      if (isObject(c) && typeof c.name === "string" && c.delivery === "bulk" && Number.isSafeInteger(c.credit) && c.credit >= 0) {
        this.#lanes.set(c.name, { available: c.credit, limit: c.credit, waiting: [] });
      }
    }
  }

  /** @param {string} channel */
  counts(channel) {
    return this.#lanes.has(channel);
  }

  /**
   * Bytes that may be sent on `channel` now, or null where credit is not counted.
   * @param {string} channel
   */
  available(channel) {
    return this.#lanes.get(channel)?.available ?? null;
  }

  /**
   * A `channel.credit` grant: more bytes, and the sends it lets go, in order. A grant for a
   * channel that is not counted, or of no bytes, changes nothing.
   * @param {unknown} channel
   * @param {unknown} bytes
   */
  grant(channel, bytes) {
    const lane = typeof channel === "string" ? this.#lanes.get(channel) : undefined;
    if (!lane || !Number.isSafeInteger(bytes) || /** @type {number} */ (bytes) <= 0) return;
    lane.available += /** @type {number} */ (bytes);
    this.#drain(lane);
  }

  /**
   * Spends `size` bytes for a frame sent at once; throws `credit_exhausted` when the credit
   * does not cover it or sends are waiting before it. Nothing to spend where not counted.
   * @param {string} channel
   * @param {number} size
   */
  spendNow(channel, size) {
    const lane = this.#lanes.get(channel);
    if (!lane) return;
    if (lane.waiting.length > 0 || lane.available < size) {
      throw new CarrierError("credit_exhausted", `channel ${channel} has ${lane.available} bytes of credit for a frame of ${size} (use sendChannelBulk, which waits for credit)`, {
        data: { available: lane.available, size },
        effectState: "none",
      });
    }
    lane.available -= size;
  }

  /**
   * Sends `frame` (a body of `size` bytes) once the credit covers it, after the sends already
   * waiting; at once where credit is not counted.
   * @param {{channel: string}} frame
   * @param {number} size
   * @returns {Promise<number>} the seq it carried
   * @throws {CarrierError} `too_large` when it exceeds the channel's whole credit (it could never go)
   */
  whenCovered(frame, size) {
    const lane = this.#lanes.get(frame.channel);
    if (!lane) {
      try {
        return Promise.resolve(this.#send(frame));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    if (size > lane.limit) {
      return Promise.reject(
        new CarrierError("too_large", `a bulk frame of ${size} bytes is over channel ${frame.channel}'s whole credit of ${lane.limit} bytes: send it in smaller frames`, {
          data: { limit: lane.limit, size },
          effectState: "none",
        }),
      );
    }
    return new Promise((resolve, reject) => {
      lane.waiting.push({ frame, size, resolve, reject });
      this.#drain(lane);
    });
  }

  /**
   * Rejects every waiting send with `error` (the pipe broke: none was sent).
   * @param {unknown} error
   */
  rejectWaiting(error) {
    for (const lane of this.#lanes.values()) {
      for (const w of lane.waiting.splice(0)) w.reject(error);
    }
  }

  /** @param {Lane} lane */
  #drain(lane) {
    while (lane.waiting.length > 0 && lane.available >= lane.waiting[0].size) {
      const next = /** @type {WaitingSend} */ (lane.waiting.shift());
      lane.available -= next.size;
      try {
        next.resolve(this.#send(next.frame));
      } catch (err) {
        next.reject(err);
      }
    }
  }
}
