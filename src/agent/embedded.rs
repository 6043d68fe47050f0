//! The embedded default agent (SPEC section 5): deterministic, so any client can test against
//! it.
//!
//! - `session.submit {prompt}` streams `"echo: " + prompt`, one delta per whitespace-separated
//!   word, each whitespace run kept with the word that follows it (trailing whitespace stays
//!   with the last word), with the demo delay between deltas; then `turn_completed` with the
//!   full text.
//! - A prompt starting with `/tool ` first asks permission for tool `"demo.tool"` with input
//!   `{"command": REST}` and waits; `allow` streams `"tool ran: " + REST`, `deny` streams
//!   `"tool denied"`.
//!
//! ```
//! use carrier::agent::embedded::reply_deltas;
//!
//! assert_eq!(reply_deltas("echo: hello  big world"), ["echo:", " hello", "  big", " world"]);
//! assert_eq!(reply_deltas("echo: ").concat(), "echo: ");
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::session::{HostError, ProtocolSession, TurnStart};
use super::turn::TurnSink;
use crate::protocol::methods::Decision;

/// The embedded agent's settings; [`AgentProfile::embedded`](super::AgentProfile::embedded)
/// gives each session its own [`EmbeddedSession`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedAgent {
    demo_delay: Duration,
}

impl Default for EmbeddedAgent {
    /// 10 ms between deltas (`--demo-delay-ms` default).
    fn default() -> Self {
        EmbeddedAgent {
            demo_delay: Duration::from_millis(10),
        }
    }
}

impl EmbeddedAgent {
    /// Sets the pause between deltas (`--demo-delay-ms`).
    pub fn with_demo_delay(mut self, delay: Duration) -> Self {
        self.demo_delay = delay;
        self
    }

    /// The pause between deltas.
    pub fn demo_delay(&self) -> Duration {
        self.demo_delay
    }

    /// A fresh session of this agent.
    pub fn session(&self) -> Arc<dyn ProtocolSession> {
        Arc::new(EmbeddedSession {
            delay: self.demo_delay,
            turns: Arc::new(Mutex::new(HashMap::new())),
        })
    }
}

/// The prompt prefix that asks for a permission first.
pub const TOOL_PREFIX: &str = "/tool ";

/// The tool name of the permission request.
pub const DEMO_TOOL: &str = "demo.tool";

/// Splits a reply into the embedded agent's deltas: a new delta starts where whitespace follows
/// a non-whitespace character and more non-whitespace comes later. The deltas concatenate to
/// `text` exactly.
pub fn reply_deltas(text: &str) -> Vec<&str> {
    Deltas::new(text).collect()
}

/// [`reply_deltas`] one at a time: a running turn holds its reply, not a list of every word
/// in it (a 1 MiB reply of one-letter words is half a million of them).
struct Deltas<'a> {
    text: &'a str,
    /// Where the next delta starts.
    start: usize,
    /// The next character to look at.
    next: usize,
    prev_ws: bool,
}

impl<'a> Deltas<'a> {
    fn new(text: &'a str) -> Self {
        Deltas {
            text,
            start: 0,
            next: 0,
            prev_ws: true,
        }
    }
}

impl<'a> Iterator for Deltas<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let text = self.text;
        for (offset, c) in text[self.next..].char_indices() {
            let i = self.next + offset;
            let ws = c.is_whitespace();
            let boundary =
                ws && !self.prev_ws && i > self.start && !text[i..].trim_start().is_empty();
            self.prev_ws = ws;
            if boundary {
                let delta = &text[self.start..i];
                self.start = i;
                self.next = i + c.len_utf8();
                return Some(delta);
            }
        }
        self.next = text.len();
        (self.start < text.len()).then(|| {
            let delta = &text[self.start..];
            self.start = text.len();
            delta
        })
    }
}

/// What a turn of the embedded agent does: only what it needs of the prompt is kept while it
/// runs.
enum Work {
    /// Streams `"echo: " + prompt`.
    Echo(String),
    /// Asks for `demo.tool` with `rest` (the prompt after [`TOOL_PREFIX`]), then streams the
    /// answer's outcome.
    Tool {
        rest: String,
        permission: oneshot::Receiver<Decision>,
    },
}

