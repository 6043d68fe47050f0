//! A token goes only to its own server: the CLI's commands go by a runtime file only while the
//! process that wrote it runs, and none of them (`send`, `connect`, `status`, `pipe`, `acp`, `doctor`)
//! sends a token or a prompt to a listener of another user. (How discovery judges a runtime file
//! is its own test, `discovery/tests/it/runtime_files.rs`; the Rust client against another user's
//! listener is the client's, `client/tests/it/owner_check.rs`.)
//!
//! The other user's listener is a small Python server started as uid 4242 (`setpriv`,
//! `carrier_test_support::squatter`), which plays a squatter: it answers `/healthz` like a
//! carrier, completes any WebSocket upgrade, and reports every byte each connection brought. Starting it needs root (CI runs as root); run as
//! another user, those tests say so and return. The runtime-file tests run as anyone. All of it
//! is Linux: the start times and the socket owners come from `/proc`.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use carrier::discovery::RuntimeDir;
use carrier_cli::client::{doctor_with, DoctorArgs};
use carrier_test_support::runtime_file::{
    boot_id, start_ticks, write_runtime_file, Recorder, Sleeper,
};
use carrier_test_support::squatter::{
    assert_one_line_naming_the_owner, squatter, PROMPT, SQUATTER_UID, TOKEN, WAIT,
};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_carrier");

// ---------------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------------

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `carrier ARGS` with `XDG_RUNTIME_DIR=runtime` and `CARRIER_TOKEN` set; stdin is `input`.
fn carrier(runtime: &Path, args: &[&str], input: &[u8]) -> Run {
    carrier_under(&[], runtime, args, input)
}

