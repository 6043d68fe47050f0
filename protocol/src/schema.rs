//! JSON Schemas of every params, result and event type, generated from the method catalog.
//!
//! One file per type: `METHOD.params.json`, `METHOD.result.json`, `EVENT.event.json`, plus
//! `error.json` for the error object. [`write_schemas`] writes them (`carrier schema --out DIR`);
//! [`check_schemas`] compares a directory with what this build would write (`carrier schema
//! --check DIR`, run by CI) and reports stale, missing and unexpected files.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::catalog::{EVENTS, METHODS};
use super::error::ErrorObject;

/// Every schema file this build defines: file name → contents (pretty JSON, newline-terminated).
pub fn schema_files() -> BTreeMap<String, String> {
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

/// Writes every schema into `dir` (created if needed), returning the paths written. Files in
/// `dir` that this build does not define are left alone (`check_schemas` reports them).
pub fn write_schemas(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (name, text) in schema_files() {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// Why a schema directory does not match this build.
#[derive(Debug)]
pub enum SchemaCheckError {
    /// The directory or a file could not be read.
    Io(io::Error),
    /// The committed files differ from what this build generates.
    Mismatch {
        /// Files whose contents differ.
        stale: Vec<PathBuf>,
        /// Files this build defines that are absent.
        missing: Vec<PathBuf>,
        /// Files present that this build does not define.
        unexpected: Vec<PathBuf>,
    },
}

impl fmt::Display for SchemaCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaCheckError::Io(e) => write!(f, "cannot read the schema directory: {e}"),
            SchemaCheckError::Mismatch {
                stale,
                missing,
                unexpected,
            } => {
                write!(f, "the JSON Schemas are out of date")?;
                for (label, paths) in [
                    ("stale", stale),
                    ("missing", missing),
                    ("unexpected", unexpected),
                ] {
                    for p in paths {
                        write!(f, "\n  {label}: {}", p.display())?;
                    }
                }
                write!(f, "\nregenerate them with `carrier schema --out DIR`")
            }
        }
    }
}

impl std::error::Error for SchemaCheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchemaCheckError::Io(e) => Some(e),
            SchemaCheckError::Mismatch { .. } => None,
        }
    }
}

impl From<io::Error> for SchemaCheckError {
    fn from(e: io::Error) -> Self {
        SchemaCheckError::Io(e)
    }
}

/// Compares `dir` with what [`write_schemas`] would write. A missing directory counts as every
/// file missing.
pub fn check_schemas(dir: &Path) -> Result<(), SchemaCheckError> {
    let expected = schema_files();
    let mut stale = Vec::new();
    let mut missing = Vec::new();
    let mut unexpected = Vec::new();
    for (name, text) in &expected {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(actual) if actual == text.as_bytes() => {}
            Ok(_) => stale.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(path),
            Err(e) => return Err(e.into()),
        }
    }
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name();
                if !expected.contains_key(name.to_string_lossy().as_ref()) {
                    unexpected.push(entry.path());
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    if stale.is_empty() && missing.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    unexpected.sort();
    Err(SchemaCheckError::Mismatch {
        stale,
        missing,
        unexpected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_check_passes_and_detects_drift() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_schemas(dir.path()).unwrap();
        assert_eq!(written.len(), schema_files().len());
        check_schemas(dir.path()).unwrap();

        std::fs::write(dir.path().join("system.ping.params.json"), "{}\n").unwrap();
        std::fs::remove_file(dir.path().join("session.submit.result.json")).unwrap();
        std::fs::write(dir.path().join("old.json"), "{}").unwrap();
        let Err(SchemaCheckError::Mismatch {
            stale,
            missing,
            unexpected,
        }) = check_schemas(dir.path())
        else {
            panic!("expected a mismatch")
        };
        assert_eq!(stale, [dir.path().join("system.ping.params.json")]);
        assert_eq!(missing, [dir.path().join("session.submit.result.json")]);
        assert_eq!(unexpected, [dir.path().join("old.json")]);
    }

    #[test]
    fn one_file_per_params_result_and_event() {
        let files = schema_files();
        assert_eq!(files.len(), METHODS.len() * 2 + EVENTS.len() + 1);
        let submit = &files["session.submit.params.json"];
        assert!(submit.contains("\"prompt\""));
    }

    #[test]
    fn committed_schemas_are_current() {
        // `CARRIER_BLESS_SCHEMAS=1 cargo test` regenerates them (like `carrier schema --out`).
        // The schemas live at the repository root, one directory above this crate.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
        if std::env::var_os("CARRIER_BLESS_SCHEMAS").is_some() {
            write_schemas(&dir).unwrap();
        }
        if let Err(e) = check_schemas(&dir) {
            panic!("{e}");
        }
    }
}
