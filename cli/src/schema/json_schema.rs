//! JSON Schemas of every params, result and event type, generated from the method catalog.
//!
//! One file per type: `METHOD.params.json`, `METHOD.result.json`, `EVENT.event.json`, plus
//! `error.json` for the error object. [`schema_files`] returns their names and contents;
//! `carrier schema --out DIR` writes them and `--check DIR` (run by CI) reports stale, missing
//! and unexpected files.

use std::collections::BTreeMap;

use carrier::protocol::catalog::METHODS;
use carrier::protocol::error::ErrorObject;
use carrier::protocol::events::EVENTS;

/// Every schema file this build defines: file name → contents (pretty JSON, newline-terminated).
pub(crate) fn schema_files() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut add = |name: String, schema: schemars::Schema| {
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        files.insert(name, text);
    };
    for m in METHODS {
        add(format!("{}.params.json", m.name), (m.params_schema)());
        add(format!("{}.result.json", m.name), (m.result_schema)());
    }
    for e in EVENTS {
        add(format!("{}.event.json", e.name), (e.payload_schema)());
    }
    add("error.json".into(), schemars::schema_for!(ErrorObject));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_per_params_result_and_event() {
        let files = schema_files();
        assert_eq!(files.len(), METHODS.len() * 2 + EVENTS.len() + 1);
        let submit = &files["session.submit.params.json"];
        assert!(submit.contains("\"prompt\""));
    }
}
