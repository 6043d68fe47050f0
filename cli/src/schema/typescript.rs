//! TypeScript declarations of the wire types, generated from the method catalog (`carrier schema
//! --ts`): the same schemas [`super::json_schema`] generates as JSON Schema, turned into the text of one
//! `.d.ts` file (`js/wire.d.ts` in this repository) that the JavaScript package's hand-written
//! declarations import. `carrier schema --out DIR --ts FILE` writes it; `--check DIR --ts FILE`
//! fails when it is stale or missing.
//!
//! Every named type of every schema (the root's `title` and its `$defs`) becomes one
//! declaration; the catalog itself becomes the `Methods` and `Events` maps that type
//! `CarrierClient.request()` by method name. A name defined twice with different schemas is an
//! error, never a silent pick.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use carrier::protocol::catalog::METHODS;
use carrier::protocol::error::ErrorObject;
use carrier::protocol::events::EVENTS;
use carrier::protocol::features::Feature;

/// Why the declarations could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TypeScriptError {
    /// Two schemas define the same type name differently.
    #[error("two wire types are both named `{0}`; rename one")]
    Conflict(String),
    /// A schema has a shape the generator does not translate.
    #[error("no TypeScript for this schema: {0}")]
    Unsupported(String),
}

const HEADER: &str = "\
// GENERATED FILE: do not edit. Written by `carrier schema --out schemas --ts js/wire.d.ts` from
// the Rust method catalog, the same source as the JSON Schemas in `schemas/`;
// `carrier schema --check schemas --ts js/wire.d.ts` (run by CI) fails when it is stale.
//
// The wire types of the carrier protocol (docs/protocol.md): every method's params and result,
// every event payload, the error codes and the channel descriptor.
";

/// The declarations this build generates (the whole `.d.ts` file).
pub(crate) fn typescript_declarations() -> Result<String, TypeScriptError> {
    let mut types = BTreeMap::new();
    let mut add = |schema: schemars::Schema| -> Result<String, TypeScriptError> {
        collect(schema.as_value(), &mut types)
    };
    let mut methods = Vec::new();
    for m in METHODS {
        let params = add((m.params_schema)())?;
        let result = add((m.result_schema)())?;
        methods.push((m, params, result));
    }
    let mut events = Vec::new();
    for e in EVENTS {
        events.push((e, add((e.payload_schema)())?));
    }
    add(schemars::schema_for!(ErrorObject))?;

    let mut out = String::from(HEADER);
    for (name, schema) in &types {
        out.push('\n');
        declare(&mut out, name, schema)?;
    }

    out.push_str(
        "\n/**\n * Every method of the catalog: its params, result, the least role allowed to call it \
         and the\n * protocol feature it needs (`null`: the core protocol).\n */\nexport interface Methods {\n",
    );
    for (m, params, result) in &methods {
        let feature = m
            .feature
            .map(|f| format!("{:?}", f.name()))
            .unwrap_or_else(|| "null".into());
        let _ = writeln!(
            out,
            "  {:?}: {{ params: {params}; result: {result}; leastRole: {:?}; feature: {feature} }};",
            m.name,
            m.least_role.as_str()
        );
    }
    out.push_str("}\n");
    out.push_str(
        "\n/** A method's wire name. */\nexport type MethodName = keyof Methods;\n\
         /** The params of a method. */\nexport type MethodParams<M extends MethodName> = Methods[M][\"params\"];\n\
         /** The result of a method. */\nexport type MethodResult<M extends MethodName> = Methods[M][\"result\"];\n",
    );

    out.push_str(
        "\n/** Every event the server sends, with its payload. */\nexport interface Events {\n",
    );
    for (e, payload) in &events {
        let _ = writeln!(out, "  {:?}: {payload};", e.name);
    }
    out.push_str("}\n\n/** An event's wire name. */\nexport type EventName = keyof Events;\n");
    let session: Vec<String> = EVENTS
        .iter()
        .filter(|e| e.session)
        .map(|e| format!("{:?}", e.name))
        .collect();
    let _ = writeln!(
        out,
        "/** The session events: numbered with `seq`, replayed on resume. */\nexport type SessionEventName = {};",
        session.join(" | ")
    );
    let features: Vec<String> = Feature::ALL
        .iter()
        .map(|f| format!("{:?}", f.name()))
        .collect();
    let _ = writeln!(
        out,
        "/** The optional protocol features (`features` of the handshake result). */\nexport type FeatureName = {};",
        features.join(" | ")
    );
    Ok(out)
}

