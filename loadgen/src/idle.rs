//! The `idle` modes: server memory per connection, read from `/proc/PID/status`.

use tokio::time::Instant;

use super::client::open_all;
use super::client::BenchSocket as BenchSocketClose;
use super::error::LoadError;
use super::latency::Latencies;
use super::pingpong::Script;
use super::plan::Plan;
use super::report::{MemoryReport, Outcome};
use super::target::Target;

/// The `VmRSS` of a process, in KiB.
pub fn vm_rss_kib(pid: u32) -> Result<u64, LoadError> {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of a process's resident memory (`RssAnon`, in KiB): its heap and stacks,
/// without the pages of its executable and libraries, which the first use of a code path maps in
/// whatever the number of connections.
pub fn rss_anon_kib(pid: u32) -> Result<u64, LoadError> {
    status_kib(pid, "RssAnon:")
}

fn status_kib(pid: u32, field: &str) -> Result<u64, LoadError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| LoadError::Proc(pid, e.to_string()))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .ok_or_else(|| LoadError::Proc(pid, format!("no {field} line")))
}

/// Connections opened, used once and closed before the baseline is read.
const WARM_UP: usize = 8;

pub(crate) async fn run(
    plan: &Plan,
    target: &Target,
    deadline: Instant,
) -> Result<Outcome, LoadError> {
    let pid = plan
        .server_pid
        .ok_or_else(|| LoadError::Plan("idle modes need the server's pid".into()))?;
    // A few connections first, each carrying one message, then closed: the code a connection
    // runs is mapped in and the allocator has its first arenas before the baseline is read, so
    // neither is counted per connection.
    let mut script = Script::new(plan)?;
    let mut warm = tokio::time::timeout_at(deadline, open_all(plan, target, WARM_UP))
        .await
        .map_err(|_| LoadError::TimedOut)??;
    for socket in warm.iter_mut() {
        tokio::time::timeout_at(deadline, script.round_trip(socket, 0))
            .await
            .map_err(|_| LoadError::TimedOut)??;
    }
    for socket in warm {
        socket.close().await;
    }
    tokio::time::sleep(plan.settle).await;
    let before = vm_rss_kib(pid)?;
    let anon_before = rss_anon_kib(pid)?;
    let mut sockets = tokio::time::timeout_at(deadline, open_all(plan, target, plan.connections))
        .await
        .map_err(|_| LoadError::TimedOut)??;
    tokio::time::sleep(plan.settle).await;
    let idle = vm_rss_kib(pid)?;
    let anon_idle = rss_anon_kib(pid)?;

    let started = Instant::now();
    let mut latencies = Latencies::with_capacity(sockets.len());
    let mut errors = 0u64;
    let mut first_error = None;
    // One message per connection, one connection at a time: the memory a message leaves
    // behind is what is measured, not a burst.
    for socket in sockets.iter_mut() {
        let sent = Instant::now();
        match tokio::time::timeout_at(deadline, script.round_trip(socket, 0)).await {
            Ok(Ok(())) => latencies.record(sent.elapsed()),
            Ok(Err(e)) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
            Err(_) => {
                errors += 1;
                first_error.get_or_insert_with(|| LoadError::TimedOut.to_string());
                break;
            }
        }
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(plan.settle).await;
    let after = vm_rss_kib(pid)?;
    let completed = latencies.len() as u64;
    if Instant::now() < deadline {
        use futures_util::StreamExt;
        futures_util::stream::iter(sockets)
            .for_each_concurrent(64, BenchSocketClose::close)
            .await;
    }
    let n = plan.connections as u64;
    Ok(Outcome {
        completed,
        errors,
        timed_out: first_error.as_deref() == Some(&LoadError::TimedOut.to_string()),
        elapsed,
        latencies,
        first_error,
        server_cpu: None,
        mixed: None,
        memory: Some(MemoryReport {
            rss_before_kib: before,
            rss_idle_kib: idle,
            rss_after_message_kib: after,
            idle_bytes_per_conn: idle.saturating_sub(before) * 1024 / n,
            after_message_bytes_per_conn: after.saturating_sub(before) * 1024 / n,
            anon_before_kib: anon_before,
            anon_idle_kib: anon_idle,
            idle_anon_bytes_per_conn: anon_idle.saturating_sub(anon_before) * 1024 / n,
        }),
    })
}
