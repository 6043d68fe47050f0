//! The façade's own tests, in one test binary: its examples run as a host runs them (the
//! embedded agent, the Rust client, the carrier mounted in axum), and the workspace-wide
//! check that no crate has an import loop between its modules. Each layer's behaviour is
//! tested in its own crate's `tests/`.

mod docs;
mod example_embedded_agent;
mod imports;
mod mount;
