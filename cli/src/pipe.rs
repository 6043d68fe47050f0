//! `carrier pipe`: the shell tool for payload channels (SPEC section 7), as `websocat` is for
//! sockets. stdin goes out as binary frames on one channel; that channel's inbound frames come
//! out on stdout.
//!
//! ```text
//! carrier pipe [URL] [--token T] --channel NAME [--chunk BYTES] [--events] [--linger-ms MS]
//!             [--any-owner]
//! ```
//!
//! Three tasks and a thread, so that neither direction waits for the other:
//!
//! - **stdin** (a thread: a blocking read of an open terminal must not keep the runtime from
//!   shutting down) reads at most `--chunk` bytes at a time and hands each read, encoded as one
//!   RBF binary frame (seq 0, 1, 2, …), to the writer through a queue of one frame. It cannot run
//!   ahead of the socket: memory stays at a few chunks whatever the input size.
//! - **writer** owns the socket's write half: data frames, the pongs the reader asks for (ahead
//!   of data, coalesced to the latest ping), and the final close.
//! - **reader** owns the read half and forwards each message through a queue of one, so a slow
//!   stdout slows the socket, not memory. It never waits for the writer: a pong owed while the
//!   writer waits for the carrier to read could otherwise stall both directions.
//! - the **coordinator** (the command's own task) writes to stdout, shows progress, and decides
//!   when the run is over.
//!
//! # When a run is over
//!
//! SPEC says nothing about when a pipe on a channel that answers is done, so this is the rule:
//! once stdin is at EOF and every frame has been written to the socket, the pipe keeps reading
//! until the channel has sent back as many binary bytes as were sent (an `echo` is complete:
//! exit at once), or until nothing arrived on the channel for `--linger-ms` (default 1000; a
//! channel that does not answer, or a `relay` whose other side is still talking). Then it closes
//! with 1000 and exits 0. With no input at all (`< /dev/null`) and nothing received it exits at
//! once. To only receive (`carrier pipe --channel share > out.bin`), leave stdin open (a terminal
//! does; end with Ctrl-D) or give a long `--linger-ms`.
//!
//! A server close or a connection failure before that exits 1 with one line on stderr, as does a
//! refused token (close 1008 or HTTP 401) and a `protocol_error` about the channel (e.g. it
//! accepts no binary frames). So does a listener of another user: the dial checks the listening
//! socket's owner before the upgrade carrying the token is written, as the Rust client's does;
//! `--any-owner` with a URL talks to it anyway, without the token. A `--chunk` outside 1..=16 MiB is a usage error (2, from clap);
//! so is a chunk whose frame would exceed the carrier's `max_message_bytes`.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use carrier::client::{ServerFrames, ServerMessage};
use carrier::discovery::listener::{DialError, OwnerCheck};
use carrier::discovery::RuntimeDir;
use carrier::protocol::channel_frame::{self, FrameBody};
use carrier::protocol::version::{MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION};
use carrier_loadgen::Target as LoopbackTarget;
use fastwebsockets::{Frame, Payload, WebSocket, WebSocketWrite};
use http_body_util::Empty;
use hyper::header::{CONNECTION, HOST, SEC_WEBSOCKET_KEY, UPGRADE};
use hyper::upgrade::Upgraded;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

use crate::client::failure::Failure;
use crate::client::target::{resolve_target, tokenless_warning, Target};

/// The default payload of one frame: 64 KiB.
pub const DEFAULT_CHUNK: usize = 64 << 10;
/// The largest `--chunk`: the carrier's default hard message cap (16 MiB).
pub const MAX_CHUNK: usize = 16 << 20;
/// How long the TCP connect, the upgrade and the handshake may take together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for the server's answer to our close before exiting anyway.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// Progress refreshes at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// The RBF header without the name: magic, version, kind, name length, seq.
const FIXED_FRAME_HEADER: usize = 10;
/// The largest RBF header: the fixed part and a 255-byte name.
const MAX_FRAME_HEADER: usize = FIXED_FRAME_HEADER + channel_frame::MAX_CHANNEL_NAME;
/// Inbound cap when the handshake publishes none: SPEC's default hard cap.
const DEFAULT_MAX_MESSAGE: usize = 16 << 20;

