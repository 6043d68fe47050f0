//! [`AcpSession`]: one carrier session as an ACP session of the hosted agent — the
//! [`ProtocolSession`] the carrier drives — and what each ACP message of it becomes:
//!
//! - a turn → `session/prompt` (the prompt as one text block; after `session/new` when the
//!   session has no ACP session in the running child yet), its answer's `stopReason` →
//!   `turn_completed` (`cancelled`: aborted; the reason kept as `stop_reason`);
//! - an abort → `session/cancel`; the agent's open permission requests are answered
//!   `cancelled` as the turn ends;
//! - `session/update`: a text `agent_message_chunk` → `text_delta`; any other update (or one
//!   outside a turn) → `agent_update`, byte for byte;
//! - `session/request_permission` → `permission_request` with the agent's `options`; the
//!   answer → the option named, or the `allow_once`/`reject_once` option for `allow`/`deny`.
//!
//! The prompt's answer is awaited while the agent shows it is working: each of its messages
//! about the session (and a permission prompt waiting for a person) restarts the request
//! timeout, so a long turn that streams is never cut, and a silent agent is after the timeout.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::watch;

use carrier_agent::process::{ChildLink, Outcome};
use carrier_agent::{
    HostError, PermissionChoice, ProtocolSession, SessionOutlet, TurnSink, TurnStart,
};
use carrier_protocol::events::{PermissionOption, PermissionOptionKind, RawObject};
use carrier_protocol::ids::TurnId;

use super::peer::{AgentPeer, PeerSession, SendError};
use super::wire::{self, ContentHead, UpdateHead};
use crate::rpc::{self, ErrorObject};

/// The longest tool call carried whole as a permission prompt's `input`; a longer one is
/// carried as its id, title and kind (the whole of it reaches clients as the tool call's own
/// `agent_update`). Bounds what an open prompt holds once parsed.
pub const MAX_PERMISSION_INPUT: usize = 16 * 1024;

/// The most options a permission request may offer.
pub const MAX_OPTIONS: usize = 16;

/// The longest `optionId` and `name` of an option carrier carries.
pub const MAX_OPTION_BYTES: usize = 256;

/// The peer of the hosted agent, serving [`AcpSession`]s.
pub(crate) type Peer = AgentPeer<AcpSession>;

pub(crate) struct AcpSession {
    peer: Weak<Peer>,
    /// The carrier session id.
    id: String,
    state: Mutex<SessionState>,
    /// Held by a turn from sending its prompt until the prompt is answered (or timed out), so
    /// the next turn's prompt follows the agent's answer to the last, as after a cancel.
    prompting: tokio::sync::Mutex<()>,
    /// Held while `session/new` runs for this session.
    creating: tokio::sync::Mutex<()>,
    /// Changes whenever the agent says something about this session.
    heard: watch::Sender<()>,
}

#[derive(Default)]
struct SessionState {
    /// The ACP session in the child's run `.0`.
    acp: Option<(u64, String)>,
    turn: Option<ActiveTurn>,
    outlet: Option<SessionOutlet>,
    /// The agent's permission requests awaiting a person: the prompt's timeout waits.
    asking: usize,
}

impl SessionState {
    /// The running turn's sink once its prompt went to the agent: until then what the agent
    /// says of the session is the end of the previous prompt (after a cancel), not this turn.
    fn prompted_sink(&self) -> Option<TurnSink> {
        self.turn
            .as_ref()
            .filter(|t| t.sent_to.is_some())
            .map(|t| t.sink.clone())
    }
}

struct ActiveTurn {
    turn_id: TurnId,
    sink: TurnSink,
    /// The child's run the prompt went to, once sent.
    sent_to: Option<u64>,
}

