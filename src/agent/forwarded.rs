//! `session.history` and `session.status` when the agent answers them itself (an agent
//! process): the read is forwarded, and the reply is sent from a task of its own when the
//! agent's answer (or its timeout) arrives. An agent that keeps no record of its own is served
//! from the carrier's record, at once, as with the embedded agent.

use std::sync::Arc;

use super::hub::SessionHub;
use super::reply::{DetachedReply, Reply};
use super::session::{ForwardedRead, ReadFuture};
use crate::protocol::catalog::{def, MethodDef};
use crate::protocol::methods::SessionStatusResult;

/// `session.history`.
pub(crate) fn history(
    hub: &Arc<SessionHub>,
    reply: &Reply<'_, def::SessionHistory>,
    limit: Option<u32>,
) {
    let Some(read) = hub.agent.history(limit) else {
        return reply.ok(&hub.history(limit));
    };
    forward(hub, reply, read, move |hub, answer| match answer {
        Some(history) => history,
        None => hub.history(limit),
    });
}

/// `session.status`: the agent's state and turn, under the carrier's session id.
pub(crate) fn status(hub: &Arc<SessionHub>, reply: &Reply<'_, def::SessionStatus>) {
    let Some(read) = hub.agent.status() else {
        return reply.ok(&hub.status());
    };
    forward(hub, reply, read, |hub, answer| match answer {
        Some(status) => SessionStatusResult {
            session_id: hub.id().to_owned(),
            state: status.state,
            turn_id: status.turn_id,
        },
        None => hub.status(),
    });
}

/// Awaits `read` on its own task and answers with `result(hub, Some(answer))`, or
/// `result(hub, None)` to use the carrier's record. Without a runtime to wait on, the record
/// answers at once.
fn forward<M, T>(
    hub: &Arc<SessionHub>,
    reply: &Reply<'_, M>,
    read: ReadFuture<T>,
    result: impl FnOnce(&SessionHub, Option<T>) -> M::Result + Send + 'static,
) where
    M: MethodDef + 'static,
    M::Result: Send,
    T: Send + 'static,
{
    let reply: DetachedReply<M> = reply.detach();
    let hub = hub.clone();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return reply.ok(&result(&hub, None));
    };
    runtime.spawn(async move {
        match read.await {
            ForwardedRead::Answer(answer) => reply.ok(&result(&hub, Some(answer))),
            ForwardedRead::FromRecord => reply.ok(&result(&hub, None)),
            ForwardedRead::Failed(error) => reply.err(error),
        }
    });
}
