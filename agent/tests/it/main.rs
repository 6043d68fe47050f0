//! The agent layer's behaviour over real sockets on 127.0.0.1 (and over the serverless bridge),
//! one module per subject, in one test binary (each binary links the whole stack). The carriers
//! run in-process, but for the tests that watch a carrier's process (its memory, its log, its
//! agent processes, a kill): those run this crate's example `agent_host`. The test that counts
//! allocations has a binary of its own (`session_memory_heap.rs`): a global allocator counts
//! every test of its binary.

mod agent_api;
mod agent_process;
mod agent_process_failures;
mod agent_updates;
mod bridge;
mod embedded;
mod handshake;
mod malformed;
mod methods;
mod prompts;
mod protocol_session;
mod reply_bound;
mod resume;
mod roles;
mod session_bounds;
mod session_memory;