impl AcpSession {
    fn lock(&self) -> MutexGuard<'_, SessionState> {
        // Critical sections leave the state consistent; a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This session's ACP session in the running child, made with `session/new` when it has
    /// none there yet.
    pub(crate) async fn ensure_acp(
        self: &Arc<Self>,
        peer: &Arc<Peer>,
        link: &ChildLink,
    ) -> Result<String, (&'static str, String)> {
        let _one_at_a_time = self.creating.lock().await;
        if let Some((_, id)) = self
            .lock()
            .acp
            .clone()
            .filter(|(g, _)| *g == link.generation())
        {
            return Ok(id);
        }
        let (n, rx) = peer
            .request_new_session(link, self)
            .map_err(|e| ("agent_exited", e.to_string()))?;
        match peer.answer(n, rx).await {
            Outcome::Answered(answer) => match answer.result::<wire::NewSessionResult>() {
                Ok(created) => Ok(created.session_id),
                Err(e) if e.code == rpc::AUTH_REQUIRED => Err((
                    "agent_error",
                    format!("the ACP agent requires authentication: {}", e.message),
                )),
                Err(e) => Err((
                    "agent_error",
                    format!("the ACP agent refused session/new: {e}"),
                )),
            },
            Outcome::Gone => Err((
                "agent_exited",
                "the ACP agent exited before it made the session".into(),
            )),
            Outcome::TimedOut => Err((
                "agent_timeout",
                format!(
                    "the ACP agent did not answer session/new within {} ms",
                    peer.timeout_ms()
                ),
            )),
        }
    }

    fn is_current(&self, turn_id: &TurnId) -> bool {
        self.lock()
            .turn
            .as_ref()
            .is_some_and(|t| t.turn_id == *turn_id)
    }

    /// Forgets the running turn if it is `turn_id`; returns its sink.
    fn take_turn(&self, turn_id: &TurnId) -> Option<TurnSink> {
        let mut st = self.lock();
        st.turn.take_if(|t| t.turn_id == *turn_id).map(|t| t.sink)
    }

    /// Runs one turn: the prompt to the agent, then its answer.
    async fn run_turn(self: Arc<Self>, turn_id: TurnId, prompt: String) {
        let Some(peer) = self.peer.upgrade() else {
            return;
        };
        // The last prompt is answered (or given up on) before this one goes.
        let _prompting = self.prompting.lock().await;
        let fail = |code: &str, message: &str| {
            if let Some(sink) = self.take_turn(&turn_id) {
                let _ = sink.fail(code, message);
            }
        };
        if !self.is_current(&turn_id) {
            return;
        }
        let link = match peer.ensure_running().await {
            Ok(link) => link,
            Err(message) => return fail("agent_exited", &message),
        };
        let acp_id = match self.ensure_acp(&peer, &link).await {
            Ok(id) => id,
            Err((code, message)) => return fail(code, &message),
        };
        let sent = {
            let mut st = self.lock();
            let Some(turn) = st.turn.as_mut().filter(|t| t.turn_id == turn_id) else {
                // Aborted meanwhile: the agent never hears of it.
                return;
            };
            let sent = peer.request(
                &link,
                "session/prompt",
                &wire::Prompt::text(&acp_id, &prompt),
            );
            if sent.is_ok() {
                turn.sent_to = Some(link.generation());
            }
            sent
        };
        let (n, rx) = match sent {
            Ok(sent) => sent,
            Err(SendError::Closed) => {
                return fail(
                    "agent_exited",
                    "the ACP agent exited as the prompt was sent",
                )
            }
            Err(e) => return fail("agent_timeout", &e.to_string()),
        };
        drop(prompt);
        match self.await_prompt(&peer, rx).await {
            Outcome::Answered(answer) => {
                let Some(sink) = self.take_turn(&turn_id) else {
                    return;
                };
                match answer.result::<wire::PromptResult>() {
                    Ok(done) => {
                        let aborted = done.stop_reason == "cancelled";
                        let _ = sink.finish_streamed(&done.stop_reason, aborted);
                    }
                    Err(e) => {
                        let _ = sink.fail(
                            "agent_error",
                            &format!("the ACP agent answered session/prompt with an error: {e}"),
                        );
                    }
                }
            }
            // The exit ended the turn (`child_exited`).
            Outcome::Gone => {}
            Outcome::TimedOut => {
                peer.forget(n);
                if let Some(sink) = self.take_turn(&turn_id) {
                    let message = format!(
                        "the ACP agent said nothing of session/prompt for {} ms",
                        peer.timeout_ms()
                    );
                    let _ = sink.fail("agent_timeout", &message);
                    if link.is_running() {
                        peer.notify(
                            &link,
                            "session/cancel",
                            &wire::Cancel {
                                session_id: &acp_id,
                            },
                        );
                    }
                }
            }
        }
    }

