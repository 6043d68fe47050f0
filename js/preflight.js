/**
 * What the client refuses locally before anything is sent: a request whose method (or params)
 * needs a feature the server lacks (`unsupported_feature`, docs/protocol.md, "Features"), and a
 * request or channel send its role does not allow (`forbidden`). Which method and which params
 * value need which feature, and each method's least role, are the generated tables of
 * `catalog.js`; the feature rule is the protocol crate's (`Peers::preflight_announced`), and
 * the cases in `protocol/tests/vectors/client-rules.json` hold both to it.
 *
 * Not part of the public API (`METHOD_FEATURES` is re-exported by `client.js`).
 *
 * @module carrier-client/preflight
 * @internal
 */

import { FEATURE_PROTOCOLS, METHOD_CATALOG, PARAMS_FEATURES, PROTOCOL_VERSION } from "./catalog.js";
import { CarrierError } from "./errors.js";
import { isObject } from "./internal.js";
import { compareVersions, parseVersion } from "./versions.js";

/**
 * @typedef {{feature: string, requiredProtocol: string}} FeatureNeed
 * @typedef {{protocol_version?: unknown, features?: Record<string, unknown>}} ServerAnnouncement
 *   the handshake result's fields that preflight reads
 */

/**
 * The protocol version that introduced `feature`.
 * @param {string} feature
 * @returns {string}
 */
function featureProtocol(feature) {
  return /** @type {Record<string, string>} */ (FEATURE_PROTOCOLS)[feature];
}

/**
 * Methods that need an optional protocol feature, with the protocol version that introduced it:
 * what feature preflight consults before sending a request. Derived from the catalog.
 * @type {Readonly<Record<string, FeatureNeed>>}
 */
export const METHOD_FEATURES = Object.freeze(
  Object.fromEntries(
    Object.entries(METHOD_CATALOG)
      .filter(([, spec]) => spec.feature !== null)
      .map(([method, { feature }]) => [
        method,
        Object.freeze({ feature: /** @type {string} */ (feature), requiredProtocol: featureProtocol(/** @type {string} */ (feature)) }),
      ]),
  ),
);

/**
 * `table[key]` when `table` has it as its own property (a method name such as `toString` is
 * not a catalog entry).
 * @template T
 * @param {Readonly<Record<string, T>>} table
 * @param {string} key
 * @returns {T | undefined}
 */
function own(table, key) {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/**
 * The feature a request's params need beyond its method's, looked up in the catalog's
 * `PARAMS_FEATURES` (a `usage.report` scope is the feature `usage.<scope>`, `session` when
 * omitted). A value the table does not list needs none: the server refuses it as invalid.
 * @param {string} method
 * @param {unknown} params
 * @returns {FeatureNeed | undefined}
 */
export function paramsFeature(method, params) {
  const rule = own(PARAMS_FEATURES, method);
  if (!rule) return undefined;
  const value = isObject(params) ? /** @type {Record<string, unknown>} */ (params)[rule.param] : undefined;
  let feature;
  if (value === undefined || value === null) feature = rule.absent;
  else if (rule.values) feature = typeof value === "string" ? own(rule.values, value) : undefined;
  else feature = rule.present;
  return feature ? { feature, requiredProtocol: featureProtocol(feature) } : undefined;
}

/**
 * The `unsupported_feature` error for `method` when the server that announced `server` (its
 * handshake result) lacks `need`, else null. A feature announced `true` is available (the
 * server judged it for this client); one announced `false` is missing; one not listed is
 * missing only when the server's protocol predates it. A feature the server has but this
 * client's protocol predates names the client as the side to update.
 * @param {string} method
 * @param {FeatureNeed | undefined} need
 * @param {ServerAnnouncement} server
 * @param {string} [clientProtocol] this client's protocol version
 * @returns {CarrierError | null}
 */
export function featureRefusal(method, need, server, clientProtocol = PROTOCOL_VERSION) {
  if (!need) return null;
  const announced = server.features?.[need.feature];
  if (announced === true) return null;
  const serverProtocol = String(server.protocol_version ?? "0.0");
  const required = parseVersion(need.requiredProtocol) ?? [0, 0];
  const serverPredates = compareVersions(parseVersion(serverProtocol) ?? [0, 0], required) < 0;
  const serverHas = typeof announced === "boolean" ? announced : !serverPredates;
  let component, actualProtocol, recovery;
  if (serverPredates || !serverHas) {
    component = "server";
    actualProtocol = serverProtocol;
    recovery = serverPredates
      ? `update the carrier server to protocol ${need.requiredProtocol} or later`
      : `the host did not enable ${need.feature}; ask the host to wire it, or update the carrier server to a build that has it`;
  } else if (compareVersions(parseVersion(clientProtocol) ?? [0, 0], required) < 0) {
    component = "client";
    actualProtocol = clientProtocol;
    recovery = `update the client to protocol ${need.requiredProtocol} or later`;
  } else {
    return null;
  }
  return new CarrierError("unsupported_feature", `${method} needs the feature "${need.feature}", which is not available: ${recovery}`, {
    effectState: "none",
    data: { feature: need.feature, component, required_protocol: need.requiredProtocol, actual_protocol: actualProtocol, recovery },
  });
}

/**
 * Feature preflight of a request: the method's feature (from `methodFeatures`), then its
 * params' own.
 * @param {string} method
 * @param {unknown} params
 * @param {ServerAnnouncement} server the handshake result
 * @param {Readonly<Record<string, FeatureNeed>>} [methodFeatures]
 * @returns {CarrierError | null}
 */
export function preflight(method, params, server, methodFeatures = METHOD_FEATURES) {
  return featureRefusal(method, own(methodFeatures, method), server) ?? featureRefusal(method, paramsFeature(method, params), server);
}

const ROLE_RANK = { observe: 0, drive: 1 };

/**
 * The local `forbidden` error when a client that asked for `asked` and was granted `granted`
 * may not do what needs `leastRole` (its effective role is the lesser of the two), else null.
 * @param {string} what e.g. `session.submit`, `sending on channel mic`
 * @param {"observe" | "drive" | undefined} leastRole
 * @param {"observe" | "drive"} asked
 * @param {"observe" | "drive"} granted
 * @returns {CarrierError | null}
 */
export function roleRefusal(what, leastRole, asked, granted) {
  const effective = ROLE_RANK[asked] < ROLE_RANK[granted] ? asked : granted;
  if (leastRole === undefined || ROLE_RANK[effective] >= ROLE_RANK[leastRole]) return null;
  return new CarrierError("forbidden", `${what} needs the ${leastRole} role; this client has the ${effective} role`, {
    effectState: "none",
    data: { least_role: leastRole, role: effective },
  });
}

/**
 * The least role `method` needs, from the catalog (undefined for a method it does not list:
 * the server answers those).
 * @param {string} method
 */
export function leastRoleOf(method) {
  return own(METHOD_CATALOG, method)?.leastRole;
}
