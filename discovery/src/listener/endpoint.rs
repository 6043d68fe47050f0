//! [`Endpoint`]: where a client connects — a loopback TCP address or a Unix socket's path.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where a client connects: a loopback TCP address, or the path of a Unix-domain socket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A TCP listener on a loopback address.
    Tcp(SocketAddr),
    /// A Unix-domain socket (the carrier's own, next to its runtime file).
    Unix(PathBuf),
}

impl Endpoint {
    /// The TCP address, for a TCP endpoint.
    pub fn tcp(&self) -> Option<SocketAddr> {
        match self {
            Endpoint::Tcp(addr) => Some(*addr),
            Endpoint::Unix(_) => None,
        }
    }
}

impl fmt::Display for Endpoint {
    /// `127.0.0.1:7070`, or `unix:/run/user/1000/carrier/4242.sock` (the form clients take).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Self {
        Endpoint::Tcp(addr)
    }
}

impl PartialEq<SocketAddr> for Endpoint {
    fn eq(&self, other: &SocketAddr) -> bool {
        self.tcp() == Some(*other)
    }
}
