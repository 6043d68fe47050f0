//! How long the browser test waits for anything.

use std::time::Duration;

/// How long any single wait in the browser test may take.
pub(crate) const WAIT: Duration = Duration::from_secs(20);
