//! `carrier pipe`: the shell tool for payload channels (docs/protocol.md, "Channels"), as
//! `websocat` is for sockets. stdin goes out as binary frames on one channel; that channel's
//! inbound frames come out on stdout.
//!
//! ```text
//! carrier pipe [URL] [--token T] --channel NAME [--chunk BYTES] [--events] [--linger-ms MS]
//!             [--any-owner]
//! ```
//!
//! It is a client of [`carrier::client`] like every other command: the shared dialer (owner
//! check, upgrade), the shared handshake, and the client's channel API, with no reconnect.
//! Neither direction waits for the other:
//!
//! - **stdin** (a thread: a blocking read of an open terminal must not keep the runtime from
//!   shutting down) reads at most `--chunk` bytes at a time and hands each read to the sender
//!   through a queue of one chunk.
//! - the **sender** sends each chunk as one binary frame; the client numbers them (seq 0, 1,
//!   2, …) and waits while its outbound buffer (a few chunks) is full or, on a bulk channel of
//!   a carrier with `bulk_credit`, until the carrier grants credit. Memory stays at a few chunks
//!   whatever the input size.
//! - the client's own tasks read and write the socket (pings answered by its writer); the
//!   channel's frames arrive on a stream bounded in bytes, so a slow stdout slows the socket,
//!   not memory.
//! - the **coordinator** (the command's own task) writes to stdout, shows progress, and decides
//!   when the run is over.
//!
//! # When a run is over
//!
//! The protocol says nothing about when a pipe on a channel that answers is done, so this is the
//! rule: once stdin is at EOF and every frame has been written to the socket, the pipe keeps
//! reading until the channel has sent back as many binary bytes as were sent (an `echo` is
//! complete: exit at once), or until nothing arrived on the channel for `--linger-ms` (default
//! 1000; a channel that does not answer, or a `relay` whose other side is still talking). Then it
//! closes with 1000 and exits 0. With no input at all (`< /dev/null`) and nothing received it exits
//! at once. To only receive (`carrier pipe --channel share > out.bin`), leave stdin open (a
//! terminal does; end with Ctrl-D) or give a long `--linger-ms`.
//!
//! A server close or a connection failure before that exits 1 with one line on stderr, as does a
//! refused token (close 1008 or HTTP 401) and a `protocol_error` about the channel (e.g. it
//! accepts no binary frames). So does a listener of another user: the dial checks the listening
//! socket's owner before the upgrade carrying the token is written, as the Rust client's does;
//! `--any-owner` with a URL talks to it anyway, without the token. A `--chunk` outside 1..=16 MiB is a usage error (2, from clap);
//! so is a chunk whose frame would exceed the carrier's `max_message_bytes`.

mod io;
mod open;

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use carrier::client::{ClientEvent, ConnectionState};
use carrier::discovery::RuntimeDir;
use carrier::protocol::channel_frame;
use futures_util::StreamExt;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

use crate::client::failure::Failure;
use crate::client::target::{resolve_target, Target};
use crate::stdin::spawn_stdin;
use crate::task::AbortOnDrop;
use io::{check_notice, deliver, send_all, Progress};
use open::{connection_ended, open};

/// The default payload of one frame: 64 KiB.
pub const DEFAULT_CHUNK: usize = 64 << 10;
/// The largest `--chunk`: the carrier's default hard message cap (16 MiB).
pub const MAX_CHUNK: usize = 16 << 20;
/// How long the TCP connect, the upgrade and the handshake may take together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Progress refreshes at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// The RBF header without the name: magic, version, kind, name length, seq.
const FIXED_FRAME_HEADER: usize = 10;
/// Chunks the outbound buffer and the inbound stream may each hold.
const CHUNKS_BUFFERED: usize = 4;

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

