//! carrier-acp's integration tests, one binary (every test binary links the whole stack), by
//! subject: `/acp` as ACP clients and editors see it (`sessions`, `input`, `schema`, `sdk`) and an
//! ACP agent hosted over stdio (`agent_host`, on what `hosted` starts).

mod agent_host;
mod hosted;
mod input;
mod schema;
mod sdk;
mod sessions;
