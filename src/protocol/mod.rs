//! The protocol core: wire formats and rules with no I/O, no tokio and no clock.
//!
//! - [`role`] — the connection roles `drive` and `observe`.
//! - [`channel_frame`] — the binary channel-frame codec (SPEC section 7), zero-copy.
//! - [`error`] — error codes, error objects and the `protocol_error` event.
//! - [`resume`] — the bounded per-session ring of recent events used for resume.

pub mod channel_frame;
pub mod error;
pub mod resume;
pub mod role;

pub use role::Role;
