//! Load and soak harness: holds many concurrent, handshaken connections to a carrier on loopback
//! with mixed traffic, checks that nothing is lost, duplicated or reordered, and prints one JSON
//! line. Exits 1 on any error.
//!
//! ```sh
//! cargo run --release --example soak -- [CONNECTIONS] [SECONDS]     # default 1000 30
//! ```
//!
//! The server runs in a child process (this same binary with `serve`), so its memory is measured
//! on its own: `/proc/<pid>/status` VmRSS idle, with every connection handshaken, at ten even
//! points of the run and at the end — and beside each RSS sample the child's live heap bytes
//! (a counting global allocator), which tells a leak (live heap climbs) from the allocator
//! keeping freed pages (RSS climbs, live heap level).
//! The server hosts the embedded agent (1 ms between deltas) and an `echo` channel (the
//! reference channel from `channels/echo.rs`).
//!
//! Traffic per connection until the deadline, each on its own timer:
//! - a binary channel frame on `echo` every 100 ms (client seq 0, 1, 2 …; the body carries the
//!   counter): every echo must come back, in order, with a server seq that strictly increases;
//! - a `system.ping` request every second: every request answered, by id;
//! - connection 0 drives the default session (a new prompt 200 ms after the previous turn
//!   completes) so its events fan out to every connection bound to it; every 20th connection
//!   starts a session of its own with `sessions.start` and drives it the same way;
//! - every session event a connection receives must have `seq` one above the previous one, and
//!   each driver checks that its turn's deltas concatenate to `"echo: " + prompt`.
//!
//! Everything is bounded: connections and seconds come from the command line, connecting and
//! draining have timeouts, and the child is stopped when the parent ends (its stdin closes).

// The counting global allocator below is the one `unsafe` here; each block says why it holds.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use carrier::agent::{AgentProfile, EmbeddedAgent};
use carrier::protocol::channel_frame::{self, FrameBody};
use carrier::server::{CarrierConfig, Limits, WsTransport};
use carrier_channels::echo;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

const CHANNEL_EVERY: Duration = Duration::from_millis(100);
const PING_EVERY: Duration = Duration::from_secs(1);
const DRAIN: Duration = Duration::from_secs(15);
/// A driver's pause between the end of one turn and its next prompt: the soak is a steady
/// load, not a flood (a flood makes the slowest of 1000 readers a slow reader by design).
const THINK: Duration = Duration::from_millis(200);

/// Live heap bytes of this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes: the soak's only window on whether the server's
/// heap (not just its RSS) stays level. One relaxed atomic per call.
struct LiveBytes;

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a side
// effect with no influence on the returned memory.
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same layout contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: LiveBytes = LiveBytes;

