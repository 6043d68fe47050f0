//! The JavaScript package's tables, generated from the method catalog: `catalog.js` (an ES
//! module of plain data that the client's modules import) and its declarations `catalog.d.ts`,
//! beside the wire types of [`super::typescript`]. They hold what the JavaScript client decides with
//! locally: the protocol version pair it announces, every method with its least role, the
//! feature it needs and whether its success rebinds the session, the feature a request's
//! params need beyond that ([`super::params_features`]), and the protocol version that
//! introduced each feature.
//!
//! Text only: `carrier schema --out DIR --js DIR` writes the files and `--check` fails when
//! one is stale, missing, or a generated file this build does not define.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::params_features::{params_features, ParamsFeature};
use super::typescript::property_name;
use carrier::protocol::catalog::METHODS;
use carrier::protocol::features::Feature;
use carrier::protocol::version::{MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION};

/// How every generated file of the JavaScript package begins (`wire.d.ts` too), so a check can
/// tell a generated file this build no longer writes from a hand-written one.
pub(crate) const GENERATED_MARKER: &str = "// GENERATED FILE: do not edit.";

/// The tables' module, imported by the client's modules (`client.js` re-exports the public ones).
pub(crate) const CATALOG_JS: &str = "catalog.js";
/// Its declarations.
pub(crate) const CATALOG_D_TS: &str = "catalog.d.ts";

const HEADER: &str = "\
// GENERATED FILE: do not edit. Written by `carrier schema --out schemas --js js` from the Rust
// method catalog, like `wire.d.ts` beside it; `carrier schema --check schemas --js js` (run by
// CI) fails when it is stale.
";

const DOC_PROTOCOL_VERSION: &str = "/** Protocol version this client speaks. */";
const DOC_MIN_COMPATIBLE: &str = "/** Oldest server protocol this client still works with. */";
const DOC_CLIENT_VERSION: &str =
    "/** Version reported in the handshake's `client` field (the package's version). */";

/// The package's generated tables, file name → contents: [`CATALOG_JS`] and [`CATALOG_D_TS`].
/// `package_version` is the version the client reports in its handshake (the carrier's).
pub(crate) fn javascript_tables(package_version: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CATALOG_JS.to_owned(), catalog_js(package_version)),
        (CATALOG_D_TS.to_owned(), catalog_d_ts()),
    ])
}

fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

fn catalog_js(package_version: &str) -> String {
    let mut out = String::from(HEADER);
    out.push_str(
        "//\n// The protocol's tables as plain data for the client's modules; `client.js` re-exports the\n// public ones.\n\n",
    );
    let _ = writeln!(out, "{DOC_PROTOCOL_VERSION}");
    let _ = writeln!(
        out,
        "export const PROTOCOL_VERSION = {};",
        quoted(&PROTOCOL_VERSION.to_string())
    );
    let _ = writeln!(out, "{DOC_MIN_COMPATIBLE}");
    let _ = writeln!(
        out,
        "export const MIN_COMPATIBLE_PROTOCOL = {};",
        quoted(&MIN_COMPATIBLE_PROTOCOL.to_string())
    );
    let _ = writeln!(out, "{DOC_CLIENT_VERSION}");
    let _ = writeln!(
        out,
        "export const CLIENT_VERSION = {};",
        quoted(package_version)
    );

    out.push_str(
        "\n/**\n * Every method of the catalog with its least role, the protocol feature it needs \
         (`null`: core\n * protocol) and whether its success rebinds the connection to another \
         session (`seq` restarts).\n * @type {Readonly<Record<string, Readonly<{leastRole: \
         \"observe\" | \"drive\", feature: string | null, rebindsSession: boolean}>>>}\n */\n\
         export const METHOD_CATALOG = Object.freeze({\n",
    );
    for m in METHODS {
        let feature = m
            .feature
            .map_or_else(|| "null".to_owned(), |f| quoted(f.name()));
        let _ = writeln!(
            out,
            "  {}: Object.freeze({{ leastRole: {}, feature: {feature}, rebindsSession: {} }}),",
            quoted(m.name),
            quoted(m.least_role.as_str()),
            m.rebinds_session
        );
    }
    out.push_str("});\n");

    params_features_js(&mut out);

    out.push_str(
        "\n/**\n * The protocol version that introduced each optional feature.\n \
         * @type {Readonly<Record<string, string>>}\n */\n\
         export const FEATURE_PROTOCOLS = Object.freeze({\n",
    );
    for f in Feature::ALL {
        let _ = writeln!(
            out,
            "  {}: {},",
            property_name(f.name()),
            quoted(f.introduced_str())
        );
    }
    out.push_str("});\n");
    out
}

