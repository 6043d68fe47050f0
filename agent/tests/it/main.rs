//! The agent layer's behaviour over real sockets on 127.0.0.1 (and over the serverless bridge),
//! one module per subject, in one test binary (each binary links the whole stack). The test
//! that counts allocations has a binary of its own (`session_memory_heap.rs`): a global
//! allocator counts every test of its binary.

mod agent_api;
mod bridge;
mod embedded;
mod handshake;
mod malformed;
mod methods;
mod prompts;
mod protocol_session;
mod resume;
mod roles;
mod session_bounds;