/// [`carrier`], run by `wrapper` (`unshare --user`, say): `WRAPPER… carrier ARGS`.
fn carrier_under(wrapper: &[&str], runtime: &Path, args: &[&str], input: &[u8]) -> Run {
    let (program, wrapper_args) = match wrapper {
        [program, rest @ ..] => (*program, rest),
        [] => (BIN, &[][..]),
    };
    let mut command = Command::new(program);
    command.args(wrapper_args);
    if !wrapper.is_empty() {
        command.arg(BIN);
    }
    let mut child = command
        .args(args)
        .env("CARRIER_TOKEN", TOKEN)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run carrier");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
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
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("carrier {args:?} did not exit within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = feeder.join();
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime files
// ---------------------------------------------------------------------------------------------

/// A runtime file naming a pid its writer no longer has: `carrier send` with no URL finds no
/// carrier, removes the file and sends nothing. (How discovery judges the file is its own test:
/// `discovery/tests/it/runtime_files.rs`.)
#[test]
fn send_ignores_and_removes_a_runtime_file_naming_a_pid_its_writer_no_longer_has() {
    let runtime = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start();
    // A live process of this user that started after the file's writer did: the pid was reused.
    let sleeper = Sleeper::start();
    let reused = start_ticks(sleeper.pid()) + 1;
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": reused})),
    );
    let run = carrier(runtime.path(), &["send", PROMPT], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("no running carrier found"),
        "{}",
        run.stderr
    );
    assert!(!file.exists(), "the stale file was removed");
    assert_eq!(recorder.connections(), 0, "something connected to the port");
}

/// An older carrier's file without a start time, while its pid runs: `carrier send` warns and
/// leaves it alone, and sends nothing. (That discovery removes it once the pid runs no more is
/// its own test: `discovery/tests/it/runtime_files.rs`.)
#[test]
fn an_older_carrier_s_file_without_a_start_time_is_ignored_with_a_warning_while_its_pid_runs() {
    let runtime = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start();
    let sleeper = Sleeper::start();
    let file = write_runtime_file(runtime.path(), sleeper.pid(), recorder.port(), None);
    let run = carrier(runtime.path(), &["send", PROMPT], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("warning: ignoring the runtime file")
            && run.stderr.contains("does not record when process"),
        "{}",
        run.stderr
    );
    assert!(
        file.exists(),
        "a possibly live carrier's file is left alone"
    );
    assert_eq!(recorder.connections(), 0, "something connected to the port");
}

// ---------------------------------------------------------------------------------------------
// Another user's listener
// ---------------------------------------------------------------------------------------------

/// The case: a carrier killed with SIGKILL left its file; its pid now belongs to
/// another user's process, which also holds its port.
#[test]
fn a_stale_runtime_file_whose_pid_and_port_another_user_took_sends_nothing() {
    let test = "a_stale_runtime_file_whose_pid_and_port_another_user_took_sends_nothing";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    // Recorded by the carrier that wrote the file, long before the squatter started.
    let file = write_runtime_file(
        runtime.path(),
        squatter.pid(),
        squatter.port,
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": 1})),
    );
    let run = carrier(runtime.path(), &["send", PROMPT], b"");
    squatter.assert_got_nothing("send");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no running carrier found"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(!file.exists(), "the stale file was removed");
}

/// The runtime file is genuine and its writer still runs, but the port is another user's now
/// (the carrier closed its listener, say): the dial's own check refuses it.
#[test]
fn a_live_runtime_file_pointing_at_another_users_port_sends_nothing() {
    let test = "a_live_runtime_file_pointing_at_another_users_port_sends_nothing";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let writer = Sleeper::start();
    write_runtime_file(
        runtime.path(),
        writer.pid(),
        squatter.port,
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": start_ticks(writer.pid())})),
    );
    for args in [
        &["send", PROMPT][..],
        &["status", "--json"][..],
        &["connect"][..],
        &["pipe", "--channel", "up"][..],
        &["acp"][..],
    ] {
        let input = format!("{PROMPT}\n");
        let run = carrier(runtime.path(), args, input.as_bytes());
        squatter.assert_got_nothing(&format!("{args:?}"));
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert_one_line_naming_the_owner(&run.stderr, squatter.port);
    }
}

#[test]
fn send_connect_status_pipe_and_acp_refuse_another_users_listener_at_a_given_url() {
    let test = "send_connect_status_pipe_and_acp_refuse_another_users_listener_at_a_given_url";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let url = squatter.url();
    for args in [
        &["send", &url, PROMPT][..],
        &["send", &url, "--token", TOKEN, PROMPT][..],
        &["status", &url][..],
        &["connect", &url][..],
        &["pipe", &url, "--channel", "up"][..],
        &["acp", &url][..],
    ] {
        let input = format!("{PROMPT}\n");
        let run = carrier(runtime.path(), args, input.as_bytes());
        squatter.assert_got_nothing(&format!("{args:?}"));
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert_one_line_naming_the_owner(&run.stderr, squatter.port);
    }
}

#[test]
fn any_owner_talks_to_another_users_listener_without_the_token_and_says_so() {
    let test = "any_owner_talks_to_another_users_listener_without_the_token_and_says_so";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let url = squatter.url();
    // The squatter completes the upgrade but never answers the handshake, then hangs up: the
    // command fails, after a request that carried no token.
    for args in [
        &["send", "--any-owner", &url, "--token", TOKEN, PROMPT][..],
        &["status", "--any-owner", &url][..],
        &["pipe", "--any-owner", &url, "--channel", "up"][..],
    ] {
        let run = carrier(runtime.path(), args, b"");
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "warning: the listener at {url} belongs to uid {SQUATTER_UID}"
            )) && run.stderr.contains("without a token (--any-owner)"),
            "{args:?}: {}",
            run.stderr
        );
        let received = squatter.received();
        assert_eq!(received.len(), 1, "{args:?}: {received:?}");
        let text = received[0].text();
        assert!(text.starts_with("GET / HTTP/1.1\r\n"), "{args:?}: {text}");
        assert!(
            !text.contains(TOKEN) && !text.to_ascii_lowercase().contains("sec-websocket-protocol"),
            "{args:?}: the token went out: {text}"
        );
        assert!(
            !received[0].frame_payloads().contains(PROMPT),
            "{args:?}: the prompt went out before a handshake answer"
        );
    }
    // Without a URL it is a usage error: a carrier found through a runtime file is always the
    // user's own.
    let run = carrier(runtime.path(), &["send", "--any-owner", PROMPT], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--any-owner needs the URL"),
        "{}",
        run.stderr
    );
    squatter.assert_got_nothing("send --any-owner without a URL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_only_the_health_of_another_users_listener_and_names_its_owner() {
    let test = "doctor_checks_only_the_health_of_another_users_listener_and_names_its_owner";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = DoctorArgs {
        url: None,
        token: Some(TOKEN.to_owned()),
    };
    let port = squatter.port;
    let code = tokio::time::timeout(
        WAIT,
        doctor_with(
            args,
            port..=port,
            &RuntimeDir::at(runtime.path()),
            &mut out,
            &mut err,
        ),
    )
    .await
    .expect("doctor finishes");
    let (out, err) = (
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    );
    let received = squatter.received();
    assert!(!received.is_empty(), "doctor did not probe the port");
    for r in &received {
        let text = r.text();
        assert!(
            text.starts_with("GET /healthz HTTP/1.1\r\n")
                && !text.contains(TOKEN)
                && !text.to_ascii_lowercase().contains("upgrade"),
            "doctor sent more than a tokenless health probe: {text}"
        );
    }

    // Not a carrier of this user's: nothing compatible was found.
    assert_eq!(code, ExitCode::FAILURE, "{out}{err}");
    assert!(
        !out.contains("  compatible") && !out.contains("carrier server"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("127.0.0.1:{port}: ")))
        .unwrap_or_else(|| panic!("doctor does not name port {port}:\n{out}"));
    assert!(
        line.contains(&format!("belongs to uid {SQUATTER_UID}"))
            && line.contains("not to you")
            && line.contains("without a token"),
        "{line}"
    );
}