/// What `abort_turn` and `permission_decided` reach: dropping an entry cancels its turn.
struct TurnControl {
    /// Dropped on abort: the turn's task sees its receiver close.
    _cancel: oneshot::Sender<()>,
    permission: Option<oneshot::Sender<Decision>>,
}

type Turns = Arc<Mutex<HashMap<String, TurnControl>>>;

/// One session of the embedded agent.
pub struct EmbeddedSession {
    delay: Duration,
    turns: Turns,
}

fn lock(turns: &Turns) -> std::sync::MutexGuard<'_, HashMap<String, TurnControl>> {
    turns.lock().unwrap_or_else(|e| e.into_inner())
}

impl ProtocolSession for EmbeddedSession {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| HostError::new("the embedded agent needs a tokio runtime"))?;
        let (cancel_tx, cancel_rx) = oneshot::channel();
        let (work, permission_tx) = match turn.prompt.strip_prefix(TOOL_PREFIX) {
            Some(rest) => {
                let (tx, rx) = oneshot::channel();
                let work = Work::Tool {
                    rest: rest.to_owned(),
                    permission: rx,
                };
                (work, Some(tx))
            }
            None => (Work::Echo(turn.prompt), None),
        };
        // Registered before the task runs, so an abort or an answer can never arrive first.
        lock(&self.turns).insert(
            turn.turn_id.clone(),
            TurnControl {
                _cancel: cancel_tx,
                permission: permission_tx,
            },
        );
        let task = TurnTask {
            delay: self.delay,
            turns: self.turns.clone(),
            sink: turn.sink,
            turn_id: turn.turn_id,
        };
        runtime.spawn(task.run(work, cancel_rx));
        Ok(())
    }

    fn abort_turn(&self, turn_id: &str) {
        lock(&self.turns).remove(turn_id);
    }

    fn permission_decided(&self, turn_id: &str, _request_id: &str, decision: Decision) {
        let sender = lock(&self.turns)
            .get_mut(turn_id)
            .and_then(|t| t.permission.take());
        if let Some(sender) = sender {
            let _ = sender.send(decision);
        }
    }

    fn shutdown(&self) {
        lock(&self.turns).clear();
    }
}

struct TurnTask {
    delay: Duration,
    turns: Turns,
    sink: TurnSink,
    turn_id: String,
}

impl TurnTask {
    async fn run(self, work: Work, mut cancel: oneshot::Receiver<()>) {
        let text = match work {
            Work::Tool { rest, permission } => {
                let request_id = format!("{}.p1", self.turn_id);
                let input = serde_json::json!({ "command": rest });
                if self
                    .sink
                    .permission_request(&request_id, DEMO_TOOL, input)
                    .is_err()
                {
                    return self.forget();
                }
                let decision = tokio::select! {
                    d = permission => d,
                    _ = &mut cancel => return self.forget(),
                };
                match decision {
                    Ok(Decision::Allow) => format!("tool ran: {rest}"),
                    Ok(Decision::Deny) => "tool denied".to_owned(),
                    Err(_) => return self.forget(),
                }
            }
            // The prompt goes as the reply is made: one copy of it while the turn runs.
            Work::Echo(prompt) => format!("echo: {prompt}"),
        };
        for (i, delta) in Deltas::new(&text).enumerate() {
            if i > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(self.delay) => {}
                    _ = &mut cancel => return self.forget(),
                }
            }
            if self.sink.delta(delta).is_err() {
                return self.forget();
            }
        }
        let _ = self.sink.complete(&text);
        self.forget();
    }

    fn forget(&self) {
        lock(&self.turns).remove(&self.turn_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_concatenate_exactly() {
        for text in [
            "echo: ",
            "echo: hi",
            "echo:   leading",
            "echo: trailing  ",
            "echo: tabs\tand\nnewlines",
            "echo: ünïcödé  wörds",
            "tool denied",
        ] {
            let deltas = reply_deltas(text);
            assert_eq!(deltas.concat(), text);
            assert_eq!(deltas.len(), text.split_whitespace().count(), "{text:?}");
        }
        assert_eq!(reply_deltas("echo: a b"), ["echo:", " a", " b"]);
        assert_eq!(reply_deltas("echo: a  "), ["echo:", " a  "]);
        assert!(reply_deltas("").is_empty());
    }
}