/// `carrier pipe [URL] --channel NAME`: stdin → binary frames on NAME, NAME's frames → stdout.
#[derive(Debug, Clone, clap::Args)]
pub struct PipeArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/ (loopback only; default: the one running carrier's
    /// runtime file)
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The channel to send stdin on and print to stdout
    #[arg(long, value_name = "NAME", value_parser = parse_channel_name)]
    pub channel: String,
    /// Payload bytes per frame at most (1..=16777216)
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_CHUNK, value_parser = parse_chunk)]
    pub chunk: usize,
    /// Print the channel's event frames on stdout, one JSON line {"event":…,"payload":…} each
    #[arg(long)]
    pub events: bool,
    /// After stdin's end, stop once nothing arrived on the channel for this long (unless the
    /// channel already answered every byte sent)
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub linger_ms: u64,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

fn parse_chunk(text: &str) -> Result<usize, String> {
    let bytes: usize = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of bytes"))?;
    if (1..=MAX_CHUNK).contains(&bytes) {
        Ok(bytes)
    } else {
        Err(format!("must be 1..={MAX_CHUNK} bytes"))
    }
}

fn parse_channel_name(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > channel_frame::MAX_CHANNEL_NAME {
        Err(format!(
            "a channel name is 1..={} bytes",
            channel_frame::MAX_CHANNEL_NAME
        ))
    } else {
        Ok(text.to_owned())
    }
}

/// Runs `carrier pipe` on the process's stdin, stdout and stderr.
pub async fn run_pipe(args: PipeArgs) -> ExitCode {
    let mut stderr = std::io::stderr();
    let target = match resolve_target(
        args.url.as_deref(),
        args.token.as_deref(),
        args.any_owner,
        &RuntimeDir::for_user(),
        &mut stderr,
    ) {
        Ok(target) => target,
        Err(failure) => return failure.report(&mut stderr),
    };
    let result = pipe(&args, &target, std::io::stdin(), tokio::io::stdout()).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(&mut stderr),
    }
}

type Stream = TokioIo<Upgraded>;
type Reader = ServerFrames<ReadHalf<Stream>>;
type Writer = WebSocketWrite<WriteHalf<Stream>>;