#[derive(Default)]
struct Counters {
    connected: AtomicU64,
    handshaken: AtomicU64,
    channel_sent: AtomicU64,
    channel_echoed: AtomicU64,
    requests: AtomicU64,
    responses: AtomicU64,
    session_events: AtomicU64,
    prompts: AtomicU64,
    turns_completed: AtomicU64,
    seq_errors: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    fn error(&self, what: &str) {
        if self.errors.fetch_add(1, Ordering::Relaxed) < 20 {
            eprintln!("soak error: {what}");
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.get(1).map(String::as_str) == Some("serve") {
        let max: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1100);
        return rt.block_on(serve(max));
    }
    let connections: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(1000);
    let seconds: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(30);
    let ok = rt.block_on(drive(connections, seconds))?;
    std::process::exit(if ok { 0 } else { 1 });
}

/// The child: a carrier with the embedded agent and an echo channel. Each line on stdin is
/// answered with the live heap in KiB; the child stops when stdin closes.
async fn serve(max_connections: usize) -> Result<(), Box<dyn std::error::Error>> {
    let transport = WsTransport::new(
        CarrierConfig::default()
            .with_port(0)
            .with_limits(Limits::default().with_max_connections(max_connections)),
    )?;
    let agent = EmbeddedAgent::default().with_demo_delay(Duration::from_millis(1));
    transport.attach(AgentProfile::embedded(agent));
    let _echo = echo::mount(transport.registry(), "echo")?;
    transport.start().await?;
    println!(
        "{} {}",
        transport.bound_port().unwrap_or(0),
        transport.resolved_token().unwrap_or_default()
    );
    // The parent closes our stdin when it is done (or dies).
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Ok(Some(_)) = lines.next_line().await {
        let answer = format!("{}\n", LIVE.load(Ordering::Relaxed) / 1024);
        if out.write_all(answer.as_bytes()).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
    transport.stop().await;
    Ok(())
}

/// One memory sample of the server child.
#[derive(Clone, Copy, Default)]
struct Memory {
    rss_kib: u64,
    heap_kib: u64,
}

/// The parent's line to the child: its pid for RSS, its stdio for the live heap.
struct Probe {
    pid: u32,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl Probe {
    /// RSS from /proc and the live heap the child reports (0 when it does not answer in 5 s).
    async fn sample(&mut self) -> Memory {
        let heap = async {
            self.stdin.write_all(b"heap\n").await.ok()?;
            self.stdin.flush().await.ok()?;
            let mut line = String::new();
            self.stdout.read_line(&mut line).await.ok()?;
            line.trim().parse().ok()
        };
        let heap_kib = tokio::time::timeout(Duration::from_secs(5), heap)
            .await
            .ok()
            .flatten()
            .unwrap_or(0);
        Memory {
            rss_kib: carrier_loadgen::vm_rss_kib(self.pid).unwrap_or(0),
            heap_kib,
        }
    }
}

async fn drive(connections: usize, seconds: u64) -> Result<bool, Box<dyn std::error::Error>> {
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg("serve")
        .arg((connections + 64).to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().unwrap_or(0);
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().ok_or("no child stdout")?);
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut line)).await??;
    let mut probe = Probe {
        pid,
        stdin: child.stdin.take().ok_or("no child stdin")?,
        stdout,
    };
    let mut parts = line.split_whitespace();
    let port: u16 = parts.next().ok_or("no port")?.parse()?;
    let token = parts.next().ok_or("no token")?.to_string();
    let url = format!("ws://127.0.0.1:{port}/?token={token}");
    let idle = probe.sample().await;

    let counters = Arc::new(Counters::default());
    // Everyone connects and handshakes first (64 at a time), then traffic starts together.
    let ready = Arc::new(tokio::sync::Barrier::new(connections + 1));
    let (go, go_rx) = tokio::sync::watch::channel(None::<Instant>);
    let connect_permits = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::with_capacity(connections);
    for i in 0..connections {
        let (url, counters, ready, mut go_rx, permits) = (
            url.clone(),
            counters.clone(),
            ready.clone(),
            go_rx.clone(),
            connect_permits.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let ws = {
                let _permit = permits.acquire().await;
                connect_and_handshake(&url, i, &counters).await
            };
            ready.wait().await;
            let Some(ws) = ws else { return };
            let deadline = match go_rx.wait_for(Option::is_some).await {
                Ok(d) => d.unwrap_or_else(Instant::now),
                Err(_) => return,
            };
            run_connection(ws, i, deadline, &counters).await;
        }));
    }
    let connect_started = Instant::now();
    tokio::time::timeout(Duration::from_secs(120), ready.wait())
        .await
        .map_err(|_| "connecting took over 120 s")?;
    let connect_secs = connect_started.elapsed().as_secs_f64();
    // Let the server settle its buffers before sampling.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let loaded = probe.sample().await;
    let _ = go.send(Some(Instant::now() + Duration::from_secs(seconds)));
    let started = Instant::now();
    // Server memory at ten even points of the run: flat after warm-up means the late samples
    // stay level.
    let sampler = tokio::spawn(async move {
        let every = Duration::from_secs_f64(seconds as f64 / 10.0);
        // On a clock, not after each sample: a slow answer must not shift the later points.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let mut samples = Vec::with_capacity(10);
        for _ in 0..10 {
            tick.tick().await;
            samples.push(probe.sample().await);
        }
        (probe, samples)
    });
    for t in tasks {
        if t.await.is_err() {
            counters.error("connection task panicked");
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (mut probe, samples) = tokio::time::timeout(Duration::from_secs(60), sampler)
        .await
        .map_err(|_| "memory sampler hung")??;
    let end = probe.sample().await;
    drop(probe);
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;

    let c = &counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let handshaken = get(&c.handshaken);
    let per_conn = if handshaken > 0 {
        (loaded.rss_kib.saturating_sub(idle.rss_kib)) as f64 / handshaken as f64
    } else {
        0.0
    };
    let report = json!({
        "connections": connections,
        "seconds": seconds,
        "elapsed_s": (elapsed * 10.0).round() / 10.0,
        "connect_s": (connect_secs * 10.0).round() / 10.0,
        "connected": get(&c.connected),
        "handshaken": handshaken,
        "channel_sent": get(&c.channel_sent),
        "channel_echoed": get(&c.channel_echoed),
        "requests": get(&c.requests),
        "responses": get(&c.responses),
        "prompts": get(&c.prompts),
        "turns_completed": get(&c.turns_completed),
        "session_events": get(&c.session_events),
        "seq_errors": get(&c.seq_errors),
        "errors": get(&c.errors),
        "server_rss_kib_idle": idle.rss_kib,
        "server_rss_kib_loaded": loaded.rss_kib,
        "server_rss_kib_during": samples.iter().map(|m| m.rss_kib).collect::<Vec<_>>(),
        "server_rss_kib_end": end.rss_kib,
        "server_heap_kib_idle": idle.heap_kib,
        "server_heap_kib_loaded": loaded.heap_kib,
        "server_heap_kib_during": samples.iter().map(|m| m.heap_kib).collect::<Vec<_>>(),
        "server_heap_kib_end": end.heap_kib,
        "server_kib_per_connection": (per_conn * 10.0).round() / 10.0,
    });
    println!("{report}");
    let ok = get(&c.errors) == 0
        && get(&c.seq_errors) == 0
        && handshaken == connections as u64
        && get(&c.channel_sent) == get(&c.channel_echoed)
        && get(&c.requests) == get(&c.responses);
    Ok(ok)
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect_and_handshake(url: &str, i: usize, c: &Counters) -> Option<Ws> {
    let connect = tokio::time::timeout(
        Duration::from_secs(30),
        tokio_tungstenite::connect_async(url),
    )
    .await;
    let mut ws = match connect {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            c.error(&format!("connection {i}: connect failed: {e}"));
            return None;
        }
        Err(_) => {
            c.error(&format!("connection {i}: connect timed out"));
            return None;
        }
    };
    c.connected.fetch_add(1, Ordering::Relaxed);
    let hs = json!({"id": "hs", "method": "system.handshake", "params": {
        "protocol_version": "1.0", "min_compatible_protocol": "1.0",
        "client": {"name": "soak", "version": "0"}}});
    if ws.send(Message::text(hs.to_string())).await.is_err() {
        c.error(&format!("connection {i}: handshake send failed"));
        return None;
    }
    let answer = tokio::time::timeout(Duration::from_secs(30), ws.next()).await;
    match answer {
        Ok(Some(Ok(Message::Text(t)))) => {
            let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
            if v["id"] == "hs" && v.get("result").is_some() {
                c.handshaken.fetch_add(1, Ordering::Relaxed);
                Some(ws)
            } else {
                c.error(&format!("connection {i}: handshake answered {t}"));
                None
            }
        }
        other => {
            c.error(&format!("connection {i}: no handshake answer: {other:?}"));
            None
        }
    }
}

/// Per-connection state of the checks.
struct Track {
    /// Next client seq to send on `echo`, and the next one expected back.
    channel_next_send: u32,
    channel_next_echo: u32,
    last_server_seq: Option<u32>,
    /// The last session-event seq seen (None until the first one, or right after a switch).
    last_event_seq: Option<u64>,
    outstanding_requests: u64,
    /// The prompt of the running turn and the deltas so far (drivers only).
    prompt: Option<String>,
    deltas: String,
    turn_count: u64,
    driver: bool,
    own_session: bool,
    waiting_start: bool,
    /// When a driver sends its next prompt.
    next_prompt_at: Option<tokio::time::Instant>,
}

async fn run_connection(mut ws: Ws, i: usize, deadline: Instant, c: &Counters) {
    let mut t = Track {
        channel_next_send: 0,
        channel_next_echo: 0,
        last_server_seq: None,
        last_event_seq: None,
        outstanding_requests: 0,
        prompt: None,
        deltas: String::new(),
        turn_count: 0,
        driver: i == 0 || i % 20 == 1,
        own_session: i % 20 == 1,
        waiting_start: false,
        next_prompt_at: None,
    };
    // Spread the timers so 1000 connections do not fire in lockstep.
    let offset = Duration::from_millis((i as u64 * 7) % 100);
    let mut channel_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + offset, CHANNEL_EVERY);
    let mut ping_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + offset * 10, PING_EVERY);
    let deadline = tokio::time::Instant::from_std(deadline);
    if t.own_session {
        t.waiting_start = true;
        t.outstanding_requests += 1;
        c.requests.fetch_add(1, Ordering::Relaxed);
        let start = json!({"id": "start", "method": "sessions.start", "params": {"title": format!("soak {i}")}});
        if ws.send(Message::text(start.to_string())).await.is_err() {
            c.error(&format!("connection {i}: send failed"));
            return;
        }
    } else if t.driver {
        submit(&mut ws, &mut t, c).await;
    }
    let mut ping_id = 0u64;
    // Traffic phase.
    loop {
        let prompt_at = t.next_prompt_at;
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            _ = channel_tick.tick() => {
                let body = Bytes::from(t.channel_next_send.to_be_bytes().repeat(16));
                match channel_frame::encode("echo", t.channel_next_send, &FrameBody::Binary(body)) {
                    Ok(f) => {
                        let bytes = [&f.head[..], &f.body[..]].concat();
                        if ws.send(Message::binary(bytes)).await.is_err() {
                            c.error(&format!("connection {i}: send failed"));
                            return;
                        }
                        t.channel_next_send += 1;
                        c.channel_sent.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => c.error(&format!("encode: {e}")),
                }
            }
            _ = async move {
                match prompt_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                t.next_prompt_at = None;
                submit(&mut ws, &mut t, c).await;
            }
            _ = ping_tick.tick() => {
                ping_id += 1;
                let req = json!({"id": format!("p{ping_id}"), "method": "system.ping"});
                if ws.send(Message::text(req.to_string())).await.is_err() {
                    c.error(&format!("connection {i}: send failed"));
                    return;
                }
                t.outstanding_requests += 1;
                c.requests.fetch_add(1, Ordering::Relaxed);
            }
            msg = ws.next() => {
                if !on_message(msg, &mut ws, &mut t, i, c, true).await {
                    return;
                }
            }
        }
    }
    // Drain: every echo and every response must still arrive (turns may still be running).
    let drain_until = tokio::time::Instant::now() + DRAIN;
    while t.channel_next_echo < t.channel_next_send
        || t.outstanding_requests > 0
        || t.prompt.is_some()
    {
        let msg = tokio::select! {
            _ = tokio::time::sleep_until(drain_until) => {
                c.error(&format!(
                    "connection {i}: after draining, {} echoes and {} responses missing, turn running: {}",
                    t.channel_next_send - t.channel_next_echo,
                    t.outstanding_requests,
                    t.prompt.is_some()
                ));
                break;
            }
            msg = ws.next() => msg,
        };
        if !on_message(msg, &mut ws, &mut t, i, c, false).await {
            return;
        }
    }
    let _ = ws.close(None).await;
}

