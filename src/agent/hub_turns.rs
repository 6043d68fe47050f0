//! The turn state machine of a [`SessionHub`]: submit, abort and permission answers from
//! clients, and the agent's output through its [`super::TurnSink`].
//!
//! The carrier owns the turn: it picks the `turn_id`, answers `busy` and `not_found`, emits
//! `turn_started`, `permission_resolved` and (on abort) `turn_completed` itself, and refuses
//! output of a turn that is no longer running. Replies to the requester are queued before the
//! events they cause, under the hub's lock. The agent and the usage reporter are host code and
//! are always called after the lock is released.

use std::sync::Arc;

use serde_json::Value;

use super::hub::{HubState, RunningTurn, SessionHub};
use super::reply::{not_found, Reply};
use super::reply_text::{cut, pieces, ReplyText};
use super::session::TurnStart;
use super::turn::{TurnEnded, TurnSink};
use super::usage::TurnRecord;
use crate::protocol::catalog::def;
use crate::protocol::error::{EffectState, ErrorCode, ErrorObject};
use crate::protocol::events::*;
use crate::protocol::methods::{
    Empty, HistoryEntry, HistoryRole, PermissionRespondParams, SubmitParams, TurnIdResult,
};

/// The reply an agent ends its turn with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completion<'a> {
    /// The whole reply, as the agent has it (the carrier cuts it to the cap).
    pub(crate) text: &'a str,
    /// The agent already cut it.
    pub(crate) truncated: bool,
}

/// A turn that has just ended, for the usage reporter.
struct Ended {
    turn_id: String,
    prompt: String,
    reply: String,
    aborted: bool,
}

impl SessionHub {
    /// `session.submit`: `busy` while a turn runs; otherwise reply `{turn_id}`, emit
    /// `turn_started` with the host's driver identity, and start the agent. The carrier keeps
    /// at most `max_reply_bytes` of the turn's reply.
    pub(crate) fn submit(
        self: &Arc<Self>,
        reply: &Reply<def::SessionSubmit>,
        params: SubmitParams,
        driver: DriverInfo,
        max_reply_bytes: usize,
    ) {
        let turn_id = {
            let mut st = self.lock();
            if let Some(running) = &st.turn {
                reply.err(
                    ErrorObject::new(
                        ErrorCode::Busy,
                        format!("turn {} is still running", running.id),
                    )
                    .effect(EffectState::None)
                    .with_data(serde_json::json!({ "turn_id": running.id })),
                );
                return;
            }
            st.next_turn += 1;
            let turn_id = format!("t{}", st.next_turn);
            st.history.push(HistoryEntry {
                role: HistoryRole::User,
                text: params.prompt.clone(),
                turn_id: turn_id.clone(),
                truncated: None,
            });
            st.turn = Some(RunningTurn {
                id: turn_id.clone(),
                prompt: params.prompt.clone(),
                reply: ReplyText::new(max_reply_bytes),
                pending: Vec::new(),
            });
            reply.ok(&TurnIdResult {
                turn_id: turn_id.clone(),
            });
            let started = TurnStarted {
                turn_id: turn_id.clone(),
                driver: driver.clone(),
                prompt: params.prompt.clone(),
            };
            self.emit(&mut st, SessionEvent::TurnStarted(started));
            turn_id
        };
        let start = TurnStart {
            turn_id: turn_id.clone(),
            prompt: params.prompt,
            options: params.options,
            driver,
            sink: TurnSink::new(self, &turn_id),
        };
        if let Err(e) = self.agent.start_turn(start) {
            tracing::warn!(session = %self.id(), turn = %turn_id, error = %e, "agent refused the turn");
            let _ = self.turn_error(&turn_id, "internal", &e.message);
            let _ = self.turn_finish(&turn_id, None, true);
        }
    }

    /// `session.abort`: ends the running turn (`not_found` when none runs or `turn_id` names
    /// another), replies `{turn_id}`, emits the aborted `turn_completed`, then tells the agent.
    pub(crate) fn abort(&self, reply: &Reply<def::SessionAbort>, turn_id: Option<&str>) {
        let ended = {
            let mut st = self.lock();
            let running = match (&st.turn, turn_id) {
                (None, _) => {
                    reply.err(not_found("no turn is running"));
                    return;
                }
                (Some(t), Some(asked)) if t.id != asked => {
                    reply.err(not_found(format!(
                        "turn {asked:?} is not running (the running turn is {})",
                        t.id
                    )));
                    return;
                }
                (Some(t), _) => t.id.clone(),
            };
            reply.ok(&TurnIdResult { turn_id: running });
            self.end_turn(&mut st, None, true)
        };
        if let Some(ended) = ended {
            self.agent.abort_turn(&ended.turn_id);
            self.record(&ended);
        }
    }

