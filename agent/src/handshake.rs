//! `system.handshake` (docs/protocol.md, "Handshake"): version negotiation, the initial binding or
//! resume, and the result that tells the client everything it may rely on.

use super::answer::{internal, Reply};
use super::handler_context::{Io, State};
use super::hub::EventScope;
use carrier_protocol::catalog::def;
use carrier_protocol::channel::DeliveryClass;
use carrier_protocol::close::CloseCode;
use carrier_protocol::envelope::MAX_ID_BYTES;
use carrier_protocol::error::{EffectState, ErrorCode, ErrorObject};
use carrier_protocol::features::{Feature, Peers};
use carrier_protocol::methods::{
    AppInfo, HandshakeParams, HandshakeResult, LimitsInfo, ResumeOutcome,
};
use carrier_protocol::version::{incompatible_error, Compatibility, VersionPair};

/// Handles `system.handshake`. A second handshake on the same connection is refused with
/// `protocol_error` (`data.reason: "already_handshaken"`): the binding and versions are fixed
/// for the connection's life; reconnect to renegotiate.
pub(crate) fn handle(
    io: &Io,
    st: &mut State,
    reply: &Reply<def::SystemHandshake>,
    p: HandshakeParams,
) {
    if st.peers.is_some() {
        return reply.err(
            ErrorObject::new(
                ErrorCode::ProtocolError,
                "this connection has already completed its handshake",
            )
            .effect(EffectState::None)
            .with_data(serde_json::json!({ "reason": "already_handshaken" })),
        );
    }
    if p.min_compatible_peer.is_some() {
        tracing::info!(conn = %io.conn.id(), "deprecated handshake field min_compatible_peer ignored");
    }
    if let Some(client) = &p.client {
        tracing::debug!(conn = %io.conn.id(), name = %client.name, version = %client.version, "client handshake");
    }
    let ours = io.host.protocol;
    let Ok(theirs) = VersionPair::new(p.protocol_version, p.min_compatible_protocol) else {
        return reply.err(
            ErrorObject::new(
                ErrorCode::ProtocolError,
                format!(
                    "invalid params for system.handshake: min_compatible_protocol {} is above \
                     protocol_version {}",
                    p.min_compatible_protocol, p.protocol_version
                ),
            )
            .effect(EffectState::None)
            .with_data(serde_json::json!({ "reason": "invalid_params" })),
        );
    };
    let skew = match ours.check(&theirs) {
        Compatibility::Compatible { skew } => skew,
        Compatibility::Incompatible(why) => {
            reply.err(incompatible_error(ours, theirs, why));
            io.conn
                .close(CloseCode::PROTOCOL_ERROR, "protocol version incompatible");
            return;
        }
    };
    let peers = Peers {
        server_features: io.host.features(),
        server_protocol: ours.version,
        client_protocol: theirs.version,
    };

    // A resume names its session and epoch; anything we cannot honour is a reset onto the
    // connection's initial session.
    let resumed = p.resume.as_ref().and_then(|r| {
        (r.epoch == io.ctx.epoch())
            .then(|| io.host.hub(&r.session_id))
            .flatten()
            .map(|hub| (hub, r.after_seq))
    });
    let reset = p.resume.is_some() && resumed.is_none();
    let (hub, after_seq) = match resumed {
        Some((hub, after)) => (hub, Some(after)),
        None => {
            let initial = io.host.binder.initial_session(
                io.host.directory.as_ref(),
                io.conn.id(),
                io.conn.role(),
            );
            match initial.and_then(|id| io.host.hub(&id)) {
                Some(hub) => (hub, None),
                None => return reply.err(internal("the host has no session to bind to")),
            }
        }
    };

    let limits = io.ctx.limits();
    let ring = io.host.ring;
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    let mut result = HandshakeResult {
        protocol_version: ours.version,
        min_compatible_protocol: ours.min_compatible,
        server: AppInfo {
            name: io.ctx.server_name().into(),
            version: io.ctx.server_version().into(),
        },
        role: io.conn.role(),
        session_id: hub.id().to_string(),
        epoch: io.ctx.epoch().to_owned(),
        version_skew: skew,
        features: peers.features(),
        channels: channels_for(io, &peers),
        limits: LimitsInfo {
            max_text_bytes: limits.max_text_bytes as u64,
            max_message_bytes: limits.max_message_bytes as u64,
            max_inbound_bytes: limits.max_inbound_bytes as u64,
            max_connections: limits.max_connections as u64,
            queue_bytes: limits.queue_bytes as u64,
            handshake_timeout_ms: ms(limits.handshake_timeout),
            ping_interval_ms: ms(limits.ping_interval),
            pong_timeout_ms: ms(limits.pong_timeout),
            max_id_bytes: MAX_ID_BYTES as u64,
            resume_max_events: ring.max_events as u64,
            resume_max_bytes: ring.max_bytes as u64,
            max_title_bytes: limits.max_title_bytes as u64,
            max_sessions: limits.max_sessions as u64,
            max_reply_bytes: limits.max_reply_bytes as u64,
            max_session_bytes: io.host.memory.limit() as u64,
        },
        resume: ResumeOutcome::New,
    };
    if peers.available(Feature::BulkCredit) {
        // Before the handshake is marked done: its first bulk frame already counts.
        io.conn.enable_bulk_credit();
    }
    hub.bind(&io.conn, EventScope::of(&peers), after_seq, |outcome| {
        result.resume = if reset { ResumeOutcome::Reset } else { outcome };
        reply.ok(&result);
        // After the reply is queued, so no channel frame can overtake it.
        io.conn.mark_handshaken();
    });
    tracing::debug!(conn = %io.conn.id(), session = %hub.id(), skew, "handshake complete");
    st.peers = Some(peers);
    st.bound = Some(hub);
}

/// The channel descriptors this connection is told about: a bulk channel's carries the
/// connection's inbound credit (its bulk window) when both sides speak `bulk_credit`.
fn channels_for(io: &Io, peers: &Peers) -> Vec<carrier_protocol::channel::ChannelDescriptor> {
    let credit = peers.available(Feature::BulkCredit);
    let mut channels = io.ctx.channels();
    for c in channels.iter_mut() {
        if credit && c.delivery == DeliveryClass::Bulk {
            c.credit = Some(c.bulk_window as u64);
        }
    }
    channels
}
