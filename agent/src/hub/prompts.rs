//! The permission prompts of a session's running turn that no one has answered yet, and the
//! rule that none of them outlives its drivers (docs/protocol.md, "Open prompts"):
//!
//! - a drive connection that binds while a prompt is open is sent that prompt right after
//!   binding ([`OpenPrompts::missed`]; the hub sends it);
//! - a prompt that no drive connection of any wire can answer — none bound to the session —
//!   for the session's unattended-prompt timeout (30 s by default) is denied as if a client
//!   had answered `deny`: `permission_resolved` to every connection, the agent told `deny`.
//!
//! The clock is [`tokio::time::Instant`], so tests run it paused. One task per session at most
//! watches the deadlines, and only while a prompt is open and no driver is bound.

use std::sync::Weak;
use std::time::Duration;

use tokio::time::Instant;

use carrier_protocol::events::SessionEvent;
use carrier_protocol::ids::RequestId;

/// How long a prompt may wait with no drive connection bound to its session before it is
/// denied, unless the host configures another value.
pub(crate) const DEFAULT_UNATTENDED_PROMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// One open prompt: its event as numbered, and when it was asked.
struct OpenPrompt {
    seq: u64,
    /// Always a `SessionEvent::PermissionRequest`; kept as the event so every wire re-sends it
    /// as it sent it the first time (the agent protocol re-encodes it under its own `seq`).
    event: SessionEvent,
    asked_at: Instant,
}

impl OpenPrompt {
    fn request_id(&self) -> &str {
        match &self.event {
            SessionEvent::PermissionRequest(p) => &p.request_id,
            _ => "",
        }
    }
}

/// The open prompts of one session, and since when no drive connection has been bound to it.
pub(super) struct OpenPrompts {
    open: Vec<OpenPrompt>,
    /// `None` while a drive connection is bound.
    unattended_since: Option<Instant>,
    /// Whether a task is watching the deadlines (at most one per session).
    watching: bool,
    timeout: Duration,
}

impl OpenPrompts {
    /// A session with no connection yet: unattended from now.
    pub(super) fn new(timeout: Duration) -> Self {
        OpenPrompts {
            open: Vec::new(),
            unattended_since: Some(Instant::now()),
            watching: false,
            timeout,
        }
    }

    /// Follows the session's events as they are numbered: a `permission_request` opens a
    /// prompt (asking again under an open id replaces it), a `permission_resolved` closes one,
    /// and a `turn_completed` closes any left (the turn machine resolves them first).
    pub(super) fn follow(&mut self, seq: u64, event: SessionEvent) {
        match &event {
            SessionEvent::PermissionRequest(p) => {
                self.open.retain(|o| o.request_id() != p.request_id);
                self.open.push(OpenPrompt {
                    seq,
                    event,
                    asked_at: Instant::now(),
                });
            }
            SessionEvent::PermissionResolved(r) => self.close(&r.request_id),
            SessionEvent::TurnCompleted(_) => self.open.clear(),
            _ => {}
        }
    }

    /// Whether `event` is one [`OpenPrompts::follow`] needs to see.
    pub(super) fn follows(event: &SessionEvent) -> bool {
        matches!(
            event,
            SessionEvent::PermissionRequest(_)
                | SessionEvent::PermissionResolved(_)
                | SessionEvent::TurnCompleted(_)
        )
    }

    /// The open prompts numbered after `after` and before `held_from`, in `seq` order: those a
    /// connection that has seen every event up to `after` and is about to be replayed the
    /// events from `held_from` on would otherwise miss.
    pub(super) fn missed(
        &self,
        after: u64,
        held_from: u64,
    ) -> impl Iterator<Item = (u64, &SessionEvent)> {
        self.open
            .iter()
            .filter(move |o| o.seq > after && o.seq < held_from)
            .map(|o| (o.seq, &o.event))
    }

    /// Closes the prompt `request_id` (when open).
    pub(super) fn close(&mut self, request_id: &str) {
        self.open.retain(|o| o.request_id() != request_id);
    }

    /// Every open prompt's event, in `seq` order.
    pub(super) fn events(&self) -> impl Iterator<Item = &SessionEvent> {
        self.open.iter().map(|o| &o.event)
    }

    /// Notes whether a drive connection is bound now. Returns whether a task should start
    /// watching the deadlines (the caller starts it with [`watch`], then calls
    /// [`OpenPrompts::watching`]).
    pub(super) fn attended(&mut self, driven: bool) -> bool {
        if driven {
            self.unattended_since = None;
        } else if self.unattended_since.is_none() {
            self.unattended_since = Some(Instant::now());
        }
        self.unattended_since.is_some() && !self.open.is_empty() && !self.watching
    }

    /// Marks the watching task started.
    pub(super) fn watching(&mut self) {
        self.watching = true;
    }

    /// When the first open prompt is due, or `None` when none will be (a driver is bound, or
    /// nothing is open): the watching task then ends, and is marked ended.
    pub(super) fn next_deadline(&mut self) -> Option<Instant> {
        let deadline = self.unattended_since.and_then(|since| {
            self.open
                .iter()
                .map(|o| o.asked_at.max(since) + self.timeout)
                .min()
        });
        if deadline.is_none() {
            self.watching = false;
        }
        deadline
    }

    /// The prompts that have waited with no driver for the whole timeout by `now`.
    pub(super) fn due(&self, now: Instant) -> Vec<RequestId> {
        let Some(since) = self.unattended_since else {
            return Vec::new();
        };
        self.open
            .iter()
            .filter(|o| o.asked_at.max(since) + self.timeout <= now)
            .map(|o| RequestId::from(o.request_id()))
            .collect()
    }
}

/// What the watching task works on: the session, known only by what it needs (so this module
/// knows nothing of hubs).
pub(super) trait Unattended: Send + Sync + 'static {
    /// When the session's first open prompt is due; `None` when none will be (the task ends).
    fn next_deadline(&self) -> Option<Instant>;

    /// Denies every prompt that is due by now, as a client's `deny` would.
    fn deny_due(&self);
}

/// Starts the task that sleeps until `session`'s first unattended prompt is due, has what is
/// due denied, and goes on until no prompt is due any more (a driver bound, or nothing open).
/// A deadline only moves later while it sleeps (a driver leaving later, a prompt asked later),
/// so it never wakes late. `false` when there is no runtime to run it on.
pub(super) fn watch(session: Weak<dyn Unattended>) -> bool {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    runtime.spawn(async move {
        loop {
            let Some(deadline) = session.upgrade().and_then(|s| s.next_deadline()) else {
                return;
            };
            tokio::time::sleep_until(deadline).await;
            let Some(session) = session.upgrade() else {
                return;
            };
            session.deny_due();
        }
    });
    true
}
