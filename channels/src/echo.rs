//! `echo`: each frame goes back to its sender, renumbered with the server's own seq.

use carrier::protocol::channel_frame::FrameBody;
use carrier::server::{
    Binary, ChannelDescriptor, ChannelError, ChannelHandle, ChannelInbound, ChannelRegistry,
    DeliveryClass, InboundBody,
};

/// Registers an echo channel named `name` (any event, binary).
pub fn mount(registry: &ChannelRegistry, name: &str) -> Result<ChannelHandle, ChannelError> {
    let handle = registry.register(ChannelDescriptor::new(name, &["*"], Binary::Accepted))?;
    let reply = handle.clone();
    handle.on_inbound(move |msg| {
        let Some(body) = body_of(msg.body) else {
            return;
        };
        // The sender may be gone already; that is its connection's problem, not the channel's.
        let _ = reply.send_to(msg.connection, body);
    });
    Ok(handle)
}

/// Inbound frames an echo or relay in bulk mode holds while it waits for a receiver's window:
/// past this, the senders' readers wait (the inbound backpressure of docs/protocol.md,
/// "Bulk channels").
pub const BULK_INBOUND_FRAMES: usize = 4;

/// Registers an echo channel of the `bulk` delivery class (docs/protocol.md, "Bulk channels"): each
/// frame goes back with [`ChannelHandle::send_bulk_to`], which waits while the sender's bulk window
/// is full, so a sender that reads its echoes slowly is paced instead of failed. Needs a tokio
/// runtime.
///
/// Frames are echoed one at a time, in arrival order across connections: a sender that does not
/// read its echoes slows the other senders on the same channel (mount one channel per client
/// where that matters).
pub fn mount_bulk(registry: &ChannelRegistry, name: &str) -> Result<ChannelHandle, ChannelError> {
    let handle = registry.register(
        ChannelDescriptor::new(name, &["*"], Binary::Accepted).delivery(DeliveryClass::Bulk),
    )?;
    let mut inbound = handle.inbound(BULK_INBOUND_FRAMES);
    let reply = handle.clone();
    tokio::spawn(async move {
        while let Some(ChannelInbound {
            connection, body, ..
        }) = inbound.recv().await
        {
            if let Some(body) = body_of(body) {
                // A sender that went away: its echo has nowhere to go.
                let _ = reply.send_bulk_to(connection, body).await;
            }
        }
    });
    Ok(handle)
}

/// The frame to send back for what arrived (nothing for a disconnect notice).
pub(crate) fn body_of(body: InboundBody) -> Option<FrameBody> {
    match body {
        InboundBody::Binary(bytes) => Some(FrameBody::Binary(bytes)),
        // Forwarded as received: the sender's bytes, key order and spacing (docs/protocol.md,
        // "Channels").
        InboundBody::Event(event) => Some(FrameBody::EventBytes(event)),
        InboundBody::Disconnected => None,
    }
}
