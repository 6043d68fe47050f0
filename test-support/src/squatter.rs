//! Another user's listener that records what it receives (the squatter): a small Python server
//! started as uid [`SQUATTER_UID`] (`setpriv`), which answers `/healthz` like a carrier,
//! completes any WebSocket upgrade, and reports every byte each connection brought. Starting it
//! needs root (CI runs as root); elsewhere [`squatter`] says why and returns `None`. Linux: the
//! start times and the socket owners come from `/proc`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What the commands carry in `CARRIER_TOKEN`; it must never reach the squatter.
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef-secret-token";
/// What the commands send as their prompt; it must never reach the squatter.
pub const PROMPT: &str = "my secret prompt";
/// The most any command or wait below may take.
pub const WAIT: Duration = Duration::from_secs(30);
/// The uid the squatter runs as: any uid but this process's and the kernel's overflow uid
/// (65534), whose listeners are unattributed rather than another user's.
pub const SQUATTER_UID: u32 = 4242;

/// Listens on 127.0.0.1 (argv[1], or any port), prints `{"port":P}`, then for each connection
/// `{"accepted":N}` and, once it closed, `{"closed":N,"text":…}` with every byte it brought
/// (latin-1). It answers `GET /healthz` as a carrier does and completes WebSocket upgrades, so
/// a client that trusted it goes on to send its handshake; after a second of quiet it closes
/// the WebSocket with 1008, so that the client gives up rather than reconnecting.
const SQUATTER: &str = r#"
import base64, hashlib, json, socket, sys, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0))
server.listen(64)
lock = threading.Lock()
def log(**fields):
    with lock:
        print(json.dumps(fields), flush=True)
log(port=server.getsockname()[1])
def serve(conn, n):
    data = b""
    conn.settimeout(3)
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        head = data.split(b"\r\n\r\n")[0]
        if head.startswith(b"GET /healthz"):
            body = b'{"status":"ok"}'
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        elif b"\r\n\r\n" in data:
            key = b""
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"sec-websocket-key":
                    key = value.strip()
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: " + accept + b"\r\n\r\n")
            # Take what the client sends until it pauses, then close with 1008 so that it does
            # not reconnect.
            conn.settimeout(1)
            try:
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            conn.sendall(b"\x88\x02\x03\xf0")
            conn.settimeout(3)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        conn.close()
        log(closed=n, text=data.decode("latin-1"))
n = 0
while True:
    conn, _ = server.accept()
    log(accepted=n)
    threading.Thread(target=serve, args=(conn, n), daemon=True).start()
    n += 1
"#;

/// One connection the squatter received, with everything it brought.
#[derive(Debug)]
pub struct Received {
    /// Every byte, in order.
    pub bytes: Vec<u8>,
}

impl Received {
    /// The bytes as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The payloads of the WebSocket frames after the upgrade request, unmasked: where a
    /// prompt would be.
    pub fn frame_payloads(&self) -> String {
        let Some(end) = find(&self.bytes, b"\r\n\r\n") else {
            return String::new();
        };
        let mut rest = &self.bytes[end + 4..];
        let mut text = String::new();
        while rest.len() >= 2 {
            let masked = rest[1] & 0x80 != 0;
            let (len, mut at) = match rest[1] & 0x7F {
                126 if rest.len() >= 4 => (usize::from(u16::from_be_bytes([rest[2], rest[3]])), 4),
                127 => break,
                126 => break,
                n => (usize::from(n), 2),
            };
            let mut key = [0u8; 4];
            if masked {
                let Some(k) = rest.get(at..at + 4) else { break };
                key.copy_from_slice(k);
                at += 4;
            }
            let Some(payload) = rest.get(at..at + len) else {
                break;
            };
            let plain: Vec<u8> = payload
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ key[i % 4])
                .collect();
            text.push_str(&String::from_utf8_lossy(&plain));
            rest = &rest[at + len..];
        }
        text
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The squatter process (killed on drop) and what it has reported so far.
pub struct Squatter {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    lines: mpsc::Receiver<Value>,
    /// Its reports so far (`{"accepted":N}`, `{"closed":N,"text":…}`).
    pub seen: Vec<Value>,
    /// Connections below this number were reported by an earlier [`Squatter::received`].
    reported: u64,
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why another user's listener cannot be started here, if it cannot.
#[allow(unsafe_code)] // geteuid(2), below
pub fn cannot_start_a_squatter() -> Option<&'static str> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the tests do not run as root, so they cannot start a listener as another user (CI runs as root)");
    }
    if !Path::new("/usr/bin/python3").exists() {
        return Some("/usr/bin/python3 (readable by any uid) is missing");
    }
    if Command::new("setpriv")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        return Some("setpriv (util-linux) is missing");
    }
    None
}

