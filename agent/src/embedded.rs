//! The embedded default agent: deterministic, so any client can test against
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
//! A reply is streamed one word per delta, each word with the whitespace before it (trailing
//! whitespace stays with the last word): `"echo: hello  big world"` arrives as `"echo:"`,
//! `" hello"`, `"  big"`, `" world"`.

use std::sync::Arc;
use std::time::Duration;

use super::session::{HostError, ProtocolSession, TurnStart};
use super::turn_sink::{TurnEnded, TurnSink};
use carrier_protocol::methods::Decision;

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
#[cfg(test)]
fn reply_deltas(text: &str) -> Vec<&str> {
    Deltas::new(text).collect()
}

/// The reply split into deltas (see the module docs) one at a time: a running turn holds its reply, not a list of every word
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

/// One session of the embedded agent. Each turn is one task that ends with the turn: it
/// awaits its permission answer and its cancellation on the turn's sink, so the session keeps
/// no state of its own.
pub struct EmbeddedSession {
    delay: Duration,
}

impl ProtocolSession for EmbeddedSession {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| HostError::new("the embedded agent needs a tokio runtime"))?;
        let (delay, sink, prompt) = (self.delay, turn.sink, turn.prompt);
        runtime.spawn(async move {
            tokio::select! {
                _ = run_turn(delay, &sink, prompt) => {}
                () = sink.cancelled() => {}
            }
        });
        Ok(())
    }
}

/// One turn: the reply (after the permission answer, for a [`TOOL_PREFIX`] prompt), streamed
/// a word at a time with `delay` between words.
async fn run_turn(delay: Duration, sink: &TurnSink, prompt: String) -> Result<(), TurnEnded> {
    let text = match prompt.strip_prefix(TOOL_PREFIX) {
        Some(rest) => {
            let input = serde_json::json!({ "command": rest });
            match sink.ask_permission(DEMO_TOOL, input).await? {
                Decision::Allow => format!("tool ran: {rest}"),
                Decision::Deny => "tool denied".to_owned(),
            }
        }
        // The prompt becomes the reply: one copy of it while the turn runs.
        None => {
            let mut text = prompt;
            text.insert_str(0, "echo: ");
            text
        }
    };
    for (i, delta) in Deltas::new(&text).enumerate() {
        if i > 0 {
            tokio::time::sleep(delay).await;
        }
        sink.delta(delta)?;
    }
    sink.complete(&text)
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
