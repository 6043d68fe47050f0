//! The `carrier` command as a user runs it, one module per subject, in one test binary (each
//! binary links the whole stack): the real binary's flags, environment variables, exit codes,
//! output and runtime files; the client commands in-process; `carrier acp`, the editors' stdio
//! bridge; the Unix socket through `send`, `status`, `pipe` and `doctor`; `carrier serve` driven
//! by the JavaScript package and by headless Chromium. What the library does underneath is
//! tested in its own crate (`server/`, `agent/`, `client/`, `robota/`, `acp/`). Binaries of
//! their own: `max_connections.rs` sets an environment variable every `carrier serve` child of
//! its process inherits; `figure/` holds a `carrier serve`'s memory to the README's figure and
//! times it, away from the load of other tests.

#[allow(dead_code)] // `main` is the example's, not these tests'
#[path = "../../../examples/axum_mount.rs"]
mod axum_mount;

mod acp_bridge;
mod agent_cmd;
mod browser;
mod client_commands;
mod hostile_server;
mod js_client;
mod owner;
mod packaging;
mod pipe;
mod robota_serve;
mod schema;
mod serve;
mod serve_agent_acp;
mod server_frames;
mod unix_socket;
