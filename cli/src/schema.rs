//! `carrier schema --out DIR | --check DIR [--ts FILE] [--js DIR] [--docs FILE]`: the files
//! generated from the method catalog — the JSON Schemas, the TypeScript declarations of the
//! wire types, the JavaScript package's tables and the tables of the protocol reference —
//! written, or checked against the committed ones. The generators below return text; the disk
//! is this command's.

mod files;
mod javascript;
mod json_schema;
mod params_features;
mod reference;
mod typescript;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use files::{FileSet, Strays};
use javascript::{javascript_tables, GENERATED_MARKER};
use json_schema::schema_files;
use reference::{fill_reference, ReferenceError};
use typescript::{typescript_declarations, TypeScriptError};

/// Flags of `carrier schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Write one JSON Schema per params/result/event type into DIR.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "check",
        required_unless_present = "check"
    )]
    out: Option<PathBuf>,
    /// Exit non-zero if the schemas in DIR (and the --ts and --js files) are stale, missing or
    /// unexpected.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
    /// Also write (with --out) or check (with --check) the TypeScript declarations of the wire
    /// types in FILE, e.g. js/wire.d.ts (default with --js: DIR/wire.d.ts).
    #[arg(long, value_name = "FILE")]
    ts: Option<PathBuf>,
    /// Also write or check the JavaScript package's tables in DIR, e.g. js: catalog.js (methods
    /// with their least role, feature and session rebinding; features with their versions; the
    /// protocol version pair) and catalog.d.ts. A file in DIR that begins like a generated file
    /// but is not one counts as unexpected.
    #[arg(long, value_name = "DIR")]
    js: Option<PathBuf>,
    /// Also fill (with --out) or check (with --check) the generated tables of the protocol
    /// reference in FILE, e.g. docs/protocol.md: the methods, events, error codes, features and
    /// their compatibility, each between its marker lines; the rest of FILE is left as it is.
    #[arg(long, value_name = "FILE")]
    docs: Option<PathBuf>,
}

