//! The carrier's Unix socket: a second door to the same server for processes of its own user,
//! checked by the kernel's peer credentials rather than the token.
//!
//! Binding goes through `carrier_discovery`'s socket-file rules: a path whose directory is not
//! this user's alone, a symbolic link, a live listener or another user's socket is refused; a
//! stale socket of ours that nobody answers on is replaced; the socket is 0600 and removed when
//! the transport stops. Each connection is judged before a byte of it is read: a peer whose uid
//! is not the server's own (or is the kernel's overflow uid) is closed at once, counted in
//! `carrier_unix_peers_refused_total` — it receives nothing, whatever it would have sent. The
//! rest is the TCP listener's: the same HTTP service, upgrade, wires and channels, with
//! admission told the peer is the same user
//! ([`carrier_protocol::admission::Peer::SameUser`]).

#[cfg(unix)]
pub(crate) use bound::{bind, BoundSocket};
use std::path::PathBuf;

/// Where a [`WsTransport`](crate::WsTransport) puts its Unix socket. Not on Unix: there is no
/// socket, whatever is asked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum UnixSocket {
    /// Beside the runtime file, as `<pid>.sock` in the same 0700 directory, when the transport
    /// publishes one ([`WsTransport::with_runtime_file`](crate::WsTransport::with_runtime_file));
    /// none otherwise. The default. A socket that cannot be created there is logged as a
    /// warning, and the carrier runs on TCP alone.
    #[default]
    BesideRuntimeFile,
    /// At this path (its directory must be this user's and writable by no one else). A path
    /// that cannot take the socket fails `start()`.
    At(PathBuf),
    /// No Unix socket.
    Off,
}

#[cfg(unix)]
mod bound {
    use std::path::Path;
    use std::sync::Arc;

    use tokio::net::{UnixListener, UnixStream};

    use crate::listener::Accept;
    use crate::metrics::Metrics;
    use carrier_discovery::listener::{attribute_uid, Listener};
    use carrier_discovery::{prepare_socket_path, SocketFile, SocketPathError};
    use carrier_protocol::admission::Peer;

    /// The bound socket: what the accept loop takes connections from, and the file it removes.
    pub(crate) struct BoundSocket {
        pub(crate) listener: UnixAccept,
        pub(crate) file: SocketFile,
    }

    /// Binds the carrier's socket at `path` (see the module docs for what is refused).
    pub(crate) fn bind(path: &Path, metrics: Arc<Metrics>) -> Result<BoundSocket, SocketPathError> {
        prepare_socket_path(path)?;
        let listener = UnixListener::bind(path).map_err(|source| SocketPathError::Io {
            path: path.to_owned(),
            source,
        })?;
        let file = SocketFile::bound(path)?;
        Ok(BoundSocket {
            listener: UnixAccept { listener, metrics },
            file,
        })
    }

    /// The Unix listener, judging each peer by its credentials.
    pub(crate) struct UnixAccept {
        listener: UnixListener,
        metrics: Arc<Metrics>,
    }

    impl Accept for UnixAccept {
        type Stream = UnixStream;

        async fn accept(&self) -> std::io::Result<UnixStream> {
            self.listener.accept().await.map(|(stream, _)| stream)
        }

        fn admit(&self, stream: &UnixStream) -> bool {
            let judged = match stream.peer_cred() {
                Ok(credentials) => attribute_uid(credentials.uid()),
                Err(e) => Listener::Unattributed(format!("its credentials cannot be read: {e}")),
            };
            if judged == Listener::Own {
                return true;
            }
            // Debug, not warn: any local user could fill the log with these. The counter says it.
            tracing::debug!(peer = ?judged, "refused a Unix-socket peer that is not this user");
            self.metrics.unix_peer_refused();
            false
        }

        fn peer(&self) -> Peer {
            Peer::SameUser
        }
    }
}
