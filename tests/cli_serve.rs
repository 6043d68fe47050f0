//! `carrier serve` as a user runs it: the real binary, its one `listening` line, exit codes,
//! the token file, signals, and `carrier send` against it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_carrier");

/// A running `carrier serve`, killed on drop.
struct Serve {
    child: Child,
    line: Value,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .args(["--port", "0"])
        .args(args)
        .env_remove("CARRIER_TOKEN")
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
    Serve { child, line }
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("CARRIER_TOKEN")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run carrier");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
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
    assert_eq!(keys.len(), 5, "{}", s.line);
    assert_eq!(s.line["event"], "listening");
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
    let page = get("/console");
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("/client.js"));
}