    /// `session.permission.respond`: `not_found` unless `request_id` is pending; otherwise
    /// reply `{}`, emit `permission_resolved`, then tell the agent.
    pub(crate) fn respond_permission(
        &self,
        reply: &Reply<def::SessionPermissionRespond>,
        params: PermissionRespondParams,
    ) {
        let turn_id = {
            let mut st = self.lock();
            let Some(turn) = st
                .turn
                .as_mut()
                .filter(|t| t.pending.contains(&params.request_id))
            else {
                reply.err(not_found(format!(
                    "no pending permission request {:?}",
                    crate::protocol::envelope::truncate(&params.request_id, 64)
                )));
                return;
            };
            turn.pending.retain(|r| *r != params.request_id);
            let turn_id = turn.id.clone();
            reply.ok(&Empty {});
            let resolved = PermissionResolved {
                request_id: params.request_id.clone(),
                decision: params.decision,
            };
            self.emit(&mut st, SessionEvent::PermissionResolved(resolved));
            turn_id
        };
        self.agent
            .permission_decided(&turn_id, &params.request_id, params.decision);
    }

    /// Runs `f` on the running turn if it is `turn_id`.
    fn with_turn<R>(
        &self,
        turn_id: &str,
        f: impl FnOnce(&Self, &mut HubState) -> R,
    ) -> Result<R, TurnEnded> {
        let mut st = self.lock();
        if st.turn.as_ref().is_none_or(|t| t.id != turn_id) {
            return Err(TurnEnded);
        }
        Ok(f(self, &mut st))
    }

    /// Keeps what fits of `delta` in the turn's reply and sends all of it, split into events
    /// of at most the reply cap (a delta is never cut).
    pub(crate) fn turn_delta(&self, turn_id: &str, delta: &str) -> Result<(), TurnEnded> {
        self.with_turn(turn_id, |hub, st| {
            let Some(turn) = st.turn.as_mut() else {
                return;
            };
            turn.reply.push(delta);
            let cap = turn.reply.cap();
            for piece in pieces(delta, cap) {
                let event = TextDelta {
                    turn_id: turn_id.to_owned(),
                    delta: piece.to_owned(),
                };
                hub.emit(st, SessionEvent::TextDelta(event));
            }
        })
    }

    pub(crate) fn turn_permission_request(
        &self,
        turn_id: &str,
        request_id: &str,
        tool: &str,
        input: Value,
    ) -> Result<(), TurnEnded> {
        self.with_turn(turn_id, |hub, st| {
            if let Some(t) = st.turn.as_mut() {
                if !t.pending.iter().any(|r| r == request_id) {
                    t.pending.push(request_id.to_owned());
                }
            }
            let event = PermissionRequest {
                turn_id: turn_id.to_owned(),
                request_id: request_id.to_owned(),
                tool: tool.to_owned(),
                input,
            };
            hub.emit(st, SessionEvent::PermissionRequest(event));
        })
    }

    pub(crate) fn turn_error(
        &self,
        turn_id: &str,
        code: &str,
        message: &str,
    ) -> Result<(), TurnEnded> {
        self.error_event(turn_id, Some(turn_id), code, message)
    }

    /// `session.error` without a `turn_id`, while `turn_id` runs.
    pub(crate) fn session_error(
        &self,
        turn_id: &str,
        code: &str,
        message: &str,
    ) -> Result<(), TurnEnded> {
        self.error_event(turn_id, None, code, message)
    }

    fn error_event(
        &self,
        running: &str,
        turn_id: Option<&str>,
        code: &str,
        message: &str,
    ) -> Result<(), TurnEnded> {
        self.with_turn(running, |hub, st| {
            let event = SessionErrorEvent {
                turn_id: turn_id.map(str::to_owned),
                code: code.to_owned(),
                message: message.to_owned(),
            };
            hub.emit(st, SessionEvent::Error(event));
        })
    }

    /// Ends `turn_id` with `text` (or what was streamed, when `None`).
    pub(crate) fn turn_finish(
        &self,
        turn_id: &str,
        text: Option<Completion<'_>>,
        aborted: bool,
    ) -> Result<(), TurnEnded> {
        let ended = self.with_turn(turn_id, |hub, st| hub.end_turn(st, text, aborted))?;
        if let Some(ended) = ended {
            self.record(&ended);
        }
        Ok(())
    }

    /// Takes the running turn, emits its `turn_completed` and records the reply in history,
    /// both cut to the reply cap.
    fn end_turn(
        &self,
        st: &mut HubState,
        text: Option<Completion<'_>>,
        aborted: bool,
    ) -> Option<Ended> {
        let turn = st.turn.take()?;
        let cap = turn.reply.cap();
        let (reply, truncated) = match text {
            None => turn.reply.into_parts(),
            Some(done) => {
                let (kept, cut) = cut(done.text, cap);
                (kept.to_owned(), cut || done.truncated)
            }
        };
        let truncated = truncated.then_some(true);
        st.history.push(HistoryEntry {
            role: HistoryRole::Assistant,
            text: reply.clone(),
            turn_id: turn.id.clone(),
            truncated,
        });
        let completed = TurnCompleted {
            turn_id: turn.id.clone(),
            text: reply.clone(),
            aborted,
            truncated,
        };
        self.emit(st, SessionEvent::TurnCompleted(completed));
        Some(Ended {
            turn_id: turn.id,
            prompt: turn.prompt,
            reply,
            aborted,
        })
    }

    fn record(&self, ended: &Ended) {
        self.usage.record_turn(&TurnRecord {
            session_id: self.id(),
            turn_id: &ended.turn_id,
            prompt: &ended.prompt,
            reply: &ended.reply,
            aborted: ended.aborted,
        });
    }
}
