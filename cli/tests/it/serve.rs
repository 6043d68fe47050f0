//! `carrier serve` as a user runs it: the real binary, its one `listening` line, exit codes,
//! the token file, signals, `carrier send` against it, and the runtime files through which
//! `send`, `connect`, `status` and `doctor` find it (docs/protocol.md, "Discovery and the CLI").
//!
//! Every child gets its own `XDG_RUNTIME_DIR` (a temporary directory), so no test sees another
//! test's carriers or the carrier of the person running the tests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_carrier");

/// A running `carrier serve`, killed on drop.
struct Serve {
    child: Child,
    line: Value,
    /// The runtime directory of a carrier started with [`serve`] (none with [`serve_in`]).
    _runtime: Option<tempfile::TempDir>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `carrier serve --port 0 ARGS` with a runtime directory of its own.
fn serve(args: &[&str], env: &[(&str, &str)]) -> Serve {
    let runtime = tempfile::tempdir().unwrap();
    let mut s = serve_in(runtime.path(), args, env);
    s._runtime = Some(runtime);
    s
}

/// `carrier serve --port 0 ARGS` with `XDG_RUNTIME_DIR=runtime`.
fn serve_in(runtime: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .args(["--port", "0"])
        .args(args)
        .env_remove("CARRIER_TOKEN")
        .env("XDG_RUNTIME_DIR", runtime)
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn carrier serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let line: Value = serde_json::from_str(line.trim_end())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
    Serve {
        child,
        line,
        _runtime: None,
    }
}

impl Serve {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn url(&self) -> &str {
        self.line["url"].as_str().unwrap()
    }
}

/// The runtime file `carrier serve` (pid `pid`) writes under `XDG_RUNTIME_DIR=runtime`.
fn runtime_file(runtime: &Path, pid: u32) -> PathBuf {
    runtime.join("carrier").join(format!("{pid}.json"))
}

/// `carrier ARGS` with an empty runtime directory of its own.
fn run(args: &[&str]) -> (i32, String, String) {
    let runtime = tempfile::tempdir().unwrap();
    run_in(runtime.path(), args)
}

/// `carrier ARGS` with `XDG_RUNTIME_DIR=runtime`, no token in the environment; killed (and the
/// test failed) if it runs longer than [`WAIT`].
fn run_in(runtime: &Path, args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("CARRIER_TOKEN")
        .env("XDG_RUNTIME_DIR", runtime)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run carrier");
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let Some(code) = wait_exit(&mut child, WAIT) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("carrier {args:?} did not exit within {WAIT:?}");
    };
    (code, stdout.join().unwrap(), stderr.join().unwrap())
}

/// How long a CLI child or a signalled server may take.
const WAIT: Duration = Duration::from_secs(20);

fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            // -1: ended by a signal.
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn serve_prints_exactly_one_listening_line_with_a_minted_token() {
    let s = serve(&[], &[]);
    let keys: Vec<&str> = s
        .line
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 6, "{}", s.line);
    assert_eq!(s.line["event"], "listening");
    assert!(s.line["socket"]
        .as_str()
        .is_some_and(|p| p.ends_with(".sock")));
    assert_eq!(s.line["role"], "drive");
    let port = s.line["port"].as_u64().expect("port");
    assert!(port > 0);
    assert_eq!(s.line["url"], format!("ws://127.0.0.1:{port}/"));
    let token = s.line["token"].as_str().expect("token");
    assert!(
        token.len() >= 64 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "{token}"
    );
}

#[test]
fn send_against_serve_prints_exactly_the_echo_and_exits_0() {
    let s = serve(&["--demo-delay-ms", "1"], &[]);
    let url = s.line["url"].as_str().unwrap().to_string();
    let token = s.line["token"].as_str().unwrap().to_string();
    let (code, stdout, _) = run(&["send", &url, "--token", &token, "hello  carrier world"]);
    assert_eq!(code, 0);
    assert_eq!(stdout, "echo: hello  carrier world\n");
    let (code, stdout, stderr) = run(&["send", &url, "--token", "wrong", "x"]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one clear line: {stderr}"
    );
}

#[test]
fn the_token_comes_from_carrier_token_in_the_environment() {
    let s = serve(&[], &[("CARRIER_TOKEN", "from-env-token")]);
    assert_eq!(s.line["token"], "from-env-token");
}

