//! [`SessionOutlet`]: what an agent reports outside its turns. A turn's output goes through its
//! [`crate::TurnSink`]; an agent that also speaks between turns (an ACP agent announcing its
//! commands or modes) is handed an outlet when its session opens
//! ([`crate::ProtocolSession::attached`]).

use std::sync::Weak;

use carrier_protocol::events::RawObject;

/// What a [`SessionOutlet`] reports into: the session hub.
pub(crate) trait SessionOutput: Send + Sync {
    /// A `session.agent_update` without `turn_id`.
    fn session_agent_update(&self, update: RawObject);
}

/// The session an agent serves, as it reports outside any turn. Cheap to clone; it does not
/// keep the session alive.
#[derive(Clone)]
pub struct SessionOutlet {
    output: Weak<dyn SessionOutput>,
}

impl std::fmt::Debug for SessionOutlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOutlet").finish_non_exhaustive()
    }
}

impl SessionOutlet {
    pub(crate) fn new(output: Weak<dyn SessionOutput>) -> Self {
        SessionOutlet { output }
    }

    /// Reports an update that belongs to no turn as `session.agent_update` without
    /// `turn_id` (protocol 1.2; see [`crate::TurnSink::agent_update`]). `false` when the
    /// session is gone.
    pub fn agent_update(&self, update: RawObject) -> bool {
        match self.output.upgrade() {
            Some(output) => {
                output.session_agent_update(update);
                true
            }
            None => false,
        }
    }
}
