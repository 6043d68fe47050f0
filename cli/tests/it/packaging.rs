//! What users install: `carrier --version` names the crate's version and the protocol pair, and
//! the JavaScript package (`js/`) packs exactly its files, installs from the tarball into an
//! empty folder and type-checks a consumer there with `tsc --strict`.
//!
//! (That every published crate packages and builds from its package is checked by
//! `cargo publish --dry-run --workspace`, a step of `.ci/run`: it compiles each crate again
//! from its `.crate`, too slow for a test.)
//!
//! The TypeScript check needs the package's dev dependencies (`typescript`), installed once
//! with `npm ci` from the committed lock file when `js/node_modules` is missing or older.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use carrier::protocol::version::{MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION};
use carrier_test_support::node::{js_dev_dependencies, run};
use serde_json::Value;

/// What the package leaves out: its own tests, the type test, the real-socket tests, the lock
/// file of its dev dependencies, and the Rust crate `carrier-web` that shares the folder (its
/// manifest, its sources and the console page it serves). Everything else under `js/` is the
/// package.
const NOT_PACKED: [&str; 7] = [
    "test/",
    "test-real/",
    "types-test/",
    "package-lock.json",
    "Cargo.toml",
    "src/",
    "console.html",
];

fn js_dir() -> PathBuf {
    carrier_test_support::repo().join("js")
}

/// Every file under `dir`, as paths relative to `root` with `/`, leaving out `node_modules`.
fn files_under(root: &Path, dir: &Path, into: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == "node_modules" {
            continue;
        }
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            files_under(root, &path, into);
        } else {
            let relative = path.strip_prefix(root).unwrap();
            into.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn version_prints_the_crate_version_and_the_protocol_pair() {
    let expected = format!(
        "carrier {} (protocol {PROTOCOL_VERSION}, min {MIN_COMPATIBLE_PROTOCOL})\n",
        env!("CARGO_PKG_VERSION")
    );
    for flag in ["--version", "-V"] {
        let out = Command::new(env!("CARGO_BIN_EXE_carrier"))
            .arg(flag)
            .output()
            .unwrap();
        assert!(out.status.success(), "carrier {flag}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    }
}

#[test]
fn npm_pack_lists_exactly_the_package_files() {
    let mut npm = Command::new("npm");
    npm.args(["pack", "--dry-run", "--json", "--ignore-scripts"])
        .current_dir(js_dir());
    let out = run(npm, "npm pack --dry-run in js/");
    assert!(out.success, "npm pack --dry-run failed:\n{}", out.report());
    let listing: Value = serde_json::from_str(&out.stdout).expect("npm pack --json");
    let packed: BTreeSet<String> = listing[0]["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str().map(str::to_owned))
        .collect();
    let mut expected = BTreeSet::new();
    files_under(&js_dir(), &js_dir(), &mut expected);
    expected.retain(|path| !NOT_PACKED.iter().any(|left_out| path.starts_with(left_out)));
    assert_eq!(packed, expected);
    assert_eq!(listing[0]["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_tarball_installs_in_an_empty_folder_and_a_consumer_type_checks_strictly() {
    js_dev_dependencies();
    let scratch = tempfile::tempdir().unwrap();
    let mut npm = Command::new("npm");
    npm.args(["pack", "--json", "--ignore-scripts", "--pack-destination"])
        .arg(scratch.path())
        .current_dir(js_dir());
    let out = run(npm, "npm pack in js/");
    assert!(out.success, "npm pack failed:\n{}", out.report());
    let listing: Value = serde_json::from_str(&out.stdout).expect("npm pack --json");
    let tarball = scratch
        .path()
        .join(listing[0]["filename"].as_str().expect("filename"));
    assert!(tarball.exists(), "{} is missing", tarball.display());

    // An empty project, far from the repository (no node_modules above it), installs the
    // tarball alone: the package has no runtime dependency, so nothing else is fetched.
    let consumer = scratch.path().join("consumer");
    std::fs::create_dir(&consumer).unwrap();
    std::fs::write(
        consumer.join("package.json"),
        r#"{ "name": "consumer", "private": true, "type": "module" }"#,
    )
    .unwrap();
    let mut install = Command::new("npm");
    install
        .args([
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
        ])
        .arg(&tarball)
        .current_dir(&consumer);
    let out = run(install, "npm install of the tarball");
    assert!(out.success, "npm install failed:\n{}", out.report());
    let installed = consumer.join("node_modules/carrier-client");
    assert!(installed.join("package.json").exists(), "{}", out.report());
    assert!(!installed.join("test").exists() && !installed.join("types-test").exists());

    // The repository's consumer (every public export, every subpath, and lines that must not
    // type-check marked `@ts-expect-error`), checked with --strict against the installed copy.
    std::fs::copy(
        js_dir().join("types-test/consumer.ts"),
        consumer.join("consumer.ts"),
    )
    .unwrap();
    std::fs::copy(
        js_dir().join("types-test/tsconfig.json"),
        consumer.join("tsconfig.json"),
    )
    .unwrap();
    let mut tsc = Command::new("node");
    tsc.arg(js_dir().join("node_modules/typescript/bin/tsc"))
        .args(["--strict", "-p", "tsconfig.json"])
        .current_dir(&consumer);
    let out = run(tsc, "tsc --strict on the consumer");
    assert!(out.success, "tsc --strict failed:\n{}", out.report());

    // And the modules load: each entry point of `exports` imports in Node.
    let script = r#"
        const names = ["carrier-client", "carrier-client/client", "carrier-client/transport",
          "carrier-client/frames", "carrier-client/errors",
          "carrier-client/examples/message-port.js", "carrier-client/testing/suite.js"];
        for (const name of names) await import(name);
        const { PROTOCOL_VERSION, CLIENT_VERSION } = await import("carrier-client");
        console.log(JSON.stringify({ PROTOCOL_VERSION, CLIENT_VERSION }));
    "#;
    let mut node = Command::new("node");
    node.args(["--input-type=module", "-e", script])
        .current_dir(&consumer);
    let out = run(node, "node importing the installed package");
    assert!(
        out.success,
        "importing the package failed:\n{}",
        out.report()
    );
    let versions: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON line");
    assert_eq!(versions["PROTOCOL_VERSION"], PROTOCOL_VERSION.to_string());
    assert_eq!(versions["CLIENT_VERSION"], env!("CARGO_PKG_VERSION"));
}