/// The whole run against `target`, with the given input and output.
async fn pipe(
    args: &PipeArgs,
    target: &Target,
    input: impl Read + Send + 'static,
    mut output: impl AsyncWrite + Unpin,
) -> Result<(), Failure> {
    let url = target.url.as_str();
    let (mut read, write, limits) =
        tokio::time::timeout(CONNECT_TIMEOUT, open(target, &args.channel))
            .await
            .map_err(|_| {
                Failure::runtime(format!(
                "{url} did not complete the connection and handshake within {CONNECT_TIMEOUT:?}"
            ))
            })??;
    let frame_max = args.chunk + FIXED_FRAME_HEADER + args.channel.len();
    if let Some(max) = limits.max_message_bytes.filter(|max| frame_max > *max) {
        return Err(Failure::usage(format!(
            "--chunk {} makes {frame_max}-byte frames, over {url}'s max_message_bytes {max}",
            args.chunk
        )));
    }
    let max_inbound = limits.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE) + MAX_FRAME_HEADER;

    read.set_max_message_bytes(max_inbound);

    let sent = Arc::new(AtomicU64::new(0));
    let (out_tx, out_rx) = mpsc::channel::<Outbound>(1);
    let (pong_tx, pong_rx) = watch::channel(Bytes::new());
    let (written_tx, mut written_rx) = oneshot::channel::<u64>();
    let (in_tx, mut in_rx) = mpsc::channel::<Inbound>(1);

    let writer = tokio::spawn(write_loop(write, out_rx, pong_rx, written_tx, sent.clone()));
    let reader = tokio::spawn(read_loop(read, in_tx, pong_tx));
    let mut stdin = spawn_stdin(input, args.channel.clone(), args.chunk, out_tx.clone())?;
    let _abort = AbortOnDrop([writer.abort_handle(), reader.abort_handle()]);

    let mut progress = Progress::new(std::io::stderr().is_terminal());
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    let linger = Duration::from_millis(args.linger_ms);
    let mut received: u64 = 0;
    // Bytes written to the socket once stdin ended; `None` while input is still going out.
    let mut sent_total: Option<u64> = None;
    let mut stdin_done = false;
    let mut idle_deadline = tokio::time::Instant::now() + linger;

    let outcome = loop {
        if sent_total == Some(received) {
            break Ok(());
        }
        tokio::select! {
            message = in_rx.recv() => {
                let message = message.unwrap_or(Inbound::Failed("the reader stopped".into()));
                match message {
                    Inbound::Binary(bytes) => match deliver(&bytes, args, &mut output).await {
                        Ok(delivered) => {
                            received += delivered.binary_bytes;
                            if delivered.on_channel {
                                idle_deadline = tokio::time::Instant::now() + linger;
                            }
                        }
                        Err(failure) => break Err(failure),
                    },
                    Inbound::Text(bytes) => {
                        if let Err(failure) = check_text(&bytes, &args.channel) {
                            break Err(failure);
                        }
                    }
                    Inbound::Closed { code, reason } => break Err(closed_early(url, code, &reason)),
                    Inbound::Failed(reason) => {
                        break Err(Failure::runtime(format!("the connection to {url} failed: {reason}")))
                    }
                }
            }
            result = &mut stdin, if !stdin_done => {
                stdin_done = true;
                match result {
                    Ok(Ok(())) => {}
                    Ok(Err(failure)) => break Err(failure),
                    Err(_) => break Err(Failure::runtime("the stdin reader stopped")),
                }
            }
            total = &mut written_rx, if sent_total.is_none() => match total {
                Ok(total) => {
                    sent_total = Some(total);
                    idle_deadline = tokio::time::Instant::now() + linger;
                }
                Err(_) => break Err(why_writing_failed(url, &mut in_rx).await),
            },
            () = tokio::time::sleep_until(idle_deadline), if sent_total.is_some() => break Ok(()),
            _ = ticker.tick() => progress.show(sent.load(Ordering::Relaxed), received),
        }
    };
    // Before any error line, so it does not end up on the progress line.
    progress.clear();
    outcome?;

    // Everything is written and read: say goodbye properly, within bounds.
    let _ = out_tx.send(Outbound::Close(1000)).await;
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
        while let Some(message) = in_rx.recv().await {
            if matches!(message, Inbound::Closed { .. } | Inbound::Failed(_)) {
                break;
            }
        }
    })
    .await;
    Ok(())
}

/// The writer stopped on an error: the reader usually knows why (a close, a reset), so give it a
/// moment to say so.
async fn why_writing_failed(url: &str, inbound: &mut mpsc::Receiver<Inbound>) -> Failure {
    let reason = tokio::time::timeout(CLOSE_TIMEOUT, async {
        while let Some(message) = inbound.recv().await {
            match message {
                Inbound::Closed { code, reason } => return Some(closed_early(url, code, &reason)),
                Inbound::Failed(reason) => {
                    return Some(Failure::runtime(format!(
                        "the connection to {url} failed: {reason}"
                    )))
                }
                Inbound::Binary(_) | Inbound::Text(_) => {}
            }
        }
        None
    })
    .await;
    reason
        .ok()
        .flatten()
        .unwrap_or_else(|| Failure::runtime(format!("writing to {url} failed")))
}

/// Aborts the socket tasks however the command ends.
struct AbortOnDrop([tokio::task::AbortHandle; 2]);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// What the carrier's limits say about frame sizes.
struct Limits {
    max_message_bytes: Option<usize>,
}