#[cfg(unix)]
#[test]
fn token_file_is_new_0600_and_the_line_says_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "stale").unwrap();
    let s = serve(&["--token-file", path.to_str().unwrap()], &[]);
    assert_eq!(s.line["token"], "file");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let token = std::fs::read_to_string(&path).unwrap();
    let token = token.trim();
    assert!(token.len() >= 64 && token != "stale");
    let url = s.line["url"].as_str().unwrap().to_string();
    let (code, stdout, _) = run(&["send", &url, "--token", token, "via file"]);
    assert_eq!((code, stdout.as_str()), (0, "echo: via file\n"));
}

/// The process's thread count from `/proc/PID/status`.
fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[test]
fn threads_one_serves_on_one_worker_and_threads_three_on_three_workers() {
    // The main thread plus the workers (plus, at most, a few blocking-pool threads).
    for (threads, expected) in [("1", 2..=4), ("3", 4..=8)] {
        let s = serve(&["--threads", threads], &[]);
        let url = s.line["url"].as_str().unwrap().to_string();
        let token = s.line["token"].as_str().unwrap().to_string();
        let (code, stdout, stderr) = run(&["send", &url, "--token", &token, "on threads"]);
        assert_eq!(
            (code, stdout.as_str()),
            (0, "echo: on threads\n"),
            "{stderr}"
        );
        let n = threads_of(s.child.id());
        assert!(expected.contains(&n), "--threads {threads}: {n} threads");
    }
    for bad in ["0", "x", "1025"] {
        let (code, _, stderr) = run(&["serve", "--port", "0", "--threads", bad]);
        assert_eq!(code, 2, "--threads {bad}: {stderr}");
    }
}

#[test]
fn configuration_errors_exit_2_with_one_line() {
    for args in [
        &["serve", "--port", "0", "--open"][..],
        &[
            "serve",
            "--port",
            "0",
            "--open",
            "--open-reason",
            "x",
            "--token",
            "t",
        ][..],
        &["serve", "--port", "0", "--role", "admin"][..],
        &["serve", "--port", "0", "--channel", "mic:nope"][..],
        &["serve", "--no-such-flag"][..],
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?} printed {stdout}");
        assert!(!stderr.trim().is_empty());
    }
    let (code, _, stderr) = run(&["serve", "--port", "0", "--open"]);
    assert_eq!(code, 2);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

/// `--max-message-bytes` takes at most 1 GiB. (What a carrier at that cap does with a header
/// announcing 60 GiB is the server's test: `server/tests/it/hostile_clients.rs`.)
#[test]
fn a_max_message_bytes_past_1_gib_exits_2_naming_the_largest_cap() {
    let accepted = serve(&["--max-message-bytes", "1073741824"], &[]);
    assert_eq!(
        accepted.line["event"], "listening",
        "1 GiB is the largest cap and is accepted"
    );
    drop(accepted);
    for cap in ["1073741825", "68719476736", "18446744073709551615"] {
        let (code, _, stderr) = run(&["serve", "--port", "0", "--max-message-bytes", cap]);
        assert_eq!(code, 2, "{cap}");
        assert!(
            stderr.contains("1073741824"),
            "the error names the largest cap: {stderr}"
        );
    }
}

/// `carrier serve --token-file PATH`: the token goes to a new 0600 file (an existing file or
/// symlink at PATH is replaced, never written through), stdout says `"token":"file"`, and the
/// token in the file admits a client. (The security tests of the server it runs are
/// `server/tests/it/security.rs`.)
#[cfg(unix)]
#[tokio::test]
async fn token_file_is_owner_only_and_never_written_through_a_link() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    use tokio::io::AsyncBufReadExt;

    let dir = tempfile::tempdir().expect("tempdir");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "do not touch\n").expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let path = dir.path().join("token");
    symlink(&victim, &path).expect("symlink");

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_carrier"))
        .args(["serve", "--port", "0", "--token-file"])
        .arg(&path)
        .env_remove("CARRIER_TOKEN")
        // Its runtime file goes here, not among the runtime files of the person running tests.
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn carrier serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::time::timeout(
        carrier_test_support::WAIT,
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("listening line")
    .expect("read");
    let listening: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
    assert_eq!(listening["token"], "file", "{line}");
    let port = listening["port"].as_u64().expect("port") as u16;

    let meta = std::fs::symlink_metadata(&path).expect("token file");
    assert!(
        meta.file_type().is_file(),
        "the link was replaced by a file"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "do not touch\n"
    );
    let token = std::fs::read_to_string(&path).expect("token");
    let token = token.trim_end();
    assert_eq!(token.len(), 64);
    assert!(!line.contains(token), "the token was printed");
    // Nor is it in the runtime file: with --token-file the token stays in that file only.
    let pid = child.id().expect("pid");
    let runtime = dir.path().join(format!("carrier/{pid}.json"));
    let advertised: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runtime).expect("runtime file"))
            .expect("runtime JSON");
    assert_eq!(advertised["port"], port, "{advertised}");
    assert_eq!(advertised["token"], serde_json::Value::Null, "{advertised}");

    let req =
        carrier_test_support::upgrade_request(&format!("/?token={token}"), Some("127.0.0.1"), &[]);
    assert_eq!(
        carrier_test_support::http_status(port, &req).await,
        Some(101)
    );
    child.kill().await.ok();
}