/// `PARAMS_FEATURES`: the catalog's `params_feature` as a lookup table.
fn params_features_js(out: &mut String) {
    out.push_str(
        "\n/**\n * The feature a request's params need beyond the method's own, by method: the \
         param that decides,\n * the feature when it is left out or `null` (`absent`), and the \
         one each value needs (`values`,\n * an enumerated param; a value not listed needs none: \
         the server refuses it as invalid) or\n * that any value needs (`present`).\n \
         * @type {Readonly<Record<string, Readonly<{param: string, absent: string | null, values: \
         Readonly<Record<string, string>> | null, present: string | null}>>>}\n */\n\
         export const PARAMS_FEATURES = Object.freeze({\n",
    );
    let feature = |f: Option<Feature>| f.map_or_else(|| "null".to_owned(), |f| quoted(f.name()));
    for ParamsFeature {
        method,
        param,
        absent,
        values,
        present,
    } in params_features()
    {
        let values = if values.is_empty() {
            "null".to_owned()
        } else {
            let entries: Vec<String> = values
                .iter()
                .map(|(value, f)| format!("{}: {}", property_name(value), quoted(f.name())))
                .collect();
            format!("Object.freeze({{ {} }})", entries.join(", "))
        };
        let _ = writeln!(
            out,
            "  {}:\n    Object.freeze({{ param: {}, absent: {}, values: {values}, present: {} }}),",
            quoted(method),
            quoted(&param),
            feature(absent),
            feature(present)
        );
    }
    out.push_str("});\n");
}

fn catalog_d_ts() -> String {
    let mut out = String::from(HEADER);
    out.push_str(
        "//\n// The declarations of `catalog.js`: the protocol's tables, typed by the wire types.\n\n\
         import type { FeatureName, MethodName, Methods } from \"./wire.js\";\n\n",
    );
    let _ = writeln!(out, "{DOC_PROTOCOL_VERSION}");
    let _ = writeln!(
        out,
        "export declare const PROTOCOL_VERSION: {};",
        quoted(&PROTOCOL_VERSION.to_string())
    );
    let _ = writeln!(out, "{DOC_MIN_COMPATIBLE}");
    let _ = writeln!(
        out,
        "export declare const MIN_COMPATIBLE_PROTOCOL: {};",
        quoted(&MIN_COMPATIBLE_PROTOCOL.to_string())
    );
    let _ = writeln!(out, "{DOC_CLIENT_VERSION}");
    out.push_str("export declare const CLIENT_VERSION: string;\n\n");
    out.push_str(
        "/** Every method with its least role, the feature it needs and whether it rebinds the \
         session. */\n\
         export declare const METHOD_CATALOG: { readonly [M in MethodName]: { readonly leastRole: \
         Methods[M][\"leastRole\"]; readonly feature: Methods[M][\"feature\"]; readonly \
         rebindsSession: boolean } };\n\
         /** The feature a request's params need beyond the method's own, by method. */\n\
         export declare const PARAMS_FEATURES: { readonly [method: string]: { readonly param: \
         string; readonly absent: FeatureName | null; readonly values: { readonly [value: \
         string]: FeatureName } | null; readonly present: FeatureName | null } };\n\
         /** The protocol version that introduced each optional feature. */\n\
         export declare const FEATURE_PROTOCOLS: { readonly [F in FeatureName]: string };\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_and_feature_is_in_the_tables_once_with_its_rules() {
        let files = javascript_tables("9.8.7");
        assert_eq!(
            files.keys().map(String::as_str).collect::<Vec<_>>(),
            [CATALOG_D_TS, CATALOG_JS]
        );
        let js = &files[CATALOG_JS];
        for m in METHODS {
            assert_eq!(
                js.matches(&format!("  \"{}\": Object.freeze(", m.name))
                    .count(),
                1,
                "{}",
                m.name
            );
        }
        assert!(js.contains(
            "  \"sessions.start\": Object.freeze({ leastRole: \"drive\", feature: \"sessions\", \
             rebindsSession: true }),\n"
        ));
        assert!(js.contains(
            "  \"system.ping\": Object.freeze({ leastRole: \"observe\", feature: null, \
             rebindsSession: false }),\n"
        ));
        for f in Feature::ALL {
            let key = property_name(f.name());
            let line = format!("  {key}: \"{}\",\n", f.introduced_str());
            assert_eq!(js.matches(&line).count(), 1, "{line}");
        }
        assert!(js.contains("  sessions: ") && js.contains("  \"usage.session\": "));
        assert!(js.contains(
            "  \"usage.report\":\n    Object.freeze({ param: \"scope\", absent: \"usage.session\", \
             values: Object.freeze({ session: \"usage.session\", personal: \"usage.personal\", \
             stored: \"usage.stored\" }), present: null }),\n"
        ));
        assert!(js.contains(&format!(
            "export const PROTOCOL_VERSION = \"{PROTOCOL_VERSION}\";\n"
        )));
        assert!(js.contains("export const CLIENT_VERSION = \"9.8.7\";\n"));
        for file in files.values() {
            assert!(file.starts_with(GENERATED_MARKER));
        }
        assert!(files[CATALOG_D_TS].contains(&format!(
            "export declare const MIN_COMPATIBLE_PROTOCOL: \"{MIN_COMPATIBLE_PROTOCOL}\";\n"
        )));
    }
}
