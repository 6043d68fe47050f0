//! The ACP methods an `/acp` connection takes, one function each: each answers its request
//! (or returns the error to answer it with), and binds, drives or lets go of sessions.

use std::sync::Arc;

use serde_json::value::RawValue;

use super::{AcpConnection, Join, JOIN};
use crate::profile::link::{Link, PendingPrompt, MAX_PROMPTS};
use crate::profile::listener::AcpListener;
use crate::profile::messages::*;
use crate::rpc::{self, ErrorObject, Id};
use carrier_agent::foreign::{
    Answer, EntryMeta, EventListener, Quiet, Recorded, SessionHandle, ENVELOPE_BYTES,
};
use carrier_protocol::envelope::truncate;
use carrier_protocol::error::ErrorCode;
use carrier_protocol::ids::TurnId;
use carrier_protocol::methods::{HistoryRole, SubmitParams, TurnIdResult};

/// A method's params as `T` (absent params read as `{}`), or the `-32602` answer.
fn params<T: serde::de::DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    serde_json::from_str(params.map_or("{}", RawValue::get)).map_err(ErrorObject::invalid_params)
}

impl AcpConnection {
    pub(super) fn initialize(
        &mut self,
        id: &Id,
        params: Option<&RawValue>,
    ) -> Result<(), ErrorObject> {
        // One major version: whatever a client asks for, carrier answers with its own (which
        // is the one asked for when the client speaks it), as ACP's negotiation says.
        let _asked: InitializeParams = self::params(params)?;
        self.link.reply(
            id,
            &InitializeResult {
                protocol_version: PROTOCOL_VERSION,
                agent_capabilities: AgentCapabilities {
                    load_session: true,
                    prompt_capabilities: PromptCapabilities {
                        image: false,
                        audio: false,
                        embedded_context: false,
                    },
                    mcp_capabilities: McpCapabilities {
                        http: false,
                        sse: false,
                    },
                },
                agent_info: Implementation {
                    name: self.ctx().server_name(),
                    title: "carrier",
                    version: self.ctx().server_version(),
                },
                auth_methods: [],
            },
        );
        self.initialized = true;
        // After the answer is queued, so no channel frame goes ahead of it.
        self.conn().mark_handshaken();
        Ok(())
    }

    pub(super) fn join(&mut self, params: Option<&RawValue>) -> Result<(), ErrorObject> {
        let p: SessionParams = self::params(params)?;
        self.join = Some(match self.sessions.open(&p.session_id) {
            Some(handle) => Join::Session(handle),
            None => Join::Unknown(truncate(&p.session_id, 64).to_owned()),
        });
        Ok(())
    }

    /// The session `session/new` binds: the joined one, the host's default one for an
    /// observer (which starts none), a new one otherwise.
    fn session_for_new(&self, cwd: &str) -> Result<SessionHandle, ErrorObject> {
        match &self.join {
            Some(Join::Session(handle)) => Ok(handle.clone()),
            Some(Join::Unknown(id)) => Err(ErrorObject::new(
                rpc::RESOURCE_NOT_FOUND,
                format!("no carrier session {id:?} (named by {JOIN})"),
            )),
            None if !self.drives() => self
                .sessions
                .initial(self.conn())
                .ok_or_else(|| ErrorObject::internal("the host has no session to bind to")),
            None => {
                let limits = self.ctx().limits();
                let title = format!("acp: {cwd}");
                let title = truncate(&title, limits.max_title_bytes);
                self.sessions
                    .start(Some(title), limits.max_sessions)
                    .map_err(carrier_error)
            }
        }
    }

    pub(super) fn new_session(
        &mut self,
        id: &Id,
        params: Option<&RawValue>,
    ) -> Result<(), ErrorObject> {
        let p: NewSessionParams = self::params(params)?;
        let handle = self.session_for_new(&p.cwd)?;
        self.bind(handle, |link, handle, _history| {
            link.reply(
                id,
                &NewSessionResult {
                    session_id: handle.id().as_str(),
                },
            );
        })
    }

