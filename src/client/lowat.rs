//! `TCP_NOTSENT_LOWAT` on the client's sockets.
//!
//! A client that sends bulk data (a file through a bulk channel) could otherwise hand the
//! kernel megabytes of it; a request or a channel frame written after that would queue behind
//! all of it in the socket's send buffer, however the client orders its own queue. With a small
//! unsent low-water mark the socket reports writable only while less than that is unsent, so
//! what waits in the kernel ahead of a later frame stays near this figure. A connection that
//! never has that much unsent (no bulk) is not affected.
#![allow(unsafe_code)]

use tokio::net::TcpStream;

/// At most this many bytes unsent in the kernel before the socket stops reporting writable.
pub(crate) const NOTSENT_LOWAT: u32 = 128 << 10;

/// Sets [`NOTSENT_LOWAT`] on `stream` (Linux; elsewhere nothing). A failure only costs
/// latency, so it is logged, not returned.
#[cfg(target_os = "linux")]
pub(crate) fn limit_unsent(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let value: libc::c_int = NOTSENT_LOWAT as libc::c_int;
    // SAFETY: the descriptor is the open socket `stream` borrows for the whole call, and the
    // option value is a live c_int whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "TCP_NOTSENT_LOWAT not set");
    }
}

/// Sets nothing where the option is not known.
#[cfg(not(target_os = "linux"))]
pub(crate) fn limit_unsent(_stream: &TcpStream) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[tokio::test]
    async fn the_option_is_set_on_a_connected_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        limit_unsent(&stream);
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a live socket, and a c_int with its size for the kernel to fill.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                std::ptr::addr_of_mut!(value).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(value as u32, NOTSENT_LOWAT);
    }
}
