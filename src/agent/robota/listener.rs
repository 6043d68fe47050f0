//! [`RobotaListener`]: one connection of the seed system's wire as a listener of its session:
//! each session event is sent as the messages it maps to.

use std::sync::Mutex;

use super::wire::from_event;
use crate::agent::hub::EventListener;
use crate::protocol::events::SessionEvent;
use crate::server::{Connection, ConnectionId};

/// Sends a session's events to one connection in the seed system's wire. Remembers the driver
/// of the running turn (from its `turn_started`) to stamp the messages the turn authors.
pub(super) struct RobotaListener {
    conn: Connection,
    /// The running turn's driver id; `None` between turns, and for a turn that started before
    /// this connection bound.
    driver: Mutex<Option<String>>,
}

impl RobotaListener {
    pub(super) fn new(conn: Connection) -> Self {
        RobotaListener {
            conn,
            driver: Mutex::new(None),
        }
    }
}

impl EventListener for RobotaListener {
    fn id(&self) -> ConnectionId {
        self.conn.id()
    }

    fn on_event(&self, event: &SessionEvent) -> bool {
        // Called under the hub's lock only, so the driver is never contended; a poisoned lock
        // still holds a usable id.
        let mut driver = self.driver.lock().unwrap_or_else(|e| e.into_inner());
        if let SessionEvent::TurnStarted(started) = event {
            *driver = Some(started.driver.driver_id.clone()).filter(|id| !id.is_empty());
        }
        let sent = from_event(event, driver.as_deref())
            .iter()
            .all(|message| self.conn.send_text(message.encode()).is_ok());
        if matches!(event, SessionEvent::TurnCompleted(_)) {
            *driver = None;
        }
        sent
    }
}
