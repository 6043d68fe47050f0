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
/// this is most of what a ping waits behind on the way in. With 16 frames of 64 KiB in flight
/// to a `bulk` echo channel (the runs `benches/mixed_credit.sh` makes), ping p99 during the
/// transfer ÷ idle was 2.6–5.4 at 128 KiB and under 1 from 64 KiB down; below 64 KiB a 1 MiB
/// echo on one connection loses 10–15 % of its rate. The runs: BENCHMARKS.md, "Bulk without head-of-line
/// blocking".
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
