//! [`Stashed`]: how every test client here reads in order and waits for one message — the
//! agent protocol's, ACP's over a WebSocket and over `carrier acp`'s stdio, the seed system's.

use std::collections::VecDeque;

use serde_json::Value;

/// A client that reads JSON messages one at a time and keeps those a wait skipped, in order.
pub(crate) trait Stashed {
    /// The messages read but not yet taken.
    fn stash(&mut self) -> &mut VecDeque<Value>;

    /// Reads the next message off the wire (panics on a timeout or a broken peer).
    async fn read_one(&mut self) -> Value;

    /// The first message (stashed first) that `pick` takes; the others stay stashed, in order.
    async fn take(&mut self, pick: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.stash().iter().position(&pick) {
            return self.stash().remove(i).expect("index");
        }
        loop {
            let m = self.read_one().await;
            if pick(&m) {
                return m;
            }
            self.stash().push_back(m);
        }
    }

    /// The next message (stashed first).
    async fn take_next(&mut self) -> Value {
        match self.stash().pop_front() {
            Some(m) => m,
            None => self.read_one().await,
        }
    }
}