    /// Waits for the prompt's answer while the agent keeps showing it works: the timeout
    /// restarts with each of its messages about the session, and waits while a permission
    /// prompt waits for a person.
    async fn await_prompt(
        &self,
        peer: &Peer,
        mut rx: tokio::sync::oneshot::Receiver<rpc::Response>,
    ) -> Outcome<rpc::Response> {
        let mut heard = self.heard.subscribe();
        loop {
            tokio::select! {
                answer = &mut rx => {
                    return match answer {
                        Ok(answer) => Outcome::Answered(answer),
                        Err(_) => Outcome::Gone,
                    };
                }
                changed = heard.changed() => {
                    if changed.is_err() {
                        return Outcome::Gone;
                    }
                }
                () = tokio::time::sleep(peer.timeout()) => {
                    if self.lock().asking == 0 {
                        return Outcome::TimedOut;
                    }
                }
            }
        }
    }
}

impl ProtocolSession for AcpSession {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(HostError::new("the ACP agent needs a tokio runtime"));
        }
        let peer = self
            .peer
            .upgrade()
            .ok_or_else(|| HostError::new("the ACP agent was stopped"))?;
        let TurnStart {
            turn_id,
            prompt,
            sink,
            ..
        } = turn;
        let turn_id = TurnId::from(turn_id);
        self.lock().turn = Some(ActiveTurn {
            turn_id: turn_id.clone(),
            sink,
            sent_to: None,
        });
        let me = peer.session(&self.id);
        tokio::spawn(me.run_turn(turn_id, prompt));
        Ok(())
    }

    fn abort_turn(&self, turn_id: &str) {
        let turn_id = TurnId::from(turn_id);
        let (turn, acp) = {
            let mut st = self.lock();
            let turn = st.turn.take_if(|t| t.turn_id == turn_id);
            (turn, st.acp.clone())
        };
        let (Some(turn), Some(peer)) = (turn, self.peer.upgrade()) else {
            return;
        };
        let (Some(sent_to), Some(link), Some((generation, acp_id))) =
            (turn.sent_to, peer.running(), acp)
        else {
            return;
        };
        // Only the child that has the prompt hears of its cancel.
        if sent_to == link.generation() && generation == sent_to {
            peer.notify(
                &link,
                "session/cancel",
                &wire::Cancel {
                    session_id: &acp_id,
                },
            );
        }
    }

    fn attached(&self, outlet: SessionOutlet) {
        self.lock().outlet = Some(outlet);
    }

    fn shutdown(&self) {
        if let Some(peer) = self.peer.upgrade() {
            peer.kill_current();
        }
    }
}

/// The tool call as a prompt's tool name and input: its title (else its id), and the whole
/// call when it is short enough, else its id, title and kind.
fn tool_call(raw: &RawValue) -> (String, Value) {
    let head: wire::ToolCallHead = serde_json::from_str(raw.get()).unwrap_or_default();
    let tool = head
        .title
        .clone()
        .or_else(|| head.tool_call_id.clone())
        .unwrap_or_else(|| "tool".into());
    let input = if raw.get().len() <= MAX_PERMISSION_INPUT {
        serde_json::from_str(raw.get()).unwrap_or(Value::Null)
    } else {
        serde_json::json!({
            "toolCallId": head.tool_call_id,
            "title": head.title,
            "kind": head.kind,
        })
    };
    (tool, input)
}

