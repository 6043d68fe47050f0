//! The envelope's bounds on what it echoes, read by parsing and encoding alike.

/// The longest `id` the server accepts (bytes). Longer ids are refused rather than echoed.
pub const MAX_ID_BYTES: usize = 256;

/// The longest method or event name accepted (bytes).
pub const MAX_NAME_BYTES: usize = 128;