/// Adds a root schema's named types to `types` and returns the root's type name.
fn collect(root: &Value, types: &mut BTreeMap<String, Value>) -> Result<String, TypeScriptError> {
    let Some(object) = root.as_object() else {
        return Err(TypeScriptError::Unsupported(
            "a root schema that is not an object".into(),
        ));
    };
    let Some(title) = object.get("title").and_then(Value::as_str) else {
        return Err(TypeScriptError::Unsupported(
            "a root schema without a title".into(),
        ));
    };
    let mut body = object.clone();
    for meta in ["$schema", "title", "$defs"] {
        body.remove(meta);
    }
    insert(types, title, Value::Object(body))?;
    if let Some(defs) = object.get("$defs").and_then(Value::as_object) {
        for (name, schema) in defs {
            insert(types, name, schema.clone())?;
        }
    }
    Ok(title.to_owned())
}

fn insert(
    types: &mut BTreeMap<String, Value>,
    name: &str,
    schema: Value,
) -> Result<(), TypeScriptError> {
    match types.get(name) {
        Some(existing) if *existing != schema => Err(TypeScriptError::Conflict(name.to_owned())),
        Some(_) => Ok(()),
        None => {
            types.insert(name.to_owned(), schema);
            Ok(())
        }
    }
}

/// Writes one `export interface` (an object with properties) or `export type`.
fn declare(out: &mut String, name: &str, schema: &Value) -> Result<(), TypeScriptError> {
    let fields = schema.as_object();
    doc(out, "", fields);
    let properties = fields
        .and_then(|o| o.get("properties"))
        .and_then(Value::as_object);
    let is_object = fields.and_then(|o| o.get("type")) == Some(&Value::from("object"));
    if let (true, Some(properties)) = (is_object, properties) {
        let _ = writeln!(out, "export interface {name} {{");
        members(out, "  ", schema, properties)?;
        out.push_str("}\n");
        return Ok(());
    }
    let variants = fields
        .and_then(|o| o.get("oneOf"))
        .and_then(Value::as_array);
    if let Some(variants) = variants.filter(|v| v.len() > 1) {
        // One line per variant, each with its own doc comment.
        let _ = writeln!(out, "export type {name} =");
        for variant in variants {
            doc(out, "  ", variant.as_object());
            let _ = writeln!(out, "  | {}", ts_type(variant, "  ")?);
        }
        trim_to_semicolon(out);
        return Ok(());
    }
    let _ = writeln!(out, "export type {name} = {};", ts_type(schema, "")?);
    Ok(())
}

fn trim_to_semicolon(out: &mut String) {
    if out.ends_with('\n') {
        out.pop();
    }
    out.push_str(";\n");
}

/// The members of an object type, one per line, with `?` for the optional ones.
fn members(
    out: &mut String,
    indent: &str,
    schema: &Value,
    properties: &Map<String, Value>,
) -> Result<(), TypeScriptError> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let inner = format!("{indent}  ");
    for (key, property) in properties {
        doc(out, indent, property.as_object());
        let optional = if required.contains(&key.as_str()) {
            ""
        } else {
            "?"
        };
        let _ = writeln!(
            out,
            "{indent}{}{optional}: {};",
            property_name(key),
            ts_type(property, &inner)?
        );
    }
    if let Some(extra) = schema.get("additionalProperties") {
        let value = match extra {
            Value::Bool(true) => "unknown".to_owned(),
            Value::Bool(false) => return Ok(()),
            other => ts_type(other, &inner)?,
        };
        let _ = writeln!(out, "{indent}[key: string]: {value};");
    }
    Ok(())
}

/// The TypeScript type of a schema, inline.
fn ts_type(schema: &Value, indent: &str) -> Result<String, TypeScriptError> {
    let object = match schema {
        Value::Bool(true) => return Ok("unknown".into()),
        Value::Object(object) => object,
        other => return Err(TypeScriptError::Unsupported(other.to_string())),
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        return reference
            .strip_prefix("#/$defs/")
            .map(str::to_owned)
            .ok_or_else(|| TypeScriptError::Unsupported(format!("the reference {reference}")));
    }
    if let Some(value) = object.get("const") {
        return Ok(value.to_string());
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return Ok(values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | "));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(variants) = object.get(key).and_then(Value::as_array) {
            let parts = variants
                .iter()
                .map(|v| ts_type(v, indent))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(parts.join(" | "));
        }
    }
    let types: Vec<&str> = match object.get("type") {
        None => return Ok("unknown".into()),
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        Some(other) => return Err(TypeScriptError::Unsupported(format!("type {other}"))),
    };
    let parts = types
        .iter()
        .map(|t| primitive(t, object, indent))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(parts.join(" | "))
}