/// `--max-reply-bytes 0` is refused. (What a carrier does at its reply cap is the agent
/// layer's test: `agent/tests/it/reply_bound.rs`.)
#[tokio::test]
async fn serve_refuses_a_zero_max_reply_bytes_with_exit_2() {
    let refused = match carrier_test_support::serve_process::Serve::start(&[
        "--max-reply-bytes",
        "0",
    ])
    .await
    {
        Ok(_) => panic!("serve started with --max-reply-bytes 0"),
        Err(refused) => refused,
    };
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("max_reply_bytes"),
        "{}",
        refused.stderr
    );
}

#[test]
fn no_free_port_exits_1() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let (code, stdout, stderr) = run(&["serve", "--port", &port, "--max-retries", "0"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains(&port), "{stderr}");
}

#[test]
fn open_mode_prints_a_null_token() {
    let s = serve(
        &["--open", "--open-reason", "demo on a single-user machine"],
        &[],
    );
    assert_eq!(s.line["token"], Value::Null);
}

#[cfg(unix)]
#[test]
fn sigterm_stops_gracefully_with_exit_0() {
    let mut s = serve(&[], &[]);
    let pid = s.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    assert_eq!(wait_exit(&mut s.child, Duration::from_secs(10)), Some(0));
}

#[test]
fn console_and_client_module_are_served() {
    let s = serve(&[], &[]);
    let port = s.line["port"].as_u64().unwrap();
    let get = |path: &str| {
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
        write!(
            tcp,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).unwrap();
        out
    };
    let js = get("/client.js");
    assert!(js.starts_with("HTTP/1.1 200"), "{js}");
    assert!(js
        .to_ascii_lowercase()
        .contains("content-type: text/javascript"));
    assert!(js.contains("export class CarrierClient"));
    // Every module the served client imports (relatively, so against the carrier's root) is
    // served too, byte for byte the package's file: a page needs no build step.
    let mut modules = vec!["client.js".to_string()];
    let mut seen = 0;
    while seen < modules.len() {
        let name = modules[seen].clone();
        seen += 1;
        let response = get(&format!("/{name}"));
        assert!(response.starts_with("HTTP/1.1 200"), "/{name}: {response}");
        let body = response.split_once("\r\n\r\n").unwrap().1;
        let package =
            std::fs::read_to_string(carrier_test_support::repo().join("js").join(&name)).unwrap();
        assert_eq!(body, package, "/{name} is js/{name}");
        for import in body.split("from \"./").skip(1) {
            let target = import.split('"').next().unwrap().to_string();
            if !modules.contains(&target) {
                modules.push(target);
            }
        }
    }
    assert!(modules.len() >= 4, "{modules:?}");
    assert!(get("/package.json").starts_with("HTTP/1.1 404"));
    let page = get("/console");
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("/client.js"));
}

// ---------------------------------------------------------------------------------------------
// Runtime files (docs/protocol.md, "Discovery and the CLI")
// ---------------------------------------------------------------------------------------------

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

