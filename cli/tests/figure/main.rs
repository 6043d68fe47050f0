//! `carrier serve`'s memory held to the README's figure ("Memory bounds") by hostile clients, one
//! module per subject, in a binary of its own: each test measures a `carrier serve` child's peak
//! resident memory and times what other clients wait for, so they run one at a time
//! ([`ONE_AT_A_TIME`]) and away from the load of the other CLI tests. What clients can make the
//! carrier hold on the way in (`inbound_bounds`), sessions' history and resume rings
//! (`session_memory`), `/acp` connections at every bound (`acp_memory`).

mod acp_memory;
mod inbound_bounds;
mod session_memory;

/// The tests measure memory and time: one at a time.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
