//! Opening a connection through the client's one dialer (`carrier::client::dial`): connect, the
//! listener's owner checked, the WebSocket upgrade — to a carrier of this process, over TCP and
//! over its Unix socket, in one run.
//!
//! - `dial/tcp_owner_checked`: TCP connect, then the owner looked up in the kernel's socket
//!   tables (`/proc/net/tcp` and `tcp6`, read whole: the cost grows with the sockets on the
//!   machine), then the upgrade with the token.
//! - `dial/unix_peer_credentials`: connect to the socket, read its peer credentials (one
//!   `getsockopt`), then the upgrade with no token.
//!
//! Both connections are dropped once upgraded; the server reads their end. BENCHMARKS.md, "The
//! Unix socket", has the figures and `benches/unix_socket.sh` the throughput beside them.

// `criterion_group!` declares an undocumented `pub fn`.
#![allow(missing_docs)]

use carrier::agent::{AgentProfile, EmbeddedAgent};
use carrier::client::{dial, WsOptions};
use carrier::discovery::RuntimeDir;
use carrier::server::{CarrierConfig, RuntimeFileOptions, WsTransport};
use criterion::{criterion_group, criterion_main, Criterion};

fn dial_benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let runtime_dir = tempfile::tempdir().expect("tempdir");
    let transport = rt.block_on(async {
        let transport = WsTransport::new(CarrierConfig::default().with_port(0))
            .expect("config")
            .with_runtime_file(RuntimeFileOptions::in_dir(RuntimeDir::at(
                runtime_dir.path().join("carrier"),
            )));
        transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));
        transport.start().await.expect("start");
        transport
    });
    let tcp = WsOptions::new(transport.url().expect("url"))
        .token(transport.resolved_token().expect("token"))
        .no_reconnect();
    let mut group = c.benchmark_group("dial");
    group.bench_function("tcp_owner_checked", |b| {
        b.iter(|| rt.block_on(dial(&tcp, |_| {})).expect("dialled"))
    });
    if let Some(socket) = transport.unix_socket_path() {
        let unix = WsOptions::new(format!("unix:{}", socket.display())).no_reconnect();
        group.bench_function("unix_peer_credentials", |b| {
            b.iter(|| rt.block_on(dial(&unix, |_| {})).expect("dialled"))
        });
    }
    group.finish();
    rt.block_on(transport.stop());
}

criterion_group!(benches, dial_benches);
criterion_main!(benches);