// Linux: the file's `pid_start` is compared with /proc (other systems do not record it).
#[cfg(target_os = "linux")]
#[test]
fn the_runtime_file_is_0600_in_a_0700_directory_and_names_the_listener() {
    let runtime = tempfile::tempdir().unwrap();
    let s = serve_in(runtime.path(), &[], &[]);
    let file = runtime_file(runtime.path(), s.pid());
    assert_eq!(mode(&runtime.path().join("carrier")), 0o700);
    assert_eq!(mode(&file), 0o600);
    let entry: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut keys: Vec<&str> = entry
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "pid",
            "pid_start",
            "port",
            "role",
            "socket",
            "started",
            "token",
            "url"
        ],
        "{entry}"
    );
    // When the process started, as the kernel counts it: what tells it from a later process
    // given the same pid.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", s.pid())).unwrap();
    let starttime: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(22 - 3)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(entry["pid_start"]["ticks_since_boot"], starttime, "{entry}");
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(entry["pid_start"]["boot_id"], boot_id.trim(), "{entry}");
    assert_eq!(entry["pid"], s.pid());
    for key in ["url", "port", "role", "token"] {
        assert_eq!(entry[key], s.line[key], "{key}: {entry} vs {}", s.line);
    }
    let started = entry["started"].as_str().unwrap();
    assert!(
        started.len() == 20 && started.ends_with('Z') && started.as_bytes()[10] == b'T',
        "RFC 3339 UTC: {started}"
    );
    // Nothing else is left in the directory (the temporary file was renamed into place) but
    // the carrier's socket beside the file.
    let mut names: Vec<String> = std::fs::read_dir(runtime.path().join("carrier"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let pid = s.pid();
    assert_eq!(
        names,
        [format!("{pid}.json"), format!("{pid}.sock")],
        "{names:?}"
    );
}

#[test]
fn send_status_and_connect_need_no_url_or_token_when_one_carrier_runs() {
    let runtime = tempfile::tempdir().unwrap();
    let s = serve_in(runtime.path(), &["--demo-delay-ms", "1"], &[]);
    let (code, stdout, stderr) = run_in(runtime.path(), &["send", "hi"]);
    assert_eq!((code, stdout.as_str()), (0, "echo: hi\n"), "{stderr}");
    let (code, stdout, stderr) = run_in(runtime.path(), &["status", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let status: Value = serde_json::from_str(&stdout).unwrap();
    // The carrier's Unix socket, which its runtime file lists.
    assert_eq!(
        status["url"],
        format!("unix:{}", s.line["socket"].as_str().unwrap())
    );
    let (code, _, stderr) = run_in(runtime.path(), &["connect"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("at unix:{}", s.line["socket"].as_str().unwrap())),
        "{stderr}"
    );
    // A token given still wins over the file's.
    let (code, _, stderr) = run_in(runtime.path(), &["send", "--token", "wrong", "hi"]);
    assert_eq!(code, 1, "{stderr}");
}

#[test]
fn with_two_carriers_running_the_commands_exit_2_naming_both() {
    let runtime = tempfile::tempdir().unwrap();
    let a = serve_in(runtime.path(), &[], &[]);
    let b = serve_in(runtime.path(), &[], &[]);
    for args in [&["send", "hi"][..], &["status"][..], &["connect"][..]] {
        let (code, stdout, stderr) = run_in(runtime.path(), args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        for s in [&a, &b] {
            assert!(
                stderr.contains(s.url()) && stderr.contains(&format!("pid {}", s.pid())),
                "{args:?} names {}: {stderr}",
                s.url()
            );
        }
    }
    // With none running it says how to start one, also with 2.
    let empty = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_in(empty.path(), &["send", "hi"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("carrier serve"), "{stderr}");
}

#[test]
fn doctor_lists_a_carrier_on_a_random_port_from_its_runtime_file() {
    let runtime = tempfile::tempdir().unwrap();
    let s = serve_in(runtime.path(), &[], &[]);
    let port = s.line["port"].as_u64().unwrap();
    assert!(
        !(7070..=7090).contains(&port),
        "--port 0 chose a default port: {port}"
    );
    let (code, stdout, stderr) = run_in(runtime.path(), &["doctor"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("127.0.0.1:{port}: ")))
        .unwrap_or_else(|| panic!("doctor does not list port {port}:\n{stdout}"));
    assert!(
        line.contains("carrier server (healthz ok)") && line.contains(&format!("pid {}", s.pid())),
        "{line}"
    );
    // The file's token let doctor handshake and compare versions without CARRIER_TOKEN.
    assert!(stdout.contains("  compatible\n"), "{stdout}");
}

#[test]
fn doctor_checks_an_open_carrier_without_a_token_and_asks_for_one_otherwise() {
    // Both runtime files list no token: --open needs none, --token-file keeps it out of the file.
    let open_dir = tempfile::tempdir().unwrap();
    let _open = serve_in(
        open_dir.path(),
        &["--open", "--open-reason", "a doctor test"],
        &[],
    );
    let (code, stdout, stderr) = run_in(open_dir.path(), &["doctor"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("  compatible\n"), "{stdout}");
    assert!(!stdout.contains("set CARRIER_TOKEN"), "{stdout}");

    let file_dir = tempfile::tempdir().unwrap();
    let token_file = file_dir.path().join("token");
    // Over TCP: its own socket would admit doctor without a token.
    let _guarded = serve_in(
        file_dir.path(),
        &[
            "--token-file",
            token_file.to_str().unwrap(),
            "--no-unix-socket",
        ],
        &[],
    );
    let (code, stdout, stderr) = run_in(file_dir.path(), &["doctor"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("set CARRIER_TOKEN"), "{stdout}");
    assert!(!stdout.contains("  compatible\n"), "{stdout}");
}

#[cfg(unix)]
#[test]
fn sigterm_removes_the_runtime_file() {
    let runtime = tempfile::tempdir().unwrap();
    let mut s = serve_in(runtime.path(), &[], &[]);
    let file = runtime_file(runtime.path(), s.pid());
    assert!(file.exists());
    let status = Command::new("kill")
        .args(["-TERM", &s.pid().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert_eq!(wait_exit(&mut s.child, WAIT), Some(0));
    assert!(!file.exists(), "{} outlived its carrier", file.display());
}

#[cfg(unix)]
#[test]
fn a_file_left_by_a_killed_carrier_is_ignored_and_removed() {
    let runtime = tempfile::tempdir().unwrap();
    let mut killed = serve_in(runtime.path(), &[], &[]);
    let live = serve_in(runtime.path(), &["--demo-delay-ms", "1"], &[]);
    let stale = runtime_file(runtime.path(), killed.pid());
    killed.child.kill().unwrap(); // SIGKILL: no chance to clean up
    killed.child.wait().unwrap();
    assert!(stale.exists(), "a killed carrier leaves its file");

    let (code, stdout, stderr) = run_in(runtime.path(), &["send", "hi"]);
    assert_eq!((code, stdout.as_str()), (0, "echo: hi\n"), "{stderr}");
    assert!(!stale.exists(), "the stale file was removed");
    assert!(runtime_file(runtime.path(), live.pid()).exists());
}

/// A killed carrier not yet reaped by its parent (a zombie) is gone for clients too.
#[cfg(target_os = "linux")]
#[test]
fn a_file_left_by_a_killed_carrier_not_yet_reaped_is_ignored_and_removed() {
    let runtime = tempfile::tempdir().unwrap();
    let mut killed = serve_in(runtime.path(), &[], &[]);
    let live = serve_in(runtime.path(), &["--demo-delay-ms", "1"], &[]);
    let stale = runtime_file(runtime.path(), killed.pid());
    killed.child.kill().unwrap(); // SIGKILL, and no wait(): the process stays a zombie
    let stat = format!("/proc/{}/stat", killed.pid());
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z")) {
        assert!(
            Instant::now() < deadline,
            "the killed carrier never became a zombie"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(stale.exists(), "a killed carrier leaves its file");

    let (code, stdout, stderr) = run_in(runtime.path(), &["send", "hi"]);
    assert_eq!((code, stdout.as_str()), (0, "echo: hi\n"), "{stderr}");
    assert!(!stale.exists(), "the zombie's file was removed");
    assert!(runtime_file(runtime.path(), live.pid()).exists());
    killed.child.wait().unwrap();
}

#[cfg(unix)]
#[test]
fn runtime_files_and_directories_others_can_write_are_ignored_with_a_warning() {
    let runtime = tempfile::tempdir().unwrap();
    let s = serve_in(runtime.path(), &["--demo-delay-ms", "1"], &[]);
    let dir = runtime.path().join("carrier");
    let genuine = std::fs::read_to_string(runtime_file(runtime.path(), s.pid())).unwrap();

    // A second, world-writable file naming a live process: anyone could have pointed it (and a
    // client's token) elsewhere, so it is not counted.
    let planted = dir.join("1.json");
    std::fs::write(
        &planted,
        genuine.replace(&format!("\"pid\": {}", s.pid()), "\"pid\": 1"),
    )
    .unwrap();
    set_mode(&planted, 0o666);
    let (code, stdout, stderr) = run_in(runtime.path(), &["send", "hi"]);
    assert_eq!((code, stdout.as_str()), (0, "echo: hi\n"), "{stderr}");
    assert!(
        stderr.contains("warning")
            && stderr.contains("1.json")
            && stderr.contains("written by other users"),
        "{stderr}"
    );
    assert!(planted.exists(), "an untrusted file is left alone");

    // Owned by someone else (only root can arrange that here): ignored too.
    set_mode(&planted, 0o600);
    if std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).is_ok() {
        let (code, _, stderr) = run_in(runtime.path(), &["send", "hi"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    }
    std::fs::remove_file(&planted).unwrap();

    // A directory others can write: nothing in it is trusted, not even the genuine file.
    set_mode(&dir, 0o777);
    let (code, _, stderr) = run_in(runtime.path(), &["send", "hi"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("warning: ignoring the runtime directory")
            && stderr.contains("written by other users"),
        "{stderr}"
    );
    set_mode(&dir, 0o700);
}
