//! The protocol crate's tests beside its unit tests, one module per subject, in one test
//! binary: the channel-frame codec's properties and its wire vectors (`tests/vectors/`), and
//! the crate's promise of no I/O.

mod channel_props;
mod channel_vectors;
mod no_io;
