//! `carrier acp`: a stdio ⇄ `/acp` bridge, for editors that only launch agents as subprocesses
//! (Zed's custom agent servers, JetBrains): the editor talks ACP to this process, and the
//! running carrier's `/acp` answers as the agent.
//!
//! ```text
//! carrier acp [URL] [--token T] [--role observe] [--session ID | --new] [--any-owner]
//! ```
//!
//! It finds the carrier as `send` does (the URL given, or the one running carrier's runtime
//! file — its Unix socket when it lists one; the listener's owner checked before the token goes
//! out; the token from `--token`, `CARRIER_TOKEN` or the runtime file, so never needed on the
//! editor's command line) and dials its `/acp` through the client's one dialer. Then each stdin line goes out as one text
//! frame and each text frame comes out as one stdout line; nothing else is written to stdout
//! (diagnostics go to stderr), except, for a line that cannot be sent (over 16 MiB, or not
//! UTF-8), a JSON-RPC error with a `null` id in its place. `--session ID` makes the editor's
//! `session/new` join that carrier session (the bridge sends `_carrier/join` first), so an
//! editor joins the session a browser already drives.
//!
//! It exits 0 when stdin closes (closing the socket with 1000; answers the carrier sent before
//! it read the close still go to stdout, a turn still running is not waited for), and 1 with
//! one line on stderr when the carrier goes away or refuses it.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use carrier::agent::process::{Line, LineReader};
use carrier::client::{
    ClientError, CloseInfo, Connector, Incoming, Outgoing, SocketWriter, TransportError,
    WsConnector,
};
use carrier::discovery::RuntimeDir;
use carrier::protocol::Role;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::client::failure::{explain, Failure};
use crate::client::session::options;
use crate::client::target::{resolve_target, tokenless_warning, Target};
use crate::stdin::{spawn_stdin, ChunkReader};
use crate::task::AbortOnDrop;

/// The longest stdin line sent (the carrier's default `--max-message-bytes`): a longer one is
/// skipped as it streams, never held whole.
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// stdin is read in chunks of this size.
const CHUNK: usize = 64 << 10;
/// Messages queued each way between stdin, the socket and stdout: a slow stdout slows the
/// socket's reading, a slow socket slows stdin's.
const QUEUED: usize = 8;
/// How long the close at the end of stdin may take: the answers still coming, then the
/// carrier's close.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// `carrier acp [URL]`: an ACP agent on stdio that is the running carrier's `/acp`.
#[derive(Debug, Clone, clap::Args)]
pub struct AcpArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/ (its /acp is dialled; loopback only; default: the
    /// one running carrier's runtime file)
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Ask for the observe role: the editor hears sessions but cannot prompt
    #[arg(long, value_parser = parse_role)]
    pub role: Option<Role>,
    /// Make the editor's session/new join this carrier session instead of starting one
    #[arg(long, value_name = "ID", conflicts_with = "new")]
    pub session: Option<String>,
    /// The editor's session/new starts a new carrier session (the default)
    #[arg(long)]
    pub new: bool,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| format!("unknown role {s:?}: use drive or observe"))
}

/// Runs `carrier acp` on the process's stdin, stdout and stderr.
pub async fn run_acp(args: AcpArgs) -> ExitCode {
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
    let input = match spawn_stdin(std::io::stdin(), CHUNK) {
        Ok((chunks, _done)) => ChunkReader::new(chunks),
        Err(failure) => return failure.report(&mut stderr),
    };
    match bridge(&args, &target, input, tokio::io::stdout(), &mut stderr).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(&mut stderr),
    }
}

/// The `/acp` URL of the carrier at `url`: a `ws://` URL's path, or a `unix:SOCKET` URL's
/// `:/PATH`, made `/acp` (a carrier's URL ends in `/`, or names `/acp` already).
pub fn acp_url(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = match base.strip_prefix("unix:") {
        Some(rest) => {
            let socket = rest.find(":/").map_or(rest, |at| &rest[..at]);
            format!("unix:{socket}:/acp")
        }
        None if base.trim_end_matches('/').ends_with("/acp") => {
            base.trim_end_matches('/').to_owned()
        }
        None => format!("{}/acp", base.trim_end_matches('/')),
    };
    if query.is_empty() {
        base
    } else {
        format!("{base}?{query}")
    }
}

