//! [`AcpConnection`]: one `/acp` connection. Each text frame is one JSON-RPC message, read
//! by `jsonrpc` and answered here:
//!
//! - `initialize` first (anything else before it: `-32600`); then the connection takes
//!   channel frames;
//! - `session/new` starts a carrier session (or joins the one `_carrier/join` named, or, for
//!   an observer, the host's default one), `session/load` binds an existing one after
//!   replaying its history; either way the session's events then reach the connection (see
//!   `listener`);
//! - `session/prompt` starts a turn, answered when it ends; `session/cancel` aborts it;
//! - the answers to carrier's `session/request_permission`s decide the session's prompts.
//!
//! An observer may do everything but prompt, cancel and answer prompts.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::jsonrpc::{self, Id, Incoming, RpcCode, RpcError};
use super::link::{Link, PendingPrompt};
use super::listener::AcpListener;
use super::messages::*;
use carrier_agent::foreign::{
    Answer, EntryMeta, EventListener, Quiet, SessionHandle, Sessions, ENVELOPE_BYTES,
};
use carrier_protocol::envelope::truncate;
use carrier_protocol::error::{ErrorCode, ErrorObject};
use carrier_protocol::events::ProtocolErrorPayload;
use carrier_protocol::ids::TurnId;
use carrier_protocol::methods::{
    Decision, HistoryEntry, HistoryRole, PermissionRespondParams, SubmitParams, TurnIdResult,
};
use carrier_protocol::Role;
use carrier_server::{CarrierContext, ChannelRefusal, Connection, TextSession};

/// The notification that makes `session/new` join an existing carrier session on this
/// connection instead of starting one (what `carrier acp --session ID` sends first).
pub(crate) const JOIN: &str = "_carrier/join";

/// The notification that answers a binary frame the carrier could not route: the agent
/// protocol's `protocol_error` payload, as an extension notification ACP clients may ignore.
pub(crate) const PROTOCOL_ERROR: &str = "_carrier/protocol_error";

/// The session `session/new` joins, as `_carrier/join` named it.
enum Join {
    Session(SessionHandle),
    /// A session the host does not know (its id cut to 64 bytes, for the answer).
    Unknown(String),
}

/// The per-connection side of [`super::AcpProfile`].
pub(crate) struct AcpConnection {
    sessions: Sessions,
    link: Arc<Link>,
    initialized: bool,
    join: Option<Join>,
    /// The sessions this connection has bound (`session/new`, `session/load`), by id: at most
    /// `limits.max_sessions`.
    bound: HashMap<String, SessionHandle>,
}

impl AcpConnection {
    pub(crate) fn open(sessions: Sessions, conn: Connection, ctx: CarrierContext) -> Self {
        AcpConnection {
            sessions,
            link: Arc::new(Link::new(conn, ctx)),
            initialized: false,
            join: None,
            bound: HashMap::new(),
        }
    }

    fn conn(&self) -> &Connection {
        &self.link.conn
    }

    fn ctx(&self) -> &CarrierContext {
        &self.link.ctx
    }

    fn drives(&self) -> bool {
        self.conn().role() == Role::Drive
    }

    fn request(&mut self, id: Id, method: &str, params: Option<&RawValue>) {
        if !self.initialized && method != "initialize" {
            let error = RpcError::new(
                RpcCode::InvalidRequest,
                format!("Invalid Request: {method} before initialize"),
            );
            self.link.fail(&id, &error);
            return;
        }
        let done = match method {
            "initialize" => self.initialize(&id, params),
            "session/new" => self.new_session(&id, params),
            "session/load" => self.load_session(&id, params),
            "session/prompt" => self.prompt(id.clone(), params),
            _ => Err(RpcError::new(
                RpcCode::MethodNotFound,
                format!("Method not found: {}", truncate(method, 64)),
            )),
        };
        if let Err(error) = done {
            self.link.fail(&id, &error);
        }
    }

