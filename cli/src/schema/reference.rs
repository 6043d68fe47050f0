//! The tables of the protocol reference (`docs/protocol.md`), generated from the catalog: the
//! methods, the events, both kinds of error codes, the features and the compatibility of each
//! feature across protocol versions.
//!
//! The reference is written by hand except for these tables, each of which sits between a
//! pair of marker lines ([`begin_marker`], [`end_marker`]). [`fill_reference`] takes the
//! document's text and returns it with every table regenerated; `carrier schema --docs FILE`
//! writes the result and `--check` fails when the committed file differs from it. Every
//! method, event, code and feature needs a line of description here (the matches below are
//! exhaustive), so one added to the catalog cannot reach the wire undocumented.
//!
//! Text only, no file access: the CLI reads and writes the document.

use std::fmt::Write as _;

use carrier::protocol::catalog::{Effect, Method, METHODS};
use carrier::protocol::error::{ErrorCode, ProtocolErrorCode};
use carrier::protocol::events::{EventName, EVENTS};
use carrier::protocol::features::Feature;
use carrier::protocol::version::{MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION};

/// The generated tables, in the order they appear in the reference.
pub(crate) const TABLES: [&str; 6] = [
    "methods",
    "events",
    "errors",
    "protocol-errors",
    "features",
    "compatibility",
];

/// The line that opens the generated table `name`.
pub(crate) fn begin_marker(name: &str) -> String {
    format!("<!-- generated table: {name} (`carrier schema --docs`; do not edit by hand) -->")
}

/// The line that closes the generated table `name`.
pub(crate) fn end_marker(name: &str) -> String {
    format!("<!-- end of generated table: {name} -->")
}

/// Why a document cannot take the generated tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReferenceError {
    /// A marker line is absent.
    #[error("the line `{0}` is missing: the reference holds each generated table between its two marker lines")]
    MissingMarker(String),
    /// A marker line appears more than once.
    #[error("the line `{0}` appears more than once")]
    DuplicateMarker(String),
    /// A table's end marker comes before its begin marker.
    #[error("the end marker of the generated table `{0}` comes before its begin marker")]
    EndBeforeBegin(String),
}

/// `doc` with the contents between every pair of markers replaced by the table this build
/// generates (one blank line either side). Text outside the markers is kept byte for byte.
pub(crate) fn fill_reference(doc: &str) -> Result<String, ReferenceError> {
    let mut out = doc.to_owned();
    for name in TABLES {
        let begin = begin_marker(name);
        let end = end_marker(name);
        let begin_at = line_position(&out, &begin)?;
        let end_at = line_position(&out, &end)?;
        let body_start = begin_at + begin.len();
        if end_at < body_start {
            return Err(ReferenceError::EndBeforeBegin(name.to_owned()));
        }
        out.replace_range(body_start..end_at, &format!("\n\n{}\n", table(name)));
    }
    Ok(out)
}

/// Where the only line of `text` equal to `line` starts.
fn line_position(text: &str, line: &str) -> Result<usize, ReferenceError> {
    let mut found = None;
    let mut offset = 0;
    for l in text.split_inclusive('\n') {
        if l.trim_end_matches(['\n', '\r']) == line {
            if found.is_some() {
                return Err(ReferenceError::DuplicateMarker(line.to_owned()));
            }
            found = Some(offset);
        }
        offset += l.len();
    }
    found.ok_or_else(|| ReferenceError::MissingMarker(line.to_owned()))
}

/// The table `name` of [`TABLES`], as Markdown (no trailing newline).
pub(crate) fn table(name: &str) -> String {
    match name {
        "methods" => methods(),
        "events" => events(),
        "errors" => errors(),
        "protocol-errors" => protocol_errors(),
        "features" => features(),
        "compatibility" => compatibility(),
        _ => String::new(),
    }
}

/// `{a, b, c?}`: a JSON Schema object's fields, required ones first in their declared order,
/// then the optional ones with `?`.
fn shape(schema: &schemars::Schema) -> String {
    let Some(object) = schema.as_object() else {
        return "any".to_owned();
    };
    let required: Vec<&str> = object
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut fields: Vec<String> = required.iter().map(|f| (*f).to_owned()).collect();
    if let Some(properties) = object.get("properties").and_then(|p| p.as_object()) {
        fields.extend(
            properties
                .keys()
                .filter(|k| !required.contains(&k.as_str()))
                // Accepted and ignored for old clients; not something to send.
                .filter(|k| k.as_str() != "min_compatible_peer")
                .map(|k| format!("{k}?")),
        );
    }
    format!("{{{}}}", fields.join(", "))
}

