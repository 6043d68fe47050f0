//! One run of an agent process: spawning it, the stdin writer, the stdout line reader (a
//! per-line cap and a bounded queue), stderr to the log, the task that owns the child and
//! reports its exit, and reading its lines until it is gone ([`ChildLink::read_until_exit`]).
//! Any line wire over a child's stdio uses this: the envelope of `--agent-cmd`, and ACP
//! (`carrier-acp`, `--agent-acp`).
//!
//! Ownership: the [`Child`](tokio::process::Child) lives in its owner task only. Killing is a
//! request to that task ([`ChildLink::kill`]): it closes stdin, gives the child
//! `stop_grace` to exit, then kills it and reaps it. The child is also spawned with
//! `kill_on_drop`, so a runtime torn down before the owner task runs still kills it.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch, Notify};

use super::config::AgentProcessConfig;
use super::lines::{Line, LineReader};

/// Lines queued for the child's stdin before a send fails (a child that stops reading).
const STDIN_QUEUE: usize = 256;

/// The longest stderr line logged whole.
const MAX_STDERR_LINE: usize = 16 * 1024;

/// After the child exits, how long its last stdout lines may still be read.
const EXIT_DRAIN: Duration = Duration::from_millis(500);

/// A running child as the rest of the carrier sees it: a line sender, a kill switch and its
/// exit. Dropping the link closes the child's stdin (its sign to exit).
pub struct ChildLink {
    /// Increases with each start, so a late report of an old child is told apart.
    pub(crate) generation: u64,
    pub(crate) pid: Option<u32>,
    stdin: mpsc::Sender<Bytes>,
    kill: Arc<Notify>,
    exited: watch::Receiver<Option<String>>,
}

/// The lines of a child's stdout, as [`ChildLink::spawn`] reads them: each at most the line
/// cap (a longer one is skipped as it streams by, and logged), at most the config's read-ahead
/// queued; closed at the child's end of output.
pub struct ChildLines(mpsc::Receiver<String>);

impl std::fmt::Debug for ChildLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildLink")
            .field("generation", &self.generation)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ChildLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildLines").finish_non_exhaustive()
    }
}

/// Why a line could not be queued for the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendLineError {
    /// The child has not read its stdin for 256 lines.
    #[error("the agent process is not reading its input")]
    Full,
    /// The child's stdin is closed (it exited).
    #[error("the agent process is not running")]
    Closed,
}

impl ChildLink {
    /// Starts `config`'s program as run `generation` (which tells a late report of an earlier
    /// run apart). Returns its link and its stdout lines.
    pub fn spawn(
        config: &AgentProcessConfig,
        generation: u64,
    ) -> std::io::Result<(ChildLink, ChildLines)> {
        spawn(config, generation)
    }

    /// The run this child is.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Its process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Queues one line (ending in `\n`) for the child's stdin. Never blocks.
    pub fn send_line(&self, line: Bytes) -> Result<(), SendLineError> {
        self.stdin.try_send(line).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SendLineError::Full,
            mpsc::error::TrySendError::Closed(_) => SendLineError::Closed,
        })
    }

    /// Asks the owner task to stop the child (close stdin, grace, kill, reap). Never blocks.
    pub fn kill(&self) {
        self.kill.notify_one();
    }

    /// Whether the child has not been seen to exit.
    pub fn is_running(&self) -> bool {
        self.exited.borrow().is_none()
    }

    /// A receiver of the exit description (`Some` once exited).
    pub(crate) fn exit_watch(&self) -> watch::Receiver<Option<String>> {
        self.exited.clone()
    }

    /// Waits until the child has exited and been reaped, at most `bound`.
    pub async fn wait_exit(&self, bound: Duration) {
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(bound, exited.wait_for(Option::is_some)).await;
    }

    /// How the child ended (its exit status), waiting briefly for it: for a child that is
    /// being killed or has closed its output.
    pub async fn exit_description(&self) -> String {
        self.wait_exit(Duration::from_secs(5)).await;
        self.exited
            .borrow()
            .clone()
            .unwrap_or_else(|| "it closed its output".into())
    }

    /// Hands each of the child's stdout lines to `on_line` until its output ends (or shortly
    /// after it exits: a grandchild may hold stdout open), then kills it if it still runs
    /// (a child that closed its output can no longer talk) and says how it ended.
    pub async fn read_until_exit(
        &self,
        lines: ChildLines,
        mut on_line: impl FnMut(&str),
    ) -> String {
        let ChildLines(mut lines) = lines;
        let mut exited = self.exit_watch();
        let drain = tokio::time::sleep(Duration::MAX);
        tokio::pin!(drain);
        let mut exit_seen = false;
        // Ends with the child's output, or the drain after its exit.
        loop {
            tokio::select! {
                line = lines.recv() => match line {
                    Some(line) => on_line(&line),
                    None => break,
                },
                changed = exited.changed(), if !exit_seen => {
                    exit_seen = true;
                    drain.as_mut().reset(tokio::time::Instant::now() + EXIT_DRAIN);
                    let _ = changed;
                }
                _ = &mut drain, if exit_seen => break,
            }
        }
        self.kill();
        self.exit_description().await
    }
}

