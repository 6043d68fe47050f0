//! Reading the loosely typed JSON of results and events for display.

use serde_json::Value;

/// The string at `key` of an object, if it is one.
pub(crate) fn string_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The driver identity as one short word: a string as is, an object by its `driver_id`.
pub(crate) fn driver_name(driver: &Value) -> String {
    match driver {
        Value::String(name) => name.clone(),
        Value::Object(fields) => fields
            .get("driver_id")
            .and_then(Value::as_str)
            .map_or_else(|| driver.to_string(), str::to_owned),
        Value::Null => "someone".into(),
        other => other.to_string(),
    }
}
