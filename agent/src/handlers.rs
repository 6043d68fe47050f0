//! The handlers of every method after the handshake, one function each. Params arrive
//! validated and the role and feature checks have passed (see [`super::connection`]).

use std::sync::Arc;

use super::answer::{internal, not_found, Reply};
use super::fit;
use super::handler_context::{Io, State};
use super::host::StartError;
use super::hub::SessionHub;
use super::session::{AgentAnswer, AgentCallError};
use carrier_protocol::catalog::{def, MethodDef};
use carrier_protocol::error::{EffectState, ErrorCode, ErrorObject};
use carrier_protocol::ids::TurnId;
use carrier_protocol::methods::*;

/// The bound session; after a successful handshake there always is one.
fn bound<'s, M: MethodDef>(st: &'s State, reply: &Reply<M>) -> Option<&'s Arc<SessionHub>> {
    if st.bound.is_none() {
        reply.err(internal("this connection is not bound to a session"));
    }
    st.bound.as_ref()
}

pub(crate) fn ping(_: &Io, _: &mut State, reply: &Reply<def::SystemPing>, _: Empty) {
    reply.ok(&Empty {});
}

pub(crate) fn system_status(io: &Io, st: &mut State, reply: &Reply<def::SystemStatus>, _: Empty) {
    let ours = io.host.protocol;
    reply.ok(&SystemStatusResult {
        server: AppInfo {
            name: io.ctx.server_name().into(),
            version: io.ctx.server_version().into(),
        },
        protocol_version: ours.version,
        min_compatible_protocol: ours.min_compatible,
        epoch: io.ctx.epoch().to_owned(),
        connections: io.ctx.connection_count() as u64,
        channels: io.ctx.channels().into_iter().map(|c| c.name).collect(),
        compatibility: st.peers.map(|p| p.compatibility()).unwrap_or_default(),
    });
}

pub(crate) fn surface_role(io: &Io, _: &mut State, reply: &Reply<def::SurfaceRole>, _: Empty) {
    reply.ok(&RoleResult {
        role: io.conn.role(),
    });
}

/// The driver is always the host's identity for this listener; params cannot carry one.
pub(crate) fn submit(io: &Io, st: &mut State, reply: &Reply<def::SessionSubmit>, p: SubmitParams) {
    if let Some(hub) = bound(st, reply) {
        let cap = io.ctx.limits().max_reply_bytes;
        hub.submit(reply, p, io.ctx.driver().clone(), cap);
    }
}

pub(crate) fn abort(_: &Io, st: &mut State, reply: &Reply<def::SessionAbort>, p: AbortParams) {
    if let Some(hub) = bound(st, reply) {
        hub.abort(reply, p.turn_id.map(TurnId::from).as_ref());
    }
}

pub(crate) fn permission_respond(
    _: &Io,
    st: &mut State,
    reply: &Reply<def::SessionPermissionRespond>,
    p: PermissionRespondParams,
) {
    if let Some(hub) = bound(st, reply) {
        hub.respond_permission(reply, p);
    }
}

/// Served by the agent when it wants to (an agent process), else from the carrier's record:
/// its newest entries that fit the connection's outbound budget.
pub(crate) fn history(
    io: &Io,
    st: &mut State,
    reply: &Reply<def::SessionHistory>,
    p: HistoryParams,
) {
    if let Some(hub) = bound(st, reply) {
        let budget = io
            .ctx
            .limits()
            .queue_bytes
            .saturating_sub(fit::ENVELOPE_BYTES);
        let local = {
            let hub = hub.clone();
            move || hub.history(p.limit, budget)
        };
        match hub.agent.history(p.limit) {
            None => reply.ok(&local()),
            Some(answer) => forward(reply, answer, local),
        }
    }
}

/// Served by the agent when it wants to, else from the turn state the carrier owns.
pub(crate) fn session_status(_: &Io, st: &mut State, reply: &Reply<def::SessionStatus>, _: Empty) {
    if let Some(hub) = bound(st, reply) {
        let local = {
            let hub = hub.clone();
            move || hub.status()
        };
        match hub.agent.status() {
            None => reply.ok(&local()),
            Some(answer) => forward(reply, answer, local),
        }
    }
}

/// Answers from the agent's future answer, validated against the method's result type; an
/// agent that turns out not to implement the method is served by `local`.
fn forward<M: MethodDef + 'static>(
    reply: &Reply<M>,
    answer: AgentAnswer,
    local: impl FnOnce() -> M::Result + Send + 'static,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return reply.ok(&local());
    };
    let reply = reply.detached();
    runtime.spawn(async move {
        match answer.await {
            Ok(result) => reply.ok_json(result),
            Err(AgentCallError::MethodNotFound) => reply.ok(&local()),
            Err(AgentCallError::Failed(why)) => {
                reply.err(internal(format!("the agent did not answer: {why}")))
            }
        }
    });
}

