//! The server's behaviour over real sockets on 127.0.0.1, one module per subject, in one test
//! binary (each binary links the whole stack). Clients are `tokio-tungstenite` or raw sockets;
//! the text profile is the payload-agnostic `TestProfile` or the agent profile
//! (`carrier-test-support`); the attacks on memory measure a carrier in a process of its own
//! (the example `server_host`). The tests that count allocations have binaries of their own
//! (`bulk_credit_memory.rs`, `outbound_memory.rs`, `zero_copy.rs`): a global allocator counts
//! every test of its binary; so has the one that captures every log line (`secret_logs.rs`).

mod admission;
mod bulk_channels;
mod bulk_credit;
mod bulk_priority;
mod delivery;
mod faults;
mod host_sends;
mod hostile_clients;
mod lifecycle;
mod limits;
mod max_connections;
mod priority;
mod security;
mod sinks;
mod unix_socket;
