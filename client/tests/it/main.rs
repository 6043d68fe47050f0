//! The Rust client's behaviour, one module per subject, in one test binary (each binary links
//! the whole stack): against stub and rogue servers written with `tokio-tungstenite`, another
//! user's listener, the in-memory network of `carrier_client::testing`, and the real carrier
//! in-process. The test that counts allocations has a binary of its own (`parse_bound.rs`): a
//! global allocator counts every test of its binary.

mod flow;
mod masked_frames;
mod message_caps;
mod owner_check;
mod real_server;
mod reference;
mod rules;
mod typed;
mod upgrade_answer;