/// Answered in any state of the host's directory: titles are cut to `max_title_bytes`, and
/// sessions that would take the answer past the connection's outbound budget are left out
/// (the default session, listed first, is the last to go).
pub(crate) fn sessions_list(io: &Io, _: &mut State, reply: &Reply<def::SessionsList>, _: Empty) {
    let limits = io.ctx.limits();
    let all = io.host.summaries(limits.max_title_bytes);
    let budget = limits.queue_bytes.saturating_sub(fit::ENVELOPE_BYTES);
    let (sessions, left_out) = fit::fit_front(all, budget);
    if left_out > 0 {
        tracing::warn!(
            listed = sessions.len(),
            left_out,
            "sessions.list: the directory is larger than the outbound budget; the last \
             sessions were left out"
        );
    }
    reply.ok(&SessionsListResult { sessions });
}

/// Starts a session and binds this connection to it, within the carrier's published bounds
/// whatever the host's directory: a title over `max_title_bytes` is `invalid_params`, a
/// directory already holding `max_sessions` is `limit_exceeded`. A result that would not
/// validate (an empty id from the host's directory) is never sent: the session is released
/// and the requester gets `protocol_error` with `effect_state: "unknown"`.
pub(crate) fn sessions_start(
    io: &Io,
    st: &mut State,
    reply: &Reply<def::SessionsStart>,
    p: SessionsStartParams,
) {
    let limits = io.ctx.limits();
    let title_bytes = p.title.as_deref().map_or(0, str::len);
    if title_bytes > limits.max_title_bytes {
        return reply.err(
            ErrorObject::new(
                ErrorCode::ProtocolError,
                format!(
                    "invalid params for sessions.start: the title is {title_bytes} bytes, over \
                     the {}-byte limit (limits.max_title_bytes)",
                    limits.max_title_bytes
                ),
            )
            .effect(EffectState::None)
            .with_data(serde_json::json!({
                "reason": "invalid_params",
                "limit": limits.max_title_bytes,
                "size": title_bytes,
            })),
        );
    }
    let started = io
        .host
        .start_and_open(p.title.as_deref(), limits.max_sessions);
    match started {
        Ok(hub) => bind_to(io, st, reply, hub),
        Err(e) => reply.err(start_refusal(e, limits.max_sessions)),
    }
}

/// What `sessions.start` (or a foreign wire's start) answers when no session was made.
pub(crate) fn start_refusal(e: StartError, max_sessions: usize) -> ErrorObject {
    match e {
        StartError::Full => ErrorObject::new(
            ErrorCode::LimitExceeded,
            format!("the host already holds {max_sessions} sessions (limits.max_sessions)"),
        )
        .effect(EffectState::None)
        .with_data(serde_json::json!({
            "limit": "max_sessions",
            "value": max_sessions,
        })),
        StartError::Host(e) => internal(format!("could not start a session: {e}")),
        StartError::Invalid => ErrorObject::new(
            ErrorCode::ProtocolError,
            "the host's directory returned an invalid session; it was released",
        )
        .effect(EffectState::Unknown)
        .with_data(serde_json::json!({ "reason": "invalid_result" })),
    }
}

pub(crate) fn sessions_switch(
    io: &Io,
    st: &mut State,
    reply: &Reply<def::SessionsSwitch>,
    p: SessionsSwitchParams,
) {
    let Some(hub) = io.host.hub(&p.session_id) else {
        return reply.err(not_found(format!(
            "no session {:?}",
            carrier_protocol::envelope::truncate(&p.session_id, 64)
        )));
    };
    if st.bound.as_ref().is_some_and(|b| Arc::ptr_eq(b, &hub)) {
        return reply.ok(&SessionIdResult {
            session_id: p.session_id,
        });
    }
    bind_to(io, st, reply, hub);
}

/// Moves this connection (only) to `hub`: unbind, then reply `{session_id}` and receive the
/// new session's live events.
fn bind_to<M>(io: &Io, st: &mut State, reply: &Reply<M>, hub: Arc<SessionHub>)
where
    M: MethodDef<Result = SessionIdResult>,
{
    st.unbind(io);
    hub.bind(&io.conn, st.scope(), None, |_| {
        reply.ok(&SessionIdResult {
            session_id: hub.id().to_string(),
        })
    });
    st.bound = Some(hub);
}

pub(crate) fn channels_list(io: &Io, _: &mut State, reply: &Reply<def::ChannelsList>, _: Empty) {
    reply.ok(&ChannelsListResult {
        channels: io.ctx.channels(),
    });
}

/// The scope's feature was checked by preflight. `session_id` defaults to the bound session;
/// an unknown one is `not_found`.
pub(crate) fn usage_report(
    io: &Io,
    st: &mut State,
    reply: &Reply<def::UsageReport>,
    p: UsageReportParams,
) {
    let scope = p.scope.unwrap_or(UsageScope::Session);
    let session_id = match (p.session_id, &st.bound) {
        (Some(id), _) => id,
        (None, Some(hub)) => hub.id().to_string(),
        (None, None) => return reply.err(internal("this connection is not bound to a session")),
    };
    if !io
        .host
        .directory
        .list()
        .iter()
        .any(|e| e.session_id == session_id)
    {
        return reply.err(not_found(format!(
            "no session {:?}",
            carrier_protocol::envelope::truncate(&session_id, 64)
        )));
    }
    match io.host.usage.report(scope, &session_id) {
        Ok(report) => reply.ok(&report),
        Err(e) => reply.err(internal(format!("the usage reporter failed: {e}"))),
    }
}