/// TCP connect, the listener's owner checked, upgrade, `system.handshake`; checks that the
/// carrier has the channel.
async fn open(target: &Target, channel: &str) -> Result<(Reader, Writer, Limits), Failure> {
    let url = target.url.as_str();
    let address = LoopbackTarget::parse(url, None).map_err(|e| Failure::usage(e.to_string()))?;
    // The upgrade may carry the token: the listener is checked first (the same check as the
    // Rust client's dialer), and a refused one gets nothing.
    let checked = OwnerCheck::own_user()
        .with_policy(target.owners)
        .connect(address.addr)
        .await
        .map_err(|error| match error {
            DialError::Connect { reason, .. } => Failure::runtime(format!(
                "cannot reach {url}: {reason}; is `carrier serve` running? (`carrier doctor` lists local servers)"
            )),
            refused => Failure::runtime(refused.to_string()),
        })?;
    let token = if checked.listener.may_receive_token() {
        target.token.as_deref()
    } else {
        if let Some(warning) = tokenless_warning(url, &checked.listener) {
            eprintln!("carrier: {warning}");
        }
        None
    };
    let request = LoopbackTarget::parse(url, token).map_err(|e| Failure::usage(e.to_string()))?;
    let tcp = checked.stream;
    let _ = tcp.set_nodelay(true);
    let ws = upgrade(url, tcp, &request).await?;
    let (mut read, mut write) = ws.split(tokio::io::split);
    // Pings and closes are answered by the writer task, not from inside the read half.
    read.set_auto_pong(false);
    read.set_auto_close(false);
    let mut read = ServerFrames::new(read, DEFAULT_MAX_MESSAGE + MAX_FRAME_HEADER);
    let result = handshake(url, &mut read, &mut write).await?;
    let channels = result
        .get("channels")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = channels
        .iter()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    if !names.contains(&channel) {
        let known = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        return Err(Failure::runtime(format!(
            "{url} has no channel `{channel}` (its channels: {known}); mount one with `carrier serve --channel {channel}:echo`"
        )));
    }
    let max_message_bytes = result
        .pointer("/limits/max_message_bytes")
        .and_then(Value::as_u64)
        .and_then(|max| usize::try_from(max).ok());
    Ok((read, write, Limits { max_message_bytes }))
}

/// The line for a refused token, whichever way the carrier refused it.
fn token_refused(url: &str, how: &str) -> Failure {
    Failure::runtime(format!(
        "{url} refused the token ({how}): check --token / CARRIER_TOKEN"
    ))
}

/// The HTTP/1 upgrade, written out (as in `carrier::client`) so failures stay one line.
async fn upgrade(
    url: &str,
    tcp: TcpStream,
    target: &LoopbackTarget,
) -> Result<WebSocket<Stream>, Failure> {
    let failed = |e: &dyn std::fmt::Display| Failure::runtime(format!("upgrade to {url}: {e}"));
    let request = Request::builder()
        .method("GET")
        .uri(target.path_and_query.as_str())
        .header(HOST, target.host_header.as_str())
        .header(UPGRADE, "websocket")
        .header(CONNECTION, "upgrade")
        .header(SEC_WEBSOCKET_KEY, fastwebsockets::handshake::generate_key())
        .header("Sec-WebSocket-Version", "13")
        .body(Empty::<Bytes>::new())
        .map_err(|e| failed(&e))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| failed(&e))?;
    tokio::spawn(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!(%error, "upgrade connection ended with an error");
        }
    });
    let mut response = sender.send_request(request).await.map_err(|e| failed(&e))?;
    match response.status() {
        StatusCode::SWITCHING_PROTOCOLS => {}
        StatusCode::UNAUTHORIZED => return Err(token_refused(url, "HTTP 401")),
        StatusCode::FORBIDDEN => {
            return Err(Failure::runtime(format!(
                "{url} refused the connection (HTTP 403): this host or origin is not allowed, or the token was refused"
            )))
        }
        status => {
            return Err(Failure::runtime(format!(
                "{url} refused the WebSocket upgrade with HTTP {}",
                status.as_u16()
            )))
        }
    }
    let upgraded = hyper::upgrade::on(&mut response)
        .await
        .map_err(|e| failed(&e))?;
    Ok(WebSocket::after_handshake(
        TokioIo::new(upgraded),
        fastwebsockets::Role::Client,
    ))
}