async fn submit(ws: &mut Ws, t: &mut Track, c: &Counters) {
    t.turn_count += 1;
    let prompt = format!("turn {} of the soak test", t.turn_count);
    let req = json!({"id": format!("s{}", t.turn_count), "method": "session.submit", "params": {"prompt": prompt}});
    if ws.send(Message::text(req.to_string())).await.is_ok() {
        t.prompt = Some(prompt);
        t.deltas.clear();
        t.outstanding_requests += 1;
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.prompts.fetch_add(1, Ordering::Relaxed);
    } else {
        c.error("submit send failed");
    }
}

/// Handles one inbound message; `false` ends the connection's task.
async fn on_message(
    msg: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ws: &mut Ws,
    t: &mut Track,
    i: usize,
    c: &Counters,
    keep_driving: bool,
) -> bool {
    let msg = match msg {
        Some(Ok(m)) => m,
        other => {
            c.error(&format!("connection {i}: closed unexpectedly: {other:?}"));
            return false;
        }
    };
    match msg {
        Message::Binary(b) => match channel_frame::decode(b) {
            Ok(f) if f.channel == "echo" => {
                let expected = Bytes::from(t.channel_next_echo.to_be_bytes().repeat(16));
                if f.body != FrameBody::Binary(expected) {
                    c.seq_errors.fetch_add(1, Ordering::Relaxed);
                    c.error(&format!(
                        "connection {i}: echo out of order (expected #{})",
                        t.channel_next_echo
                    ));
                }
                if t.last_server_seq.is_some_and(|s| f.seq <= s) {
                    c.seq_errors.fetch_add(1, Ordering::Relaxed);
                    c.error(&format!(
                        "connection {i}: server channel seq not increasing"
                    ));
                }
                t.last_server_seq = Some(f.seq);
                t.channel_next_echo += 1;
                c.channel_echoed.fetch_add(1, Ordering::Relaxed);
            }
            other => c.error(&format!("connection {i}: unexpected binary {other:?}")),
        },
        Message::Text(text) => {
            let v: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(_) => {
                    c.error(&format!("connection {i}: non-JSON text"));
                    return true;
                }
            };
            if let Some(event) = v.get("event").and_then(Value::as_str) {
                return on_event(event, &v, t, i, c, keep_driving).await;
            }
            if v.get("id").is_some() {
                t.outstanding_requests = t.outstanding_requests.saturating_sub(1);
                c.responses.fetch_add(1, Ordering::Relaxed);
                if let Some(e) = v.get("error") {
                    c.error(&format!("connection {i}: error response {e}"));
                } else if v["id"] == "start" {
                    // Bound to a fresh session: its events start again at seq 1.
                    t.waiting_start = false;
                    t.last_event_seq = Some(0);
                    if keep_driving {
                        submit(ws, t, c).await;
                    }
                }
            }
        }
        Message::Close(f) => {
            c.error(&format!("connection {i}: server closed: {f:?}"));
            return false;
        }
        _ => {}
    }
    true
}