/// The option a client's answer picks: the one it named, else for `allow` the agent's
/// `allow_once` option (or `allow_always` when it offers no other), for `deny` its
/// `reject_once` (or `reject_always`); `None` when the agent offers no option of that kind.
fn chosen_option(options: &[PermissionOption], choice: &PermissionChoice) -> Option<String> {
    if let Some(named) = &choice.option_id {
        return Some(named.clone());
    }
    let (first, then) = match choice.decision {
        carrier_agent::Decision::Allow => (
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ),
        carrier_agent::Decision::Deny => (
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ),
    };
    [first, then].iter().find_map(|kind| {
        options
            .iter()
            .find(|o| o.kind == *kind)
            .map(|o| o.option_id.clone())
    })
}

/// What the peer hands a session ([`PeerSession`]).
impl PeerSession for AcpSession {
    fn new(peer: Weak<Peer>, id: &str) -> Arc<Self> {
        Arc::new(AcpSession {
            peer,
            id: id.to_owned(),
            state: Mutex::new(SessionState::default()),
            prompting: tokio::sync::Mutex::new(()),
            creating: tokio::sync::Mutex::new(()),
            heard: watch::Sender::new(()),
        })
    }

    /// Records the ACP session `id` the child's run `generation` made for this session.
    fn adopt(&self, generation: u64, id: &str) {
        self.lock().acp = Some((generation, id.to_owned()));
    }

    /// The child's run `generation` exited: a turn whose prompt it had ends `agent_exited`.
    fn child_exited(&self, generation: u64, message: &str) {
        let ended = {
            let mut st = self.lock();
            st.turn
                .take_if(|t| t.sent_to == Some(generation))
                .map(|t| t.sink)
        };
        if let Some(sink) = ended {
            let _ = sink.fail("agent_exited", message);
        }
    }