fn schema_link(shape: &str, file: &str) -> String {
    format!("[`{shape}`](../schemas/{file})")
}

fn feature_cell(feature: Option<Feature>) -> String {
    feature.map_or_else(|| "core".to_owned(), |f| format!("`{}`", f.name()))
}

fn methods() -> String {
    let mut out = String::from(
        "| method | least role | effect | feature | params | result | what it does |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for m in METHODS {
        let effect = match m.effect {
            Effect::Read => "read",
            Effect::Mutate => "mutate",
        };
        let mut what = method_summary(m.method).to_owned();
        if m.rebinds_session {
            what.push_str(
                " On success this connection follows that session: its events, with `seq` \
                 starting again from that session's numbering.",
            );
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {effect} | {} | {} | {} | {what} |",
            m.name,
            m.least_role.as_str(),
            feature_cell(m.feature),
            schema_link(
                &shape(&(m.params_schema)()),
                &format!("{}.params.json", m.name)
            ),
            schema_link(
                &shape(&(m.result_schema)()),
                &format!("{}.result.json", m.name)
            ),
        );
    }
    out.trim_end().to_owned()
}

fn events() -> String {
    let mut out = String::from(
        "| event | numbered (`seq`) | payload | when the server sends it |\n|---|---|---|---|\n",
    );
    for e in EVENTS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            e.name,
            if e.session { "yes" } else { "no" },
            schema_link(
                &shape(&(e.payload_schema)()),
                &format!("{}.event.json", e.name)
            ),
            event_summary(e.event),
        );
    }
    out.trim_end().to_owned()
}

fn errors() -> String {
    let mut out = String::from("| `error.code` | when |\n|---|---|\n");
    for code in ErrorCode::ALL {
        let _ = writeln!(out, "| `{}` | {} |", code.as_str(), error_when(code));
    }
    out.trim_end().to_owned()
}

fn protocol_errors() -> String {
    let mut out = String::from("| `payload.code` | when |\n|---|---|\n");
    for code in ProtocolErrorCode::ALL {
        let _ = writeln!(
            out,
            "| `{}` | {} |",
            code.as_str(),
            protocol_error_when(code)
        );
    }
    out.trim_end().to_owned()
}

fn features() -> String {
    let mut out = String::from(
        "| feature | introduced in | what it covers | announced `true` when |\n|---|---|---|---|\n",
    );
    for f in Feature::ALL {
        let (covers, available) = feature_summary(f);
        let _ = writeln!(
            out,
            "| `{}` | {} | {covers} | {available} |",
            f.name(),
            f.introduced_str()
        );
    }
    out.trim_end().to_owned()
}

fn compatibility() -> String {
    let mut out = format!(
        "This build speaks protocol **{PROTOCOL_VERSION}** and works with peers down to \
         **{MIN_COMPATIBLE_PROTOCOL}**.\n\n\
         | feature | introduced in | what a peer on an older protocol gets |\n|---|---|---|\n"
    );
    for f in Feature::ALL {
        let older = if f.introduced() <= MIN_COMPATIBLE_PROTOCOL {
            format!(
                "nothing to fall back from: every peer this build accepts (protocol \
                 {MIN_COMPATIBLE_PROTOCOL} or later) has it"
            )
        } else {
            older_peer(f).to_owned()
        };
        let _ = writeln!(out, "| `{}` | {} | {older} |", f.name(), f.introduced_str());
    }
    out.trim_end().to_owned()
}

fn method_summary(method: Method) -> &'static str {
    match method {
        Method::SystemHandshake => {
            "Opens the conversation; must be the first text frame. Agrees on versions, binds the \
             connection to a session (or resumes one) and tells the client its role, features, \
             channels and limits."
        }
        Method::SystemPing => "Does nothing; a round trip to check the connection is alive.",
        Method::SystemStatus => {
            "The server's name and versions, its epoch, how many connections it holds, the \
             channel names, and for each feature whether this client can use it."
        }
        Method::SurfaceRole => "The role this connection was admitted with.",
        Method::SessionSubmit => {
            "Starts a turn with this prompt and answers with its id straight away; the output \
             follows as events. Refused with `busy` while another turn runs."
        }
        Method::SessionAbort => {
            "Ends the running turn (`turn_completed` with `aborted: true`). `not_found` when no \
             turn runs or the id names another turn."
        }
        Method::SessionPermissionRespond => {
            "Answers a `permission_request` with `allow` or `deny`, or (1.2) with the \
             `option_id` of one of its `options`; `not_found` for an id that is unknown or \
             already answered."
        }
        Method::SessionHistory => {
            "The session's prompts and replies, oldest first, at most `limit` of the newest."
        }
        Method::SessionStatus => {
            "Whether the bound session is idle, running a turn or waiting for a permission \
             answer, and the running turn's id."
        }
        Method::SessionsList => "The host's sessions with their titles and states.",
        Method::SessionsStart => {
            "Creates a session (title at most `limits.max_title_bytes`) and binds this \
             connection to it; `limit_exceeded` past `limits.max_sessions`."
        }
        Method::SessionsSwitch => {
            "Binds this connection to an existing session; other connections keep theirs."
        }
        Method::ChannelsList => {
            "The declared payload channels: name, events, whether they take binary frames, \
             and their delivery class."
        }
        Method::UsageReport => {
            "Token and turn counts the host reports for a scope (`session` by default); a scope \
             the host did not wire is `unsupported_feature`."
        }
    }
}

