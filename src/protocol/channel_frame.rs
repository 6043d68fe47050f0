//! Channel-frame codec (SPEC section 7). Filled in by the codec work.
