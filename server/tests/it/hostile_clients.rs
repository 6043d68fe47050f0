//! Hostile local clients against the carrier's memory and its connection slots (docs/protocol.md,
//! "Limits" and "Delivery and memory"). Each attack on memory runs against a carrier in
//! a process of its own (the `server_host` example: the embedded agent and the flags of `carrier
//! serve`) over 127.0.0.1 and asserts on that process's resident memory (`VmHWM` after
//! `clear_refs`); the others run against an in-process carrier with the same defaults and assert
//! on who gets in and what arrives. Every loop is bounded in count and time.

use carrier_test_support as support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use carrier_server::DEFAULT_MAX_INBOUND;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::serve_process::{alive, Program, Serve, TOKEN};
use support::Server;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

const MIB: u64 = 1 << 20;

/// The carrier whose memory a test measures: this crate's example `server_host`.
const HOST: Program = Program::Example("server_host");

/// An in-process carrier as `carrier serve --channel echo1:echo` runs by default: the embedded
/// agent (10 ms demo delay), the default limits, an `echo1` echo channel; `max_message_bytes` as
/// given (and the shared inbound budget at least as large, as `carrier serve` sets it).
async fn in_process(max_message_bytes: Option<usize>) -> Server {
    let mut config = support::config();
    if let Some(bytes) = max_message_bytes {
        config.limits.max_message_bytes = bytes;
        config.limits.max_inbound_bytes = DEFAULT_MAX_INBOUND.max(bytes);
    }
    let server = Server::with(config, support::embedded(Duration::from_millis(10))).await;
    let echo = "echo1:echo".parse().expect("channel spec");
    carrier_channels::mount(&server.transport, &echo).expect("echo channel");
    server
}

/// The in-process carrier still serves: a fresh client completes a handshake and a ping.
async fn still_serves_in_process(server: &Server) {
    let (mut c, _) = server.drive().await;
    c.ok("system.ping", json!({})).await;
}

/// Resident memory of a child carrier, in KiB.
struct Memory {
    pid: u32,
}

impl Memory {
    fn field(&self, name: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("status field")
    }

    /// Resets the peak to the current resident size and returns it (Linux `clear_refs` 5).
    fn baseline(&self) -> u64 {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").expect("clear_refs");
        self.field("VmRSS:")
    }

    /// Growth of the peak over `baseline`, in MiB.
    fn peak_growth_mib(&self, baseline: u64) -> f64 {
        let growth = (self.field("VmHWM:").saturating_sub(baseline)) as f64 / 1024.0;
        eprintln!("peak resident growth: {growth:.1} MiB");
        growth
    }
}

/// A masked client frame header for a payload of `len` bytes (mask all zero, so the payload can
/// be written as is).
fn header(opcode: u8, len: u64) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    if len < 126 {
        f.push(0x80 | len as u8);
    } else if len <= 0xFFFF {
        f.push(0x80 | 126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&len.to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f
}

fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = header(opcode, payload.len() as u64);
    f.extend_from_slice(payload);
    f
}

/// A raw upgraded socket (the 101 response read), for clients that misbehave at the byte level.
async fn raw_upgrade(port: u16, query: &str) -> TcpStream {
    raw_upgrade_with(port, query, None).await
}

/// [`raw_upgrade`] with the client's receive buffer set (before connecting, so the window is
/// small from the start): a client that does not read then fills the kernel's buffers at once,
/// and whatever the carrier still owes it stays in the carrier.
async fn raw_upgrade_with(port: u16, query: &str, recv_buffer: Option<u32>) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    if let Some(bytes) = recv_buffer {
        socket.set_recv_buffer_size(bytes).expect("SO_RCVBUF");
    }
    let mut tcp = socket
        .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect");
    let req = format!(
        "GET /{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.expect("request");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(support::WAIT, tcp.read(&mut byte))
            .await
            .expect("response in time")
            .expect("read");
        assert_eq!(n, 1, "connection closed during the upgrade");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    tcp
}

/// Reads server frames until a close; its code, or `None` if the stream ends first.
async fn read_until_close(tcp: &mut TcpStream) -> Option<u16> {
    read_until_close_within(tcp, support::WAIT).await
}

