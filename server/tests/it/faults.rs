//! Fault tests over real sockets on 127.0.0.1: clients that vanish mid-message, peers that stop
//! answering pings, slow upgrades, connection churn, and write errors under the writer.
//!
//! The churn test runs `CARRIER_FAULT_CYCLES` connect/handshake/disconnect cycles (default 2,000
//! so CI stays fast; the documented local run is `CARRIER_FAULT_CYCLES=10000`).

use carrier_test_support as support;

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use carrier_protocol::Role;
use carrier_server::{
    CarrierConfig, CarrierContext, Connection, FailReason, Limits, TextProfile, TextSession,
    WsTransport,
};
use futures_util::{SinkExt, StreamExt};
use support::*;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// Upgrades a raw client and completes the test profile's handshake.
async fn raw_handshaken(port: u16, token: &str) -> Raw {
    let (status, mut raw) = Raw::upgrade(port, &format!("/?token={token}"), &[]).await;
    assert_eq!(status, 101);
    raw.send(true, 1, b"hs").await;
    let ok = raw.recv_data().await.expect("handshake answer");
    assert_eq!(ok.payload, b"ok");
    raw
}

/// Waits until the server has cleaned up `n` connections in total and holds none.
async fn cleaned_up(server: &Server, n: usize) {
    let m = server.transport.metrics();
    assert!(
        eventually(|| m.cleanups() as usize >= n && m.connections() == 0).await,
        "cleanups {} (want {n}), connections {}",
        m.cleanups(),
        m.connections()
    );
    assert_eq!(
        m.cleanups() as usize,
        n,
        "a connection was cleaned up twice"
    );
    assert!(eventually(|| count(&server.stats.closes) == n).await);
}

#[tokio::test]
async fn client_vanishing_mid_frame_is_cleaned_up_once() {
    let server = Server::core_default().await;
    let mut raw = raw_handshaken(server.port, &server.token).await;
    // A masked binary frame header announcing 1000 bytes, then only 10 of them.
    let mut partial = vec![0x82, 0x80 | 126, 0x03, 0xE8, 1, 2, 3, 4];
    partial.extend_from_slice(&[0u8; 10]);
    raw.tcp.write_all(&partial).await.expect("write");
    drop(raw);
    cleaned_up(&server, 1).await;
    // The carrier still serves.
    let mut ws = connect_handshaken(&server.url("")).await;
    ws.close(None).await.ok();
}

#[tokio::test]
async fn client_vanishing_mid_fragmented_message_is_cleaned_up_once() {
    let server = Server::core_default().await;
    let mut raw = raw_handshaken(server.port, &server.token).await;
    raw.send(false, 1, b"first fragment ").await;
    raw.send(false, 0, b"second fragment ").await;
    // A ping in the middle of the message is answered: the connection is alive and reading.
    raw.send(true, 9, b"still here").await;
    let pong = raw.recv().await.expect("pong");
    assert_eq!(
        (pong.opcode, pong.payload.as_slice()),
        (10, &b"still here"[..])
    );
    // Half of the next continuation's header, then gone.
    raw.tcp.write_all(&[0x00]).await.expect("write");
    drop(raw);
    cleaned_up(&server, 1).await;
    assert_eq!(server.transport.metrics().delivery_failures(), 0);
}

#[tokio::test]
async fn silent_peer_that_never_pongs_is_closed_with_1001() {
    let server = Server::core(
        config().with_limits(
            Limits::default()
                .with_ping_interval(Duration::from_millis(200))
                .with_pong_timeout(Duration::from_millis(300))
                .with_stop_grace(Duration::from_millis(300)),
        ),
    )
    .await;
    let mut raw = raw_handshaken(server.port, &server.token).await;
    let started = Instant::now();
    // The client reads but never writes again: pings go unanswered.
    let mut pings = 0;
    let close = loop {
        let f = raw.recv().await.expect("a ping or the close");
        match f.opcode {
            9 => pings += 1,
            8 => break f,
            other => panic!("unexpected frame {other}"),
        }
    };
    assert_eq!(close.close_code(), Some(1001));
    assert!(pings >= 1, "the server pinged before giving up");
    // Closed after ping interval + pong timeout, not long after.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // We never answer the close either: the server drops the socket after its grace period.
    assert!(
        raw.recv().await.is_none(),
        "socket not closed after the grace period"
    );
    cleaned_up(&server, 1).await;
}

