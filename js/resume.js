/**
 * Resume bookkeeping (docs/protocol.md, "Sessions and resume"): which session events are new,
 * and where a reconnect resumes from. `seq` numbers belong to one session, so every binding that
 * can restart them restarts the line here. The same rules as the Rust client's `SessionCursor`
 * (`client/src/resume.rs`); the cases in `protocol/tests/vectors/client-rules.json` hold both
 * to them.
 *
 * Not part of the public API.
 *
 * @module carrier-client/resume
 * @internal
 */

import { METHOD_CATALOG } from "./catalog.js";

/** The connection's session binding as it moves across handshakes, reconnects and switches. */
export class SessionCursor {
  /** @type {string | null} the bound session, as last reported by the server */
  sessionId = null;
  /** @type {string | null} the server epoch of that binding */
  epoch = null;
  /** Highest session-event seq delivered for `sessionId`; 0 when none. */
  lastSeq = 0;

  /**
   * The handshake's `resume` param: where to continue from, or null before any binding.
   * @returns {{session_id: string, epoch: string, after_seq: number} | null}
   */
  resumePoint() {
    if (this.sessionId === null || this.epoch === null) return null;
    return { session_id: this.sessionId, epoch: this.epoch, after_seq: this.lastSeq };
  }

  /**
   * Applies a handshake result. Only a resumed (or gapped) binding of the same session
   * continues the seq line; `new` and `reset` restart it.
   * @param {Record<string, any>} result
   */
  bind(result) {
    const outcome = result.resume?.outcome;
    const continues = (outcome === "resumed" || outcome === "gap") && result.session_id === this.sessionId;
    if (!continues) this.lastSeq = 0;
    this.sessionId = typeof result.session_id === "string" ? result.session_id : null;
    this.epoch = typeof result.epoch === "string" ? result.epoch : null;
  }

  /**
   * Records a session event's `seq`: true when it is new, false for one already delivered (a
   * replay after a resume).
   * @param {number} seq
   */
  accept(seq) {
    if (seq <= this.lastSeq) return false;
    this.lastSeq = seq;
    return true;
  }

  /**
   * After `method` succeeded with `result`: a method the catalog marks as rebinding
   * (`sessions.start`, `sessions.switch`) moves the connection to the session it names, whose
   * events are numbered from its own start.
   * @param {string} method
   * @param {any} result
   */
  answered(method, result) {
    if (!Object.hasOwn(METHOD_CATALOG, method) || !METHOD_CATALOG[/** @type {keyof typeof METHOD_CATALOG} */ (method)].rebindsSession) return;
    const sessionId = result?.session_id;
    if (typeof sessionId === "string" && sessionId !== this.sessionId) {
      this.sessionId = sessionId;
      this.lastSeq = 0;
    }
  }
}
