//! [`UsageReporter`]: the host-supplied usage read model behind `usage.report`.
//!
//! A host wires the scopes it can answer (`session`, `personal`, `stored`); a request for any
//! other scope is refused by feature preflight with `unsupported_feature` (component
//! `server`). The carrier tells the reporter about every ended turn.

use std::collections::HashMap;
use std::sync::Mutex;

use super::session::HostError;
use carrier_protocol::methods::{UsageReportResult, UsageScope};

/// One ended turn, as the carrier reports it to the usage reporter.
#[derive(Debug, Clone, Copy)]
pub struct TurnRecord<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The turn.
    pub turn_id: &'a str,
    /// The user prompt.
    pub prompt: &'a str,
    /// The reply (what was streamed, when aborted).
    pub reply: &'a str,
    /// Whether the turn was aborted.
    pub aborted: bool,
}

/// The host's usage read model.
pub trait UsageReporter: Send + Sync + 'static {
    /// Whether the host wired `scope`.
    fn supports(&self, scope: UsageScope) -> bool;

    /// The usage for `scope`. `session_id` is the session asked about (for `session`) or the
    /// connection's bound session (for the other scopes). Only called for supported scopes.
    fn report(&self, scope: UsageScope, session_id: &str) -> Result<UsageReportResult, HostError>;

    /// A turn ended. The default ignores it.
    fn record_turn(&self, _turn: &TurnRecord<'_>) {}
}

/// No scope wired: every `usage.report` is `unsupported_feature`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoUsage;

impl UsageReporter for NoUsage {
    fn supports(&self, _scope: UsageScope) -> bool {
        false
    }

    fn report(&self, scope: UsageScope, _session_id: &str) -> Result<UsageReportResult, HostError> {
        Err(HostError::new(format!(
            "usage scope {scope:?} is not wired"
        )))
    }
}

/// The default reporter: per-session counters kept in memory, `session` scope only. The
/// embedded agent has no tokenizer, so a "token" here is a whitespace-separated word.
#[derive(Debug, Default)]
pub struct SessionUsage {
    sessions: Mutex<HashMap<String, Counters>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    tokens_in: u64,
    tokens_out: u64,
    turns: u64,
}

impl UsageReporter for SessionUsage {
    fn supports(&self, scope: UsageScope) -> bool {
        scope == UsageScope::Session
    }

    fn report(&self, scope: UsageScope, session_id: &str) -> Result<UsageReportResult, HostError> {
        if scope != UsageScope::Session {
            return Err(HostError::new(format!(
                "usage scope {scope:?} is not wired"
            )));
        }
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let c = sessions.get(session_id).copied().unwrap_or_default();
        Ok(UsageReportResult {
            scope,
            session_id: Some(session_id.to_owned()),
            tokens_in: c.tokens_in,
            tokens_out: c.tokens_out,
            turns: c.turns,
        })
    }

    fn record_turn(&self, turn: &TurnRecord<'_>) {
        let words = |s: &str| s.split_whitespace().count() as u64;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let c = sessions.entry(turn.session_id.to_owned()).or_default();
        c.tokens_in += words(turn.prompt);
        c.tokens_out += words(turn.reply);
        c.turns += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_usage_counts_words_and_turns() {
        let u = SessionUsage::default();
        u.record_turn(&TurnRecord {
            session_id: "s1",
            turn_id: "t1",
            prompt: "hello big world",
            reply: "echo: hello big world",
            aborted: false,
        });
        let r = u.report(UsageScope::Session, "s1").unwrap();
        assert_eq!((r.tokens_in, r.tokens_out, r.turns), (3, 4, 1));
        assert_eq!(u.report(UsageScope::Session, "s9").unwrap().turns, 0);
        assert!(!u.supports(UsageScope::Personal));
    }
}