/// [`read_until_close`], waiting at most `wait` for each read.
async fn read_until_close_within(tcp: &mut TcpStream, wait: Duration) -> Option<u16> {
    read_close_frame(tcp, wait).await.map(|(code, _)| code)
}

/// Reads server frames until a close; its code and reason, or `None` if the stream ends first
/// (or the close has no code). Waits at most `wait` for each read.
async fn read_close_frame(
    tcp: &mut (impl AsyncRead + Unpin),
    wait: Duration,
) -> Option<(u16, String)> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        // Parse whole frames off the front.
        while buf.len() >= 2 {
            let (hl, len) = match buf[1] & 0x7F {
                126 if buf.len() >= 4 => (4, u16::from_be_bytes([buf[2], buf[3]]) as usize),
                127 if buf.len() >= 10 => {
                    (10, u64::from_be_bytes(buf[2..10].try_into().ok()?) as usize)
                }
                126 | 127 => break,
                n => (2, n as usize),
            };
            if buf.len() < hl + len {
                break;
            }
            if buf[0] & 0x0F == 8 {
                return (len >= 2).then(|| {
                    let code = u16::from_be_bytes([buf[hl], buf[hl + 1]]);
                    let reason = String::from_utf8_lossy(&buf[hl + 2..hl + len]).into_owned();
                    (code, reason)
                });
            }
            buf.drain(..hl + len);
        }
        match tokio::time::timeout(wait, tcp.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => panic!("no close within {wait:?}"),
        }
    }
}

