// GENERATED FILE: do not edit. Written by `carrier schema --out schemas --js js` from the Rust
// method catalog, like `wire.d.ts` beside it; `carrier schema --check schemas --js js` (run by
// CI) fails when it is stale.
//
// The protocol's tables as plain data for the client's modules; `client.js` re-exports the
// public ones.

/** Protocol version this client speaks. */
export const PROTOCOL_VERSION = "1.2";
/** Oldest server protocol this client still works with. */
export const MIN_COMPATIBLE_PROTOCOL = "1.0";
/** Version reported in the handshake's `client` field (the package's version). */
export const CLIENT_VERSION = "0.2.0";

/**
 * Every method of the catalog with its least role, the protocol feature it needs (`null`: core
 * protocol) and whether its success rebinds the connection to another session (`seq` restarts).
 * @type {Readonly<Record<string, Readonly<{leastRole: "observe" | "drive", feature: string | null, rebindsSession: boolean}>>>}
 */
export const METHOD_CATALOG = Object.freeze({
  "system.handshake": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
  "system.ping": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
  "system.status": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
  "surface.role": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
  "session.submit": Object.freeze({ leastRole: "drive", feature: null, rebindsSession: false }),
  "session.abort": Object.freeze({ leastRole: "drive", feature: null, rebindsSession: false }),
  "session.permission.respond": Object.freeze({ leastRole: "drive", feature: "permissions", rebindsSession: false }),
  "session.history": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
  "session.status": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
  "sessions.list": Object.freeze({ leastRole: "observe", feature: "sessions", rebindsSession: false }),
  "sessions.start": Object.freeze({ leastRole: "drive", feature: "sessions", rebindsSession: true }),
  "sessions.switch": Object.freeze({ leastRole: "observe", feature: "sessions", rebindsSession: true }),
  "channels.list": Object.freeze({ leastRole: "observe", feature: "channels", rebindsSession: false }),
  "usage.report": Object.freeze({ leastRole: "observe", feature: null, rebindsSession: false }),
});

/**
 * The feature a request's params need beyond the method's own, by method: the param that decides,
 * the feature when it is left out or `null` (`absent`), and the one each value needs (`values`,
 * an enumerated param; a value not listed needs none: the server refuses it as invalid) or
 * that any value needs (`present`).
 * @type {Readonly<Record<string, Readonly<{param: string, absent: string | null, values: Readonly<Record<string, string>> | null, present: string | null}>>>}
 */
export const PARAMS_FEATURES = Object.freeze({
  "system.handshake":
    Object.freeze({ param: "resume", absent: null, values: null, present: "resume" }),
  "session.permission.respond":
    Object.freeze({ param: "option_id", absent: null, values: null, present: "agent_updates" }),
  "usage.report":
    Object.freeze({ param: "scope", absent: "usage.session", values: Object.freeze({ session: "usage.session", personal: "usage.personal", stored: "usage.stored" }), present: null }),
});

/**
 * The protocol version that introduced each optional feature.
 * @type {Readonly<Record<string, string>>}
 */
export const FEATURE_PROTOCOLS = Object.freeze({
  sessions: "1.0",
  resume: "1.0",
  permissions: "1.0",
  channels: "1.0",
  "usage.session": "1.0",
  "usage.personal": "1.0",
  "usage.stored": "1.0",
  bulk_credit: "1.1",
  agent_updates: "1.2",
});