/// Starts the child. Returns its link and the queue of its stdout lines (closed at EOF).
fn spawn(config: &AgentProcessConfig, generation: u64) -> std::io::Result<(ChildLink, ChildLines)> {
    let mut child = Command::new(config.program())
        .args(config.args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the agent process has no pipes"));
    };
    let (line_tx, line_rx) = mpsc::channel(config.line_queue.max(1));
    let (stdin_tx, stdin_rx) = mpsc::channel(STDIN_QUEUE);
    let (exit_tx, exit_rx) = watch::channel(None);
    let kill = Arc::new(Notify::new());
    let close_stdin = Arc::new(Notify::new());

    tokio::spawn(write_stdin(stdin, stdin_rx, close_stdin.clone()));
    tokio::spawn(read_stdout(stdout, line_tx, config.max_line_bytes, pid));
    tokio::spawn(log_stderr(stderr, pid));
    tokio::spawn(own_child(
        child,
        kill.clone(),
        close_stdin,
        config.stop_grace,
        exit_tx,
    ));
    tracing::info!(pid, program = %config.program(), generation, "agent process started");
    let link = ChildLink {
        generation,
        pid,
        stdin: stdin_tx,
        kill,
        exited: exit_rx,
    };
    Ok((link, ChildLines(line_rx)))
}

async fn write_stdin(mut stdin: ChildStdin, mut lines: mpsc::Receiver<Bytes>, close: Arc<Notify>) {
    // Ends when every sender is gone, on a close request, or on a write error (the child
    // closed its stdin or exited); dropping `stdin` then closes the pipe.
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            _ = close.notified() => None,
        };
        let Some(line) = line else { return };
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

async fn read_stdout(
    stdout: tokio::process::ChildStdout,
    lines: mpsc::Sender<String>,
    max: usize,
    pid: Option<u32>,
) {
    let mut reader = LineReader::new(BufReader::new(stdout), max);
    // One pass per line; ends at EOF, on a read error, or when nobody listens. `send` waits
    // while the queue is full, so a flooding child blocks on its own stdout.
    loop {
        match reader.next().await {
            Ok(Some(Line::Text(text))) => {
                if text.trim().is_empty() {
                    continue;
                }
                if lines.send(text).await.is_err() {
                    return;
                }
            }
            Ok(Some(Line::TooLong(n))) => {
                tracing::warn!(
                    pid,
                    bytes = n,
                    limit = max,
                    "agent process line over the limit dropped"
                );
            }
            Ok(Some(Line::NotUtf8)) => {
                tracing::warn!(pid, "agent process line that is not UTF-8 dropped");
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(pid, error = %e, "reading the agent process output failed");
                return;
            }
        }
    }
}

async fn log_stderr(stderr: tokio::process::ChildStderr, pid: Option<u32>) {
    let mut reader = LineReader::new(BufReader::new(stderr), MAX_STDERR_LINE);
    loop {
        match reader.next().await {
            Ok(Some(Line::Text(text))) => tracing::info!(pid, "agent: {text}"),
            Ok(Some(Line::TooLong(n))) => {
                tracing::info!(pid, bytes = n, "agent: (stderr line too long, dropped)")
            }
            Ok(Some(Line::NotUtf8)) => tracing::info!(pid, "agent: (stderr line not UTF-8)"),
            Ok(None) | Err(_) => return,
        }
    }
}

async fn own_child(
    mut child: Child,
    kill: Arc<Notify>,
    close_stdin: Arc<Notify>,
    grace: std::time::Duration,
    exited: watch::Sender<Option<String>>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = kill.notified() => {
            close_stdin.notify_one();
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            }
        }
    };
    let description = match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("waiting for it failed: {e}"),
    };
    exited.send_replace(Some(description));
}
