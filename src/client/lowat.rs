//! `TCP_NOTSENT_LOWAT` on the client's sockets.
//!
//! A client that sends bulk data (a file through a bulk channel) could otherwise hand the
//! kernel megabytes of it; a request or a channel frame written after that would queue behind
//! all of it in the socket's send buffer, however the client orders its own queue. With a small
//! unsent low-water mark the socket reports writable only while less than that is unsent, so
//! what waits in the kernel ahead of a later frame stays near this figure. A connection that
//! never has that much unsent (no bulk) is not affected.

use tokio::net::TcpStream;

/// At most this many bytes unsent in the kernel before the socket stops reporting writable.
///
/// 64 KiB, half the server's 128 KiB: what a client sends ahead of its own ping is all on its
/// side, and the carrier keeps its receive buffer small on a connection with bulk traffic, so
/// this is most of what a ping waits behind on the way in. Measured with
/// `benches/mixed_credit.sh` (16 frames of 64 KiB in flight to a `bulk` echo channel, server's
/// 64 KiB receive buffer, 3 runs each): ping p99 during the transfer ÷ idle 2.6–5.4 at 128 KiB,
/// 0.76–0.95 at 64 KiB, 0.69–0.86 at 32 KiB, 0.83–0.90 at 16 KiB, the transfer at 1.85–2.04 GB/s
/// from 64 KiB down against 1.3–1.5 at 128 KiB. Lower costs large messages: a 1 MiB echo on one
/// connection went 870–940 messages/s at 64 and 128 KiB, 750–880 at 16 KiB.
pub(crate) const NOTSENT_LOWAT: u32 = 64 << 10;

/// Sets [`NOTSENT_LOWAT`] on `stream` (Linux and Android; elsewhere nothing), as the server's
/// writer does on connections with bulk traffic. A failure only costs latency, so it is
/// logged, not returned.
pub(crate) fn limit_unsent(stream: &TcpStream) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_notsent_lowat(NOTSENT_LOWAT) {
        tracing::debug!(error = %e, "TCP_NOTSENT_LOWAT not set");
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = stream;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_option_is_set_on_a_connected_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        limit_unsent(&stream);
        let value = socket2::SockRef::from(&stream).tcp_notsent_lowat();
        assert_eq!(value.ok(), Some(NOTSENT_LOWAT));
    }
}