/// Why the files could not be generated.
#[derive(Debug, thiserror::Error)]
enum GenerateError {
    #[error(transparent)]
    TypeScript(#[from] TypeScriptError),
    #[error("--ts {}: not a file name", .0.display())]
    NotAFile(PathBuf),
    #[error("--docs {}: not a file name", .0.display())]
    DocsNotAFile(PathBuf),
    #[error("--docs: cannot read the reference: {0}")]
    ReadDocs(#[from] files::FileError),
    #[error("--docs {}: {source}", path.display())]
    Reference {
        path: PathBuf,
        source: ReferenceError,
    },
}

/// Runs `carrier schema`.
pub fn run(args: SchemaArgs) -> ExitCode {
    let Some(dir) = args.out.as_deref().or(args.check.as_deref()) else {
        return ExitCode::from(2);
    };
    let ts = args
        .ts
        .clone()
        .or_else(|| args.js.as_ref().map(|js| js.join("wire.d.ts")));
    let sets = match file_sets(dir, ts.as_deref(), args.js.as_deref(), args.docs.as_deref()) {
        Ok(sets) => sets,
        Err(e) => {
            eprintln!("carrier schema: {e}");
            return ExitCode::from(1);
        }
    };
    if args.out.is_some() {
        return write(&sets);
    }
    let mut regenerate = format!("cargo run -- schema --out {}", dir.display());
    for (flag, path) in [
        ("--ts", &args.ts),
        ("--js", &args.js),
        ("--docs", &args.docs),
    ] {
        if let Some(path) = path {
            regenerate.push_str(&format!(" {flag} {}", path.display()));
        }
    }
    check(&sets, &regenerate)
}

/// Every set of files this run generates: the schemas in `dir`, the declarations in `ts`, the
/// JavaScript tables in `js`, the reference `docs` with its tables filled in.
fn file_sets(
    dir: &Path,
    ts: Option<&Path>,
    js: Option<&Path>,
    docs: Option<&Path>,
) -> Result<Vec<FileSet>, GenerateError> {
    let mut sets = vec![FileSet {
        what: "the JSON Schemas",
        dir: dir.to_owned(),
        files: schema_files(),
        strays: Strays::AnyFile,
    }];
    if let Some(file) = ts {
        let name = file
            .file_name()
            .ok_or_else(|| GenerateError::NotAFile(file.to_owned()))?;
        sets.push(FileSet {
            what: "the TypeScript declarations",
            dir: file.parent().unwrap_or(Path::new("")).to_owned(),
            files: [(
                name.to_string_lossy().into_owned(),
                typescript_declarations()?,
            )]
            .into(),
            strays: Strays::None,
        });
    }
    if let Some(js) = js {
        sets.push(FileSet {
            what: "the JavaScript tables",
            dir: js.to_owned(),
            // The client reports the carrier's version in its handshake, like the Rust client.
            files: javascript_tables(env!("CARGO_PKG_VERSION")),
            strays: Strays::MarkedWith(GENERATED_MARKER),
        });
    }
    if let Some(file) = docs {
        let name = file
            .file_name()
            .ok_or_else(|| GenerateError::DocsNotAFile(file.to_owned()))?;
        // The reference is hand-written around its tables: what it should be is the file on
        // disk with the tables this build generates.
        let filled =
            fill_reference(&files::read(file)?).map_err(|source| GenerateError::Reference {
                path: file.to_owned(),
                source,
            })?;
        sets.push(FileSet {
            what: "the protocol reference's tables",
            dir: file.parent().unwrap_or(Path::new("")).to_owned(),
            files: [(name.to_string_lossy().into_owned(), filled)].into(),
            strays: Strays::None,
        });
    }
    Ok(sets)
}

/// The path a message names for a set: its one file, or its directory.
fn shown(set: &FileSet) -> PathBuf {
    match (set.strays, set.files.keys().next()) {
        (Strays::None, Some(name)) if set.files.len() == 1 => set.dir.join(name),
        _ => set.dir.clone(),
    }
}

fn write(sets: &[FileSet]) -> ExitCode {
    for set in sets {
        match files::write(set) {
            Ok(count) => {
                let files = if count == 1 { "file" } else { "files" };
                println!(
                    "wrote {} ({count} {files}) to {}",
                    set.what,
                    shown(set).display()
                );
            }
            Err(e) => {
                eprintln!("carrier schema: cannot write {}: {e}", set.what);
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

/// Every path the run generates, so a set's directory can share files with another set's.
fn defined(sets: &[FileSet]) -> BTreeSet<PathBuf> {
    sets.iter()
        .flat_map(|set| set.files.keys().map(|name| set.dir.join(name)))
        .collect()
}

fn check(sets: &[FileSet], regenerate: &str) -> ExitCode {
    let defined = defined(sets);
    let mut ok = true;
    for set in sets {
        match files::check(set, &defined) {
            Ok(drift) if drift.is_empty() => {
                println!("{} in {} are up to date", set.what, shown(set).display());
            }
            Ok(drift) => {
                eprintln!("carrier schema: {} are out of date{drift}", set.what);
                ok = false;
            }
            Err(e) => {
                eprintln!("carrier schema: cannot read {}: {e}", set.what);
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("regenerate with: {regenerate}");
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_generated_files_are_current() {
        // `CARRIER_BLESS_SCHEMAS=1 cargo test -p carrier-cli --lib` regenerates them (like
        // `carrier schema --out schemas --js js --docs docs/protocol.md`). They live at the
        // repository root, one directory above this crate.
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let js = repo.join("js");
        let sets = file_sets(
            &repo.join("schemas"),
            Some(&js.join("wire.d.ts")),
            Some(&js),
            Some(&repo.join("docs/protocol.md")),
        )
        .unwrap();
        assert_eq!(sets.len(), 4);
        if std::env::var_os("CARRIER_BLESS_SCHEMAS").is_some() {
            for set in &sets {
                files::write(set).unwrap();
            }
        }
        let defined = defined(&sets);
        for set in &sets {
            let drift = files::check(set, &defined).unwrap();
            assert!(
                drift.is_empty(),
                "{} are out of date{drift}\nregenerate with: cargo run -- schema --out schemas --js js --docs docs/protocol.md",
                set.what
            );
        }
    }
}
