//! A complete agent for `carrier serve --agent-cmd`, with no model: it answers each prompt
//! with its words in reverse order, streamed one word at a time. Copy it and put your model
//! where `reply_to` is.
//!
//! ```sh
//! cargo build --example reverse_agent
//! carrier serve --agent-cmd "target/debug/examples/reverse_agent --delay-ms 50"
//! carrier send ws://127.0.0.1:7070/ --token <token> "one two three"   # three two one
//! ```
//!
//! The wire: one JSON frame per line. The carrier writes requests to our stdin; we answer each
//! by its `id` on stdout and stream `session.*` events (without `seq`: the carrier numbers
//! them). Anything we print to stderr lands in the carrier's log. We exit when stdin closes.
//!
//! - `system.handshake` → our protocol versions and name;
//! - `session.submit {prompt, turn_id, driver}` → `{}` at once, then `session.text_delta`s and
//!   a `session.turn_completed`. A prompt `/tool CMD` first asks permission with
//!   `session.permission_request` and waits for `session.permission.respond`;
//! - `session.abort {turn_id}` → stop that turn (the carrier already told the clients);
//! - anything else (`session.history`, `session.status`) → `method_not_found`: the carrier
//!   then answers from its own record.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The turn being worked on: its task (aborted on `session.abort`) and, while it waits for a
/// permission answer, where to send it.
struct Turn {
    id: String,
    task: JoinHandle<()>,
    decision: Option<oneshot::Sender<String>>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let delay = delay_from_args();
    let mut turn: Option<Turn> = None;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    // Until the carrier closes our stdin (it stopped, or it is gone).
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(frame) = serde_json::from_str::<Value>(&line) else {
            eprintln!("reverse_agent: ignoring a line that is not JSON");
            continue;
        };
        let (Some(id), Some(method)) = (frame["id"].as_str(), frame["method"].as_str()) else {
            continue; // The carrier sends us only requests.
        };
        let params = &frame["params"];
        match method {
            "system.handshake" => answer(
                id,
                json!({
                    "protocol_version": "1.0",
                    "min_compatible_protocol": "1.0",
                    "server": {"name": "reverse-agent", "version": env!("CARGO_PKG_VERSION")},
                }),
            ),
            "session.submit" => {
                if turn.as_ref().is_some_and(|t| !t.task.is_finished()) {
                    fail(id, "busy", "a turn is already running");
                    continue;
                }
                let turn_id = params["turn_id"].as_str().unwrap_or_default().to_owned();
                let prompt = params["prompt"].as_str().unwrap_or_default().to_owned();
                let (decision_tx, decision_rx) = oneshot::channel();
                answer(id, json!({}));
                turn = Some(Turn {
                    id: turn_id.clone(),
                    task: tokio::spawn(run_turn(turn_id, prompt, delay, decision_rx)),
                    decision: Some(decision_tx),
                });
            }
            "session.abort" => match turn.take() {
                Some(t) if params["turn_id"] == t.id.as_str() => {
                    t.task.abort();
                    answer(id, json!({}));
                }
                other => {
                    turn = other;
                    fail(id, "not_found", "no such turn");
                }
            },
            "session.permission.respond" => {
                let decision = params["decision"].as_str().unwrap_or("deny").to_owned();
                match turn.as_mut().and_then(|t| t.decision.take()) {
                    Some(tx) => {
                        let _ = tx.send(decision);
                        answer(id, json!({}));
                    }
                    None => fail(id, "not_found", "no permission request is waiting"),
                }
            }
            _ => fail(id, "method_not_found", "not implemented by reverse_agent"),
        }
    }
}

/// One turn: maybe a permission prompt, then the reply word by word, then `turn_completed`.
async fn run_turn(
    turn_id: String,
    prompt: String,
    delay: Duration,
    decision: oneshot::Receiver<String>,
) {
    let text = match prompt.strip_prefix("/tool ") {
        Some(command) => {
            let request_id = format!("{turn_id}.p1");
            let input = json!({ "command": command });
            emit(
                "session.permission_request",
                json!({"turn_id": turn_id, "request_id": request_id, "tool": "reverse.tool", "input": input}),
            );
            match decision.await.as_deref() {
                Ok("allow") => format!("tool ran: {}", reply_to(command)),
                _ => "tool denied".to_owned(),
            }
        }
        None => reply_to(&prompt),
    };
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            tokio::time::sleep(delay).await;
        }
        let delta = if i == 0 {
            word.to_owned()
        } else {
            format!(" {word}")
        };
        emit(
            "session.text_delta",
            json!({"turn_id": turn_id, "delta": delta}),
        );
    }
    emit(
        "session.turn_completed",
        json!({"turn_id": turn_id, "text": text, "aborted": false}),
    );
}

/// The "model": the prompt's words in reverse order.
fn reply_to(prompt: &str) -> String {
    prompt
        .split_whitespace()
        .rev()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints one frame as one line. Rust's stdout flushes at each newline.
fn send(frame: Value) {
    println!("{frame}");
}

fn answer(id: &str, result: Value) {
    send(json!({"id": id, "result": result}));
}

fn fail(id: &str, code: &str, message: &str) {
    send(json!({"id": id, "error": {"code": code, "message": message}}));
}

fn emit(event: &str, payload: Value) {
    send(json!({"event": event, "payload": payload}));
}

/// `--delay-ms N` between words (default 20).
fn delay_from_args() -> Duration {
    let args: Vec<String> = std::env::args().collect();
    let ms = args
        .iter()
        .position(|a| a == "--delay-ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    Duration::from_millis(ms)
}
