//! Inbound channel frames: decoded once and handed to each subscribed stream of their
//! channel, counted against the client's backlog.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
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
