//! `relay`: each frame goes to every other handshaken connection.

use carrier::server::{
    Binary, ChannelDescriptor, ChannelError, ChannelHandle, ChannelInbound, ChannelRegistry,
    DeliveryClass,
};

use super::echo::{body_of, BULK_INBOUND_FRAMES};

/// Registers a relay channel named `name` (any event, binary).
pub fn mount(registry: &ChannelRegistry, name: &str) -> Result<ChannelHandle, ChannelError> {
    let handle = registry.register(ChannelDescriptor::new(name, &["*"], Binary::Accepted))?;
    let relay = handle.clone();
    handle.on_inbound(move |msg| {
        let Some(body) = body_of(msg.body) else {
            return;
        };
        let _ = relay.broadcast_except(msg.connection, body);
    });
    Ok(handle)
}

/// Registers a relay channel of the `bulk` delivery class: each frame goes to every other
/// connection with [`ChannelHandle::broadcast_bulk_except`], which waits for each receiver's
/// window. While it waits, the relay holds at most [`BULK_INBOUND_FRAMES`] frames and then the
/// sender's reader waits too: the sender goes at the pace of the slowest receiver, and no one
/// is failed for being slow. Needs a tokio runtime.
pub fn mount_bulk(registry: &ChannelRegistry, name: &str) -> Result<ChannelHandle, ChannelError> {
    let handle = registry.register(
        ChannelDescriptor::new(name, &["*"], Binary::Accepted).delivery(DeliveryClass::Bulk),
    )?;
    let mut inbound = handle.inbound(BULK_INBOUND_FRAMES);
    let relay = handle.clone();
    tokio::spawn(async move {
        while let Some(ChannelInbound {
            connection, body, ..
        }) = inbound.recv().await
        {
            if let Some(body) = body_of(body) {
                let _ = relay.broadcast_bulk_except(Some(connection), body).await;
            }
        }
    });
    Ok(handle)
}