/// Starts the squatter as [`SQUATTER_UID`] on `port` (0: any), or says why it cannot and returns
/// `None`.
pub fn squatter(test: &str, port: u16) -> Option<Squatter> {
    if let Some(why) = cannot_start_a_squatter() {
        eprintln!("SKIPPED {test}: {why}");
        return None;
    }
    let mut child = Command::new("setpriv")
        .args([
            &format!("--reuid={SQUATTER_UID}"),
            &format!("--regid={SQUATTER_UID}"),
            "--clear-groups",
            "/usr/bin/python3",
            "-u",
            "-c",
            SQUATTER,
            &port.to_string(),
        ])
        .current_dir("/")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the squatter");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                break;
            };
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let first = lines
        .recv_timeout(WAIT)
        .expect("the squatter reports its port");
    let port = first["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("a port");
    let squatter = Squatter {
        child,
        port,
        lines,
        seen: Vec::new(),
        reported: 0,
    };
    // It really runs as the other user.
    let status = std::fs::read_to_string(format!("/proc/{}/status", squatter.pid()))
        .expect("the squatter's status");
    assert!(
        status.lines().any(|l| l.starts_with("Uid:")
            && l.split_whitespace().nth(2) == Some(&SQUATTER_UID.to_string())),
        "{status}"
    );
    Some(squatter)
}

impl Squatter {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its `ws://` URL.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }

    /// Takes the squatter's reports until `done` holds for them, within [`WAIT`].
    pub fn wait_until(&mut self, what: &str, done: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("the squatter never reported {what}: {:?}", self.seen),
            }
        }
    }

    /// Every connection made so far, once each has closed. A connection of the test's own is
    /// made last: connections are accepted in order, so once it has been, so has every earlier
    /// one.
    pub fn received(&mut self) -> Vec<Received> {
        let mut marker =
            TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the squatter");
        marker.write_all(b"MARKER").expect("write the marker");
        drop(marker);
        let closed = |seen: &[Value], n: u64| seen.iter().any(|v| v["closed"] == n);
        let marker_id = |seen: &[Value]| {
            seen.iter()
                .find(|v| v["text"] == "MARKER")
                .and_then(|v| v["closed"].as_u64())
        };
        self.wait_until("the marker connection", |seen| marker_id(seen).is_some());
        let marker = marker_id(&self.seen).unwrap_or_default();
        let since = self.reported;
        self.wait_until("every connection closed", |seen| {
            (since..marker).all(|n| closed(seen, n))
        });
        let mut received: Vec<(u64, Received)> = self
            .seen
            .iter()
            .filter_map(|v| {
                let n = v["closed"]
                    .as_u64()
                    .filter(|n| (since..marker).contains(n))?;
                let text = v["text"].as_str()?;
                // latin-1: one char per byte.
                let bytes = text.chars().map(|c| c as u32 as u8).collect();
                Some((n, Received { bytes }))
            })
            .collect();
        received.sort_by_key(|(n, _)| *n);
        self.seen.retain(|v| {
            let n = v["closed"].as_u64().or_else(|| v["accepted"].as_u64());
            n.is_some_and(|n| n > marker)
        });
        self.reported = marker + 1;
        received.into_iter().map(|(_, r)| r).collect()
    }

    /// Asserts that no connection brought a single byte.
    pub fn assert_got_nothing(&mut self, who: &str) {
        let received = self.received();
        for r in &received {
            assert!(
                r.bytes.is_empty(),
                "{who} sent the squatter {} bytes (token sent: {}, prompt sent: {}):\n{}\nframes: {}",
                r.bytes.len(),
                r.text().contains(TOKEN),
                r.frame_payloads().contains(PROMPT),
                r.text(),
                r.frame_payloads()
            );
        }
    }
}

/// Asserts `stderr` is the one line refusing the squatter's port and naming its owner.
pub fn assert_one_line_naming_the_owner(stderr: &str, port: u16) {
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{port}"))
            && stderr.contains(&format!("uid {SQUATTER_UID}"))
            && stderr.contains("not to you")
            && stderr.contains("nothing was sent"),
        "{stderr}"
    );
}