fn primitive(
    kind: &str,
    schema: &Map<String, Value>,
    indent: &str,
) -> Result<String, TypeScriptError> {
    Ok(match kind {
        "string" => "string".into(),
        "integer" | "number" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => {
            let item = match schema.get("items") {
                Some(items) => ts_type(items, indent)?,
                None => "unknown".into(),
            };
            if item.contains(' ') {
                format!("Array<{item}>")
            } else {
                format!("{item}[]")
            }
        }
        "object" => {
            let value = Value::Object(schema.clone());
            match schema.get("properties").and_then(Value::as_object) {
                Some(properties) => {
                    let mut out = String::from("{\n");
                    members(&mut out, &format!("{indent}  "), &value, properties)?;
                    out.push_str(indent);
                    out.push('}');
                    out
                }
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(true)) => "{ [key: string]: unknown }".into(),
                    Some(extra @ Value::Object(_)) => {
                        format!("{{ [key: string]: {} }}", ts_type(extra, indent)?)
                    }
                    // An object that declares nothing: `{}` on the wire, nothing else.
                    _ => "Record<string, never>".into(),
                },
            }
        }
        other => return Err(TypeScriptError::Unsupported(format!("type {other:?}"))),
    })
}

/// `key` as a property name: bare when it is an identifier, quoted otherwise.
pub(crate) fn property_name(key: &str) -> String {
    let identifier = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if identifier {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

/// A JSDoc comment from a schema's `description` (and `deprecated`).
fn doc(out: &mut String, indent: &str, schema: Option<&Map<String, Value>>) {
    let Some(schema) = schema else { return };
    let description = schema.get("description").and_then(Value::as_str);
    let deprecated = schema.get("deprecated") == Some(&Value::Bool(true));
    if description.is_none() && !deprecated {
        return;
    }
    let mut lines: Vec<String> = description
        .unwrap_or_default()
        .replace("*/", "*\\/")
        .lines()
        .map(str::to_owned)
        .collect();
    if deprecated {
        lines.push("@deprecated".into());
    }
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/** {} */", lines[0]);
        return;
    }
    let _ = writeln!(out, "{indent}/**");
    for line in lines {
        let _ = writeln!(out, "{indent} * {line}");
    }
    let _ = writeln!(out, "{indent} */");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_and_event_is_declared_once() {
        let text = typescript_declarations().unwrap();
        for m in METHODS {
            assert_eq!(
                text.matches(&format!("  {:?}: {{ params:", m.name)).count(),
                1,
                "{}",
                m.name
            );
        }
        for e in EVENTS {
            assert!(text.contains(&format!("  {:?}: ", e.name)), "{}", e.name);
        }
        assert!(text.contains("export interface SubmitParams {\n  /** Agent-specific options"));
        assert!(text.contains("  prompt: string;\n"));
        assert!(text.contains("export type Empty = Record<string, never>;"));
        assert!(text.contains("export type ErrorCode =\n"));
        assert!(text.contains("export interface ChannelDescriptor {"));
    }

    #[test]
    fn optional_nullable_fields_and_unions_translate() {
        let schema = serde_json::json!({
            "title": "Probe",
            "type": "object",
            "properties": {
                "a": { "type": ["string", "null"] },
                "b": { "anyOf": [{ "$ref": "#/$defs/Inner" }, { "type": "null" }] },
                "c": { "type": "array", "items": { "type": "integer" } },
                "d-e": { "description": "Free-form." },
                "f": { "type": "object", "additionalProperties": { "type": "boolean" } }
            },
            "required": ["c"],
            "$defs": { "Inner": { "type": "string", "const": "x" } }
        });
        let mut types = BTreeMap::new();
        assert_eq!(collect(&schema, &mut types).unwrap(), "Probe");
        let mut out = String::new();
        declare(&mut out, "Probe", &types["Probe"]).unwrap();
        assert_eq!(
            out,
            "export interface Probe {\n  a?: string | null;\n  b?: Inner | null;\n  c: number[];\n  \
             /** Free-form. */\n  \"d-e\"?: unknown;\n  f?: { [key: string]: boolean };\n}\n"
        );
        assert_eq!(
            types["Inner"],
            serde_json::json!({ "type": "string", "const": "x" })
        );
    }

    #[test]
    fn a_name_defined_twice_differently_is_refused() {
        let mut types = BTreeMap::new();
        let one = serde_json::json!({ "title": "Same", "type": "string" });
        let other = serde_json::json!({ "title": "Same", "type": "integer" });
        collect(&one, &mut types).unwrap();
        collect(&one, &mut types).unwrap();
        assert!(
            matches!(collect(&other, &mut types), Err(TypeScriptError::Conflict(n)) if n == "Same")
        );
    }
}