/// Short keepalive timings (2 s in all) and a queue large enough that the kernel's socket
/// buffers (a few MiB) fill long before the carrier's own budget does.
fn keepalive_config() -> CarrierConfig {
    config().with_limits(
        Limits::default()
            .with_ping_interval(Duration::from_millis(500))
            .with_pong_timeout(Duration::from_millis(1500))
            .with_stop_grace(Duration::from_millis(300))
            .with_queue_bytes(96 << 20),
    )
}

#[tokio::test]
async fn a_peer_that_reads_nothing_is_dropped_even_while_its_socket_is_full() {
    // 16 MiB queued for a peer that neither reads nor answers: the kernel holds a few MiB, the
    // writer waits on the full socket with the rest queued (under the budget, so no 1013), and
    // our pings never reach the peer. The writer checked for pongs only between writes, so this
    // connection was never closed; now a write that waits the keepalive time (2 s here) with
    // no byte going out fails the connection, as a write error.
    let server = Server::core(keepalive_config()).await;
    let mut raw = raw_handshaken(server.port, &server.token).await;
    raw.send(true, 1, b"flood 256 65536").await;
    assert!(
        eventually(|| count(&server.stats.sent) == 256).await,
        "the flood was queued"
    );
    cleaned_up(&server, 1).await;
    assert_eq!(server.transport.metrics().delivery_failures(), 1);
    drop(raw);
}

#[tokio::test]
async fn a_slow_reader_whose_pongs_lag_behind_its_data_is_kept() {
    // 64 MiB for a peer that reads slowly (64 KiB per 4 ms at most: over 4 s, two keepalive
    // periods): our pings sit behind tens of MiB of queued data, so its pongs come long after
    // the pong timeout, yet it makes room in the socket all along. (What the kernel already
    // holds when the queue runs dry, the peer must read within the keepalive: ~0.3 s here.)
    let server = Server::core(keepalive_config()).await;
    let mut ws = connect_handshaken(&server.url("")).await;
    ws.send(Message::text("flood 1024 65536")).await.unwrap();
    let mut received = 0;
    while received < 1024 {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                assert_eq!(t.len(), 65536);
                received += 1;
                tokio::time::sleep(Duration::from_millis(4)).await;
            }
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            other => panic!("after {received} messages: {other:?}"),
        }
    }
    ws.send(Message::text("still here")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "still here");
    assert_eq!(server.transport.metrics().delivery_failures(), 0);
}

#[tokio::test]
async fn slow_upgrade_that_trickles_headers_times_out() {
    let server = Server::core(
        config().with_limits(Limits::default().with_header_timeout(Duration::from_millis(500))),
    )
    .await;
    let mut tcp = TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    let request = format!(
        "GET /?token={} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Slow: {}\r\n\r\n",
        server.token.clone(),
        "z".repeat(200)
    );
    let started = Instant::now();
    let mut cut_off = false;
    // One byte every 20 ms: the whole request would take several seconds.
    for b in request.as_bytes() {
        if tcp.write_all(&[*b]).await.is_err() {
            cut_off = true;
            break;
        }
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(20), tcp.read(&mut buf)).await {
            Err(_) => continue,
            Ok(Ok(0)) | Ok(Err(_)) => {
                cut_off = true;
                break;
            }
            Ok(Ok(n)) => {
                let head = String::from_utf8_lossy(&buf[..n]);
                assert!(
                    !head.starts_with("HTTP/1.1 101"),
                    "upgraded a trickled request"
                );
                // hyper answers 408 on a header timeout; the socket is closed after it.
                assert!(head.starts_with("HTTP/1.1 408"), "{head}");
                cut_off = true;
                break;
            }
        }
    }
    assert!(cut_off, "the trickled upgrade was never cut off");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(3),
        "cut off after {elapsed:?} (header timeout 500 ms)"
    );
    assert_eq!(server.transport.metrics().connections(), 0);
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

fn rss_kib() -> usize {
    carrier_test_support::serve_process::rss_kib(std::process::id()) as usize
}

