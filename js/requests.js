/**
 * Requests in flight (docs/protocol.md, "Envelope"): each gets a unique string id, a timeout,
 * and its response's `result` or `error`, whatever order responses come in.
 *
 * Not part of the public API.
 *
 * @module carrier-client/requests
 * @internal
 */

import { CarrierError } from "./errors.js";
import { isObject } from "./internal.js";

/**
 * @typedef {{method: string, resolve: (result: any) => void, reject: (err: unknown) => void, timer: unknown}} Pending
 * @typedef {object} RequestsOptions
 * @property {(frame: import("./transport.js").JsonObject) => void} send sends one text frame
 *   (throws when the pipe is closed)
 * @property {number} timeoutMs a request without a response by then rejects with `timeout`
 * @property {(fn: () => void, ms: number) => unknown} setTimeout
 * @property {(handle: any) => void} clearTimeout
 * @property {(method: string, result: any) => void} onResult called with each success before
 *   its caller hears of it
 */

/**
 * A wire `error` object as a {@link CarrierError}.
 * @param {unknown} error
 */
export function toCarrierError(error) {
  const wire = isObject(error) ? /** @type {Record<string, any>} */ (error) : {};
  const code = typeof wire.code === "string" ? wire.code : "internal";
  const message = typeof wire.message === "string" && wire.message ? wire.message : code;
  return new CarrierError(code, message, { data: wire.data, effectState: wire.effect_state });
}

/** The requests of one client, correlated by id. */
export class Requests {
  #nextNumber = 1;
  /** @type {Map<string, Pending>} */
  #pending = new Map();
  /** @type {RequestsOptions} */
  #options;

  /** @param {RequestsOptions} options */
  constructor(options) {
    this.#options = options;
  }

  /** A fresh request id (the handshake takes its ids here too, so no two frames share one). */
  newId() {
    return `c${this.#nextNumber++}`;
  }

  /**
   * Sends a request and settles with its response.
   * @param {string} method
   * @param {object | undefined} params
   * @returns {Promise<any>}
   */
  call(method, params) {
    const { send, timeoutMs, setTimeout, clearTimeout } = this.#options;
    const id = this.newId();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.#pending.delete(id)) {
          reject(new CarrierError("timeout", `${method} got no response within ${timeoutMs} ms`, { effectState: "unknown" }));
        }
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      try {
        send({ id, method, params: params ?? {} });
      } catch (err) {
        this.#pending.delete(id);
        clearTimeout(timer);
        reject(err instanceof CarrierError ? err : new CarrierError("connection_closed", `cannot send ${method}: ${/** @type {Error} */ (err).message}`, {
          effectState: "none",
        }));
      }
    });
  }

  /**
   * A response: settles the request it answers. One for no request in flight (timed out, or
   * never sent) is dropped with a warning.
   * @param {{id: string, result?: unknown, error?: unknown}} frame
   */
  settle(frame) {
    const pending = this.#pending.get(frame.id);
    if (!pending) {
      console.warn(`carrier: dropped a response for unknown request id ${JSON.stringify(frame.id)}`);
      return;
    }
    this.#pending.delete(frame.id);
    this.#options.clearTimeout(pending.timer);
    if (frame.error !== undefined) {
      pending.reject(toCarrierError(frame.error));
      return;
    }
    this.#options.onResult(pending.method, frame.result);
    pending.resolve(frame.result);
  }

  /**
   * Rejects every request in flight with `error` (the pipe broke, or the client stopped).
   * @param {unknown} error
   */
  rejectAll(error) {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const entry of pending) {
      this.#options.clearTimeout(entry.timer);
      entry.reject(error);
    }
  }
}