/// The carrier still serves: a fresh client completes a handshake and a ping.
async fn still_serves(serve: &Serve) {
    assert!(
        alive(serve.pid),
        "the carrier process died:\n{}",
        serve.log()
    );
    let (mut c, _) = serve.client().await;
    c.ok("system.ping", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_sockets_discard_what_they_are_sent() {
    // 60 token-less sockets each send a 15 MiB binary frame, one byte short: the old reader
    // buffered each whole while it waited for the peer's close (907 MiB seen).
    let serve = HOST.start(&[]).await.expect("serve");
    let memory = Memory { pid: serve.pid };
    let baseline = memory.baseline();
    let len = 15 * MIB - 1;
    let mut tasks = Vec::new();
    for _ in 0..60 {
        let port = serve.port;
        tasks.push(tokio::spawn(async move {
            let mut tcp = raw_upgrade(port, "?token=wrong").await;
            let chunk = vec![0u8; 1 << 20];
            let _ = tcp.write_all(&header(2, 15 * MIB)).await;
            let mut left = len as usize;
            while left > 0 {
                let n = left.min(chunk.len());
                if tcp.write_all(&chunk[..n]).await.is_err() {
                    break; // the carrier let the socket go
                }
                left -= n;
            }
            read_until_close(&mut tcp).await
        }));
    }
    for t in tasks {
        let close = tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("attack in time")
            .unwrap();
        assert!(matches!(close, Some(1008) | None), "{close:?}");
    }
    let growth = memory.peak_growth_mib(baseline);
    assert!(growth < 32.0, "resident memory grew by {growth:.1} MiB");
    still_serves(&serve).await;
    serve.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_upgrades_does_not_lock_clients_out() {
    // 20 slots, all for legitimate clients; refused upgrades used to keep a slot each for the
    // close grace period (3 s), so a flood of them made every upgrade 503.
    let mut config = support::config();
    config.limits.max_connections = 20;
    let s = support::Server::core(config).await;
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicUsize::new(0));
    let mut flood = Vec::new();
    for _ in 0..4 {
        let (port, stop, refused) = (s.port, stop.clone(), refused.clone());
        flood.push(tokio::spawn(async move {
            for _ in 0..20_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut tcp = raw_upgrade(port, "?token=wrong").await;
                if read_until_close(&mut tcp).await == Some(1008) {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    // Let the flood build up before the clients come.
    assert!(support::eventually(|| refused.load(Ordering::Relaxed) >= 200).await);
    let mut clients = Vec::new();
    for i in 0..20 {
        match support::connect_with(&s.url(""), &[]).await {
            Ok((mut ws, _)) => {
                ws.send(Message::text("hs")).await.expect("send");
                assert_eq!(support::next_text(&mut ws).await, "ok", "client {i}");
                clients.push(ws);
            }
            Err(status) => panic!("client {i} refused with HTTP {status} during the flood"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for f in flood {
        tokio::time::timeout(Duration::from_secs(30), f)
            .await
            .expect("flood ends")
            .unwrap();
    }
    assert_eq!(clients.len(), 20);
    assert!(refused.load(Ordering::Relaxed) >= 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_announcing_60_gib_is_refused_at_the_largest_cap() {
    // 1 GiB is the largest cap (`carrier serve --max-message-bytes` refuses more: the CLI's
    // tests, cli/tests/it/serve.rs).
    let server = in_process(Some(1 << 30)).await;
    let huge = header(2, 60 << 30);
    // Admitted: 1009 from the header alone.
    let mut tcp = raw_upgrade(server.port, &format!("?token={TOKEN}")).await;
    tcp.write_all(&huge).await.unwrap();
    assert_eq!(read_until_close(&mut tcp).await, Some(1009));
    // Token-less: 1008, and the header costs nothing.
    let mut tcp = raw_upgrade(server.port, "").await;
    tcp.write_all(&huge).await.unwrap();
    assert_eq!(read_until_close(&mut tcp).await, Some(1008));
    still_serves_in_process(&server).await;
    server.transport.stop().await;
}

/// A handshaken raw connection to the carrier at `port` that reads through a small window.
async fn raw_client(port: u16) -> TcpStream {
    raw_handshaken(port, Some(4096)).await
}

/// A raw connection to the carrier at `port` that has sent its handshake (the answer is not
/// read), with the receive buffer as [`raw_upgrade_with`] sets it.
async fn raw_handshaken(port: u16, recv_buffer: Option<u32>) -> TcpStream {
    let mut tcp = raw_upgrade_with(port, &format!("?token={TOKEN}"), recv_buffer).await;
    let hs = json!({"id": "hs", "method": "system.handshake",
        "params": {"protocol_version": "1.0", "min_compatible_protocol": "1.0"}});
    tcp.write_all(&frame(1, hs.to_string().as_bytes()))
        .await
        .unwrap();
    tcp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_million_unread_pings_cost_one_pong() {
    let serve = HOST.start(&[]).await.expect("serve");
    let memory = Memory { pid: serve.pid };
    let mut tcp = raw_client(serve.port).await;
    let baseline = memory.baseline();
    let million: Vec<u8> = frame(9, b"").repeat(1_000_000);
    for _ in 0..3 {
        tcp.write_all(&million)
            .await
            .expect("the carrier keeps reading");
    }
    // Everything written has been read once a request sent after it is answered.
    let ping = json!({"id": "after", "method": "system.ping"}).to_string();
    tcp.write_all(&frame(1, ping.as_bytes())).await.unwrap();
    let answered = read_until_text(&mut tcp, "\"after\"").await;
    assert!(answered, "the connection stays up and answers");
    // Only now has the carrier read every ping (up to ~18 MB of them can still sit in the
    // kernel's socket buffers when `write_all` returns); the peak covers the whole attack.
    let growth = memory.peak_growth_mib(baseline);
    assert!(growth < 32.0, "resident memory grew by {growth:.1} MiB");
    serve.finish().await;
}

/// Reads server frames until a text frame containing `needle`; false on close or EOF.
async fn read_until_text(tcp: &mut TcpStream, needle: &str) -> bool {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        while buf.len() >= 2 {
            let (hl, len) = match buf[1] & 0x7F {
                126 if buf.len() >= 4 => (4, u16::from_be_bytes([buf[2], buf[3]]) as usize),
                127 if buf.len() >= 10 => (
                    10,
                    u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
                ),
                126 | 127 => break,
                n => (2, n as usize),
            };
            if buf.len() < hl + len {
                break;
            }
            match buf[0] & 0x0F {
                8 => return false,
                1 if String::from_utf8_lossy(&buf[hl..hl + len]).contains(needle) => return true,
                _ => {}
            }
            buf.drain(..hl + len);
        }
        match tokio::time::timeout(support::WAIT, tcp.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return false,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => panic!("nothing within {:?}", support::WAIT),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_not_read_fail_the_reader_before_memory_grows() {
    // 600,000 `system.ping`s, nothing read: the answers pile up until the queue is over its
    // 8 MiB budget — counted as the memory they hold, not their payload bytes (102 MiB seen).
    let serve = HOST.start(&[]).await.expect("serve");
    let memory = Memory { pid: serve.pid };
    let mut tcp = raw_client(serve.port).await;
    let baseline = memory.baseline();
    let mut wire = Vec::new();
    for i in 0..600_000u32 {
        wire.extend(frame(
            1,
            format!(r#"{{"id":"p{i}","method":"system.ping"}}"#).as_bytes(),
        ));
    }
    // The carrier discards what follows its failure, then lets the socket go.
    let _ = tcp.write_all(&wire).await;
    assert_eq!(read_until_close(&mut tcp).await, Some(1013));
    // Read the peak once the carrier has failed the reader: before it, pings may still be
    // unread in the kernel's buffers.
    let growth = memory.peak_growth_mib(baseline);
    assert!(growth < 32.0, "resident memory grew by {growth:.1} MiB");
    still_serves(&serve).await;
    serve.finish().await;
}

/// A channel frame (docs/protocol.md, "Channels") carrying `payload` as opaque binary.
fn channel_binary(channel: &str, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = b"RBF\x01\x01".to_vec();
    f.push(channel.len() as u8);
    f.extend_from_slice(channel.as_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Sends `payload` on the `echo1` channel and returns the echoed body.
async fn echo_once(c: &mut support::Client, payload: &[u8]) -> Vec<u8> {
    c.ws.send(Message::binary(channel_binary("echo1", 0, payload)))
        .await
        .expect("send");
    loop {
        match tokio::time::timeout(Duration::from_secs(60), c.ws.next())
            .await
            .expect("echo in time")
        {
            Some(Ok(Message::Binary(b))) => {
                let name_len = b[5] as usize;
                return b[6 + name_len + 4..].to_vec();
            }
            Some(Ok(Message::Close(f))) => panic!("closed instead of echoing: {f:?}"),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_15_mib_echo_reaches_a_reader_that_keeps_up() {
    // Larger than the 8 MiB outbound budget, within the 16 MiB message cap: it used to fail
    // the reader with 1013 however fast it read.
    let server = in_process(None).await;
    let (mut c, _) = server.drive().await;
    let payload = pattern(15 * MIB as usize, 7);
    let echoed = echo_once(&mut c, &payload).await;
    assert!(echoed == payload, "the echo is byte-identical");
    c.ok("system.ping", json!({})).await;
    server.transport.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_sending_15_mib_at_once_stay_within_the_inbound_budget() {
    // The README's figure: client messages held at once ≤ --max-inbound-bytes (64 MiB by
    // default); the rest of the carrier's memory does not grow with them. Without the budget
    // 16 × 15 MiB were all held at once (602 MiB seen).
    let serve = HOST
        .start(&["--channel", "echo1:echo"])
        .await
        .expect("serve");
    let memory = Memory { pid: serve.pid };
    let mut clients = Vec::new();
    for _ in 0..16 {
        clients.push(serve.client().await.0);
    }
    let baseline = memory.baseline();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            tokio::spawn(async move {
                let payload = pattern(15 * MIB as usize, i as u8);
                let echoed = echo_once(&mut c, &payload).await;
                assert!(echoed == payload, "client {i}: the echo is byte-identical");
            })
        })
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("all echoes in time")
            .unwrap();
    }
    let growth = memory.peak_growth_mib(baseline);
    assert!(
        growth < 64.0 + 16.0,
        "resident memory grew by {growth:.1} MiB (budget 64 MiB + 16 MiB of runtime slack)"
    );
    serve.finish().await;
}

/// A masked, non-final first fragment of `opcode` carrying `payload` (mask all zero).
fn first_fragment(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = frame(opcode, payload);
    f[0] &= 0x7F;
    f
}

/// The carrier's `carrier_inbound_bytes` gauge (the shared inbound budget in use).
async fn inbound_in_use(port: u16) -> u64 {
    support::serve_process::gauge(port, "carrier_inbound_bytes").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_messages_never_keep_other_clients_out_and_stalled_ones_are_dropped() {
    // Admitted clients that begin messages and never finish them: four that went past the
    // per-connection allowance hold the whole shared budget (4 × the 16 MiB cap), four more sent
    // a 1-byte first fragment. They used to keep every other client from being answered, even
    // from handshaking (every message paid from the one shared budget, without a deadline).
    let server = in_process(None).await;
    let (mut victim, _) = server.drive().await;
    let mut holders = Vec::new();
    for i in 0..8 {
        let mut tcp = raw_client(server.port).await;
        let first = if i < 4 {
            first_fragment(2, &vec![0u8; 100 << 10])
        } else {
            first_fragment(1, b"{")
        };
        tcp.write_all(&first).await.unwrap();
        holders.push(tcp);
    }
    let deadline = tokio::time::Instant::now() + support::WAIT;
    while inbound_in_use(server.port).await != 64 * MIB {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the holders took the whole shared budget"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The four large ones keep sending, above the minimum rate, so they keep their share
    // however long the next step takes on a loaded machine.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let large: Vec<TcpStream> = holders.drain(..4).collect();
    let feeders: Vec<_> = large
        .into_iter()
        .map(|mut tcp| {
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let mut fragment = header(0, 64 << 10);
                fragment[0] &= 0x7F;
                fragment.extend(std::iter::repeat_n(0u8, 64 << 10));
                while !*stopped.borrow() {
                    tcp.write_all(&fragment).await.unwrap();
                    let _ =
                        tokio::time::timeout(Duration::from_millis(100), stopped.changed()).await;
                }
                tcp
            })
        })
        .collect();
    // Small messages still go through: a ping on a connection that was open, and new clients
    // handshake and are answered.
    victim.ok("system.ping", json!({})).await;
    for _ in 0..20 {
        let (mut c, _) = server.drive().await;
        c.ok("system.ping", json!({})).await;
    }
    assert_eq!(
        inbound_in_use(server.port).await,
        64 * MIB,
        "the budget was held all along"
    );
    stop.send_replace(true);
    let mut large = Vec::new();
    for feeder in feeders {
        large.push(feeder.await.unwrap());
    }
    // A message paid from the shared budget must keep arriving: the holders that stopped are
    // closed with 1008 and their memory returns, and a large echo then goes through.
    for tcp in large.iter_mut() {
        assert_eq!(
            read_until_close_within(tcp, Duration::from_secs(30)).await,
            Some(1008)
        );
    }
    let payload = pattern(MIB as usize, 3);
    assert!(echo_once(&mut victim, &payload).await == payload);
    assert_eq!(inbound_in_use(server.port).await, 0);
    still_serves_in_process(&server).await;
    server.transport.stop().await;
}

/// The README's figures for a message paid from the shared inbound budget: from when it began
/// holding the budget, it must have arrived at `MIN_RATE` on average once `PACE_GRACE` is over.
const PACE_GRACE: Duration = Duration::from_secs(3);
/// Bytes per second.
const MIN_RATE: u64 = 256 << 10;
/// How late past the grace a close may be read on a loaded machine.
const CLOSE_MARGIN: Duration = Duration::from_secs(2);

/// The first bytes of a binary frame announcing `len` payload bytes: a channel frame on
/// `echo1` whose body starts with `body` (the rest is the caller's to send, or not).
fn announce_echo(len: u64, body: &[u8]) -> Vec<u8> {
    let mut f = header(2, len);
    f.extend(channel_binary("echo1", 0, body));
    f
}

/// Polls `carrier_inbound_bytes` until it is `bytes`, at most [`support::WAIT`].
async fn inbound_reaches(port: u16, bytes: u64) -> bool {
    let deadline = tokio::time::Instant::now() + support::WAIT;
    while inbound_in_use(port).await != bytes {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// The close a message too slow for the shared budget gets: 1008 naming the rule, read no
/// earlier than the grace after the message's first bytes were written (`after`), and no later
/// than the grace plus a margin.
fn assert_closed_for_pace(close: Option<(u16, String)>, after: Duration, who: &str) {
    eprintln!("{who}: closed {close:?} {after:?} after its first bytes");
    let (code, reason) = close.unwrap_or_else(|| panic!("{who}: the stream ended with no close"));
    assert_eq!(code, 1008, "{who}: {reason}");
    assert!(
        reason.contains("256 KiB/s") && reason.contains("3 s"),
        "{who}: the reason names the rule: {reason:?}"
    );
    // The carrier's clock starts once it has read the header, after the write began.
    assert!(
        after >= PACE_GRACE - Duration::from_millis(100),
        "{who}: closed {after:?} after its first bytes, within the grace"
    );
    assert!(
        after <= PACE_GRACE + CLOSE_MARGIN,
        "{who}: closed only {after:?} after its first bytes"
    );
}

/// One trickler: announces a 16 MiB channel frame, sends 100 KiB of it, then one
/// byte every 8 s (under the 10 s no-byte rule), at most 6, until the carrier closes the
/// connection. Returns the close (`None` if none came) and how long after the first write.
async fn trickle(mut tcp: TcpStream) -> (Option<(u16, String)>, Duration) {
    let started = std::time::Instant::now();
    let (mut rd, mut wr) = tcp.split();
    wr.write_all(&announce_echo(16 * MIB, &vec![0; 100 << 10]))
        .await
        .expect("the first 100 KiB");
    let closed = read_close_frame(&mut rd, Duration::from_secs(60));
    tokio::pin!(closed);
    let every = Duration::from_secs(8);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    for _ in 0..6 {
        tokio::select! {
            close = &mut closed => return (close, started.elapsed()),
            _ = ticks.tick() => {
                let _ = wr.write_all(&[0]).await;
            }
        }
    }
    (None, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tricklers_lose_the_shared_budget_after_the_grace_and_a_large_echo_goes_through() {
    // Issue 22: four connections each announce a 16 MiB frame, send ~100 KiB and then a byte
    // every 8 s, under the 10 s no-byte rule. They held the whole shared budget for as long as
    // they liked, and another client's 200 KiB echo was not delivered within 40 s.
    let server = in_process(None).await;
    let (mut victim, _) = server.drive().await;
    let mut tricklers = Vec::new();
    for _ in 0..4 {
        let tcp = raw_client(server.port).await;
        tricklers.push(tokio::spawn(trickle(tcp)));
    }
    assert!(
        inbound_reaches(server.port, 64 * MIB).await,
        "the tricklers hold the whole shared budget"
    );
    let payload = pattern(200 << 10, 9);
    let sent = std::time::Instant::now();
    let echoed = tokio::time::timeout(Duration::from_secs(5), echo_once(&mut victim, &payload))
        .await
        .expect("the 200 KiB echo arrives within 5 s");
    eprintln!(
        "200 KiB echo received {:?} after it was sent",
        sent.elapsed()
    );
    assert!(echoed == payload, "the echo is byte-identical");
    for (i, t) in tricklers.into_iter().enumerate() {
        let (close, after) = t.await.expect("trickler");
        assert_closed_for_pace(close, after, &format!("trickler {i}"));
    }
    assert!(inbound_reaches(server.port, 0).await, "the memory returned");
    still_serves_in_process(&server).await;
    server.transport.stop().await;
}

/// Writes `wire` at `rate` bytes per second: 16 KiB chunks on a fixed schedule from the first,
/// so the average holds however this task is scheduled. Stops at a failed write.
async fn write_paced(w: &mut (impl AsyncWrite + Unpin), wire: &[u8], rate: u64) {
    const CHUNK: usize = 16 << 10;
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(CHUNK as f64 / rate as f64));
    for chunk in wire.chunks(CHUNK) {
        ticks.tick().await;
        if w.write_all(chunk).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_at_twice_the_minimum_rate_is_echoed_whole_and_one_at_a_quarter_is_closed() {
    let server = in_process(None).await;
    // At full speed, a message of the whole 16 MiB cap (15 bytes of channel header).
    let (mut c, _) = server.drive().await;
    let whole = pattern(16 * MIB as usize - 15, 1);
    assert!(echo_once(&mut c, &whole).await == whole, "the 16 MiB echo");

    // 2 MiB at twice the minimum rate: 4 s, past the grace, and echoed whole.
    let fast = {
        let mut tcp = raw_handshaken(server.port, None).await;
        async move {
            let body = pattern(8 * MIN_RATE as usize, 2);
            let wire = [
                header(2, 15 + body.len() as u64),
                channel_binary("echo1", 0, &body),
            ]
            .concat();
            let started = std::time::Instant::now();
            write_paced(&mut tcp, &wire, 2 * MIN_RATE).await;
            eprintln!(
                "{} KiB sent at {} KiB/s in {:?}",
                body.len() >> 10,
                (2 * MIN_RATE) >> 10,
                started.elapsed()
            );
            let mut raw = support::Raw::from_stream(tcp);
            loop {
                let f = raw
                    .recv_data()
                    .await
                    .expect("an echo, not the end of the stream");
                assert_ne!(
                    f.opcode,
                    8,
                    "closed instead of echoing: {:?}",
                    f.close_code()
                );
                if f.opcode == 2 {
                    assert!(f.payload[15..] == body[..], "the echo is byte-identical");
                    break;
                }
            }
        }
    };
    // 1 MiB at a quarter of it: closed at the grace, long before it is all sent (16 s).
    let slow = {
        let mut tcp = raw_handshaken(server.port, None).await;
        async move {
            let body = pattern(4 * MIN_RATE as usize, 3);
            let wire = [
                header(2, 15 + body.len() as u64),
                channel_binary("echo1", 0, &body),
            ]
            .concat();
            let started = std::time::Instant::now();
            let (mut rd, mut wr) = tcp.split();
            let watch = async {
                let closed = read_close_frame(&mut rd, Duration::from_secs(60));
                tokio::pin!(closed);
                tokio::select! {
                    close = &mut closed => close,
                    () = write_paced(&mut wr, &wire, MIN_RATE / 4) => closed.await,
                }
            };
            let close = tokio::time::timeout(PACE_GRACE + CLOSE_MARGIN, watch)
                .await
                .expect("the slow message is closed within the grace and a margin");
            assert_closed_for_pace(close, started.elapsed(), "1/4 of the rate");
        }
    };
    tokio::join!(fast, slow);
    c.ok("system.ping", json!({})).await;
    server.transport.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_handshaken_connections_hold_a_few_kib_each() {
    // What an admitted, handshaken connection that sends nothing keeps: its task, queue and
    // session state, no buffer. It was 12 KB when the upgrade's leftover `Bytes` pinned hyper's
    // 8 KiB read buffer for the connection's life (about 6 KB with it copied and dropped; this is
    // the debug build, whose futures are larger).
    let serve = HOST.start(&[]).await.expect("serve");
    let memory = Memory { pid: serve.pid };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = memory.field("VmRSS:");
    let mut clients = Vec::new();
    for _ in 0..500 {
        clients.push(serve.client().await.0);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let per_connection = (memory.field("VmRSS:").saturating_sub(before) * 1024) / 500;
    eprintln!("resident memory per idle connection: {per_connection} B");
    assert!(
        per_connection < 10 * 1024,
        "an idle connection holds {per_connection} B"
    );
    drop(clients);
    serve.finish().await;
}

/// Opens `n` TCP connections to `port` that never send a byte (bounded: `n` sockets, closed when
/// dropped).
async fn idle_sockets(port: u16, n: usize) -> Vec<TcpStream> {
    let mut socks = Vec::with_capacity(n);
    for _ in 0..n {
        match tokio::time::timeout(support::WAIT, TcpStream::connect(("127.0.0.1", port))).await {
            Ok(Ok(s)) => socks.push(s),
            _ => break, // the accept backlog is full: enough
        }
    }
    socks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tcp_connections_cost_a_bounded_amount_and_never_lock_clients_out() {
    // A token-less process opens connections and sends nothing. Each used to hold ~10 KiB for
    // the 10 s header timeout, without limit, and once the carrier ran out of file descriptors
    // no client got in. Now at most 512 wait for their request; the oldest makes room.
    let serve = HOST.start(&[]).await.expect("serve");
    let memory = Memory { pid: serve.pid };
    let baseline = memory.baseline();
    let idle = idle_sockets(serve.port, 3000).await;
    assert_eq!(idle.len(), 3000);
    still_serves(&serve).await;
    let growth = memory.peak_growth_mib(baseline);
    assert!(
        growth < 12.0,
        "resident memory grew by {growth:.1} MiB for 3000 idle sockets"
    );
    drop(idle);
    serve.finish().await;

    // With few descriptors: 400 idle sockets would take them all.
    let serve = HOST
        .start_with_fd_limit(Some(256), &[])
        .await
        .expect("serve with 256 descriptors");
    let idle = idle_sockets(serve.port, 400).await;
    assert!(idle.len() >= 300, "only {} sockets connected", idle.len());
    for _ in 0..10 {
        still_serves(&serve).await;
    }
    drop(idle);
    serve.finish().await;
}