fn event_summary(event: EventName) -> &'static str {
    match event {
        EventName::TurnStarted => {
            "A turn began: who submitted it (the identity the host configured, never one a \
             client claims) and its prompt."
        }
        EventName::TextDelta => {
            "The next piece of the reply. Joined in order, the deltas are the whole reply."
        }
        EventName::PermissionRequest => {
            "The agent wants to use a tool; the turn waits for `session.permission.respond`."
        }
        EventName::PermissionResolved => "A permission request was answered (by any driver).",
        EventName::TurnCompleted => {
            "The turn ended: the reply (cut to `limits.max_reply_bytes`, then `truncated: \
             true`) and whether it was aborted."
        }
        EventName::Error => "The agent or host failed during a turn (or outside one).",
        EventName::AgentUpdate => {
            "What the agent reports beside its text (an ACP agent's tool calls, plans, \
             thoughts, commands, modes, usage), its `update` object carried byte for byte; \
             `turn_id` absent outside a turn. Sent only to clients that announced 1.2."
        }
        EventName::ProtocolError => {
            "A frame the server could not answer by `id` was refused (codes in the next table)."
        }
        EventName::ChannelDropped => {
            "Frames of a `lossy` channel queued for this connection were dropped to keep it \
             within budget; `count` says how many."
        }
        EventName::ChannelCredit => {
            "More inbound credit on a bulk channel, `{channel, bytes}`: how many more bytes of \
             frame bodies the client may send on it. Sent only to clients that announced 1.1."
        }
    }
}

fn error_when(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::ProtocolError => {
            "The frame is not a valid request, or its params fail validation \
             (`data.reason: \"invalid_params\"`). Also sent with `effect_state: \"unknown\"` \
             when an agent's result fails its schema."
        }
        ErrorCode::HandshakeRequired => {
            "A request other than `system.handshake` came first; the socket then closes with \
             1008."
        }
        ErrorCode::VersionIncompatible => {
            "The two protocol versions cannot work together; `data` holds both; the socket then \
             closes with 1002."
        }
        ErrorCode::MethodNotFound => "No method of that name.",
        ErrorCode::Forbidden => "The connection's role is below the method's least role.",
        ErrorCode::UnsupportedFeature => {
            "The request needs a feature one side lacks; `data` names the feature, the \
             component to update (`server` or `client`), the versions and how to recover. \
             Nothing happened (`effect_state: \"none\"`)."
        }
        ErrorCode::Busy => "A turn is already running in this session.",
        ErrorCode::TooLarge => {
            "The text message is over `limits.max_text_bytes`; `data: {limit, size}`. The socket \
             stays open."
        }
        ErrorCode::NotFound => "The session, turn or permission request named does not exist.",
        ErrorCode::LimitExceeded => {
            "The request would pass a bound published in `limits`; `data: {limit, value}`. \
             Nothing happened."
        }
        ErrorCode::Internal => {
            "The host or the agent failed; whether the effect happened is unknown."
        }
    }
}

fn protocol_error_when(code: ProtocolErrorCode) -> &'static str {
    match code {
        ProtocolErrorCode::MalformedFrame => {
            "Text that is not a JSON object, or a binary message that is not a channel frame."
        }
        ProtocolErrorCode::UnknownChannel => "A channel frame names no registered channel.",
        ProtocolErrorCode::CreditExceeded => {
            "A bulk frame larger than the channel's remaining credit: not delivered; the socket \
             stays open."
        }
        ProtocolErrorCode::UndeclaredEvent => {
            "A channel event the channel did not declare in its `events`."
        }
        ProtocolErrorCode::BinaryNotDeclared => {
            "An opaque binary frame on a channel that does not take binary."
        }
        ProtocolErrorCode::Forbidden => {
            "The sender may not send it: an `observe` connection sending a channel frame, or \
             any client sending on a channel declared `direction: \"host_to_clients\"`."
        }
        ProtocolErrorCode::HandshakeRequired => {
            "A frame before the handshake; the socket then closes with 1008."
        }
        ProtocolErrorCode::InvalidEnvelope => {
            "A JSON object that is not a request: a response or an event from a client, or a \
             request without a usable `id`."
        }
        ProtocolErrorCode::TooLarge => {
            "A message over the soft text limit that had no usable `id`; the socket stays open."
        }
    }
}