// ---------------------------------------------------------------------------------------------
// A user namespace: where the kernel cannot tell users apart
// ---------------------------------------------------------------------------------------------

/// `carrier serve` of this user on a free port (killed on drop).
struct OwnCarrier {
    child: Child,
    port: u16,
}

impl OwnCarrier {
    /// A carrier whose token is `token`.
    fn start(runtime: &Path, token: &str) -> OwnCarrier {
        let mut child = Command::new(BIN)
            .args(["serve", "--port", "0"])
            .env("CARRIER_TOKEN", token)
            .env("XDG_RUNTIME_DIR", runtime)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("carrier serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the listening line");
        let listening: Value = serde_json::from_str(&line).expect("JSON");
        let port = listening["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .expect("port");
        OwnCarrier { child, port }
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }
}

impl Drop for OwnCarrier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The wrapper that runs a command in a new user namespace without a uid map.
const UNSHARE_USER: [&str; 2] = ["unshare", "--user"];

/// Why a command cannot be run in a new user namespace here, if it cannot.
fn cannot_unshare_a_user_namespace() -> Option<String> {
    match Command::new("unshare").args(["--user", "true"]).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`unshare --user` fails here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("unshare (util-linux) is missing: {e}")),
    }
}

/// Under `unshare --user` without a uid map the client runs as the kernel's overflow uid, and
/// the socket table shows every user it cannot map — the squatter, this user's own carrier —
/// as that same uid: no listener can be attributed, so none gets the token or the prompt.
/// Outside the namespace the same command still reaches the user's own carrier.
#[test]
fn in_a_user_namespace_without_a_uid_map_no_listener_is_attributed_and_nothing_is_sent() {
    let test =
        "in_a_user_namespace_without_a_uid_map_no_listener_is_attributed_and_nothing_is_sent";
    if let Some(why) = cannot_unshare_a_user_namespace() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let own = OwnCarrier::start(runtime.path(), TOKEN);

    let outside = carrier(runtime.path(), &["send", &own.url(), PROMPT], b"");
    assert_eq!(outside.code, 0, "{}\n{}", outside.stdout, outside.stderr);
    assert!(
        !outside.stdout.trim().is_empty(),
        "no reply: {}",
        outside.stderr
    );

    for (url, port) in [(squatter.url(), squatter.port), (own.url(), own.port)] {
        let inside = carrier_under(&UNSHARE_USER, runtime.path(), &["send", &url, PROMPT], b"");
        assert_eq!(
            inside.code, 1,
            "{url}: {}\n{}",
            inside.stdout, inside.stderr
        );
        assert!(inside.stdout.is_empty(), "{url}: {}", inside.stdout);
        let stderr = inside.stderr.trim_end();
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "carrier: refusing to talk to 127.0.0.1:{port}: the port cannot be attributed to a user ("
            )) && stderr.contains("overflow uid")
                && stderr.ends_with("nothing was sent"),
            "{stderr}"
        );
    }
    squatter.assert_got_nothing("send in a user namespace");
}

