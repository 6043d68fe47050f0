//! The workspace's layout, checked: every file in `tests/` and `examples/` is a target of exactly
//! one workspace member, so a file moved between manifests (or a new one nobody registered) can
//! never silently stop being built and run, and no source file pulls in another through a `path` attribute.
//!
//! The members list `autotests = false` and `autoexamples = false` (a file belongs to the one
//! package whose dependencies it needs), which is what makes this check necessary.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root: this test belongs to the root package.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The values of `key = "…"` lines in a TOML table body, unquoted.
fn string_value(line: &str, key: &str) -> Option<String> {
    let (k, v) = line.split_once('=')?;
    if k.trim() != key {
        return None;
    }
    let v = v.trim();
    let v = v.split('#').next().unwrap_or(v).trim();
    Some(v.strip_prefix('"')?.strip_suffix('"')?.to_owned())
}

/// The workspace members' directories, from the root manifest's `[workspace] members`.
fn members() -> Vec<PathBuf> {
    let manifest = fs::read_to_string(root().join("Cargo.toml")).expect("root Cargo.toml");
    let mut in_workspace = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_workspace = line == "[workspace]";
            continue;
        }
        if in_workspace {
            if let Some(list) = line
                .strip_prefix("members")
                .and_then(|rest| rest.trim_start().strip_prefix('='))
            {
                let list = list.trim().trim_start_matches('[').trim_end_matches(']');
                return list
                    .split(',')
                    .map(|m| m.trim().trim_matches('"'))
                    .filter(|m| !m.is_empty())
                    .map(|m| root().join(m))
                    .collect();
            }
        }
    }
    panic!("the root Cargo.toml has no [workspace] members line");
}

/// One member's manifest: its `[[test]]` and `[[example]]` files and its `auto*` settings.
struct Manifest {
    tests: Vec<PathBuf>,
    examples: Vec<PathBuf>,
    text: String,
}

fn manifest(dir: &Path) -> Manifest {
    let text = fs::read_to_string(dir.join("Cargo.toml")).expect("member Cargo.toml");
    let mut out = Manifest {
        tests: Vec::new(),
        examples: Vec::new(),
        text: text.clone(),
    };
    // A target is `[[test]]`/`[[example]]` with a name and, optionally, a path; without a path
    // Cargo takes tests/NAME.rs or examples/NAME.rs of the member.
    let mut section = String::new();
    let mut name: Option<String> = None;
    let mut path: Option<String> = None;
    let mut flush = |section: &str, name: &mut Option<String>, path: &mut Option<String>| {
        let (list, folder) = match section {
            "[[test]]" => (&mut out.tests, "tests"),
            "[[example]]" => (&mut out.examples, "examples"),
            _ => return,
        };
        let file = match (path.take(), name.take()) {
            (Some(p), _) => dir.join(p),
            (None, Some(n)) => dir.join(folder).join(format!("{n}.rs")),
            (None, None) => panic!("{}: a {section} without name or path", dir.display()),
        };
        list.push(fs::canonicalize(&file).unwrap_or(file));
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            flush(&section, &mut name, &mut path);
            // `name`/`path` of [package], [lib] or [[bin]] are not a test's.
            (name, path) = (None, None);
            section = line.to_owned();
            continue;
        }
        if let Some(v) = string_value(line, "name") {
            name = Some(v);
        } else if let Some(v) = string_value(line, "path") {
            path = Some(v);
        }
    }
    flush(&section, &mut name, &mut path);
    out
}

/// The `.rs` files directly in `dir` (modules shared by tests live in subfolders).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| fs::canonicalize(&p).expect("canonical path"))
        .collect();
    files.sort();
    files
}

/// Each file of `folder` registered exactly once, and every registered file present.
fn check_registered(folder: &str, registered: &[(PathBuf, PathBuf)]) {
    let mut owners: BTreeMap<&Path, Vec<&Path>> = BTreeMap::new();
    for (member, file) in registered {
        owners
            .entry(file.as_path())
            .or_default()
            .push(member.as_path());
    }
    for file in rust_files(&root().join(folder)) {
        match owners.remove(file.as_path()) {
            Some(members) => assert_eq!(
                members.len(),
                1,
                "{} is a target of several members: {members:?}",
                file.display()
            ),
            None => panic!(
                "{} is not registered in any workspace member's Cargo.toml",
                file.display()
            ),
        }
    }
    let missing: Vec<_> = owners
        .keys()
        .filter(|f| f.starts_with(root().join(folder)))
        .collect();
    assert!(missing.is_empty(), "registered but absent: {missing:?}");
}

#[test]
fn every_test_and_example_file_is_a_target_of_exactly_one_member() {
    let members = members();
    assert!(members.len() >= 3, "members: {members:?}");
    let mut tests = Vec::new();
    let mut examples = Vec::new();
    for member in &members {
        let m = manifest(member);
        for setting in ["autotests = false", "autoexamples = false"] {
            assert!(
                m.text.lines().any(|l| l.trim() == setting),
                "{}/Cargo.toml must say `{setting}`: targets are listed by hand",
                member.display()
            );
        }
        tests.extend(m.tests.into_iter().map(|f| (member.clone(), f)));
        examples.extend(m.examples.into_iter().map(|f| (member.clone(), f)));
    }
    assert!(tests.len() >= 30, "only {} test targets found", tests.len());
    check_registered("tests", &tests);
    check_registered("examples", &examples);
}

/// Every `.rs` file under `dir`, recursively, skipping build output.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_includes_another_by_path() {
    // Split so this file does not match itself.
    let attribute = concat!("#[", "path");
    let mut files = Vec::new();
    for dir in ["src", "tests", "channels", "fuzz", "examples", "benches"] {
        sources(&root().join(dir), &mut files);
    }
    assert!(files.len() > 50, "only {} sources found", files.len());
    let offenders: Vec<_> = files
        .iter()
        .filter(|f| {
            fs::read_to_string(f)
                .expect("read source")
                .contains(attribute)
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "modules included by path: {offenders:?}"
    );
}