/// The whole run against `target`'s `/acp`, with the given stdin, stdout and stderr.
pub(crate) async fn bridge(
    args: &AcpArgs,
    target: &Target,
    input: impl AsyncRead + Unpin + Send + 'static,
    mut output: impl AsyncWrite + Unpin,
    err: &mut impl Write,
) -> Result<(), Failure> {
    let url = acp_url(&target.url);
    let acp = Target {
        url: url.clone(),
        token: target.token.clone(),
        owners: target.owners,
    };
    let options = options(&acp, args.role).map_err(|error| explain(&url, &error))?;
    let connector = WsConnector::new(options);
    let socket = connector.connect().await;
    if let Some(warning) = connector
        .last_listener()
        .and_then(|listener| tokenless_warning(&url, &listener))
    {
        let _ = writeln!(err, "carrier: {warning}");
    }
    let socket = socket.map_err(|error| explain(&url, &ClientError::Transport(error)))?;

    let (to_socket, queued) = mpsc::channel::<Outgoing>(QUEUED);
    let writing = tokio::spawn(write_socket(socket.writer, queued));
    let (from_socket, mut frames) = mpsc::channel(QUEUED);
    let mut reader = socket.reader;
    let pongs = to_socket.clone();
    let reading = tokio::spawn(async move {
        loop {
            let message = reader.read().await;
            let message = match message {
                Ok(Incoming::Ping(payload)) => {
                    if pongs.send(Outgoing::Pong(payload)).await.is_err() {
                        return;
                    }
                    continue;
                }
                other => other,
            };
            let last = !matches!(message, Ok(Incoming::Text(_) | Incoming::Binary(_)));
            if from_socket.send(message).await.is_err() || last {
                return;
            }
        }
    });
    let _stop_reading = AbortOnDrop(reading.abort_handle());
    let (lines_tx, mut lines) = mpsc::channel(1);
    let stdin = tokio::spawn(async move {
        let mut reader = LineReader::new(BufReader::new(input), MAX_LINE_BYTES);
        loop {
            let line = reader.next().await;
            let end = !matches!(line, Ok(Some(_)));
            if lines_tx.send(line).await.is_err() || end {
                return;
            }
        }
    });
    let _stop_stdin = AbortOnDrop(stdin.abort_handle());

    if let Some(session_id) = &args.session {
        let join = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "_carrier/join",
            "params": {"sessionId": session_id},
        });
        let _ = to_socket.send(Outgoing::Text(join.to_string())).await;
    }

    loop {
        tokio::select! {
            line = lines.recv() => match line {
                Some(Ok(Some(Line::Text(text)))) => {
                    // Blank lines carry no message.
                    if !text.trim().is_empty() && to_socket.send(Outgoing::Text(text)).await.is_err() {
                        return Err(ended(&url, None));
                    }
                }
                Some(Ok(Some(Line::TooLong(bytes)))) => {
                    let why = format!("a line of {bytes} bytes is over the {MAX_LINE_BYTES}-byte limit: not sent");
                    refuse_line(&mut output, err, -32600, &why).await?;
                }
                Some(Ok(Some(Line::NotUtf8))) => {
                    refuse_line(&mut output, err, -32700, "a line that is not UTF-8: not sent").await?;
                }
                // stdin closed (or cannot be read): the editor is done with us.
                Some(Ok(None)) | Some(Err(_)) | None => break,
            },
            frame = frames.recv() => match frame {
                Some(Ok(Incoming::Text(text))) => forward(&mut output, text).await?,
                // Channel frames are not ACP; an editor has no use for them.
                Some(Ok(Incoming::Binary(_))) => {}
                Some(Ok(Incoming::Close(close))) => return Err(ended(&url, close)),
                Some(Err(error)) => {
                    return Err(Failure::runtime(format!("the connection to {url} failed: {error}")))
                }
                Some(Ok(Incoming::Ping(_))) | None => return Err(ended(&url, None)),
            },
        }
    }
    // What the carrier sent before it read the close (the answers to requests it had handled)
    // still goes out, up to its close echo, for at most `CLOSE_WAIT`; a turn still running
    // ends with the connection.
    let close = CloseInfo {
        code: 1000,
        reason: String::new(),
    };
    let _ = to_socket.send(Outgoing::Close(close)).await;
    drop(to_socket);
    let drain = async {
        while let Some(Ok(Incoming::Text(text))) = frames.recv().await {
            forward(&mut output, text).await?;
        }
        Ok::<(), Failure>(())
    };
    if let Ok(Err(failure)) = tokio::time::timeout(CLOSE_WAIT, drain).await {
        return Err(failure);
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, writing).await;
    Ok(())
}

