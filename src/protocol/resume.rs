//! Resume ring. Filled in by the codec work.
