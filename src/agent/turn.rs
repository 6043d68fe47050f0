//! [`TurnSink`]: how an agent reports the output of one turn to the carrier, and
//! [`TurnOutput`], what the sink reports into (the session hub implements it, so the sink
//! knows nothing of hubs).

use std::sync::{Arc, Weak};

use serde_json::Value;

use crate::protocol::ids::{RequestId, TurnId};

/// The turn this sink belongs to has ended (completed, aborted by a client, or the session is
/// gone): the output was not recorded and the agent should stop working on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the turn has ended")]
pub struct TurnEnded;

/// The reply an agent ends its turn with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completion<'a> {
    /// The whole reply, as the agent has it (the carrier cuts it to the cap).
    pub(crate) text: &'a str,
    /// The agent already cut it.
    pub(crate) truncated: bool,
}

/// What a [`TurnSink`] reports into: the session that runs the turn. Each call names the
/// turn, and is refused with [`TurnEnded`] unless that turn is the session's running one.
pub(crate) trait TurnOutput: Send + Sync {
    /// The next piece of the reply.
    fn turn_delta(&self, turn_id: &TurnId, delta: &str) -> Result<(), TurnEnded>;

    /// A permission prompt of the turn.
    fn turn_permission_request(
        &self,
        turn_id: &TurnId,
        request_id: &RequestId,
        tool: &str,
        input: Value,
    ) -> Result<(), TurnEnded>;

    /// `session.error` of the turn.
    fn turn_error(&self, turn_id: &TurnId, code: &str, message: &str) -> Result<(), TurnEnded>;

    /// `session.error` without a `turn_id`, while the turn runs.
    fn session_error(&self, turn_id: &TurnId, code: &str, message: &str) -> Result<(), TurnEnded>;

    /// Ends the turn with `text` (or what was streamed, when `None`).
    fn turn_finish(
        &self,
        turn_id: &TurnId,
        text: Option<Completion<'_>>,
        aborted: bool,
    ) -> Result<(), TurnEnded>;

    /// Whether the turn is the session's running one.
    fn is_current_turn(&self, turn_id: &TurnId) -> bool;
}

/// The output side of one turn. Cheap to clone. Every call is checked against the session's
/// current turn, so output of a turn the carrier already ended (e.g. on abort) is refused with
/// [`TurnEnded`] instead of leaking into a later turn.
#[derive(Clone)]
pub struct TurnSink {
    /// Weak, so a sink an agent keeps does not keep its session alive.
    output: Weak<dyn TurnOutput>,
    /// Shared, so a clone allocates nothing.
    turn_id: Arc<TurnId>,
}

impl std::fmt::Debug for TurnSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnSink")
            .field("turn_id", &self.turn_id.as_str())
            .finish()
    }
}

impl TurnSink {
    pub(crate) fn new(output: Weak<dyn TurnOutput>, turn_id: TurnId) -> Self {
        TurnSink {
            output,
            turn_id: Arc::new(turn_id),
        }
    }

    /// The turn.
    pub fn turn_id(&self) -> &str {
        self.turn_id.as_str()
    }

    fn output(&self) -> Result<Arc<dyn TurnOutput>, TurnEnded> {
        self.output.upgrade().ok_or(TurnEnded)
    }

    /// Streams the next piece of the reply (`session.text_delta`; a delta longer than
    /// `max_reply_bytes` is sent as several, split at character boundaries).
    pub fn delta(&self, delta: &str) -> Result<(), TurnEnded> {
        self.output()?.turn_delta(&self.turn_id, delta)
    }

    /// Asks the user to allow a tool (`session.permission_request`); the answer arrives through
    /// [`super::ProtocolSession::permission_decided`]. `request_id` is the agent's, unique in
    /// the turn.
    pub fn permission_request(
        &self,
        request_id: &str,
        tool: &str,
        input: Value,
    ) -> Result<(), TurnEnded> {
        let request_id = RequestId::from(request_id);
        self.output()?
            .turn_permission_request(&self.turn_id, &request_id, tool, input)
    }

    /// Reports an error without ending the turn (`session.error`).
    pub fn error(&self, code: &str, message: &str) -> Result<(), TurnEnded> {
        self.output()?.turn_error(&self.turn_id, code, message)
    }

    /// Reports an error of the session that belongs to no turn (`session.error` without
    /// `turn_id`). Accepted only while this turn runs.
    pub fn session_error(&self, code: &str, message: &str) -> Result<(), TurnEnded> {
        self.output()?.session_error(&self.turn_id, code, message)
    }

    /// Ends the turn normally with the full reply (`session.turn_completed`, `aborted: false`);
    /// the carrier keeps at most `max_reply_bytes` of it.
    pub fn complete(&self, text: &str) -> Result<(), TurnEnded> {
        self.finish(text, false)
    }

    /// Ends the turn with the given reply, aborted or not. The carrier keeps at most
    /// `max_reply_bytes` of it (the rest is cut and the turn marked `truncated`).
    pub fn finish(&self, text: &str, aborted: bool) -> Result<(), TurnEnded> {
        self.end(text, aborted, false)
    }

    /// Like [`TurnSink::finish`], for a reply the agent itself had to cut (e.g. to fit a
    /// line): the turn is marked `truncated` whatever its length.
    pub fn finish_truncated(&self, text: &str, aborted: bool) -> Result<(), TurnEnded> {
        self.end(text, aborted, true)
    }

    fn end(&self, text: &str, aborted: bool, truncated: bool) -> Result<(), TurnEnded> {
        let done = Completion { text, truncated };
        self.output()?
            .turn_finish(&self.turn_id, Some(done), aborted)
    }

    /// Ends the turn on a failure: `session.error {code, message}`, then an aborted
    /// `session.turn_completed` with what was streamed so far.
    pub fn fail(&self, code: &str, message: &str) -> Result<(), TurnEnded> {
        let output = self.output()?;
        output.turn_error(&self.turn_id, code, message)?;
        output.turn_finish(&self.turn_id, None, true)
    }

    /// Whether the turn is still the session's running turn.
    pub fn is_current(&self) -> bool {
        self.output()
            .is_ok_and(|o| o.is_current_turn(&self.turn_id))
    }
}