// ---------------------------------------------------------------------------------------------
// A token written into the URL
// ---------------------------------------------------------------------------------------------

/// A token written into the URL is the token: with `--any-owner` it goes to another user's
/// listener no more than `--token` does, and no line a command prints shows it.
/// `user:password@` is refused before anything is dialled. The user's own carrier still takes
/// the URL's token (over `CARRIER_TOKEN`, which is wrong for it here).
#[test]
fn a_token_in_the_url_never_reaches_another_users_listener_and_is_never_printed() {
    let test = "a_token_in_the_url_never_reaches_another_users_listener_and_is_never_printed";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let secret = "url-secret-0123456789abcdef0123456789";
    let url = squatter.url();
    let in_query = format!("{url}?token={secret}");
    let among_others = format!("{url}?role=observe&token={secret}");
    let nothing_shown = |run: &Run, what: &str| {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{what} printed the token:\n{}\n{}",
            run.stdout,
            run.stderr
        );
    };
    for args in [
        &["send", "--any-owner", &in_query, PROMPT][..],
        &["status", "--any-owner", &among_others][..],
        &["pipe", "--any-owner", &in_query, "--channel", "up"][..],
    ] {
        let run = carrier(runtime.path(), args, b"");
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("without a token (--any-owner)"),
            "{args:?}: {}",
            run.stderr
        );
        nothing_shown(&run, &format!("{args:?}"));
        let received = squatter.received();
        assert_eq!(received.len(), 1, "{args:?}: {received:?}");
        let text = received[0].text();
        assert!(text.starts_with("GET /"), "{args:?}: {text}");
        assert!(
            !text.contains(secret) && !text.contains(TOKEN),
            "{args:?}: a token went out: {text}"
        );
    }

    let port = squatter.port;
    for url in [
        format!("ws://me:{secret}@127.0.0.1:{port}/"),
        format!("ws://{secret}@127.0.0.1:{port}/?token={secret}"),
    ] {
        for any_owner in [true, false] {
            let mut args = vec!["send", &url, PROMPT];
            if any_owner {
                args.insert(1, "--any-owner");
            }
            let run = carrier(runtime.path(), &args, b"");
            assert_eq!(run.code, 2, "{args:?}: {}\n{}", run.stdout, run.stderr);
            assert!(
                run.stderr.contains("user:password@"),
                "{args:?}: {}",
                run.stderr
            );
            nothing_shown(&run, &format!("{args:?}"));
        }
    }
    squatter.assert_got_nothing("a URL with user:password@");

    let own_token = "own-carrier-token-0123456789abcdef0123";
    let own = OwnCarrier::start(runtime.path(), own_token);
    let run = carrier(
        runtime.path(),
        &["send", &format!("{}?token={own_token}", own.url()), PROMPT],
        b"",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stdout.trim().is_empty(), "no reply: {}", run.stderr);
    assert!(
        !run.stdout.contains(own_token) && !run.stderr.contains(own_token),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}
