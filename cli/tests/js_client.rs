//! The JavaScript package (`js/`) from `cargo test`: its reference suite with no installs (run
//! from a copy of the package with no `node_modules` beside it), the same suite and full prompt
//! turns against this build's `carrier serve`, the TypeScript consumer checked with `tsc
//! --strict` (every `@ts-expect-error` line proven to be an error), and the package's copy of
//! the method catalog checked against the Rust one.
//!
//! The real-socket and TypeScript checks need the package's dev dependencies (`ws` for Node 20,
//! `typescript`): they are installed once with `npm ci` from the committed lock file.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use carrier::protocol::catalog::METHODS;
use carrier::protocol::features::Feature;
use carrier::protocol::version::{MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION};
use serde_json::Value;

/// Longest any one command (a whole `node --test` run, `npm ci`, `tsc`) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// Per-test bound inside `node --test`.
const NODE_TEST_TIMEOUT: &str = "--test-timeout=60000";

fn repo() -> PathBuf {
    carrier_test_support::repo()
}

fn js_dir() -> PathBuf {
    repo().join("js")
}

struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn report(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// Runs `command` to completion within [`COMMAND_TIMEOUT`], killing it past that.
fn run(mut command: Command, what: &str) -> Run {
    let out = tempfile::tempfile().unwrap();
    let err = tempfile::tempfile().unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what} ({e}): Node.js 20+ and npm are needed"));
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |mut file: std::fs::File| {
        use std::io::{Read, Seek};
        let mut text = String::new();
        file.rewind().unwrap();
        file.read_to_string(&mut text).unwrap();
        text
    };
    let run = Run {
        success: status.is_some_and(|s| s.success()),
        stdout: read(out),
        stderr: read(err),
    };
    assert!(
        status.is_some(),
        "{what} did not finish within {COMMAND_TIMEOUT:?}\n{}",
        run.report()
    );
    run
}