/// Sends `system.handshake` and returns its result. Frames before the response are skipped.
async fn handshake(url: &str, read: &mut Reader, write: &mut Writer) -> Result<Value, Failure> {
    let request = json!({
        "id": "pipe-handshake",
        "method": "system.handshake",
        "params": {
            "protocol_version": PROTOCOL_VERSION,
            "min_compatible_protocol": MIN_COMPATIBLE_PROTOCOL,
            "client": { "name": "carrier-pipe", "version": env!("CARGO_PKG_VERSION") },
        },
    });
    // A carrier that refuses the token may already have closed: the close frame it sent says
    // why, so a failed write is not the end of the story.
    let _ = write
        .write_frame(Frame::text(Payload::Owned(
            request.to_string().into_bytes(),
        )))
        .await;
    loop {
        let message = read.next().await.map_err(|e| {
            Failure::runtime(format!(
                "the connection to {url} failed during the handshake: {e}"
            ))
        })?;
        match message {
            ServerMessage::Close(close) => {
                let (code, reason) = close_parts(close);
                return Err(closed_early(url, code, &reason));
            }
            ServerMessage::Text(text) => {
                let Ok(value) = serde_json::from_slice::<Value>(&text) else {
                    continue;
                };
                if value.get("id").and_then(Value::as_str) != Some("pipe-handshake") {
                    continue;
                }
                if let Some(error) = value.get("error") {
                    let code = error.get("code").and_then(Value::as_str).unwrap_or("error");
                    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
                    return Err(Failure::runtime(format!(
                        "{url} refused the handshake: {code}: {message}"
                    )));
                }
                return Ok(value.get("result").cloned().unwrap_or(Value::Null));
            }
            ServerMessage::Binary(_) | ServerMessage::Ping(_) | ServerMessage::Pong => {}
        }
    }
}

/// The one line for a close the pipe did not ask for.
fn closed_early(url: &str, code: Option<u16>, reason: &str) -> Failure {
    match code {
        Some(1008) => token_refused(url, "close 1008"),
        Some(code) if reason.is_empty() => {
            Failure::runtime(format!("{url} closed the connection ({code})"))
        }
        Some(code) => Failure::runtime(format!("{url} closed the connection ({code}: {reason})")),
        None => Failure::runtime(format!("{url} closed the connection")),
    }
}

fn close_parts(close: Option<(u16, String)>) -> (Option<u16>, String) {
    match close {
        Some((code, reason)) => (Some(code), reason),
        None => (None, String::new()),
    }
}

/// What goes to the writer task.
enum Outbound {
    /// One encoded channel frame and the payload bytes it carries.
    Data { frame: Vec<u8>, payload: u64 },
    /// stdin ended: report the bytes written so far.
    EndOfInput,
    /// Close with this code and stop.
    Close(u16),
}

/// What the reader task hands over.
enum Inbound {
    Binary(Bytes),
    Text(Bytes),
    Closed { code: Option<u16>, reason: String },
    Failed(String),
}

/// stdin → encoded frames, one read per frame (so typed lines go out at once; a file fills every
/// frame); each waits for room in the writer's queue before the next read.
///
/// A thread of its own rather than `tokio::io::stdin`: a blocking read that never returns (an
/// open terminal) would keep the runtime from shutting down after a failure.
fn read_stdin(
    mut input: impl Read,
    channel: &str,
    chunk: usize,
    out: &mpsc::Sender<Outbound>,
) -> Result<(), Failure> {
    let mut seq: u32 = 0;
    let mut buffer = vec![0u8; chunk];
    loop {
        let n = match input.read(&mut buffer) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::runtime(format!("reading stdin: {e}"))),
        };
        if n == 0 {
            let _ = out.blocking_send(Outbound::EndOfInput);
            return Ok(());
        }
        let encoded =
            channel_frame::encode_binary(channel, seq, Bytes::copy_from_slice(&buffer[..n]))
                .map_err(|e| Failure::usage(format!("channel `{channel}`: {e}")))?;
        let message = Outbound::Data {
            frame: encoded.to_vec(),
            payload: n as u64,
        };
        if out.blocking_send(message).is_err() {
            // The writer stopped; the coordinator reports why.
            return Ok(());
        }
        seq = seq.wrapping_add(1);
    }
}

