//! Inbound channel frames: decoded once and handed to each subscribed stream of their
//! channel, counted against the client's backlog.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::backlog::{backlog_stream, Backlog, BacklogSender, BacklogStream};
use super::subscribers::lock;
use carrier_protocol::channel_frame::{self, FrameBody};

/// One inbound frame of a channel, or news about the channel.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ChannelMessage {
    /// An opaque binary frame.
    Binary {
        /// The server's `seq` (per channel; gaps where frames went to other connections).
        seq: u32,
        /// The bytes (a slice of the received message).
        body: Bytes,
    },
    /// An event frame.
    Event {
        /// The server's `seq`.
        seq: u32,
        /// The event name.
        event: String,
        /// Its payload (`null` when left out).
        payload: Value,
    },
    /// The server dropped `count` frames of this (lossy) channel for this connection.
    Dropped {
        /// How many.
        count: u64,
    },
}

impl ChannelMessage {
    /// The frame as the host's own serde type. An event frame is read as the JSON object
    /// `{"event": NAME, "payload": …}` it carries on the wire, so an enum of the channel's
    /// events tagged the same way reads directly (`#[serde(tag = "event", content = "payload")]`,
    /// one variant per event; see [`ChannelMessage::payload`] for one event's payload alone); a
    /// binary frame's body is read as JSON text. A `Dropped` notice is not a frame: an error.
    ///
    /// ```
    /// use carrier_client::ChannelMessage;
    /// use serde::Deserialize;
    ///
    /// #[derive(Debug, PartialEq, Deserialize)]
    /// #[serde(tag = "event", content = "payload", rename_all = "snake_case")]
    /// enum Diagnostics {
    ///     Cpu { percent: f64 },
    ///     Disk { free_bytes: u64 },
    /// }
    ///
    /// let frame = ChannelMessage::Event {
    ///     seq: 7,
    ///     event: "cpu".into(),
    ///     payload: serde_json::json!({"percent": 12.5}),
    /// };
    /// assert_eq!(frame.json::<Diagnostics>()?, Diagnostics::Cpu { percent: 12.5 });
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match self {
            ChannelMessage::Event { event, payload, .. } => {
                T::deserialize(serde_json::json!({ "event": event, "payload": payload }))
            }
            ChannelMessage::Binary { body, .. } => serde_json::from_slice(body),
            ChannelMessage::Dropped { count } => Err(serde::de::Error::custom(format!(
                "not a frame: the server dropped {count} frame(s) of this lossy channel"
            ))),
        }
    }

    /// An event frame's payload as the host's own serde type; `None` for other frames and for
    /// events with another name than `event`.
    ///
    /// ```
    /// # use carrier_client::ChannelMessage;
    /// #[derive(serde::Deserialize)]
    /// struct Cpu {
    ///     percent: f64,
    /// }
    ///
    /// let frame = ChannelMessage::Event {
    ///     seq: 7,
    ///     event: "cpu".into(),
    ///     payload: serde_json::json!({"percent": 12.5}),
    /// };
    /// let cpu: Cpu = frame.payload("cpu").transpose()?.expect("a cpu event");
    /// assert_eq!(cpu.percent, 12.5);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn payload<T: DeserializeOwned>(
        &self,
        event: &str,
    ) -> Option<Result<T, serde_json::Error>> {
        match self {
            ChannelMessage::Event {
                event: name,
                payload,
                ..
            } if name == event => Some(T::deserialize(payload)),
            _ => None,
        }
    }
}

/// A channel's inbound frames, in order: see [`Client::channel`](super::Client::channel).
pub type ChannelStream = BacklogStream<ChannelMessage>;

/// The streams of each channel.
pub(crate) struct ChannelRoutes {
    backlog: Arc<Backlog>,
    routes: Mutex<HashMap<String, Vec<BacklogSender<ChannelMessage>>>>,
}

impl ChannelRoutes {
    pub(crate) fn new(backlog: &Arc<Backlog>) -> ChannelRoutes {
        ChannelRoutes {
            backlog: Arc::clone(backlog),
            routes: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn subscribe(&self, channel: &str) -> ChannelStream {
        let (tx, rx) = backlog_stream(&self.backlog);
        lock(&self.routes)
            .entry(channel.to_owned())
            .or_default()
            .push(tx);
        rx
    }

    /// Decodes one inbound binary message and hands it to its channel's streams.
    pub(crate) fn route_binary(&self, message: &Bytes) {
        let frame = match channel_frame::decode(message.clone()) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::debug!(%error, "dropped a binary message that is not a channel frame");
                return;
            }
        };
        let item = match frame.body {
            FrameBody::Binary(body) => ChannelMessage::Binary {
                seq: frame.seq,
                body,
            },
            FrameBody::Event { event, payload } => ChannelMessage::Event {
                seq: frame.seq,
                event,
                payload,
            },
            // `decode` never makes this one (it is for forwarding).
            FrameBody::EventBytes(_) => return,
        };
        self.route(&frame.channel, item, message.len());
    }

    /// Hands `item` (holding about `size` bytes) to every live stream of `channel`.
    pub(crate) fn route(&self, channel: &str, item: ChannelMessage, size: usize) {
        let mut routes = lock(&self.routes);
        let Some(streams) = routes.get_mut(channel) else {
            return;
        };
        // Clones share the body bytes.
        streams.retain(|stream| stream.send(item.clone(), size));
        if streams.is_empty() {
            routes.remove(channel);
        }
    }
}
