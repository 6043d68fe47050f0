//! Whose listener is at the other end of a loopback connection, checked before a token goes to
//! it.
//!
//! Ports are first come, first served: another local user can bind the port a carrier used
//! before (after a crash, or when port retry moved the carrier on) or a default port `carrier
//! doctor` probes, and would then receive every token and prompt sent there. So every dial of
//! the project's clients goes through [`OwnerCheck::connect`]: TCP connect, then attribute the
//! listener, then — only if it belongs to this process's effective user — hand the stream to the
//! caller, who writes the upgrade (and the token in it).
//!
//! **How the listener is attributed (Linux).** Once `connect()` returns, the kernel's table of
//! TCP sockets (`/proc/net/tcp`, and `/proc/net/tcp6` for IPv6 or an IPv4 connection taken by a
//! dual-stack listener) lists the server side of this very connection — its local address is
//! the one dialled, its remote address this socket's own — under the uid of the listening
//! socket's owner, whether or not the server has accepted it yet (state `SYN_RECV` or
//! `ESTABLISHED`). Looking that entry up attributes the exact connection the token would travel
//! on: nothing can change hands between the check and the write. A table that cannot be read,
//! or that has no such entry, refuses the listener as unattributed; nothing falls back to
//! trusting it.
//!
//! **User namespaces.** The table shows each uid as this process's user namespace sees it, and
//! a uid the namespace does not map as the kernel's overflow uid
//! (`/proc/sys/kernel/overflowuid`, usually 65534). Under `unshare --user` without a uid map the
//! process itself runs as that uid too, so every other user's listener would look like its own.
//! An owner shown as the overflow uid, or a process running as it (also a client run as
//! `nobody`), is therefore unattributed, never the user's own.
//!
//! **Elsewhere** there is no such table and the check is skipped: [`Listener::Unchecked`], which
//! is treated as the user's own.
//!
//! **The Unix socket** needs no table, on any Unix: [`OwnerCheck::connect_unix`] asks the
//! kernel for the credentials of the process that holds the listening socket (`SO_PEERCRED` on
//! Linux, `getpeereid`/`LOCAL_PEERCRED` on macOS and the BSDs, through tokio's
//! `UnixStream::peer_cred`), once connected and before anything is written, and judges that uid
//! as the table's ([`attribute_uid`]: the overflow uid is never anyone's own). The server's
//! listener applies the same judgement to each client that connects to its socket.
//!
//! ```no_run
//! use carrier_discovery::listener::OwnerCheck;
//!
//! # async fn run() -> Result<(), carrier_discovery::listener::DialError> {
//! let checked = OwnerCheck::own_user().connect("127.0.0.1:7070".parse().unwrap()).await?;
//! // `checked.stream` leads to a listener of this user: the upgrade may carry the token.
//! # drop(checked);
//! # Ok(())
//! # }
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use super::user::{effective_uid, User};

mod endpoint;
mod tcp_table;

pub use endpoint::Endpoint;
pub use tcp_table::SocketTables;

/// Which listeners a dial hands back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OwnerPolicy {
    /// Only a listener of this process's effective user; any other is refused before anything
    /// is written. The default, and the only policy under which a token may be sent.
    #[default]
    OwnUser,
    /// Any listener; the caller learns whose it is from [`CheckedStream::listener`] and must not
    /// send a token unless [`Listener::may_receive_token`] says so. For health probes, and for a
    /// URL the user named with `--any-owner`.
    AnyOwner,
}

/// What the check found out about the listener a stream leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listener {
    /// The listening socket belongs to this process's effective user.
    Own,
    /// The listening socket belongs to another user.
    Foreign(User),
    /// Whose it is could not be found out: the socket table is unreadable or lists no entry for
    /// this connection, or the owner or this process runs as the kernel's overflow uid (a user
    /// namespace that cannot tell users apart).
    Unattributed(String),
    /// Not checked: this system has no socket table to read (not Linux).
    Unchecked,
}

impl Listener {
    /// Whether a token may go to this listener: only to the user's own (or, where nothing can
    /// be checked, to what the user named).
    pub fn may_receive_token(&self) -> bool {
        matches!(self, Listener::Own | Listener::Unchecked)
    }
}

/// The one line for a listener of another user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing to talk to {addr}: its listener belongs to {owner}, not to you (uid {you}); nothing was sent")]
pub struct ForeignListener {
    /// The address or socket dialled.
    pub addr: Endpoint,
    /// Who owns the listening socket.
    pub owner: User,
    /// This process's effective uid.
    pub you: u32,
}

