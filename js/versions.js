/**
 * Protocol versions from the client's side (docs/protocol.md, "Versions"): `MAJOR.MINOR` read as
 * the protocol reads it, and a server's pair judged against this client's. The rules are the
 * protocol crate's (`protocol/src/version.rs`); the cases in
 * `protocol/tests/vectors/client-rules.json` hold both to them.
 *
 * Not part of the public API.
 *
 * @module carrier-client/versions
 * @internal
 */

import { MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "./catalog.js";
import { CarrierError } from "./errors.js";

/**
 * @typedef {[number, number]} Version
 * @typedef {{protocol_version: unknown, min_compatible_protocol: unknown}} AnnouncedPair
 * @typedef {"major_mismatch" | "server_too_old" | "client_too_old"} Incompatibility
 * @typedef {{verdict: "compatible"}
 *   | {verdict: "skew", update: "client" | "server"}
 *   | {verdict: "incompatible", why: Incompatibility, update: "client" | "server"}} Verdict
 */

/** This client's pair, as its handshake announces it. */
export const CLIENT_PAIR = Object.freeze({
  protocol_version: PROTOCOL_VERSION,
  min_compatible_protocol: MIN_COMPATIBLE_PROTOCOL,
});

/**
 * A `MAJOR.MINOR` protocol version as the protocol reads it (no sign, no padding, no leading
 * zeros, each part at most 65535), or null.
 * @param {unknown} text
 * @returns {Version | null}
 */
export function parseVersion(text) {
  const match = typeof text === "string" ? /^(0|[1-9][0-9]{0,4})\.(0|[1-9][0-9]{0,4})$/.exec(text) : null;
  if (!match) return null;
  const version = /** @type {Version} */ ([Number(match[1]), Number(match[2])]);
  return version[0] <= 65535 && version[1] <= 65535 ? version : null;
}

/**
 * Negative, zero or positive as `a` is older than, the same as or newer than `b`.
 * @param {Version} a
 * @param {Version} b
 */
export function compareVersions(a, b) {
  return a[0] - b[0] || a[1] - b[1];
}

/**
 * @param {AnnouncedPair} pair
 * @returns {{version: Version, min: Version} | null} null when unreadable or its minimum is above its version
 */
function readPair(pair) {
  const version = parseVersion(pair.protocol_version);
  const min = parseVersion(pair.min_compatible_protocol);
  return version && min && compareVersions(min, version) <= 0 ? { version, min } : null;
}

/**
 * Whether a client and a server can talk, and which side to update when they differ (the older
 * one): same major and each at least the other's minimum, `skew` when the minors differ.
 * @param {AnnouncedPair} client
 * @param {AnnouncedPair} server
 * @returns {Verdict | null} null when either pair is unreadable
 */
export function assessVersions(client, server) {
  const ours = readPair(client);
  const theirs = readPair(server);
  if (!ours || !theirs) return null;
  const update = compareVersions(ours.version, theirs.version) < 0 ? "client" : "server";
  /** @type {Incompatibility | null} */
  let why = null;
  if (theirs.version[0] !== ours.version[0]) why = "major_mismatch";
  else if (compareVersions(theirs.version, ours.min) < 0) why = "server_too_old";
  else if (compareVersions(ours.version, theirs.min) < 0) why = "client_too_old";
  if (why !== null) return { verdict: "incompatible", why, update };
  return theirs.version[1] === ours.version[1] ? { verdict: "compatible" } : { verdict: "skew", update };
}

/** @type {Record<Incompatibility, string>} */
const WHY = {
  major_mismatch: "protocol major versions differ",
  server_too_old: "the server's protocol is older than this client accepts",
  client_too_old: "this client's protocol is older than the server accepts",
};

/**
 * The handshake layer's judgement of a server's handshake result: `{skew}` when this client can
 * talk to it, else the `version_incompatible` error it refuses the server with (as a server
 * refuses a client), or `protocol_error` when the result's versions cannot be read.
 * @param {Record<string, unknown>} result
 * @param {AnnouncedPair} [client] this client's pair
 * @returns {{skew: boolean} | CarrierError}
 */
export function judgeVersions(result, client = CLIENT_PAIR) {
  const server = { protocol_version: result.protocol_version, min_compatible_protocol: result.min_compatible_protocol };
  const verdict = assessVersions(client, server);
  if (verdict === null) {
    return new CarrierError("protocol_error", `the carrier's handshake result has unreadable versions (protocol_version ${JSON.stringify(server.protocol_version)}, min_compatible_protocol ${JSON.stringify(server.min_compatible_protocol)})`, { effectState: "none" });
  }
  if (verdict.verdict !== "incompatible") return { skew: verdict.verdict === "skew" };
  const update = verdict.update === "client" ? "update the client" : "update the carrier server";
  return new CarrierError(
    "version_incompatible",
    `${WHY[verdict.why]}: server speaks ${server.protocol_version} (accepts ${server.min_compatible_protocol} or later), client speaks ${client.protocol_version} (accepts ${client.min_compatible_protocol} or later); ${update}`,
    {
      effectState: "none",
      data: {
        server,
        client: { protocol_version: client.protocol_version, min_compatible_protocol: client.min_compatible_protocol },
      },
    },
  );
}
