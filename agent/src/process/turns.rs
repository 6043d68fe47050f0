//! [`ActiveTurn`]: the turn the agent process works on, as the supervisor holds it, and
//! [`deliver`]: how a session event of the child reaches that turn's [`TurnSink`].
//!
//! The hub already emitted `turn_started` (with the host's driver) and answered `{turn_id}`
//! before the submit reaches the child; it emits `permission_resolved` itself. A child's own
//! `turn_started` or `permission_resolved` is therefore dropped, as is any event of a turn
//! that is not the running one. A child's `permission_request` is asked on the sink under the
//! child's own request id; the supervisor passes the answer back to the child.

use crate::turn_sink::{PendingPermission, TurnSink};
use carrier_protocol::events::SessionEvent;
use carrier_protocol::ids::TurnId;

/// The turn the child works on.
pub(crate) struct ActiveTurn {
    pub(crate) turn_id: TurnId,
    pub(crate) sink: TurnSink,
    /// The child generation the submit was sent to; `None` while a child is (re)starting.
    pub(crate) generation: Option<u64>,
}

/// Delivers a validated session event of the child to the running turn `turn_id` through its
/// `sink`. `take` forgets the turn; it runs before the turn's `turn_completed` is delivered, so
/// nothing more of the child reaches a turn that has ended. A permission prompt that was sent
/// is returned: its answer goes back to the child.
pub(crate) fn deliver(
    turn_id: &TurnId,
    sink: &TurnSink,
    event: SessionEvent,
    take: impl FnOnce(),
) -> Option<PendingPermission> {
    let name = event.name();
    let ours = |id: &str| turn_id == id;
    let delivered = match event {
        SessionEvent::TurnStarted(_) | SessionEvent::PermissionResolved(_) => {
            tracing::debug!(
                event = name,
                "agent process event dropped: the carrier emits it"
            );
            return None;
        }
        SessionEvent::TextDelta(e) if ours(&e.turn_id) => sink.delta(&e.delta),
        SessionEvent::PermissionRequest(e) if ours(&e.turn_id) => {
            let pending = match e.options {
                Some(options) => {
                    sink.ask_permission_offering(Some(&e.request_id), &e.tool, e.input, options)
                }
                None => sink.ask_permission_as(&e.request_id, &e.tool, e.input),
            };
            if pending.request_id().is_some() {
                return Some(pending);
            }
            Err(crate::TurnEnded)
        }
        // An update without a turn id, while a turn runs, is the turn's.
        SessionEvent::AgentUpdate(e) if e.turn_id.as_deref().is_none_or(ours) => {
            sink.agent_update(e.update)
        }
        SessionEvent::Error(e) => match e.turn_id.as_deref() {
            Some(id) if ours(id) => sink.error(&e.code, &e.message),
            None => sink.session_error(&e.code, &e.message),
            Some(_) => return drop_other_turn(name),
        },
        SessionEvent::TurnCompleted(e) if ours(&e.turn_id) => {
            take();
            match e.truncated {
                Some(true) => sink.finish_truncated(&e.text, e.aborted),
                _ => sink.finish(&e.text, e.aborted),
            }
        }
        _ => return drop_other_turn(name),
    };
    if delivered.is_err() {
        tracing::debug!(
            event = name,
            "agent process event dropped: the turn has ended"
        );
    }
    None
}

fn drop_other_turn(name: &str) -> Option<PendingPermission> {
    tracing::info!(
        event = name,
        "agent process event dropped: not the running turn"
    );
    None
}
