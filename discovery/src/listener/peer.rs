//! The Unix socket's half of the check: the kernel's word on whose process holds the listening
//! socket, read from the connected socket itself (`SO_PEERCRED`, `getpeereid`/`LOCAL_PEERCRED`),
//! so no table is read and nothing can change hands between the check and the first write.

use std::path::Path;

use tokio::net::UnixStream;

use super::{attribute_uid, DialError, Endpoint, Listener, OwnerCheck};

/// A connected Unix stream and what is known about its listener.
#[derive(Debug)]
pub struct CheckedUnixStream {
    /// The connection; nothing has been written to it.
    pub stream: UnixStream,
    /// Whose listener it reached.
    pub listener: Listener,
}

impl OwnerCheck {
    /// Connects to the Unix socket at `path` and attributes its listener by the peer
    /// credentials the kernel reports for it. Under [`super::OwnerPolicy::OwnUser`] a socket of
    /// another user (or of the overflow uid), or one whose credentials cannot be read, is an
    /// error; the connection is then closed with nothing written.
    pub async fn connect_unix(&self, path: &Path) -> Result<CheckedUnixStream, DialError> {
        let addr = Endpoint::Unix(path.to_owned());
        let stream = UnixStream::connect(path)
            .await
            .map_err(|e| DialError::Connect {
                addr: addr.clone(),
                reason: e.to_string(),
            })?;
        let listener = match stream.peer_cred() {
            Ok(credentials) => attribute_uid(credentials.uid()),
            Err(e) => Listener::Unattributed(format!("its peer credentials cannot be read: {e}")),
        };
        let listener = self.judge_policy(addr, listener)?;
        Ok(CheckedUnixStream { stream, listener })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::UnixListener;

    #[tokio::test]
    async fn a_socket_of_this_process_is_its_own_and_nothing_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("own.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        let received = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut bytes = Vec::new();
            let _ = socket.read_to_end(&mut bytes).await;
            bytes
        });
        let checked = OwnerCheck::own_user()
            .connect_unix(&path)
            .await
            .expect("connects");
        assert_eq!(checked.listener, Listener::Own);
        drop(checked);
        assert!(received.await.expect("listener task").is_empty());
    }

    #[tokio::test]
    async fn a_missing_socket_is_a_connect_error_naming_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nobody-here.sock");
        let error = OwnerCheck::own_user()
            .connect_unix(&path)
            .await
            .expect_err("nothing listens");
        assert!(matches!(error, DialError::Connect { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot reach unix:{}", path.display())),
            "{error}"
        );
    }
}
