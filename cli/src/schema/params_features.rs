//! What the catalog's `params_feature` says, as data: for each method whose params can need a
//! feature of their own, the one param that decides it and which of its values needs which
//! feature. The JavaScript client's preflight looks a request's params up in this table instead
//! of restating the rule (`catalog.js`, `PARAMS_FEATURES`).
//!
//! The table is read off the Rust function itself: every param of a method's params schema is
//! tried (each value of an enumerated one, a smallest valid value of any other, `null`, and the
//! param left out) on a smallest valid params object, and the answers are recorded. A method
//! that needs no feature for any of them has no entry.

use serde_json::Value;

use carrier::protocol::catalog::{MethodSpec, METHODS};
use carrier::protocol::features::Feature;

/// How one method's params decide the feature they need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamsFeature {
    /// The method's wire name.
    pub(crate) method: &'static str,
    /// The param that decides.
    pub(crate) param: String,
    /// The feature needed when the param is left out or `null`.
    pub(crate) absent: Option<Feature>,
    /// An enumerated param: each value with the feature it needs (a value not listed: none;
    /// the server refuses it as `invalid_params`).
    pub(crate) values: Vec<(String, Feature)>,
    /// Any other param: the feature it needs whenever it is given.
    pub(crate) present: Option<Feature>,
}

/// Every method's entry, in catalog order.
pub(crate) fn params_features() -> Vec<ParamsFeature> {
    METHODS.iter().filter_map(method_entry).collect()
}

fn method_entry(spec: &MethodSpec) -> Option<ParamsFeature> {
    let schema = (spec.params_schema)();
    let root = schema.as_value();
    let base = smallest(root, root);
    let properties = root.get("properties").and_then(Value::as_object)?;
    properties.iter().find_map(|(param, property)| {
        let with = |value: Option<Value>| {
            let mut params = base.as_object().cloned().unwrap_or_default();
            match value {
                Some(value) => params.insert(param.clone(), value),
                None => params.remove(param),
            };
            (spec.params_feature)(&Value::Object(params))
        };
        // `null` reads as omitted, as the catalog's params types read it (a test holds every
        // method to that): one answer for both.
        let absent = with(None);
        let enumerated: Vec<(String, Option<Feature>)> = string_values(property, root)
            .into_iter()
            .map(|v| {
                let feature = with(Some(Value::from(v.as_str())));
                (v, feature)
            })
            .collect();
        let present = if enumerated.is_empty() {
            with(Some(smallest(property, root)))
        } else {
            None
        };
        // The param decides when some value of it needs another feature than leaving it out.
        let decides = if enumerated.is_empty() {
            present != absent
        } else {
            enumerated.iter().any(|(_, feature)| *feature != absent)
        };
        let values = enumerated
            .into_iter()
            .filter_map(|(v, feature)| Some((v, feature?)))
            .collect();
        decides.then(|| ParamsFeature {
            method: spec.name,
            param: param.clone(),
            absent,
            values,
            present,
        })
    })
}

/// `schema` itself, or the definition its `$ref` names.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|path| path.strip_prefix("#/$defs/"))
        .and_then(|name| root.get("$defs")?.get(name))
        .unwrap_or(schema)
}

/// The strings an enumerated schema allows (`enum`, or `const` alternatives); empty for any
/// other schema.
fn string_values(schema: &Value, root: &Value) -> Vec<String> {
    let schema = resolve(schema, root);
    let mut values: Vec<String> = schema
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(schema.get("const"))
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    for key in ["anyOf", "oneOf"] {
        for alternative in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            values.extend(string_values(alternative, root));
        }
    }
    values
}

/// A smallest value `schema` accepts: an object with its required properties only, the first
/// alternative or enumerated value, zero, false, an empty array. Strings are `"1.0"`, which a
/// free-form string and a protocol version (`MAJOR.MINOR`) both accept.
fn smallest(schema: &Value, root: &Value) -> Value {
    let schema = resolve(schema, root);
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return smallest(first, root);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str),
        Some(kind) => kind.as_str(),
        None => None,
    };
    match kind {
        Some("string") => Value::from("1.0"),
        Some("integer" | "number") => Value::from(0),
        Some("boolean") => Value::Bool(false),
        Some("array") => Value::Array(Vec::new()),
        Some("null") => Value::Null,
        _ => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required = schema.get("required").and_then(Value::as_array);
            let object = required
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(|name| {
                    let property = properties?.get(name)?;
                    Some((name.to_owned(), smallest(property, root)))
                })
                .collect();
            Value::Object(object)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_report_scopes_the_handshake_resume_and_option_id_are_read_off_the_catalog() {
        let table = params_features();
        let usage = table
            .iter()
            .find(|e| e.method == "usage.report")
            .expect("usage.report");
        assert_eq!(usage.param, "scope");
        assert_eq!(usage.absent, Some(Feature::UsageSession));
        assert_eq!(
            usage.values,
            [
                ("session".to_owned(), Feature::UsageSession),
                ("personal".to_owned(), Feature::UsagePersonal),
                ("stored".to_owned(), Feature::UsageStored),
            ]
        );
        assert_eq!(usage.present, None);
        let handshake = table
            .iter()
            .find(|e| e.method == "system.handshake")
            .expect("handshake");
        assert_eq!(
            (
                handshake.param.as_str(),
                handshake.absent,
                handshake.present
            ),
            ("resume", None, Some(Feature::Resume))
        );
        let respond = table
            .iter()
            .find(|e| e.method == "session.permission.respond")
            .expect("permission.respond");
        assert_eq!(
            (respond.param.as_str(), respond.absent, respond.present),
            ("option_id", None, Some(Feature::AgentUpdates))
        );
        assert_eq!(table.len(), 3, "{table:?}");
    }

    #[test]
    fn every_entry_agrees_with_the_catalog_function_and_no_method_is_left_out() {
        let table = params_features();
        for spec in METHODS {
            let schema = (spec.params_schema)();
            let base = smallest(schema.as_value(), schema.as_value());
            let Some(entry) = table.iter().find(|e| e.method == spec.name) else {
                // No param decides, so the params need nothing at all (or the table would say).
                assert_eq!((spec.params_feature)(&base), None, "{}", spec.name);
                continue;
            };
            for (value, feature) in &entry.values {
                let mut params = base.clone();
                params[&entry.param] = Value::from(value.as_str());
                let found = (spec.params_feature)(&params);
                assert_eq!(found, Some(*feature), "{} {value}", spec.name);
            }
            let mut absent = base.clone();
            if let Some(params) = absent.as_object_mut() {
                params.remove(&entry.param);
            }
            assert_eq!(
                (spec.params_feature)(&absent),
                entry.absent,
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn null_reads_as_omitted_for_every_param_of_every_method() {
        for spec in METHODS {
            let schema = (spec.params_schema)();
            let root = schema.as_value();
            let base = smallest(root, root);
            let properties = root.get("properties").and_then(Value::as_object);
            for param in properties.into_iter().flatten().map(|(name, _)| name) {
                let mut params = base.clone();
                if let Some(object) = params.as_object_mut() {
                    object.remove(param);
                }
                let omitted = (spec.params_feature)(&params);
                params[param] = Value::Null;
                let null = (spec.params_feature)(&params);
                assert_eq!(null, omitted, "{} {param}", spec.name);
            }
        }
    }
}