/// The one line for a listener whose owner could not be found out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing to talk to {addr}: the {} cannot be attributed to a user ({reason}); nothing was sent", what(addr))]
pub struct UnattributedListener {
    /// The address or socket dialled.
    pub addr: Endpoint,
    /// Why not.
    pub reason: String,
}

/// What an [`UnattributedListener`] line calls the endpoint.
fn what(addr: &Endpoint) -> &'static str {
    match addr {
        Endpoint::Tcp(_) => "port",
        Endpoint::Unix(_) => "socket",
    }
}

/// Why [`OwnerCheck::connect`] hands back no stream. In every case nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    /// Carrier clients talk to loopback addresses only (the carrier binds 127.0.0.1, and no
    /// other address can be attributed to a local user).
    #[error("refusing {addr}: carrier clients connect to loopback addresses only")]
    NotLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Nothing accepted the connection.
    #[error("cannot reach {addr}: {reason}")]
    Connect {
        /// The address or socket dialled.
        addr: Endpoint,
        /// The socket error.
        reason: String,
    },
    /// The listener belongs to another user (under [`OwnerPolicy::OwnUser`]).
    #[error(transparent)]
    Foreign(#[from] ForeignListener),
    /// The listener could not be attributed (under [`OwnerPolicy::OwnUser`]).
    #[error(transparent)]
    Unattributed(#[from] UnattributedListener),
}

/// A connected stream and what is known about its listener.
#[derive(Debug)]
pub struct CheckedStream {
    /// The connection; nothing has been written to it.
    pub stream: TcpStream,
    /// Whose listener it reached.
    pub listener: Listener,
}

/// A connected Unix stream and what is known about its listener.
#[cfg(unix)]
#[derive(Debug)]
pub struct CheckedUnixStream {
    /// The connection; nothing has been written to it.
    pub stream: tokio::net::UnixStream,
    /// Whose listener it reached.
    pub listener: Listener,
}

/// How a dial treats listeners: the policy, and where the socket tables are.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnerCheck {
    policy: OwnerPolicy,
    tables: SocketTables,
}

/// How many times the tables are read for a connection they do not list yet, and the pause
/// before each new reading. One case needs it: with SYN cookies (a flooded listener) the server
/// side exists only once the kernel has handled our final ACK, which can trail `connect()`.
const LOOKUPS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(10),
    Duration::from_millis(50),
];

impl OwnerCheck {
    /// Only listeners of this user ([`OwnerPolicy::OwnUser`]).
    pub fn own_user() -> OwnerCheck {
        OwnerCheck::default()
    }

    /// Any listener, reported ([`OwnerPolicy::AnyOwner`]).
    pub fn any_owner() -> OwnerCheck {
        OwnerCheck {
            policy: OwnerPolicy::AnyOwner,
            ..OwnerCheck::default()
        }
    }

    /// The policy.
    pub fn policy(&self) -> OwnerPolicy {
        self.policy
    }

    /// The same check under `policy`.
    pub fn with_policy(mut self, policy: OwnerPolicy) -> OwnerCheck {
        self.policy = policy;
        self
    }

    /// Reads the socket tables from `tables` instead of `/proc/net`.
    pub fn with_tables(mut self, tables: SocketTables) -> OwnerCheck {
        self.tables = tables;
        self
    }