    pub(super) fn load_session(
        &mut self,
        id: &Id,
        params: Option<&RawValue>,
    ) -> Result<(), ErrorObject> {
        let p: LoadSessionParams = self::params(params)?;
        let Some(handle) = self.sessions.open(&p.session_id) else {
            return Err(ErrorObject::new(
                rpc::RESOURCE_NOT_FOUND,
                format!("no carrier session {:?}", truncate(&p.session_id, 64)),
            ));
        };
        self.bind(handle, |link, handle, history| {
            replay(link, handle.id().as_str(), history);
            link.reply(id, &serde_json::json!({}));
        })
    }

    /// Binds `handle` to this connection: `greet` answers (under the session's lock, so the
    /// answer comes before any live event), then the session's events follow.
    fn bind(
        &mut self,
        handle: SessionHandle,
        greet: impl FnOnce(&Link, &SessionHandle, Vec<(EntryMeta, Recorded)>),
    ) -> Result<(), ErrorObject> {
        let session_id = handle.id().as_str().to_owned();
        let max = self.ctx().limits().max_sessions;
        if !self.bound.contains_key(&session_id) && self.bound.len() >= max {
            return Err(ErrorObject {
                data: Some(
                    serde_json::json!({ "code": "limit_exceeded", "limit": "max_sessions", "value": max }),
                ),
                ..ErrorObject::internal(format!(
                    "this connection has bound {max} sessions (limits.max_sessions)"
                ))
            });
        }
        let listener: Arc<dyn EventListener> =
            Arc::new(AcpListener::new(self.link.clone(), session_id.clone()));
        let link = self.link.clone();
        let budget = self
            .ctx()
            .limits()
            .queue_bytes
            .saturating_sub(ENVELOPE_BYTES);
        handle.listen(listener, budget, |history| greet(&link, &handle, history));
        self.bound.insert(session_id, handle);
        Ok(())
    }

    fn bound_session(&self, session_id: &str) -> Result<&SessionHandle, ErrorObject> {
        self.bound.get(session_id).ok_or_else(|| {
            ErrorObject::new(
                rpc::RESOURCE_NOT_FOUND,
                format!(
                    "no session {:?} on this connection: session/new or session/load it first",
                    truncate(session_id, 64)
                ),
            )
        })
    }

    pub(super) fn prompt(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), ErrorObject> {
        if !self.drives() {
            return Err(forbidden());
        }
        let p: PromptParams = self::params(params)?;
        let handle = self.bound_session(&p.session_id)?.clone();
        if self.link.state().prompts.len() >= MAX_PROMPTS {
            return Err(ErrorObject {
                data: Some(
                    serde_json::json!({ "code": "limit_exceeded", "limit": "prompts", "value": MAX_PROMPTS }),
                ),
                ..ErrorObject::internal(format!(
                    "this connection has {MAX_PROMPTS} prompts running: wait for one to end"
                ))
            });
        }
        let mut prompt = String::new();
        for block in &p.prompt {
            match (block.kind.as_str(), &block.text) {
                ("text", Some(text)) => prompt.push_str(text),
                (kind, _) => {
                    return Err(ErrorObject::invalid_params(format!(
                        "carrier takes text prompts only, not a {:?} block",
                        truncate(kind, 64)
                    )))
                }
            }
        }
        let answer = PromptAnswer {
            link: &self.link,
            id,
            session_id: handle.id().as_str(),
        };
        let params = SubmitParams {
            prompt,
            options: None,
        };
        let cap = self.ctx().limits().max_reply_bytes;
        handle.submit(&answer, params, self.ctx().driver().clone(), cap);
        Ok(())
    }

    pub(super) fn cancel(&mut self, params: Option<&RawValue>) -> Result<(), ErrorObject> {
        if !self.drives() {
            return Err(forbidden());
        }
        let p: SessionParams = self::params(params)?;
        // No turn running (or another wire's abort came first): nothing to do.
        self.bound_session(&p.session_id)?.abort(&Quiet, None);
        Ok(())
    }

