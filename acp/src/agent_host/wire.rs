//! The ACP v1 messages carrier sends a hosted agent and the fields it reads from the agent's,
//! typed with exactly those fields (ACP's JSON Schema, `schema/v1/schema.json`, is the
//! reference; the tests check every message carrier sends against it). Everything else an agent
//! sends is passed on as it came or ignored.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The ACP protocol version carrier speaks (ACP's `protocolVersion` is one integer, the major).
pub(crate) const ACP_VERSION: u16 = 1;

/// `initialize` params: carrier's name, and no `fs` or `terminal` (the agent works on its own
/// files and runs its own commands).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Initialize {
    pub(crate) protocol_version: u16,
    pub(crate) client_capabilities: ClientCapabilities,
    pub(crate) client_info: Implementation,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClientCapabilities {
    pub(crate) fs: FileSystem,
    pub(crate) terminal: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileSystem {
    pub(crate) read_text_file: bool,
    pub(crate) write_text_file: bool,
}

/// ACP's `Implementation`: a program's name and version.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Implementation {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) version: String,
}

impl Initialize {
    pub(crate) fn carrier() -> Self {
        Initialize {
            protocol_version: ACP_VERSION,
            client_capabilities: ClientCapabilities {
                fs: FileSystem {
                    read_text_file: false,
                    write_text_file: false,
                },
                terminal: false,
            },
            client_info: Implementation {
                name: "carrier".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        }
    }
}

/// What carrier reads of the `initialize` result.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Initialized {
    pub(crate) protocol_version: u16,
    #[serde(default)]
    pub(crate) agent_info: Option<Implementation>,
    #[serde(default)]
    pub(crate) auth_methods: Vec<AuthMethod>,
}

/// What carrier reads of an `authMethods` entry: enough to name it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AuthMethod {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// `session/new` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSession<'a> {
    pub(crate) cwd: &'a str,
    /// Always empty: carrier configures no MCP servers for the agent.
    pub(crate) mcp_servers: [(); 0],
}

/// What carrier reads of the `session/new` result.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionResult {
    pub(crate) session_id: String,
}

/// `session/prompt` params: the carrier prompt as one text block.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Prompt<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) prompt: [TextBlock<'a>; 1],
}

/// ACP's text `ContentBlock`.
#[derive(Debug, Serialize)]
pub(crate) struct TextBlock<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) text: &'a str,
}

impl<'a> Prompt<'a> {
    pub(crate) fn text(session_id: &'a str, text: &'a str) -> Self {
        Prompt {
            session_id,
            prompt: [TextBlock { kind: "text", text }],
        }
    }
}

/// What carrier reads of the `session/prompt` result.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptResult {
    pub(crate) stop_reason: String,
}

/// `session/cancel` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Cancel<'a> {
    pub(crate) session_id: &'a str,
}

/// `session/update` params, the update kept as the agent wrote it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionUpdate {
    pub(crate) session_id: String,
    pub(crate) update: Box<RawValue>,
}

/// What carrier reads of an update to route it: its kind, and a message chunk's content.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpdateHead {
    pub(crate) session_update: String,
    #[serde(default)]
    pub(crate) content: Option<ContentHead>,
}

/// A content block's type and, for text, its text.
#[derive(Debug, Deserialize)]
pub(crate) struct ContentHead {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// `session/request_permission` params: the tool call and the options stay raw until read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestPermission {
    pub(crate) session_id: String,
    pub(crate) tool_call: Box<RawValue>,
    pub(crate) options: Vec<Box<RawValue>>,
}

/// What carrier reads of a tool call to name it when its whole input is too long to carry.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCallHead {
    #[serde(default)]
    pub(crate) tool_call_id: Option<String>,
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) kind: Option<String>,
}

/// The `session/request_permission` result.
#[derive(Debug, Serialize)]
pub(crate) struct PermissionOutcome<'a> {
    pub(crate) outcome: Outcome<'a>,
}

/// ACP's `RequestPermissionOutcome`.
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub(crate) enum Outcome<'a> {
    /// The turn was cancelled (or no one can answer).
    Cancelled,
    /// The user chose this option.
    Selected {
        #[serde(rename = "optionId")]
        option_id: &'a str,
    },
}