    fn notification(&mut self, method: &str, params: Option<&RawValue>) {
        let done = match method {
            JOIN => self.join(params),
            "session/cancel" if self.initialized => self.cancel(params),
            "$/cancel_request" if self.initialized => self.cancel_request(params),
            // Unknown notifications (extensions included) are ignored, as JSON-RPC asks.
            _ => Ok(()),
        };
        if let Err(error) = done {
            tracing::debug!(conn = %self.conn().id(), method, error = %error.message, "notification ignored");
        }
    }

    fn initialize(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let p: InitializeParams = jsonrpc::params(params, "initialize")?;
        // One major version: the one asked for when it is carrier's, carrier's otherwise.
        let _asked = p.protocol_version;
        self.link.reply(
            id,
            InitializeResult {
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

    fn join(&mut self, params: Option<&RawValue>) -> Result<(), RpcError> {
        let p: SessionParams = jsonrpc::params(params, JOIN)?;
        self.join = Some(match self.sessions.open(&p.session_id) {
            Some(handle) => Join::Session(handle),
            None => Join::Unknown(truncate(&p.session_id, 64).to_owned()),
        });
        Ok(())
    }

    /// The session `session/new` binds: the joined one, the host's default one for an
    /// observer (which starts none), a new one otherwise.
    fn session_for_new(&self, cwd: &str) -> Result<SessionHandle, RpcError> {
        match &self.join {
            Some(Join::Session(handle)) => Ok(handle.clone()),
            Some(Join::Unknown(id)) => Err(RpcError::new(
                RpcCode::ResourceNotFound,
                format!("no carrier session {id:?} (named by {JOIN})"),
            )),
            None if !self.drives() => self.sessions.initial(self.conn()).ok_or_else(|| {
                RpcError::new(RpcCode::Internal, "the host has no session to bind to")
            }),
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

    fn new_session(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let p: NewSessionParams = jsonrpc::params(params, "session/new")?;
        let handle = self.session_for_new(&p.cwd)?;
        self.bind(handle, |link, handle, _history| {
            link.reply(
                id,
                NewSessionResult {
                    session_id: handle.id().as_str(),
                },
            );
        })
    }

    fn load_session(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let p: LoadSessionParams = jsonrpc::params(params, "session/load")?;
        let Some(handle) = self.sessions.open(&p.session_id) else {
            return Err(RpcError::new(
                RpcCode::ResourceNotFound,
                format!("no carrier session {:?}", truncate(&p.session_id, 64)),
            ));
        };
        self.bind(handle, |link, handle, history| {
            replay(link, handle.id().as_str(), history);
            link.reply(id, serde_json::json!({}));
        })
    }

    /// Binds `handle` to this connection: `greet` answers (under the session's lock, so the
    /// answer comes before any live event), then the session's events follow.
    fn bind(
        &mut self,
        handle: SessionHandle,
        greet: impl FnOnce(&Link, &SessionHandle, Vec<(EntryMeta, HistoryEntry)>),
    ) -> Result<(), RpcError> {
        let session_id = handle.id().as_str().to_owned();
        let max = self.ctx().limits().max_sessions;
        if !self.bound.contains_key(&session_id) && self.bound.len() >= max {
            return Err(RpcError::new(
                RpcCode::Internal,
                format!("this connection has bound {max} sessions (limits.max_sessions)"),
            )
            .with_data(serde_json::json!({ "code": "limit_exceeded", "limit": "max_sessions", "value": max })));
        }
        let listener: Arc<dyn EventListener> =
            Arc::new(AcpListener::new(self.link.clone(), session_id.clone()));
        let link = self.link.clone();
        let budget = self.budget();
        handle.listen(listener, budget, |history| greet(&link, &handle, history));
        self.bound.insert(session_id, handle);
        Ok(())
    }

    /// What an answer built from a session's history may take of the outbound budget.
    fn budget(&self) -> usize {
        self.ctx()
            .limits()
            .queue_bytes
            .saturating_sub(ENVELOPE_BYTES)
    }

    fn bound_session(&self, session_id: &str) -> Result<&SessionHandle, RpcError> {
        self.bound.get(session_id).ok_or_else(|| {
            RpcError::new(
                RpcCode::ResourceNotFound,
                format!(
                    "no session {:?} on this connection: session/new or session/load it first",
                    truncate(session_id, 64)
                ),
            )
        })
    }

    fn prompt(&mut self, id: Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        if !self.drives() {
            return Err(forbidden());
        }
        let p: PromptParams = jsonrpc::params(params, "session/prompt")?;
        let handle = self.bound_session(&p.session_id)?.clone();
        let mut prompt = String::new();
        for block in &p.prompt {
            match (block.kind.as_str(), &block.text) {
                ("text", Some(text)) => prompt.push_str(text),
                (kind, _) => {
                    return Err(RpcError::new(
                        RpcCode::InvalidParams,
                        format!(
                            "Invalid params: carrier takes text prompts only, not a {:?} block",
                            truncate(kind, 64)
                        ),
                    ))
                }
            }
        }
        let limits = self.ctx().limits();
        let answer = PromptAnswer {
            link: &self.link,
            id,
            session_id: handle.id().as_str(),
        };
        let params = SubmitParams {
            prompt,
            options: None,
        };
        handle.submit(
            &answer,
            params,
            self.ctx().driver().clone(),
            limits.max_reply_bytes,
        );
        Ok(())
    }

    fn cancel(&mut self, params: Option<&RawValue>) -> Result<(), RpcError> {
        if !self.drives() {
            return Err(forbidden());
        }
        let p: SessionParams = jsonrpc::params(params, "session/cancel")?;
        // No turn running (or another wire's abort came first): nothing to do.
        self.bound_session(&p.session_id)?.abort(&Quiet, None);
        Ok(())
    }

    /// `$/cancel_request` for a running `session/prompt` cancels its turn; for anything else
    /// (already answered) there is nothing to cancel.
    fn cancel_request(&mut self, params: Option<&RawValue>) -> Result<(), RpcError> {
        if !self.drives() {
            return Err(forbidden());
        }
        let p: CancelRequestParams = jsonrpc::params(params, "$/cancel_request")?;
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

    /// A client's answer to a `session/request_permission`: decides the prompt, unless another
    /// wire did first (then the session ignores it).
    fn response(&mut self, id: Id, outcome: Result<&RawValue, &RawValue>) {
        let Id::Number(number) = id else {
            return tracing::debug!(conn = %self.conn().id(), "a response to no request of carrier's");
        };
        let asked = {
            let mut state = self.link.state();
            let at = state
                .asked
                .iter()
                .position(|a| Ok(a.id) == u64::try_from(number));
            at.map(|at| state.asked.swap_remove(at))
        };
        let Some(asked) = asked else {
            // Withdrawn (answered elsewhere, its turn ended) or never sent.
            return;
        };
        let decision = match outcome
            .map(|result| serde_json::from_str::<PermissionAnswer>(result.get()))
        {
            Ok(Ok(PermissionAnswer {
                outcome: PermissionOutcome::Selected { option_id },
            })) => match option_id.as_str() {
                "allow" => Decision::Allow,
                "deny" => Decision::Deny,
                other => {
                    return tracing::debug!(conn = %self.conn().id(), option = truncate(other, 64), "an option carrier did not offer");
                }
            },
            // The client gives no answer: its turn was cancelled, or it failed.
            Ok(Ok(PermissionAnswer {
                outcome: PermissionOutcome::Cancelled,
            }))
            | Err(_) => return,
            Ok(Err(e)) => {
                return tracing::debug!(conn = %self.conn().id(), error = %e, "an unreadable permission answer");
            }
        };
        if let Some(handle) = self.bound.get(&asked.session_id) {
            let params = PermissionRespondParams {
                request_id: asked.request_id,
                decision,
            };
            // Answered elsewhere in the meantime: the session ignores it.
            handle.respond_permission(&Quiet, params);
        }
    }
}

/// The history as the updates a client would have seen: each user entry as a
/// `user_message_chunk`, each reply as an `agent_message_chunk`, the newest that fit the
/// connection's outbound budget.
fn replay(link: &Link, session_id: &str, history: Vec<(EntryMeta, HistoryEntry)>) {
    let budget = link.ctx.limits().queue_bytes.saturating_sub(ENVELOPE_BYTES);
    let mut frames = Vec::new();
    let mut total = 0;
    for (_, entry) in history.iter().rev() {
        let content = Text { text: &entry.text };
        let update = match entry.role {
            HistoryRole::User => Update::UserMessageChunk { content },
            _ => Update::AgentMessageChunk { content },
        };
        let frame = match jsonrpc::encode_notification(
            "session/update",
            SessionUpdate { session_id, update },
        ) {
            Ok(frame) => frame,
            Err(_) => continue,
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

fn forbidden() -> RpcError {
    RpcError::new(RpcCode::Internal, "forbidden: observe role")
        .with_data(serde_json::json!({ "code": "forbidden" }))
}

/// A carrier error as a JSON-RPC one: an unknown session is ACP's "resource not found",
/// everything else an internal error; `data` carries carrier's code and data.
fn carrier_error(error: ErrorObject) -> RpcError {
    let code = match error.code {
        ErrorCode::NotFound => RpcCode::ResourceNotFound,
        _ => RpcCode::Internal,
    };
    let mut data = serde_json::Map::new();
    data.insert("code".into(), error.code.as_str().into());
    if let Some(serde_json::Value::Object(more)) = error.data {
        data.extend(more);
    }
    RpcError::new(code, error.message).with_data(serde_json::Value::Object(data))
}

/// The answer to a `session/prompt` when the session takes or refuses it: a started turn is
/// remembered, to be answered when it ends; a refusal (a turn already running) is answered
/// at once.
struct PromptAnswer<'a> {
    link: &'a Link,
    id: Id,
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

    fn err(&self, error: ErrorObject) {
        self.link.fail(&self.id, &carrier_error(error));
    }
}

impl TextSession for AcpConnection {
    fn on_text(&mut self, text: &str) {
        match jsonrpc::parse(text) {
            Err(unreadable) => {
                self.link.fail(&unreadable.id, &unreadable.error);
            }
            Ok(Incoming::Request { id, method, params }) => self.request(id, method, params),
            Ok(Incoming::Notification { method, params }) => self.notification(method, params),
            Ok(Incoming::Response { id, outcome }) => self.response(id, outcome),
            Ok(Incoming::Discarded) => {
                tracing::debug!(conn = %self.conn().id(), "an invalid response, not answered");
            }
        }
    }

    /// `-32600` with the request's id when it has one that can be read.
    fn too_large(&mut self, message: &[u8], limit: usize) -> Option<bytes::Bytes> {
        self.ctx().count_protocol_error();
        let id = jsonrpc::id_of(message);
        let error = RpcError::new(
            RpcCode::InvalidRequest,
            format!(
                "Invalid Request: the message is {} bytes, over the {limit}-byte limit",
                message.len()
            ),
        )
        .with_data(
            serde_json::json!({ "code": "too_large", "limit": limit, "size": message.len() }),
        );
        Some(jsonrpc::encode_error(&id, &error).into())
    }

    /// A binary frame the carrier could not route: the agent protocol's `protocol_error`
    /// payload as the extension notification `_carrier/protocol_error`.
    fn channel_refused(&mut self, refusal: &ChannelRefusal) -> Option<bytes::Bytes> {
        let payload = ProtocolErrorPayload {
            code: refusal.code(),
            message: refusal.message().to_owned(),
            channel: refusal.channel().map(str::to_owned),
            seq: refusal.seq(),
            limit: None,
            size: None,
        };
        let frame = jsonrpc::encode_notification(PROTOCOL_ERROR, payload).ok()?;
        Some(frame.into())
    }

    fn on_close(&mut self) {
        let id = self.conn().id();
        for handle in std::mem::take(&mut self.bound).into_values() {
            handle.unbind(id);
        }
        let mut state = self.link.state();
        state.prompts.clear();
        state.asked.clear();
    }
}