    /// `$/cancel_request` for a running `session/prompt` cancels its turn; for anything else
    /// (already answered) there is nothing to cancel.
    pub(super) fn cancel_request(&mut self, params: Option<&RawValue>) -> Result<(), ErrorObject> {
        if !self.drives() {
            return Err(forbidden());
        }
        let p: CancelRequestParams = self::params(params)?;
        let running = {
            let state = self.link.state();
            state
                .prompts
                .iter()
                .find(|prompt| prompt.id == p.request_id)
                .map(|prompt| (prompt.session_id.clone(), prompt.turn_id.clone()))
        };
        if let Some((session_id, turn_id)) = running {
            if let Some(handle) = self.bound.get(&session_id) {
                handle.abort(&Quiet, Some(&turn_id));
            }
        }
        Ok(())
    }
}

/// The history as the updates a client would have seen: each user entry as a
/// `user_message_chunk`, each reply as an `agent_message_chunk`, each agent update as the
/// agent sent it; the newest that fit the connection's outbound budget.
fn replay(link: &Link, session_id: &str, history: Vec<(EntryMeta, Recorded)>) {
    let budget = link.ctx.limits().queue_bytes.saturating_sub(ENVELOPE_BYTES);
    let mut frames = Vec::new();
    let mut total = 0;
    for (_, recorded) in history.iter().rev() {
        let frame = match recorded {
            Recorded::Said(entry) => {
                let content = Text { text: &entry.text };
                let update = match entry.role {
                    HistoryRole::User => Update::UserMessageChunk { content },
                    _ => Update::AgentMessageChunk { content },
                };
                rpc::encode_notification("session/update", &SessionUpdate { session_id, update })
            }
            Recorded::AgentUpdate(agent) => rpc::encode_notification(
                "session/update",
                &ForwardedUpdate {
                    session_id,
                    update: &agent.update,
                },
            ),
        };
        let Ok(frame) = frame else {
            continue;
        };
        total += frame.len();
        if total > budget {
            tracing::debug!(conn = %link.conn.id(), left_out = history.len() - frames.len(), "history replay fitted to the outbound budget");
            break;
        }
        frames.push(frame);
    }
    for frame in frames.into_iter().rev() {
        if !link.send(frame) {
            return;
        }
    }
}

fn forbidden() -> ErrorObject {
    ErrorObject {
        data: Some(serde_json::json!({ "code": "forbidden" })),
        ..ErrorObject::internal("forbidden: observe role")
    }
}

/// A carrier error as a JSON-RPC one: an unknown session is ACP's "resource not found",
/// everything else an internal error; `data` carries carrier's code and data.
fn carrier_error(error: carrier_protocol::error::ErrorObject) -> ErrorObject {
    let code = match error.code {
        ErrorCode::NotFound => rpc::RESOURCE_NOT_FOUND,
        _ => rpc::INTERNAL_ERROR,
    };
    let mut data = serde_json::Map::new();
    data.insert("code".into(), error.code.as_str().into());
    if let Some(serde_json::Value::Object(more)) = error.data {
        data.extend(more);
    }
    ErrorObject {
        data: Some(serde_json::Value::Object(data)),
        ..ErrorObject::new(code, error.message)
    }
}

/// The answer to a `session/prompt` when the session takes or refuses it: a started turn is
/// remembered, to be answered when it ends; a refusal (a turn already running) is answered
/// at once.
struct PromptAnswer<'a> {
    link: &'a Link,
    id: &'a Id,
    session_id: &'a str,
}

impl Answer<TurnIdResult> for PromptAnswer<'_> {
    fn ok(&self, started: &TurnIdResult) {
        // Under the session's lock, before its `turn_started`: the listener knows the turn
        // as this connection's own from its first event.
        self.link.state().prompts.push(PendingPrompt {
            id: self.id.clone(),
            session_id: self.session_id.to_owned(),
            turn_id: TurnId::from(started.turn_id.as_str()),
            error: None,
        });
    }

    fn err(&self, error: carrier_protocol::error::ErrorObject) {
        self.link.fail(Some(self.id), &carrier_error(error));
    }
}
