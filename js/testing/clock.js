/**
 * A clock the test moves by hand, injected as a transport's `setTimeout`/`clearTimeout`, so
 * backoff delays are checked to the millisecond without waiting and without touching the
 * process's real timers (real sockets keep working beside it).
 *
 * @module carrier-client/testing/clock
 */

export class ManualClock {
  /** Milliseconds since the clock was made. */
  now = 0;
  /** @type {{at: number, ms: number, fn: () => void, done: boolean}[]} */
  #timers = [];

  /** Drop-in for `setTimeout`. */
  setTimeout = (/** @type {() => void} */ fn, /** @type {number} */ ms) => {
    const timer = { at: this.now + ms, ms, fn, done: false };
    this.#timers.push(timer);
    return timer;
  };

  /** Drop-in for `clearTimeout`. */
  clearTimeout = (/** @type {any} */ timer) => {
    if (timer) timer.done = true;
  };

  /** Timers scheduled and neither fired nor cleared. */
  pending() {
    return this.#timers.filter((t) => !t.done);
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due, in order.
   * @param {number} ms
   */
  advance(ms) {
    const target = this.now + ms;
    for (;;) {
      const due = this.pending()
        .filter((t) => t.at <= target)
        .sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.now = due.at;
      due.done = true;
      due.fn();
    }
    this.now = target;
  }
}

// Captured at load: a test that mocks the global timers must not stop waitFor's polling.
const realSetTimeout = globalThis.setTimeout;

/**
 * Resolves once `condition()` is truthy (polled every few milliseconds of real time, so it
 * works beside mocked timers), or rejects after `timeoutMs` of real time naming `what`.
 * @template T
 * @param {string} what
 * @param {() => T} condition
 * @param {number} [timeoutMs]
 * @returns {Promise<T>}
 */
export async function waitFor(what, condition, timeoutMs = 10_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => realSetTimeout(resolve, 2));
  }
}
