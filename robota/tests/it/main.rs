//! The seed system's wire (the Robota profile) over real sockets on 127.0.0.1, one module per
//! subject, in one test binary (each binary links the whole stack).

mod agent_process;
mod channels;
mod host_session;
mod profile;
mod shared_sessions;
