//! `carrier schema --check DIR --ts FILE --js DIR` against copies of the committed files:
//! passes on them as committed, fails (exit 1, naming the file) when the TypeScript
//! declarations are edited or missing, when a JSON Schema is stale, and when a JavaScript table
//! is hand-edited, missing or left over, and when a generated table of the protocol reference
//! (`--docs`) is stale; `--out --ts --js --docs` writes them all.

use std::path::Path;
use std::process::{Command, Output};

fn carrier(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_carrier"))
        .arg("schema")
        .args(args)
        .output()
        .unwrap()
}

fn committed(path: &str) -> std::path::PathBuf {
    carrier_test_support::repo().join(path)
}

fn copy_schemas(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(committed("schemas")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn check_fails_on_an_edited_or_missing_typescript_file_and_passes_on_the_committed_one() {
    let scratch = tempfile::tempdir().unwrap();
    let schemas = scratch.path().join("schemas");
    let wire = scratch.path().join("wire.d.ts");
    copy_schemas(&schemas);
    std::fs::copy(committed("js/wire.d.ts"), &wire).unwrap();
    let check = || {
        carrier(&[
            "--check".as_ref(),
            schemas.as_os_str(),
            "--ts".as_ref(),
            wire.as_os_str(),
        ])
    };

    let ok = check();
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("TypeScript declarations"));

    // A hand edit: the submit params lose their prompt.
    let text = std::fs::read_to_string(&wire).unwrap();
    let edited = text.replacen("  prompt: string;\n", "  prompt?: string;\n", 1);
    assert_ne!(
        edited, text,
        "the committed file declares SubmitParams.prompt"
    );
    std::fs::write(&wire, edited).unwrap();
    let stale = check();
    assert_eq!(stale.status.code(), Some(1), "{stale:?}");
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert!(
        stderr.contains("stale") && stderr.contains("wire.d.ts"),
        "{stderr}"
    );
    assert!(stderr.contains("--ts"), "says how to regenerate: {stderr}");

    std::fs::remove_file(&wire).unwrap();
    let missing = check();
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("missing"));

    // --out --ts writes it again, and then the check passes.
    let out = carrier(&[
        "--out".as_ref(),
        schemas.as_os_str(),
        "--ts".as_ref(),
        wire.as_os_str(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read(&wire).unwrap(),
        std::fs::read(committed("js/wire.d.ts")).unwrap()
    );
    assert!(check().status.success());
}

#[test]
fn a_stale_json_schema_still_fails_the_check_beside_a_current_typescript_file() {
    let scratch = tempfile::tempdir().unwrap();
    let schemas = scratch.path().join("schemas");
    copy_schemas(&schemas);
    std::fs::write(schemas.join("system.ping.params.json"), "{}\n").unwrap();
    let wire = committed("js/wire.d.ts");
    let out = carrier(&[
        "--check".as_ref(),
        schemas.as_os_str(),
        "--ts".as_ref(),
        wire.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("system.ping.params.json"));
}

#[test]
fn check_fails_on_a_hand_edited_missing_or_leftover_javascript_table() {
    let scratch = tempfile::tempdir().unwrap();
    let schemas = scratch.path().join("schemas");
    let js = scratch.path().join("js");
    copy_schemas(&schemas);
    std::fs::create_dir_all(&js).unwrap();
    // The generated files, and a hand-written module beside them (not a generated file).
    for name in ["wire.d.ts", "catalog.js", "catalog.d.ts", "client.js"] {
        std::fs::copy(committed(&format!("js/{name}")), js.join(name)).unwrap();
    }
    let check = || {
        carrier(&[
            "--check".as_ref(),
            schemas.as_os_str(),
            "--js".as_ref(),
            js.as_os_str(),
        ])
    };
    let assert_fails = |what: &str, file: &str| {
        let out = check();
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{what}: ")) && stderr.contains(file),
            "{what} {file}: {stderr}"
        );
        assert!(stderr.contains("--js"), "says how to regenerate: {stderr}");
    };

    let ok = check();
    assert!(ok.status.success(), "{ok:?}");
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(stdout.contains("JavaScript tables") && stdout.contains("TypeScript declarations"));

    // A hand edit of the method table: session.submit open to observers.
    let catalog = js.join("catalog.js");
    let text = std::fs::read_to_string(&catalog).unwrap();
    let edited = text.replacen(
        "\"session.submit\": Object.freeze({ leastRole: \"drive\"",
        "\"session.submit\": Object.freeze({ leastRole: \"observe\"",
        1,
    );
    assert_ne!(
        edited, text,
        "the committed table has session.submit for drive"
    );
    std::fs::write(&catalog, edited).unwrap();
    assert_fails("stale", "catalog.js");
    std::fs::write(&catalog, &text).unwrap();
    assert!(check().status.success());

    // A hand edit of the feature table's versions.
    let edited = text.replacen("  resume: \"1.0\",", "  resume: \"1.1\",", 1);
    assert_ne!(edited, text, "the committed table has resume in 1.0");
    std::fs::write(&catalog, edited).unwrap();
    assert_fails("stale", "catalog.js");

    std::fs::remove_file(&catalog).unwrap();
    std::fs::remove_file(js.join("catalog.d.ts")).unwrap();
    assert_fails("missing", "catalog.d.ts");

    // A generated file this build does not define (e.g. one left from a renamed table).
    let leftover = js.join("methods.js");
    std::fs::write(
        &leftover,
        "// GENERATED FILE: do not edit. Written by an older carrier.\nexport const M = {};\n",
    )
    .unwrap();
    assert_fails("unexpected", "methods.js");

    // --out --js writes the tables (and wire.d.ts beside them) again, byte for byte the
    // committed ones; the leftover stays until removed.
    let out = carrier(&[
        "--out".as_ref(),
        schemas.as_os_str(),
        "--js".as_ref(),
        js.as_os_str(),
    ]);
    assert!(out.status.success(), "{out:?}");
    for name in ["wire.d.ts", "catalog.js", "catalog.d.ts"] {
        assert_eq!(
            std::fs::read(js.join(name)).unwrap(),
            std::fs::read(committed(&format!("js/{name}"))).unwrap(),
            "{name}"
        );
    }
    assert_fails("unexpected", "methods.js");
    std::fs::remove_file(&leftover).unwrap();
    assert!(check().status.success());
}

#[test]
fn check_fails_when_a_table_of_the_protocol_reference_is_stale_and_out_fills_it_again() {
    let scratch = tempfile::tempdir().unwrap();
    let schemas = scratch.path().join("schemas");
    let docs = scratch.path().join("protocol.md");
    copy_schemas(&schemas);
    let committed_docs = std::fs::read_to_string(committed("docs/protocol.md")).unwrap();
    std::fs::write(&docs, &committed_docs).unwrap();
    let run = |mode: &str| {
        carrier(&[
            mode.as_ref(),
            schemas.as_os_str(),
            "--docs".as_ref(),
            docs.as_os_str(),
        ])
    };

    let ok = run("--check");
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("protocol reference"));

    // A method row edited by hand (its least role), as a stale table would read.
    let edited = committed_docs.replacen(
        "| `session.submit` | drive |",
        "| `session.submit` | observe |",
        1,
    );
    assert_ne!(edited, committed_docs, "the reference lists session.submit");
    std::fs::write(&docs, &edited).unwrap();
    let stale = run("--check");
    assert_eq!(stale.status.code(), Some(1), "{stale:?}");
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert!(
        stderr.contains("stale") && stderr.contains("protocol.md"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--docs"),
        "says how to regenerate: {stderr}"
    );

    // Prose outside the tables is the author's: editing it does not make the file stale.
    let prose = committed_docs.replacen(
        "# The carrier protocol",
        "# The carrier protocol (draft)",
        1,
    );
    std::fs::write(&docs, &prose).unwrap();
    assert!(run("--check").status.success());

    // --out fills the tables in again and keeps the prose.
    std::fs::write(&docs, &edited).unwrap();
    let out = run("--out");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&docs).unwrap(), committed_docs);

    // A reference without a table's markers cannot be checked: a clear error, exit 1.
    let marker = "<!-- end of generated table: events -->\n";
    std::fs::write(&docs, committed_docs.replacen(marker, "", 1)).unwrap();
    let broken = run("--check");
    assert_eq!(broken.status.code(), Some(1), "{broken:?}");
    assert!(
        String::from_utf8_lossy(&broken.stderr).contains("end of generated table: events"),
        "{broken:?}"
    );
}
