//! `echo`: each frame goes back to its sender, renumbered with the server's own seq.

use carrier::protocol::channel_frame::FrameBody;
use carrier::server::{
    Binary, ChannelDescriptor, ChannelError, ChannelHandle, ChannelRegistry, InboundBody,
};

/// Registers an echo channel named `name` (any event, binary).
pub fn mount(registry: &ChannelRegistry, name: &str) -> Result<ChannelHandle, ChannelError> {
    let handle = registry.register(ChannelDescriptor::new(name, &["*"], Binary::Accepted))?;
    let reply = handle.clone();
    handle.on_inbound(move |msg| {
        let body = match msg.body {
            InboundBody::Binary(bytes) => FrameBody::Binary(bytes),
            InboundBody::Event { event, payload } => FrameBody::Event { event, payload },
            InboundBody::Disconnected => return,
        };
        // The sender may be gone already; that is its connection's problem, not the channel's.
        let _ = reply.send_to(msg.connection, body);
    });
    Ok(handle)
}