    /// Connects to the loopback address `addr` and attributes the listener. Under
    /// [`OwnerPolicy::OwnUser`] another user's listener, or one that cannot be attributed, is an
    /// error; the connection is then closed with nothing written.
    pub async fn connect(&self, addr: SocketAddr) -> Result<CheckedStream, DialError> {
        if !addr.ip().is_loopback() {
            return Err(DialError::NotLoopback { addr });
        }
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| DialError::Connect {
                addr: addr.into(),
                reason: e.to_string(),
            })?;
        let listener = self.attribute(&stream).await;
        let listener = self.judge_policy(addr.into(), listener)?;
        Ok(CheckedStream { stream, listener })
    }

    /// Connects to the Unix socket at `path` and attributes its listener by the peer
    /// credentials the kernel reports on the connected socket (no table is read, and nothing
    /// can change hands between the check and the first write). Under [`OwnerPolicy::OwnUser`]
    /// a socket of another user (or of the overflow uid), or one whose credentials cannot be
    /// read, is an error; the connection is then closed with nothing written.
    #[cfg(unix)]
    pub async fn connect_unix(
        &self,
        path: &std::path::Path,
    ) -> Result<CheckedUnixStream, DialError> {
        let addr = Endpoint::Unix(path.to_owned());
        let stream =
            tokio::net::UnixStream::connect(path)
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

    /// `listener`, when the policy lets a dial hand back a stream to it; the refusal otherwise.
    fn judge_policy(&self, addr: Endpoint, listener: Listener) -> Result<Listener, DialError> {
        match (self.policy, listener) {
            (OwnerPolicy::OwnUser, Listener::Foreign(owner)) => Err(ForeignListener {
                addr,
                owner,
                you: effective_uid(),
            }
            .into()),
            (OwnerPolicy::OwnUser, Listener::Unattributed(reason)) => {
                Err(UnattributedListener { addr, reason }.into())
            }
            (_, listener) => Ok(listener),
        }
    }

    /// Whose listener `stream` is connected to.
    async fn attribute(&self, stream: &TcpStream) -> Listener {
        if !cfg!(target_os = "linux") {
            return Listener::Unchecked;
        }
        let (server, client) = match (stream.peer_addr(), stream.local_addr()) {
            (Ok(server), Ok(client)) => (server, client),
            (Err(e), _) | (_, Err(e)) => {
                return Listener::Unattributed(format!("the connection has no address: {e}"))
            }
        };
        for pause in LOOKUPS {
            tokio::time::sleep(pause).await;
            let tables = self.tables.clone();
            // The tables are read as files: a few hundred bytes per socket on the machine.
            let lookup = tokio::task::spawn_blocking(move || {
                let owner = tables.server_side_owner(server, client)?;
                Ok::<_, String>(owner.map(|owner| (owner, overflow_uid())))
            })
            .await;
            match lookup {
                Ok(Ok(Some((owner, overflow)))) => return judge(owner, effective_uid(), overflow),
                Ok(Ok(None)) => {}
                Ok(Err(reason)) => return Listener::Unattributed(reason),
                Err(e) => return Listener::Unattributed(format!("the lookup failed: {e}")),
            }
        }
        Listener::Unattributed(format!(
            "{} lists no listener for this connection",
            self.tables.ipv4().display()
        ))
    }
}

/// Whose a uid the kernel reported is — the owner of a listening socket, or the peer of a Unix
/// socket — for this process: [`Listener::Own`] only for this process's effective uid, and
/// never for the kernel's overflow uid (the same rule that judges a listener's owner). The server's Unix listener
/// admits a client only when this says `Own`.
pub fn attribute_uid(uid: u32) -> Listener {
    judge(uid, effective_uid(), overflow_uid())
}

/// Where the kernel says which uid stands for every user it cannot map into this process's
/// user namespace.
const OVERFLOW_UID_FILE: &str = "/proc/sys/kernel/overflowuid";

/// The kernel's overflow uid (65534, the kernel's default, when the file cannot be read).
fn overflow_uid() -> u32 {
    std::fs::read_to_string(OVERFLOW_UID_FILE)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(65534)
}

/// Whose listener a socket table's `owner` uid says it is, for a process of effective uid `you`.
///
/// The overflow uid tells nobody apart: in a user namespace without a mapping for a user, the
/// tables show that user's sockets as the overflow uid, and a process whose own uid has no
/// mapping runs as it too (`unshare --user` without a uid map makes every other user's
/// listener look like the caller's own). So an owner shown as the overflow uid, or a caller
/// running as it, cannot be attributed — never `Own`.
fn judge(owner: u32, you: u32, overflow: u32) -> Listener {
    if you == overflow {
        return Listener::Unattributed(format!(
            "you run as uid {you}, the kernel's overflow uid, which also stands for every user this user namespace does not map, so your sockets cannot be told from theirs"
        ));
    }
    if owner == overflow {
        return Listener::Unattributed(format!(
            "its owner shows as uid {owner}, the kernel's overflow uid, which stands for any user this user namespace does not map"
        ));
    }
    if owner == you {
        Listener::Own
    } else {
        Listener::Foreign(User::by_uid(owner))
    }
}

