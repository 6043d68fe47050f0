//! Resume bookkeeping (docs/protocol.md, "Sessions and resume"), with no I/O: which session events
//! are new, and where a reconnect resumes from.

use serde::Serialize;

use super::events::ResumeOutcome;

/// Where to resume from: the session, the server epoch, and the highest `seq` delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResumePoint {
    /// The bound session.
    pub session_id: String,
    /// The server epoch the session belongs to.
    pub epoch: String,
    /// The highest session `seq` delivered to the application (0: none yet).
    pub after_seq: u64,
}

/// The connection's session binding as it moves across handshakes, reconnects and session
/// switches. `seq` numbers belong to one session of one epoch, so every rebinding that can
/// restart them resets `after_seq`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SessionCursor {
    point: Option<ResumePoint>,
}

impl SessionCursor {
    /// Where a reconnect would resume from; `None` before the first handshake.
    pub(crate) fn point(&self) -> Option<&ResumePoint> {
        self.point.as_ref()
    }

    /// Records `seq` as delivered if it is newer than everything delivered so far; `false` for
    /// a duplicate (a replayed event the application already has). Before any handshake every
    /// event counts as new.
    pub(crate) fn accept(&mut self, seq: u64) -> bool {
        match self.point.as_mut() {
            Some(point) if seq <= point.after_seq => false,
            Some(point) => {
                point.after_seq = seq;
                true
            }
            None => true,
        }
    }

    /// Applies a handshake result and returns the outcome as the application should see it: a
    /// fresh binding after asking to resume means events may be missing, which is a `reset`.
    pub(crate) fn bind(
        &mut self,
        asked_to_resume: bool,
        outcome: ResumeOutcome,
        session_id: &str,
        epoch: &str,
    ) -> ResumeOutcome {
        let outcome = match outcome {
            ResumeOutcome::New if asked_to_resume => ResumeOutcome::Reset,
            other => other,
        };
        let continues = matches!(
            outcome,
            ResumeOutcome::Resumed { .. } | ResumeOutcome::Gap { .. }
        );
        match self.point.as_mut() {
            Some(point) if continues && point.session_id == session_id => {
                point.epoch = epoch.to_owned();
            }
            _ => self.point = Some(fresh(session_id, epoch)),
        }
        outcome
    }

    /// After `sessions.start` or `sessions.switch` answered `session_id`: a different session
    /// numbers its events from its own start.
    pub(crate) fn rebind(&mut self, session_id: &str) {
        if let Some(point) = self.point.as_mut() {
            if point.session_id != session_id {
                *point = fresh(session_id, &point.epoch);
            }
        }
    }
}

fn fresh(session_id: &str, epoch: &str) -> ResumePoint {
    ResumePoint {
        session_id: session_id.to_owned(),
        epoch: epoch.to_owned(),
        after_seq: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(after: u64) -> SessionCursor {
        let mut cursor = SessionCursor::default();
        cursor.bind(false, ResumeOutcome::New, "s1", "e1");
        for seq in 1..=after {
            assert!(cursor.accept(seq));
        }
        cursor
    }

    #[test]
    fn duplicates_and_older_events_are_refused() {
        let mut cursor = bound(3);
        assert!(!cursor.accept(2));
        assert!(!cursor.accept(3));
        assert!(cursor.accept(4));
        assert!(!cursor.accept(4));
        assert_eq!(cursor.point().map(|p| p.after_seq), Some(4));
    }

    #[test]
    fn resumed_and_gap_keep_the_delivered_seq() {
        for outcome in [
            ResumeOutcome::Resumed { replayed: 2 },
            ResumeOutcome::Gap { from: 4, to: 9 },
        ] {
            let mut cursor = bound(3);
            assert_eq!(cursor.bind(true, outcome, "s1", "e1"), outcome);
            assert_eq!(cursor.point().map(|p| p.after_seq), Some(3));
        }
    }

    #[test]
    fn reset_and_a_fresh_binding_after_asking_to_resume_start_over() {
        let mut cursor = bound(3);
        assert_eq!(
            cursor.bind(true, ResumeOutcome::Reset, "s7", "e2"),
            ResumeOutcome::Reset
        );
        assert_eq!(
            cursor.point(),
            Some(&ResumePoint {
                session_id: "s7".into(),
                epoch: "e2".into(),
                after_seq: 0
            })
        );
        let mut cursor = bound(3);
        assert_eq!(
            cursor.bind(true, ResumeOutcome::New, "s1", "e2"),
            ResumeOutcome::Reset
        );
        assert!(cursor.accept(1));
    }

    #[test]
    fn switching_to_another_session_restarts_numbering_but_not_for_the_same_one() {
        let mut cursor = bound(5);
        cursor.rebind("s1");
        assert_eq!(cursor.point().map(|p| p.after_seq), Some(5));
        cursor.rebind("s2");
        let point = cursor.point().cloned();
        assert_eq!(
            point.map(|p| (p.session_id, p.after_seq)),
            Some(("s2".into(), 0))
        );
    }

    #[test]
    fn events_before_any_handshake_are_all_new() {
        let mut cursor = SessionCursor::default();
        assert!(cursor.accept(5));
        assert!(cursor.accept(5));
        assert_eq!(cursor.point(), None);
    }
}
