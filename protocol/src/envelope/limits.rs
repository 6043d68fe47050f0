//! The envelope's bounds on what it echoes, read by parsing and encoding alike.

/// The longest `id` the server accepts (bytes). Longer ids are refused rather than echoed.
pub const MAX_ID_BYTES: usize = 256;

/// The longest method or event name accepted (bytes).
pub const MAX_NAME_BYTES: usize = 128;

/// A usable id: a non-empty string of at most [`MAX_ID_BYTES`] bytes.
pub(super) fn id_fits(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_BYTES
}

/// A usable method or event name: non-empty, at most [`MAX_NAME_BYTES`] bytes.
pub(super) fn name_fits(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES
}
