//! A minimal Chrome DevTools Protocol connection: one WebSocket to the browser, commands matched
//! to responses by `id`, one flattened session per page (`sessionId` on every frame), and the few
//! page events the browser test reads (console, exceptions, log entries, WebSocket handshakes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::wait::WAIT;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// The browser-level DevTools connection. Dropping it stops the reader task.
pub(crate) struct Cdp {
    writer: tokio::sync::Mutex<SplitSink<Socket, Message>>,
    /// Each command's response is handed to its caller here; the reader drops every sender when
    /// the socket ends, so a caller waiting on a dead browser fails at once instead of timing out.
    pending: Pending,
    next_id: AtomicU64,
    /// Page events worth showing when a test fails, and WebSocket handshake events.
    events: Arc<Mutex<Vec<Value>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Cdp {
    /// Connects to the browser's DevTools WebSocket (`ws://127.0.0.1:PORT/devtools/browser/…`).
    pub(crate) async fn connect(url: &str) -> Result<Arc<Cdp>, String> {
        let (socket, _) = timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .map_err(|_| format!("DevTools socket {url} did not open within {WAIT:?}"))?
            .map_err(|e| format!("DevTools socket {url}: {e}"))?;
        let (writer, mut reader) = socket.split();
        let pending: Pending = Arc::default();
        let events: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (route_pending, route_events) = (pending.clone(), events.clone());
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = reader.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = frame["id"].as_u64() {
                    let waiter = route_pending.lock().unwrap().remove(&id);
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(frame);
                    }
                } else if frame["method"].as_str().is_some_and(is_recorded_event) {
                    route_events.lock().unwrap().push(frame);
                }
            }
            route_pending.lock().unwrap().clear();
        });
        Ok(Arc::new(Cdp {
            writer: tokio::sync::Mutex::new(writer),
            pending,
            next_id: AtomicU64::new(1),
            events,
            reader,
        }))
    }

    /// Sends one command (to the browser, or to a page's session) and returns its `result`.
    pub(crate) async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            frame["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let sent = self
            .writer
            .lock()
            .await
            .send(Message::text(frame.to_string()))
            .await;
        if let Err(e) = sent {
            self.pending.lock().unwrap().remove(&id);
            return Err(format!("{method}: DevTools socket write failed: {e}"));
        }
        let reply = match timeout(WAIT, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => return Err(format!("{method}: the browser went away")),
            Err(_) => {
                self.pending.lock().unwrap().remove(&id);
                return Err(format!("{method}: no answer within {WAIT:?}"));
            }
        };
        match reply.get("error") {
            Some(error) => Err(format!("{method}: {error}")),
            None => Ok(reply["result"].clone()),
        }
    }

    /// The recorded events of one page session, oldest first, as whole frames
    /// (`{method, params, sessionId}`).
    pub(crate) fn session_events(&self, session: &str) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["sessionId"] == session)
            .cloned()
            .collect()
    }
}

fn is_recorded_event(method: &str) -> bool {
    matches!(
        method,
        "Runtime.consoleAPICalled"
            | "Runtime.exceptionThrown"
            | "Log.entryAdded"
            | "Inspector.targetCrashed"
            | "Network.webSocketCreated"
            | "Network.webSocketWillSendHandshakeRequest"
            | "Network.webSocketHandshakeResponseReceived"
            | "Network.webSocketFrameError"
            | "Network.webSocketClosed"
            | "Network.loadingFailed"
    )
}
