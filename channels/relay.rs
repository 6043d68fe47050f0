//! `relay`: each frame goes to every other handshaken connection.

use carrier::protocol::channel_frame::FrameBody;
use carrier::server::{
    Binary, ChannelDescriptor, ChannelError, ChannelHandle, ChannelRegistry, InboundBody,
};

/// Registers a relay channel named `name` (any event, binary).
pub fn mount(registry: &ChannelRegistry, name: &str) -> Result<ChannelHandle, ChannelError> {
    let handle = registry.register(ChannelDescriptor::new(name, &["*"], Binary::Accepted))?;
    let relay = handle.clone();
    handle.on_inbound(move |msg| {
        let body = match msg.body {
            InboundBody::Binary(bytes) => FrameBody::Binary(bytes),
            InboundBody::Event { event, payload } => FrameBody::Event { event, payload },
            InboundBody::Disconnected => return,
        };
        let _ = relay.broadcast_except(msg.connection, body);
    });
    Ok(handle)
}
