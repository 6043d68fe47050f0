//! A second web server on loopback for cross-origin tests.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::wait::WAIT;

/// A second local web server that serves one page at `/` (404 elsewhere). Dropping it stops
/// accepting.
pub(crate) struct ForeignSite {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for ForeignSite {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl ForeignSite {
    /// Serves `html` at `/` on a fresh port.
    pub(crate) async fn serve(html: String) -> ForeignSite {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accept = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let html = html.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
                            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                            _ => return,
                        }
                    }
                    let root = head.starts_with(b"GET / ");
                    let (status, body) = if root {
                        ("200 OK", html.as_str())
                    } else {
                        ("404 Not Found", "not found")
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                         Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        ForeignSite { port, accept }
    }
}