fn assert_node_tests_passed(run: &Run, what: &str) {
    assert!(run.success, "{what} failed:\n{}", run.report());
    for zero in ["# fail 0", "# cancelled 0", "# skipped 0"] {
        assert!(
            run.stdout.contains(zero),
            "{what}: expected {zero:?}\n{}",
            run.report()
        );
    }
    let passed: u32 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("# pass "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(passed > 0, "{what} ran no test:\n{}", run.report());
}

/// Installs the dev dependencies once per test binary (cargo runs test binaries one at a
/// time, so a lock inside this one is enough), unless `node_modules` is newer than the lock file.
fn dev_dependencies() {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if *installed {
        return;
    }
    let js = js_dir();
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let fresh = match (
        modified(&js.join("node_modules/.package-lock.json")),
        modified(&js.join("package-lock.json")),
    ) {
        (Some(installed), Some(lock)) => installed >= lock,
        _ => false,
    };
    if !fresh {
        let mut npm = Command::new("npm");
        npm.args(["ci", "--no-audit", "--no-fund"]).current_dir(&js);
        let out = run(npm, "npm ci in js/");
        assert!(
            out.success,
            "npm ci in js/ failed (the npm registry must be reachable):\n{}",
            out.report()
        );
    }
    *installed = true;
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "node_modules" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn reference_suite_passes_on_a_fake_socket_with_no_installs() {
    // A copy with no node_modules anywhere above it: an import of a dev dependency would fail.
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("carrier-client");
    copy_dir(&js_dir(), &copy);
    let mut node = Command::new("node");
    node.args(["--test", NODE_TEST_TIMEOUT])
        .current_dir(&copy)
        .env(
            "CARRIER_VECTORS",
            repo().join("../shared/vectors/channel-frames.json"),
        );
    let out = run(node, "node --test in a copy of js/");
    assert_node_tests_passed(&out, "node --test (fake socket, no installs)");
    for suite in [
        "transport contract: WsTransport on a fake socket",
        "transport contract: PortTransport over a MessageChannel, bridged to WsTransport on a fake socket",
        "encodes valid vector",
    ] {
        assert!(out.stdout.contains(suite), "{suite:?} did not run:\n{}", out.stdout);
    }
}

#[test]
fn reference_suite_and_prompt_turns_pass_against_a_real_carrier() {
    dev_dependencies();
    let mut node = Command::new("node");
    node.args([
        "--test",
        NODE_TEST_TIMEOUT,
        "test-real/carrier.js",
        "test-real/ws-peer.js",
    ])
    .current_dir(js_dir())
    .env("CARRIER_BIN", env!("CARGO_BIN_EXE_carrier"));
    let out = run(node, "node --test test-real/");
    assert_node_tests_passed(&out, "node --test test-real/ (real sockets)");
    for suite in [
        "transport contract: WsTransport on a real carrier (through a TCP proxy)",
        "transport contract: PortTransport over a MessageChannel, bridged to WsTransport on a real carrier",
        "transport contract: WsTransport on a real socket (scripted ws peer)",
        "over a MessageChannel pair bridged to a WsTransport: a full prompt turn",
    ] {
        assert!(out.stdout.contains(suite), "{suite:?} did not run:\n{}", out.stdout);
    }
}

fn tsc(config: &Path) -> Run {
    let mut tsc = Command::new("node");
    tsc.arg(js_dir().join("node_modules/typescript/bin/tsc"))
        .arg("-p")
        .arg(config)
        .current_dir(js_dir());
    run(tsc, "tsc")
}

#[test]
fn typescript_consumer_type_checks_strictly() {
    dev_dependencies();
    let out = tsc(&js_dir().join("types-test/tsconfig.json"));
    assert!(out.success, "tsc --strict failed:\n{}", out.report());
}

#[test]
fn every_ts_expect_error_line_is_really_a_type_error() {
    dev_dependencies();
    let dir = js_dir().join("types-test");
    let source = std::fs::read_to_string(dir.join("consumer.ts")).unwrap();
    // Blank each directive (keeping line numbers): tsc must now fail on the line after each.
    let mut expected = BTreeSet::new();
    let mut stripped = String::new();
    for (index, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("// @ts-expect-error") {
            expected.insert(index + 2);
            stripped.push('\n');
        } else {
            stripped.push_str(line);
            stripped.push('\n');
        }
    }
    assert!(expected.len() >= 5, "{expected:?}");
    // Inside the package, so `carrier-client` resolves to it as it does for consumer.ts.
    let mut file = tempfile::Builder::new()
        .prefix("no-expect-error-")
        .suffix(".ts")
        .tempfile_in(&dir)
        .unwrap();
    file.write_all(stripped.as_bytes()).unwrap();
    let name = file
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut config = tempfile::Builder::new()
        .prefix("tsconfig-")
        .suffix(".json")
        .tempfile_in(&dir)
        .unwrap();
    write!(
        config,
        r#"{{ "extends": "./tsconfig.json", "files": ["{name}"] }}"#
    )
    .unwrap();
    let out = tsc(config.path());
    assert!(
        !out.success,
        "tsc passed without the @ts-expect-error lines"
    );
    let failing: BTreeSet<usize> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("types-test/{name}(")))
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .collect();
    assert_eq!(failing, expected, "tsc output:\n{}", out.report());
}

#[test]
fn the_packages_method_catalog_matches_the_rust_catalog() {
    let script = "const m = await import('./client.js'); const p = JSON.parse((await import('node:fs')).readFileSync('package.json', 'utf8')); \
        console.log(JSON.stringify({ methods: m.METHOD_CATALOG, features: m.FEATURE_PROTOCOLS, client: m.CLIENT_VERSION, \
        package: p.version, protocol: m.PROTOCOL_VERSION, min: m.MIN_COMPATIBLE_PROTOCOL }))";
    let mut node = Command::new("node");
    node.args(["--input-type=module", "-e", script])
        .current_dir(js_dir());
    let out = run(node, "node -e");
    assert!(out.success, "{}", out.report());
    let js: Value = serde_json::from_str(out.stdout.trim()).unwrap();

    let methods = js["methods"].as_object().unwrap();
    assert_eq!(
        methods.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        METHODS.iter().map(|m| m.name).collect::<BTreeSet<_>>(),
    );
    for m in METHODS {
        let entry = &methods[m.name];
        assert_eq!(entry["leastRole"], m.least_role.as_str(), "{}", m.name);
        assert_eq!(
            entry["feature"],
            m.feature.map_or(Value::Null, |f| Value::from(f.name())),
            "{}",
            m.name
        );
    }
    let features = js["features"].as_object().unwrap();
    assert_eq!(features.len(), Feature::ALL.len());
    for f in Feature::ALL {
        assert_eq!(features[f.name()], f.introduced_str(), "{}", f.name());
    }
    assert_eq!(js["client"], env!("CARGO_PKG_VERSION"));
    assert_eq!(js["package"], env!("CARGO_PKG_VERSION"));
    assert_eq!(js["protocol"], PROTOCOL_VERSION.to_string());
    assert_eq!(js["min"], MIN_COMPATIBLE_PROTOCOL.to_string());
}