/// Writes what is queued for the socket, in order, until a close is written.
async fn write_socket(
    mut writer: Box<dyn SocketWriter>,
    mut queued: mpsc::Receiver<Outgoing>,
) -> Result<(), TransportError> {
    while let Some(message) = queued.recv().await {
        let closing = matches!(message, Outgoing::Close(_));
        writer.write(message).await?;
        if closing {
            break;
        }
    }
    Ok(())
}

/// One text frame as one stdout line. Carrier's frames are compact JSON; one that held a line
/// break (as JSON whitespace) is written compact, so it stays one line.
async fn forward(output: &mut (impl AsyncWrite + Unpin), text: Bytes) -> Result<(), Failure> {
    let line = if text.contains(&b'\n') || text.contains(&b'\r') {
        match serde_json::from_slice::<serde_json::Value>(&text) {
            Ok(value) => Bytes::from(value.to_string()),
            Err(_) => {
                tracing::warn!("a text frame with a line break that is not JSON: not forwarded");
                return Ok(());
            }
        }
    } else {
        text
    };
    let stdout_failed = |e: std::io::Error| Failure::runtime(format!("writing stdout: {e}"));
    output.write_all(&line).await.map_err(stdout_failed)?;
    output.write_all(b"\n").await.map_err(stdout_failed)?;
    output.flush().await.map_err(stdout_failed)
}

/// A stdin line that cannot be sent: said on stderr, and answered on stdout as JSON-RPC would
/// answer it (an error with a `null` id), so the editor is not left waiting for a reply.
async fn refuse_line(
    output: &mut (impl AsyncWrite + Unpin),
    err: &mut impl Write,
    code: i64,
    why: &str,
) -> Result<(), Failure> {
    let _ = writeln!(err, "carrier: {why}");
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": format!("carrier acp: {why}")},
    });
    forward(output, Bytes::from(error.to_string())).await
}

/// The line for a connection the carrier ended.
fn ended(url: &str, close: Option<CloseInfo>) -> Failure {
    match close {
        Some(close) if close.is_refusal() => Failure::runtime(format!(
            "{url} refused this client ({close}): check --token / CARRIER_TOKEN and --role"
        )),
        Some(close) => Failure::runtime(format!("{url} closed the connection ({close})")),
        None => Failure::runtime(format!("{url} closed the connection")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acp_url_is_the_carrier_s_own_with_acp() {
        assert_eq!(acp_url("ws://127.0.0.1:7070/"), "ws://127.0.0.1:7070/acp");
        assert_eq!(acp_url("ws://127.0.0.1:7070"), "ws://127.0.0.1:7070/acp");
        assert_eq!(
            acp_url("ws://127.0.0.1:7070/acp"),
            "ws://127.0.0.1:7070/acp"
        );
        assert_eq!(
            acp_url("ws://127.0.0.1:7070/acp/"),
            "ws://127.0.0.1:7070/acp"
        );
        assert_eq!(
            acp_url("ws://127.0.0.1:7070/?role=observe"),
            "ws://127.0.0.1:7070/acp?role=observe"
        );
        // The carrier's Unix socket (what a runtime file lists), `/` on it or another path.
        assert_eq!(acp_url("unix:/run/c/42.sock"), "unix:/run/c/42.sock:/acp");
        assert_eq!(acp_url("unix:/run/c/42.sock:/"), "unix:/run/c/42.sock:/acp");
        assert_eq!(
            acp_url("unix:/run/c/42.sock:/acp"),
            "unix:/run/c/42.sock:/acp"
        );
        assert_eq!(
            acp_url("unix:rel/c.sock?token=t"),
            "unix:rel/c.sock:/acp?token=t"
        );
    }
}