/// What a feature covers, and when the server announces it `true`.
fn feature_summary(feature: Feature) -> (&'static str, &'static str) {
    match feature {
        Feature::Sessions => (
            "`sessions.list`, `sessions.start`, `sessions.switch`",
            "always (the host's session directory)",
        ),
        Feature::Resume => ("`resume` in the handshake params", "always"),
        Feature::Permissions => ("`session.permission.respond`", "always"),
        Feature::Channels => ("`channels.list` and binary channel frames", "always"),
        Feature::UsageSession => (
            "`usage.report` with `scope: \"session\"`",
            "the host wired that scope",
        ),
        Feature::UsagePersonal => (
            "`usage.report` with `scope: \"personal\"`",
            "the host wired that scope",
        ),
        Feature::UsageStored => (
            "`usage.report` with `scope: \"stored\"`",
            "the host wired that scope",
        ),
        Feature::BulkCredit => (
            "`credit` in bulk channel descriptors and `channel.credit` grants",
            "always, to a client that announced 1.1 or later",
        ),
        Feature::AgentUpdates => (
            "the `session.agent_update` event; `option_id` in `session.permission.respond`",
            "always, to a client that announced 1.2 or later",
        ),
    }
}

/// What a peer whose protocol predates `feature` gets instead (only asked of features newer
/// than the oldest protocol this build accepts).
fn older_peer(feature: Feature) -> &'static str {
    match feature {
        Feature::Sessions
        | Feature::Resume
        | Feature::Permissions
        | Feature::Channels
        | Feature::UsageSession
        | Feature::UsagePersonal
        | Feature::UsageStored => {
            "requests that need it fail with `unsupported_feature` before anything is sent"
        }
        Feature::BulkCredit => {
            "no `credit` and no `channel.credit`; its bulk frames are still accepted, and its \
             reader pauses while the host's bulk stream is full"
        }
        Feature::AgentUpdates => {
            "no `session.agent_update` (its `seq` skips their numbers) and `option_id` is \
             refused with `unsupported_feature`; it answers prompts with `allow`/`deny`"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skeleton() -> String {
        let mut doc = String::from("# Reference\n\nHand-written.\n");
        for name in TABLES {
            doc.push_str(&format!(
                "\n## {name}\n\n{}\nold\n{}\n\nAfter.\n",
                begin_marker(name),
                end_marker(name)
            ));
        }
        doc
    }

    #[test]
    fn fills_every_table_and_keeps_the_prose() {
        let filled = fill_reference(&skeleton()).unwrap();
        assert!(!filled.contains("\nold\n"));
        assert!(filled.starts_with("# Reference\n\nHand-written.\n"));
        assert_eq!(filled.matches("\nAfter.\n").count(), TABLES.len());
        for m in METHODS {
            assert!(filled.contains(&format!("| `{}` |", m.name)), "{}", m.name);
        }
        for e in EVENTS {
            assert!(filled.contains(&format!("| `{}` |", e.name)), "{}", e.name);
        }
        for f in Feature::ALL {
            assert!(filled.contains(&format!("| `{}` |", f.name())));
        }
        assert!(filled.contains("[`{prompt, options?}`](../schemas/session.submit.params.json)"));
        // Filling is idempotent: a filled document is already up to date.
        assert_eq!(fill_reference(&filled).unwrap(), filled);
    }

    #[test]
    fn a_missing_duplicate_or_reversed_marker_is_an_error() {
        let doc = skeleton();
        let begin = begin_marker("events");
        let end = end_marker("events");
        let without = doc.replace(&format!("{begin}\n"), "");
        assert_eq!(
            fill_reference(&without),
            Err(ReferenceError::MissingMarker(begin.clone()))
        );
        let twice = format!("{doc}\n{end}\n");
        assert_eq!(
            fill_reference(&twice),
            Err(ReferenceError::DuplicateMarker(end.clone()))
        );
        let reversed = doc
            .replace(&begin, "@@")
            .replace(&end, &begin)
            .replace("@@", &end);
        assert_eq!(
            fill_reference(&reversed),
            Err(ReferenceError::EndBeforeBegin("events".to_owned()))
        );
    }
}