/// Starts [`read_stdin`] on its own thread; the receiver gets its outcome.
fn spawn_stdin(
    input: impl Read + Send + 'static,
    channel: String,
    chunk: usize,
    out: mpsc::Sender<Outbound>,
) -> Result<oneshot::Receiver<Result<(), Failure>>, Failure> {
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("carrier-pipe-stdin".into())
        .spawn(move || {
            let _ = done_tx.send(read_stdin(input, &channel, chunk, &out));
        })
        .map_err(|e| Failure::runtime(format!("cannot start the stdin reader: {e}")))?;
    Ok(done_rx)
}

/// The socket's one writer: pongs first, then data in order, then the close.
async fn write_loop(
    mut write: Writer,
    mut out: mpsc::Receiver<Outbound>,
    mut pongs: watch::Receiver<Bytes>,
    written: oneshot::Sender<u64>,
    sent: Arc<AtomicU64>,
) {
    let mut written = Some(written);
    let mut pongs_open = true;
    loop {
        let result = tokio::select! {
            biased;
            changed = pongs.changed(), if pongs_open => match changed {
                Ok(()) => {
                    let payload = pongs.borrow_and_update().clone();
                    write.write_frame(Frame::pong(Payload::Owned(payload.to_vec()))).await
                }
                Err(_) => {
                    pongs_open = false;
                    Ok(())
                }
            },
            message = out.recv() => match message {
                Some(Outbound::Data { frame, payload }) => {
                    let result = write.write_frame(Frame::binary(Payload::Owned(frame))).await;
                    if result.is_ok() {
                        sent.fetch_add(payload, Ordering::Relaxed);
                    }
                    result
                }
                Some(Outbound::EndOfInput) => {
                    if let Some(tx) = written.take() {
                        let _ = tx.send(sent.load(Ordering::Relaxed));
                    }
                    Ok(())
                }
                Some(Outbound::Close(code)) => {
                    let _ = write.write_frame(Frame::close(code, b"")).await;
                    return;
                }
                None => return,
            },
        };
        if let Err(error) = result {
            // Dropping `written` unanswered tells the coordinator the write side failed.
            tracing::debug!(%error, "writing to the carrier failed");
            return;
        }
    }
}

/// The socket's one reader: messages to the coordinator, pings to the writer. A frame no
/// server may send (masked, reserved bits, a bad opcode) ends it as a failure.
async fn read_loop(
    mut read: Reader,
    to_coordinator: mpsc::Sender<Inbound>,
    pongs: watch::Sender<Bytes>,
) {
    loop {
        let message = match read.next().await {
            Err(error) => Inbound::Failed(error.to_string()),
            Ok(ServerMessage::Binary(bytes)) => Inbound::Binary(bytes),
            Ok(ServerMessage::Text(bytes)) => Inbound::Text(bytes),
            Ok(ServerMessage::Ping(payload)) => {
                let _ = pongs.send(payload);
                continue;
            }
            Ok(ServerMessage::Close(close)) => {
                let (code, reason) = close_parts(close);
                Inbound::Closed { code, reason }
            }
            Ok(ServerMessage::Pong) => continue,
        };
        let last = matches!(message, Inbound::Closed { .. } | Inbound::Failed(_));
        if to_coordinator.send(message).await.is_err() || last {
            return;
        }
    }
}

/// What one inbound binary message amounted to.
struct Delivered {
    /// Whether it was a frame of our channel.
    on_channel: bool,
    /// Opaque bytes written to stdout.
    binary_bytes: u64,
}

