//! [`RobotaListener`]: one connection of the seed system's wire as a listener of its session:
//! each session event is sent as the messages it maps to.

use std::sync::Mutex;

use super::wire::{driver_id, from_event};
use carrier_agent::foreign::EventListener;
use carrier_protocol::events::SessionEvent;
use carrier_protocol::ids::SessionId;
use carrier_protocol::Role;
use carrier_server::{Connection, ConnectionId};

/// Sends a session's events to one connection in the seed system's wire. Remembers the driver
/// of the running turn (from its `turn_started`) to stamp the messages the turn authors.
pub(super) struct RobotaListener {
    conn: Connection,
    /// The session it listens to, named in the workspace snapshot that ends each turn.
    session_id: SessionId,
    /// The running turn's driver id; `None` between turns, and for a turn that started before
    /// this connection bound.
    driver: Mutex<Option<String>>,
}

impl RobotaListener {
    pub(super) fn new(conn: Connection, session_id: SessionId) -> Self {
        RobotaListener {
            conn,
            session_id,
            driver: Mutex::new(None),
        }
    }
}

impl EventListener for RobotaListener {
    fn id(&self) -> ConnectionId {
        self.conn.id()
    }

    fn drives(&self) -> bool {
        self.conn.role() == Role::Drive
    }

    fn on_event(&self, event: &SessionEvent) -> bool {
        // Called under the hub's lock only, so the driver is never contended; a poisoned lock
        // still holds a usable id.
        let mut driver = self.driver.lock().unwrap_or_else(|e| e.into_inner());
        if let SessionEvent::TurnStarted(started) = event {
            *driver = driver_id(&started.driver);
        }
        let sent = from_event(event, driver.as_deref(), self.session_id.as_str())
            .iter()
            .all(|message| self.conn.send_text(message.encode()).is_ok());
        if matches!(event, SessionEvent::TurnCompleted(_)) {
            *driver = None;
        }
        sent
    }
}
