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
    let mut deltas = Vec::new();
    let mut start = 0;
    let mut prev_ws = true;
    for (i, c) in text.char_indices() {
        let ws = c.is_whitespace();
        if ws && !prev_ws && i > start && !text[i..].trim_start().is_empty() {
            deltas.push(&text[start..i]);
            start = i;
        }
        prev_ws = ws;
    }
    if start < text.len() {
        deltas.push(&text[start..]);
    }
    deltas
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
        let tool = turn.prompt.strip_prefix(TOOL_PREFIX).map(str::to_owned);
        let (permission_tx, permission_rx) = match tool {
            Some(_) => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            }
            None => (None, None),
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
        runtime.spawn(task.run(turn.prompt, tool, permission_rx, cancel_rx));
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
    async fn run(
        self,
        prompt: String,
        tool: Option<String>,
        permission: Option<oneshot::Receiver<Decision>>,
        mut cancel: oneshot::Receiver<()>,
    ) {
        let text = match (tool, permission) {
            (Some(rest), Some(permission)) => {
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
            _ => format!("echo: {prompt}"),
        };
        for (i, delta) in reply_deltas(&text).into_iter().enumerate() {
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
