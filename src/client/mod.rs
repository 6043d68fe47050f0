//! Client side (SPEC section 11).
