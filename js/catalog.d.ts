// GENERATED FILE: do not edit. Written by `carrier schema --out schemas --js js` from the Rust
// method catalog, like `wire.d.ts` beside it; `carrier schema --check schemas --js js` (run by
// CI) fails when it is stale.
//
// The declarations of `catalog.js`: the protocol's tables, typed by the wire types.

import type { FeatureName, MethodName, Methods } from "./wire.js";

/** Protocol version this client speaks. */
export declare const PROTOCOL_VERSION: "1.2";
/** Oldest server protocol this client still works with. */
export declare const MIN_COMPATIBLE_PROTOCOL: "1.0";
/** Version reported in the handshake's `client` field (the package's version). */
export declare const CLIENT_VERSION: string;

/** Every method with its least role, the feature it needs and whether it rebinds the session. */
export declare const METHOD_CATALOG: { readonly [M in MethodName]: { readonly leastRole: Methods[M]["leastRole"]; readonly feature: Methods[M]["feature"]; readonly rebindsSession: boolean } };
/** The feature a request's params need beyond the method's own, by method. */
export declare const PARAMS_FEATURES: { readonly [method: string]: { readonly param: string; readonly absent: FeatureName | null; readonly values: { readonly [value: string]: FeatureName } | null; readonly present: FeatureName | null } };
/** The protocol version that introduced each optional feature. */
export declare const FEATURE_PROTOCOLS: { readonly [F in FeatureName]: string };