    /// A `session/update` of this session: text chunks of a turn as deltas, everything else
    /// (and anything outside a turn) as an agent update, byte for byte.
    fn on_update(&self, update: Box<RawValue>) {
        self.heard.send_replace(());
        let Some(update) = RawObject::new(update) else {
            tracing::warn!(session = %self.id, "ACP agent update that is not an object dropped");
            return;
        };
        let head = match serde_json::from_str::<UpdateHead>(update.get()) {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(session = %self.id, error = %e, "ACP agent update without sessionUpdate dropped");
                return;
            }
        };
        let (sink, outlet) = {
            let st = self.lock();
            (st.prompted_sink(), st.outlet.clone())
        };
        match (sink, head) {
            (
                Some(sink),
                UpdateHead {
                    session_update,
                    content:
                        Some(ContentHead {
                            kind,
                            text: Some(text),
                        }),
                },
            ) if session_update == "agent_message_chunk" && kind == "text" => {
                let _ = sink.delta(&text);
            }
            (Some(sink), _) => {
                let _ = sink.agent_update(update);
            }
            (None, _) => match outlet {
                Some(outlet) => {
                    outlet.agent_update(update);
                }
                None => {
                    tracing::debug!(session = %self.id, "ACP agent update before the session opened dropped")
                }
            },
        }
    }

    /// The agent's `session/request_permission`: asked as the session's running turn's prompt,
    /// answered when a client answers (or `cancelled` when the turn ends first).
    fn on_permission_request(peer: &Arc<Peer>, link: &Arc<ChildLink>, request: rpc::Request) {
        let id = request.id.clone();
        let cancelled = |peer: &Peer| {
            let outcome = wire::PermissionOutcome {
                outcome: wire::Outcome::Cancelled,
            };
            peer.respond(link, &id, &outcome);
        };
        let params: wire::RequestPermission = match request.params() {
            Ok(params) => params,
            Err(error) => return peer.refuse_request(link, &id, &error),
        };
        if params.options.len() > MAX_OPTIONS {
            let error = ErrorObject::invalid_params(format!(
                "{} options; carrier takes at most {MAX_OPTIONS}",
                params.options.len()
            ));
            return peer.refuse_request(link, &id, &error);
        }
        let Some(session) = peer.routed(link.generation(), &params.session_id) else {
            return cancelled(peer);
        };
        session.heard.send_replace(());
        let Some(sink) = session.lock().prompted_sink() else {
            // No turn of carrier's to ask in (the agent asks outside a prompt, or late).
            return cancelled(peer);
        };
        if !peer.open_permission() {
            let error = ErrorObject::internal(format!(
                "{} permission requests already await an answer",
                super::peer::MAX_OPEN_PERMISSIONS
            ));
            return peer.refuse_request(link, &id, &error);
        }
        // An option of a kind ACP v1 does not define, or with an id or name longer than
        // MAX_OPTION_BYTES, is left out (and logged): what an open prompt holds stays small.
        let options: Vec<PermissionOption> = params
            .options
            .iter()
            .filter_map(|raw| {
                let option = serde_json::from_str::<PermissionOption>(raw.get()).ok();
                let kept = option.filter(|o| {
                    o.option_id.len() <= MAX_OPTION_BYTES && o.name.len() <= MAX_OPTION_BYTES
                });
                if kept.is_none() {
                    tracing::warn!(option = %carrier_protocol::envelope::truncate(raw.get(), 200), "ACP agent's permission option left out");
                }
                kept
            })
            .collect();
        let (tool, input) = tool_call(&params.tool_call);
        let pending = sink.ask_permission_offering(None, &tool, input, options.clone());
        session.lock().asking += 1;
        let (peer, link) = (peer.clone(), link.clone());
        tokio::spawn(async move {
            let choice = pending.choice().await;
            {
                let mut st = session.lock();
                st.asking = st.asking.saturating_sub(1);
            }
            session.heard.send_replace(());
            let chosen = choice.ok().and_then(|c| chosen_option(&options, &c));
            let outcome = wire::PermissionOutcome {
                outcome: match &chosen {
                    Some(option_id) => wire::Outcome::Selected { option_id },
                    None => wire::Outcome::Cancelled,
                },
            };
            peer.respond(&link, &id, &outcome);
            peer.close_permission();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier_agent::Decision;
    use serde_json::json;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::from_str(&value.to_string()).unwrap()
    }

    /// A tool call whose JSON is exactly `len` bytes.
    fn call_of_len(len: usize) -> Value {
        let skeleton =
            json!({"toolCallId": "c1", "title": "Write", "kind": "edit", "rawInput": ""});
        let pad = len - skeleton.to_string().len();
        json!({"toolCallId": "c1", "title": "Write", "kind": "edit", "rawInput": "x".repeat(pad)})
    }

    #[test]
    fn a_tool_call_up_to_the_limit_is_carried_whole_and_one_past_it_by_its_head() {
        let at = call_of_len(MAX_PERMISSION_INPUT);
        assert_eq!(at.to_string().len(), MAX_PERMISSION_INPUT);
        assert_eq!(tool_call(&raw(&at)), ("Write".to_owned(), at.clone()));
        let past = call_of_len(MAX_PERMISSION_INPUT + 1);
        assert_eq!(
            tool_call(&raw(&past)),
            (
                "Write".to_owned(),
                json!({"toolCallId": "c1", "title": "Write", "kind": "edit"})
            )
        );
        // No title: the id names the tool; nothing: "tool".
        assert_eq!(tool_call(&raw(&json!({"toolCallId": "c9"}))).0, "c9");
        assert_eq!(tool_call(&raw(&json!({}))).0, "tool");
    }

    #[test]
    fn a_decision_picks_the_once_option_then_the_always_one() {
        let options: Vec<PermissionOption> = serde_json::from_value(json!([
            {"optionId": "always", "name": "A", "kind": "allow_always"},
            {"optionId": "once", "name": "O", "kind": "allow_once"},
            {"optionId": "never", "name": "N", "kind": "reject_always"},
        ]))
        .unwrap();
        let decide = |decision| PermissionChoice {
            decision,
            option_id: None,
        };
        assert_eq!(
            chosen_option(&options, &decide(Decision::Allow)).as_deref(),
            Some("once")
        );
        assert_eq!(
            chosen_option(&options, &decide(Decision::Deny)).as_deref(),
            Some("never")
        );
        assert_eq!(chosen_option(&options[..1], &decide(Decision::Deny)), None);
        let named = PermissionChoice {
            decision: Decision::Allow,
            option_id: Some("always".into()),
        };
        assert_eq!(chosen_option(&options, &named).as_deref(), Some("always"));
    }
}