/// One connect → upgrade → handshake → close handshake → disconnect cycle.
async fn cycle(port: u16, token: &str) {
    let mut raw = raw_handshaken(port, token).await;
    raw.send(true, 8, &1000u16.to_be_bytes()).await;
    let close = raw.recv_data().await.expect("close echo");
    assert_eq!(close.close_code(), Some(1000));
    assert!(raw.recv().await.is_none(), "server closed the TCP stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_of_connections_leaks_no_fds_or_memory() {
    let cycles: usize = std::env::var("CARRIER_FAULT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let server = Arc::new(Server::core_default().await);
    let token = server.token.clone();
    const WORKERS: usize = 8;
    let run = |n: usize| {
        let token = token.clone();
        let port = server.port;
        async move {
            let done = Arc::new(AtomicUsize::new(0));
            let mut tasks = Vec::new();
            for _ in 0..WORKERS {
                let (token, done) = (token.clone(), done.clone());
                tasks.push(tokio::spawn(async move {
                    while done.fetch_add(1, Ordering::AcqRel) < n {
                        cycle(port, &token).await;
                    }
                }));
            }
            for t in tasks {
                t.await.expect("cycle task");
            }
        }
    };
    // Warm up allocator arenas, the runtime's worker pools and the connection-id space.
    let warmup = 500.min(cycles);
    run(warmup).await;
    cleaned_up(&server, warmup).await;
    let (fds0, rss0) = (open_fds(), rss_kib());
    let started = Instant::now();
    run(cycles).await;
    let elapsed = started.elapsed();
    cleaned_up(&server, warmup + cycles).await;
    let (fds1, rss1) = (open_fds(), rss_kib());
    println!(
        "{{\"cycles\":{cycles},\"seconds\":{:.2},\"fds_before\":{fds0},\"fds_after\":{fds1},\"rss_kib_before\":{rss0},\"rss_kib_after\":{rss1}}}",
        elapsed.as_secs_f64()
    );
    assert!(fds1 <= fds0 + 4, "open fds grew from {fds0} to {fds1}");
    // A leak of even 1 KiB per connection would show as `cycles` KiB; allow allocator noise.
    let growth = rss1.saturating_sub(rss0);
    assert!(
        growth < 8 * 1024 + cycles / 4,
        "RSS grew by {growth} KiB over {cycles} cycles"
    );
    assert_eq!(server.transport.metrics().delivery_failures(), 0);
}

/// A socket whose writes start failing once `armed` is set; reads pass through.
struct FaultyWrite {
    inner: TcpStream,
    armed: Arc<AtomicBool>,
    failed_writes: Arc<AtomicUsize>,
}

impl AsyncRead for FaultyWrite {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for FaultyWrite {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.armed.load(Ordering::Acquire) {
            self.failed_writes.fetch_add(1, Ordering::AcqRel);
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Records how each connection ended, as its session saw it.
#[derive(Default)]
struct Endings(Mutex<Vec<Option<FailReason>>>);

struct RecordingProfile(Arc<Endings>);
struct RecordingSession(Connection, Arc<Endings>);

impl TextProfile for RecordingProfile {
    fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(RecordingSession(conn, self.0.clone()))
    }
}

impl TextSession for RecordingSession {
    fn on_text(&mut self, text: &str) {
        match text {
            "hs" => {
                self.0.mark_handshaken();
                let _ = self.0.send_text("ok");
            }
            // Many frames at once: every one after the first failed write must fail quietly.
            "burst" => {
                for i in 0..200 {
                    let _ = self.0.send_text(format!("frame {i}"));
                }
            }
            other => {
                let _ = self.0.send_text(other.to_owned());
            }
        }
    }
    fn on_close(&mut self) {
        let failure = self.0.failure();
        self.1 .0.lock().unwrap().push(failure);
    }
}

#[tokio::test]
async fn write_error_under_the_writer_fails_the_connection_exactly_once() {
    let endings = Arc::new(Endings::default());
    let transport = WsTransport::new(config()).expect("config");
    transport.attach(Arc::new(RecordingProfile(endings.clone())));
    transport.start().await.expect("start");
    let port = transport.bound_port().expect("port");
    let token = transport.resolved_token().unwrap_or_default().to_string();

    // The faulty connection: a real socket pair on 127.0.0.1, served by the real connection
    // task with a write half that we can make fail.
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let client = TcpStream::connect(listener.local_addr().expect("addr"))
        .await
        .expect("connect");
    let (server_side, _) = listener.accept().await.expect("accept");
    let armed = Arc::new(AtomicBool::new(false));
    let failed_writes = Arc::new(AtomicUsize::new(0));
    let conn_task = tokio::spawn(
        transport
            .serve_upgraded(
                FaultyWrite {
                    inner: server_side,
                    armed: armed.clone(),
                    failed_writes: failed_writes.clone(),
                },
                Ok(Role::Drive),
            )
            .expect("slot"),
    );
    let mut raw = Raw::from_stream(client);
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.expect("ok").payload, b"ok");

    // A healthy neighbour on the real listener.
    let (status, mut neighbour) = Raw::upgrade(port, &format!("/?token={token}"), &[]).await;
    assert_eq!(status, 101);
    neighbour.send(true, 1, b"hs").await;
    assert_eq!(neighbour.recv_data().await.expect("ok").payload, b"ok");

    armed.store(true, Ordering::Release);
    raw.send(true, 1, b"burst").await;
    tokio::time::timeout(WAIT, conn_task)
        .await
        .expect("the failed connection's task ended")
        .expect("no panic");

    let m = transport.metrics();
    assert_eq!(m.delivery_failures(), 1, "one latched failure");
    assert_eq!(
        *endings.0.lock().unwrap(),
        vec![Some(FailReason::WriteError)],
        "one cleanup, seen by the session as a write error (close code 1011)"
    );
    assert!(failed_writes.load(Ordering::Acquire) >= 1);
    // The writer gave up at the first failed write: no close frame and no data reached the
    // client, and the socket was closed under it.
    assert!(
        raw.recv().await.is_none(),
        "the failed socket was not closed"
    );

    // The neighbour is unaffected.
    neighbour.send(true, 1, b"still fine").await;
    assert_eq!(
        neighbour.recv_data().await.expect("echo").payload,
        b"still fine"
    );
    assert_eq!(m.delivery_failures(), 1);
    transport.stop().await;
    assert_eq!(endings.0.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn reset_under_a_flooding_writer_is_cleaned_up_once() {
    let server = Server::core_default().await;
    let mut raw = raw_handshaken(server.port, &server.token).await;
    // 2,000 messages of 16 KiB: far more than the socket buffers hold, so the writer is
    // mid-stream when the peer resets the connection.
    raw.send(true, 1, b"flood 2000 16384").await;
    let first = raw.recv_data().await.expect("flood started");
    assert_eq!(first.payload.len(), 16384);
    raw.tcp.set_zero_linger().expect("linger");
    drop(raw);
    cleaned_up(&server, 1).await;
    assert!(server.transport.metrics().delivery_failures() <= 1);
}

/// Found by the `connection` fuzz target (LeakSanitizer): a channel whose handler captures its
/// own handle (as `echo` and `relay` do) kept the registry, its channels and handlers alive after
/// the transport was dropped.
#[tokio::test]
async fn dropping_a_transport_frees_its_channels_and_their_handlers() {
    let transport = WsTransport::new(config()).expect("config");
    let alive = Arc::new(());
    let witness = Arc::downgrade(&alive);
    let handle = transport
        .register_channel(carrier_server::ChannelDescriptor::new(
            "loop",
            &["*"],
            carrier_server::Binary::Accepted,
        ))
        .expect("register");
    let reply = handle.clone();
    handle.on_inbound(move |msg| {
        let _keep = &alive;
        let _ = reply.send_to(
            msg.connection,
            carrier_protocol::channel_frame::FrameBody::Binary(Default::default()),
        );
    });
    drop(handle);
    assert!(
        witness.upgrade().is_some(),
        "the handler lives while the transport does"
    );
    drop(transport);
    assert!(
        witness.upgrade().is_none(),
        "the handler (and the registry it points back to) outlived the transport"
    );
}

/// Found by the `connection` fuzz target (LeakSanitizer): a connection that ended before its
/// handshake kept itself alive through its unrun handshake hook (which holds the connection
/// and the channel registry), leaking its outbound queue and the registry.
#[tokio::test]
async fn a_connection_that_ends_before_its_handshake_is_freed() {
    let server = Server::core_default().await;
    let alive = Arc::new(());
    let witness = Arc::downgrade(&alive);
    let handle = server
        .transport
        .register_channel(carrier_server::ChannelDescriptor::new(
            "w",
            &["*"],
            carrier_server::Binary::Accepted,
        ))
        .expect("register");
    handle.on_inbound(move |_| {
        let _keep = &alive;
    });
    drop(handle);
    let (status, raw) = Raw::upgrade(server.port, &format!("/?token={}", server.token), &[]).await;
    assert_eq!(status, 101);
    drop(raw);
    cleaned_up(&server, 1).await;
    server.transport.stop().await;
    let Server { transport, .. } = server;
    drop(transport);
    assert!(
        witness.upgrade().is_none(),
        "the registry outlived the transport: a connection kept it alive"
    );
}