async fn on_event(
    event: &str,
    v: &Value,
    t: &mut Track,
    i: usize,
    c: &Counters,
    keep_driving: bool,
) -> bool {
    if !event.starts_with("session.") {
        c.error(&format!("connection {i}: event {v}"));
        return true;
    }
    c.session_events.fetch_add(1, Ordering::Relaxed);
    let seq = v.get("seq").and_then(Value::as_u64);
    match (t.last_event_seq, seq) {
        (_, None) => c.error(&format!("connection {i}: session event without seq")),
        (Some(last), Some(s)) if s != last + 1 => {
            c.seq_errors.fetch_add(1, Ordering::Relaxed);
            c.error(&format!("connection {i}: session seq {s} after {last}"));
        }
        _ => {}
    }
    if seq.is_some() {
        t.last_event_seq = seq;
    }
    if !t.driver || t.waiting_start {
        return true;
    }
    let payload = &v["payload"];
    match event {
        "session.text_delta" => {
            t.deltas
                .push_str(payload["delta"].as_str().unwrap_or_default());
        }
        "session.turn_completed" => {
            c.turns_completed.fetch_add(1, Ordering::Relaxed);
            if let Some(prompt) = t.prompt.take() {
                let want = format!("echo: {prompt}");
                if t.deltas != want || payload["text"] != want.as_str() {
                    c.error(&format!(
                        "connection {i}: turn text {:?}, want {want:?}",
                        t.deltas
                    ));
                }
            }
            if keep_driving {
                t.next_prompt_at = Some(tokio::time::Instant::now() + THINK);
            }
        }
        _ => {}
    }
    true
}