/// The whole run against `target`, with the given input and output.
async fn pipe(
    args: &PipeArgs,
    target: &Target,
    input: impl Read + Send + 'static,
    mut output: impl AsyncWrite + Unpin,
) -> Result<(), Failure> {
    let url = target.url.as_str();
    let frame_max = args.chunk + FIXED_FRAME_HEADER + args.channel.len();
    let buffered = CHUNKS_BUFFERED * frame_max;
    let opened = tokio::time::timeout(
        CONNECT_TIMEOUT,
        open(
            target,
            &args.channel,
            buffered,
            buffered,
            &mut std::io::stderr(),
        ),
    )
    .await
    .map_err(|_| {
        Failure::runtime(format!(
            "{url} did not complete the connection and handshake within {CONNECT_TIMEOUT:?}"
        ))
    })??;
    let client = opened.client;
    if let Some(max) = opened
        .info
        .max_message_bytes()
        .filter(|max| frame_max > *max)
    {
        client.disconnect().await;
        return Err(Failure::usage(format!(
            "--chunk {} makes {frame_max}-byte frames, over {url}'s max_message_bytes {max}",
            args.chunk
        )));
    }

    let mut frames = client.channel(&args.channel);
    let mut notices = client.events();
    let (state_tx, mut states) = mpsc::unbounded_channel();
    let _states = client.on_state_change(Box::new(move |state| {
        let _ = state_tx.send(state);
    }));
    let sent = Arc::new(AtomicU64::new(0));
    let (chunks, mut stdin) = spawn_stdin(input, args.chunk)?;
    let mut sender = tokio::spawn(send_all(
        client.clone(),
        args.channel.clone(),
        chunks,
        Arc::clone(&sent),
    ));
    let _abort = AbortOnDrop(sender.abort_handle());

    let mut progress = Progress::new(std::io::stderr().is_terminal());
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    let linger = Duration::from_millis(args.linger_ms);
    let mut received: u64 = 0;
    // Bytes sent once stdin ended; `None` while input is still going out.
    let mut sent_total: Option<u64> = None;
    let mut stdin_done = false;
    let mut idle_deadline = tokio::time::Instant::now() + linger;

    let outcome = loop {
        if sent_total == Some(received) {
            break Ok(());
        }
        tokio::select! {
            message = frames.next() => {
                let Some(message) = message else {
                    break Err(connection_ended(url, &opened.transport));
                };
                match deliver(message, args.events, &mut output).await {
                    Ok(bytes) => {
                        received += bytes;
                        idle_deadline = tokio::time::Instant::now() + linger;
                    }
                    Err(failure) => break Err(failure),
                }
            }
            event = notices.next() => {
                if let Some(ClientEvent::Notice { event, payload }) = event {
                    if let Err(failure) = check_notice(&event, &payload, &args.channel) {
                        break Err(failure);
                    }
                }
            }
            state = states.recv() => {
                if state.is_none_or(|state| state == ConnectionState::Disconnected) {
                    break Err(connection_ended(url, &opened.transport));
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
            total = &mut sender, if sent_total.is_none() => match total {
                Ok(Ok(total)) => {
                    sent_total = Some(total);
                    idle_deadline = tokio::time::Instant::now() + linger;
                }
                Ok(Err(reason)) => break Err(Failure::runtime(format!("sending to {url} failed: {reason}"))),
                Err(_) => break Err(Failure::runtime("the sender stopped")),
            },
            () = tokio::time::sleep_until(idle_deadline), if sent_total.is_some() => break Ok(()),
            _ = ticker.tick() => progress.show(sent.load(Ordering::Relaxed), received),
        }
    };
    // Before any error line, so it does not end up on the progress line.
    progress.clear();
    // Everything is written and read (or the run failed): close with 1000, within bounds.
    client.disconnect().await;
    outcome
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
        let frame = channel_frame::encode_binary("abc", 7, bytes::Bytes::new()).unwrap();
        assert_eq!(frame.len(), FIXED_FRAME_HEADER + 3);
    }
}
