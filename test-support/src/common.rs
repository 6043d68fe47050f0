//! What every part of the crate shares: where the repository is, the client socket's type,
//! and the waits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpStream;

/// The repository's root, for the committed files tests read (`schemas/`, `js/`,
/// `agent/tests/agents/`, …): the tests belong to different packages, so their own
/// `CARGO_MANIFEST_DIR` is not it.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support/ sits one level below the root")
        .to_path_buf()
}

/// A client WebSocket as `tokio-tungstenite` opens it.
pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// How long any single wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The demo delay of the embedded agent in these tests: small, but nonzero so turns interleave.
pub const DELAY: Duration = Duration::from_millis(2);