/// The loopback address a URL's host stands for: `localhost` (as 127.0.0.1, where the carrier
/// binds), or a loopback IP literal (`[::1]` with or without brackets). `None` for anything
/// else, names included: a name could resolve anywhere.
pub fn loopback_ip(host: &str) -> Option<IpAddr> {
    if host.eq_ignore_ascii_case("localhost") {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = bare.parse().ok()?;
    ip.is_loopback().then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    #[test]
    fn the_overflow_uid_on_either_side_is_never_attributed() {
        assert_eq!(judge(1000, 1000, 65534), Listener::Own);
        assert_eq!(judge(0, 1000, 65534), Listener::Foreign(User::by_uid(0)));
        // `unshare --user` without a map: the caller and every other user look alike.
        for (owner, you) in [(65534, 65534), (0, 65534), (65534, 1000)] {
            let Listener::Unattributed(reason) = judge(owner, you, 65534) else {
                panic!("owner {owner}, you {you}: attributed");
            };
            assert!(reason.contains("overflow uid"), "{reason}");
        }
        // Another overflow uid configured: 65534 is an ordinary uid again.
        assert_eq!(judge(65534, 65534, 4242), Listener::Own);
        assert!(matches!(judge(4242, 1000, 4242), Listener::Unattributed(_)));
    }

    #[test]
    fn only_loopback_hosts_are_dialled() {
        assert_eq!(
            loopback_ip("localhost"),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        assert_eq!(loopback_ip("127.3.2.1"), Some("127.3.2.1".parse().unwrap()));
        assert_eq!(loopback_ip("[::1]"), Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        for host in [
            "10.0.0.1",
            "example.com",
            "0.0.0.0",
            "[::]",
            "::ffff:127.0.0.1",
        ] {
            assert_eq!(loopback_ip(host), None, "{host}");
        }
    }

    /// A listener of this process, and what it received on its first connection before that
    /// connection closed.
    async fn recording_listener() -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let received = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut bytes = Vec::new();
            let _ = socket.read_to_end(&mut bytes).await;
            bytes
        });
        (addr, received)
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_listener_of_this_user_is_its_own() {
        let (addr, _received) = recording_listener().await;
        let checked = OwnerCheck::own_user()
            .connect(addr)
            .await
            .expect("connects");
        assert_eq!(checked.listener, Listener::Own);
        assert!(checked.listener.may_receive_token());
    }

    /// IPv6 loopback, and an IPv4 connection taken by a dual-stack listener (listed in `tcp6`
    /// with an IPv4-mapped address).
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn ipv6_and_dual_stack_listeners_are_found_in_tcp6() {
        let Ok(v6) = TcpListener::bind("[::1]:0").await else {
            eprintln!("SKIPPED: no IPv6 loopback here");
            return;
        };
        let addr = v6.local_addr().expect("addr");
        let checked = OwnerCheck::own_user()
            .connect(addr)
            .await
            .expect("connects");
        assert_eq!(checked.listener, Listener::Own);

        let socket = tokio::net::TcpSocket::new_v6().expect("socket");
        let dual = socket
            .bind("[::]:0".parse().unwrap())
            .ok()
            .and_then(|()| socket.listen(8).ok());
        let Some(dual) = dual else {
            eprintln!("SKIPPED: cannot listen on [::]");
            return;
        };
        let port = dual.local_addr().expect("addr").port();
        let v4: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
        match TcpStream::connect(v4).await {
            // bindv6only=1: the listener takes IPv6 only, and there is nothing to check.
            Err(_) => eprintln!("SKIPPED: [::] listeners are IPv6-only here"),
            Ok(probe) => {
                drop(probe);
                let checked = OwnerCheck::own_user().connect(v4).await.expect("connects");
                assert_eq!(checked.listener, Listener::Own);
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_unreadable_socket_table_refuses_the_port_in_one_line_and_sends_nothing() {
        let (addr, received) = recording_listener().await;
        let nowhere = tempfile::tempdir().expect("tempdir");
        let check = OwnerCheck::own_user().with_tables(SocketTables::in_dir(nowhere.path()));
        let error = check.connect(addr).await.expect_err("refused");
        let DialError::Unattributed(refusal) = &error else {
            panic!("not an attribution refusal: {error:?}");
        };
        assert_eq!(refusal.addr, addr);
        let line = error.to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(
            line.starts_with(&format!(
                "refusing to talk to {addr}: the port cannot be attributed"
            )) && line.contains("tcp")
                && line.ends_with("nothing was sent"),
            "{line}"
        );
        // The refused connection was closed with nothing written.
        let bytes = tokio::time::timeout(Duration::from_secs(10), received)
            .await
            .expect("the connection was closed")
            .expect("listener task");
        assert!(bytes.is_empty(), "{bytes:?}");

        // Under AnyOwner the same listener is reported, not refused, and gets no token.
        let (addr, _received) = recording_listener().await;
        let check = OwnerCheck::any_owner().with_tables(SocketTables::in_dir(nowhere.path()));
        let checked = check.connect(addr).await.expect("reported");
        assert!(matches!(checked.listener, Listener::Unattributed(_)));
        assert!(!checked.listener.may_receive_token());
    }

    #[tokio::test]
    async fn non_loopback_addresses_are_refused_before_connecting() {
        let addr: SocketAddr = "192.0.2.1:7070".parse().unwrap();
        assert_eq!(
            OwnerCheck::any_owner().connect(addr).await.err(),
            Some(DialError::NotLoopback { addr })
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_socket_of_this_process_is_its_own_and_nothing_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("own.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
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

    #[cfg(unix)]
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
