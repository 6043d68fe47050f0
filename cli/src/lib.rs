//! The `carrier` command line: argument parsing and wiring only; no protocol logic lives here.

pub mod acp;
pub mod client;
pub mod pipe;
pub mod schema;
pub mod serve;
mod stdin;
mod task;