/// Writes a frame of our channel to `output`: a binary body raw, an event as one JSON line
/// (with `--events`). Other channels' frames and undecodable messages are skipped.
async fn deliver(
    message: &Bytes,
    args: &PipeArgs,
    output: &mut (impl AsyncWrite + Unpin),
) -> Result<Delivered, Failure> {
    let skipped = Delivered {
        on_channel: false,
        binary_bytes: 0,
    };
    match channel_frame::peek(message) {
        Ok(header) if header.channel == args.channel => {}
        Ok(_) => return Ok(skipped),
        Err(error) => {
            tracing::debug!(%error, "skipping a binary message that is not a channel frame");
            return Ok(skipped);
        }
    }
    let frame = match channel_frame::decode(message.clone()) {
        Ok(frame) => frame,
        Err(error) => {
            tracing::warn!(%error, "skipping a malformed frame on the channel");
            return Ok(skipped);
        }
    };
    let stdout_failed = |e: std::io::Error| Failure::runtime(format!("writing stdout: {e}"));
    let binary_bytes = match frame.body {
        FrameBody::Binary(body) => {
            output.write_all(&body).await.map_err(stdout_failed)?;
            body.len() as u64
        }
        FrameBody::Event { event, payload } if args.events => {
            let mut line = json!({ "event": event, "payload": payload }).to_string();
            line.push('\n');
            output
                .write_all(line.as_bytes())
                .await
                .map_err(stdout_failed)?;
            0
        }
        // `decode` never makes this one (it is for forwarding).
        FrameBody::Event { .. } | FrameBody::EventBytes(_) => 0,
    };
    output.flush().await.map_err(stdout_failed)?;
    Ok(Delivered {
        on_channel: true,
        binary_bytes,
    })
}

/// A text frame after the handshake: a `protocol_error` about this pipe's frames ends the run;
/// a `channel.dropped` on the channel is worth a warning; everything else is not ours.
fn check_text(message: &[u8], channel: &str) -> Result<(), Failure> {
    let Ok(value) = serde_json::from_slice::<Value>(message) else {
        return Ok(());
    };
    let payload = value.get("payload");
    let about_us = payload
        .and_then(|p| p.get("channel"))
        .and_then(Value::as_str)
        .is_none_or(|name| name == channel);
    let field = |key: &str| {
        payload
            .and_then(|p| p.get(key))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default()
    };
    match value.get("event").and_then(Value::as_str) {
        Some("protocol_error") if about_us => Err(Failure::runtime(format!(
            "the carrier refused a frame on `{channel}`: {}: {}",
            field("code"),
            field("message")
        ))),
        Some("channel.dropped") if about_us => {
            tracing::warn!(
                count = field("count"),
                "the carrier dropped frames of `{channel}` for this reader"
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The progress line on stderr, shown only when stderr is a terminal.
struct Progress {
    enabled: bool,
    started: Instant,
    shown: bool,
}

impl Progress {
    fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            started: Instant::now(),
            shown: false,
        }
    }

    fn show(&mut self, sent: u64, received: u64) {
        if !self.enabled {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = sent.max(received) as f64 / seconds;
        eprint!(
            "\r{} sent, {} received, {}/s\x1b[K",
            human(sent as f64),
            human(received as f64),
            human(rate)
        );
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

/// Bytes in binary units, one decimal.
fn human(bytes: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_bounds_are_enforced() {
        assert_eq!(parse_chunk("1"), Ok(1));
        assert_eq!(parse_chunk("16777216"), Ok(MAX_CHUNK));
        assert!(parse_chunk("0").is_err());
        assert!(parse_chunk("16777217").is_err());
        assert!(parse_chunk("-5").is_err());
        assert!(parse_chunk("64k").is_err());
    }

    #[test]
    fn the_fixed_header_size_is_the_codec_s() {
        let frame = channel_frame::encode_binary("abc", 7, Bytes::new()).unwrap();
        assert_eq!(frame.len(), FIXED_FRAME_HEADER + 3);
    }

    #[test]
    fn human_sizes_read_well() {
        assert_eq!(human(512.0), "512 B");
        assert_eq!(human(65536.0), "64.0 KiB");
        assert_eq!(human(50.0 * 1024.0 * 1024.0), "50.0 MiB");
    }

    #[test]
    fn protocol_errors_about_other_channels_are_not_ours() {
        let other = br#"{"event":"protocol_error","payload":{"code":"unknown_channel","message":"x","channel":"b"}}"#;
        assert!(check_text(other, "a").is_ok());
        let ours = br#"{"event":"protocol_error","payload":{"code":"binary_not_allowed","message":"no","channel":"a"}}"#;
        assert!(check_text(ours, "a").is_err());
    }
}
