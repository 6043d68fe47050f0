/**
 * Helpers shared by the package's modules. Not part of the public API: import from
 * `carrier-client` (or `/client.js`) instead; these may change without notice.
 *
 * @module carrier-client/internal
 * @internal
 */

/**
 * Views bytes given as a Uint8Array, an ArrayBuffer or any other ArrayBufferView, without copying.
 * @param {unknown} value
 * @returns {Uint8Array | null} null when `value` is not bytes
 */
export function asBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return null;
}

/** @param {unknown} value */
export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * Adds `handler` to `set` until the returned subscription is disposed (disposing twice is a no-op).
 * @param {Set<Function>} set
 * @param {Function} handler
 * @returns {{dispose(): void}}
 */
export function subscribe(set, handler) {
  if (typeof handler !== "function") throw new TypeError("handler must be a function");
  // One entry per subscription: a function subscribed twice is called twice, and disposing one
  // of its subscriptions leaves the other.
  const entry = (...args) => handler(...args);
  set.add(entry);
  return { dispose: () => void set.delete(entry) };
}

/**
 * Calls every handler of `set` with `args`. A throwing subscriber must not break delivery to the
 * others or the caller's state machine, so its error is logged and swallowed. The set is copied
 * first: a handler may dispose itself or subscribe others while it runs.
 * @param {Set<Function>} set
 * @param {...unknown} args
 */
export function emit(set, ...args) {
  for (const handler of [...set]) {
    try {
      handler(...args);
    } catch (err) {
      console.error("carrier: a subscriber threw", err);
    }
  }
}

/** A promise with its resolve and reject functions. */
export function deferred() {
  /** @type {(value: any) => void} */
  let resolve = () => {};
  /** @type {(reason: unknown) => void} */
  let reject = () => {};
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
