//! The ACP messages of the `/acp` profile as types: the params carrier reads from a client,
//! and the results, updates and requests it writes (ACP v1's field names, camelCase).
//! Unknown members (`_meta`, newer fields) are ignored on the way in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The ACP major version carrier speaks.
pub(crate) const PROTOCOL_VERSION: u16 = 1;

/// `initialize` params: only the version is checked (carrier calls no client method, so the
/// client's capabilities change nothing, and whatever version is asked for, carrier answers
/// with its own).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeParams {
    #[allow(dead_code)] // required by ACP, and read to be checked
    pub(crate) protocol_version: u16,
}

/// `session/new` params. `cwd` and `mcpServers` are required by ACP and read to be checked;
/// the carrier session's agent is the host's, so neither reaches it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionParams {
    pub(crate) cwd: String,
    #[allow(dead_code)] // required by ACP; carrier's agents take no MCP servers from a client
    pub(crate) mcp_servers: Vec<Value>,
}

/// `session/load` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoadSessionParams {
    pub(crate) session_id: String,
    #[allow(dead_code)] // required by ACP; see `NewSessionParams`
    pub(crate) cwd: String,
    #[allow(dead_code)]
    pub(crate) mcp_servers: Vec<Value>,
}

/// `session/prompt` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptParams {
    pub(crate) session_id: String,
    pub(crate) prompt: Vec<ContentBlock>,
}

/// One block of a prompt: carrier's prompts are text, so only `text` blocks are taken.
#[derive(Deserialize)]
pub(crate) struct ContentBlock {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// `session/cancel` params (and `_carrier/join`'s).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionParams {
    pub(crate) session_id: String,
}

/// `$/cancel_request` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancelRequestParams {
    pub(crate) request_id: crate::rpc::Id,
}

/// A client's answer to `session/request_permission`.
#[derive(Deserialize)]
pub(crate) struct PermissionAnswer {
    pub(crate) outcome: PermissionOutcome,
}

/// What the client chose.
#[derive(Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum PermissionOutcome {
    /// One of the offered options.
    Selected {
        #[serde(rename = "optionId")]
        option_id: String,
    },
    /// The client's prompt turn was cancelled: it gives no answer.
    Cancelled,
}

/// `initialize` result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitializeResult<'a> {
    pub(crate) protocol_version: u16,
    pub(crate) agent_capabilities: AgentCapabilities,
    pub(crate) agent_info: Implementation<'a>,
    pub(crate) auth_methods: [(); 0],
}

/// What carrier offers as an agent: `session/load`, and text prompts only.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentCapabilities {
    pub(crate) load_session: bool,
    pub(crate) prompt_capabilities: PromptCapabilities,
    pub(crate) mcp_capabilities: McpCapabilities,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptCapabilities {
    pub(crate) image: bool,
    pub(crate) audio: bool,
    pub(crate) embedded_context: bool,
}

#[derive(Serialize)]
pub(crate) struct McpCapabilities {
    pub(crate) http: bool,
    pub(crate) sse: bool,
}

/// `agentInfo`.
#[derive(Serialize)]
pub(crate) struct Implementation<'a> {
    pub(crate) name: &'a str,
    pub(crate) title: &'a str,
    pub(crate) version: &'a str,
}

/// `session/new` result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionResult<'a> {
    pub(crate) session_id: &'a str,
}

/// `session/prompt` result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptResult<'a> {
    pub(crate) stop_reason: &'a str,
}

/// `session/update` params.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionUpdate<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) update: Update<'a>,
}

/// The updates carrier makes itself from a session's events and history.
#[derive(Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub(crate) enum Update<'a> {
    /// What a user asked (another client's prompt, or the history's).
    UserMessageChunk { content: Text<'a> },
    /// The agent's reply, streamed or replayed.
    AgentMessageChunk { content: Text<'a> },
}

/// `session/update` params carrying an agent's update as the agent sent it (an ACP agent's tool
/// calls, plans, thoughts, …).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ForwardedUpdate<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) update: &'a carrier_protocol::events::RawObject,
}

/// A text content block.
#[derive(Serialize)]
#[serde(tag = "type", rename = "text")]
pub(crate) struct Text<'a> {
    pub(crate) text: &'a str,
}

/// `session/request_permission` params.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestPermission<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) tool_call: ToolCallField<'a>,
    pub(crate) options: Options<'a>,
}

/// The tool call a permission is asked for: an ACP agent's own (passed on as it sent it), or
/// the one carrier makes of another agent's prompt.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum ToolCallField<'a> {
    Agent(&'a Value),
    Carrier(ToolCall<'a>),
}

/// The options of a permission prompt: an ACP agent's own, or carrier's two.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Options<'a> {
    Agent(&'a [carrier_protocol::events::PermissionOption]),
    Carrier(&'a [PermissionOption<'a>]),
}

/// The tool call carrier makes of a prompt of an agent that is not an ACP one: the prompt's
/// request id, the tool's name and its input.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCall<'a> {
    pub(crate) tool_call_id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) status: &'a str,
    pub(crate) raw_input: &'a Value,
}

/// One option of a permission prompt.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PermissionOption<'a> {
    pub(crate) option_id: &'a str,
    pub(crate) name: &'a str,
    pub(crate) kind: &'a str,
}

/// `$/cancel_request` params.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancelRequest {
    pub(crate) request_id: i64,
}
