//! The frame's fixed layout, read by the codec and named in its refusals.

/// The three bytes every channel frame starts with.
pub const MAGIC: [u8; 3] = *b"RBF";
/// The only wire version this codec reads and writes.
pub const VERSION: u8 = 1;
/// The longest channel name in bytes (its length is one byte on the wire).
pub const MAX_CHANNEL_NAME: usize = 255;

/// Magic, version, kind and name length: the part of the header before the name.
pub(super) const PREFIX_LEN: usize = 6;
/// Width of the big-endian `seq` that follows the name.
pub(super) const SEQ_LEN: usize = 4;
