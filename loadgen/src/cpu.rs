//! The server's CPU time, read from `/proc` (Linux).

use std::time::Duration;

use crate::error::LoadError;

/// The CPU time (user + system, all threads) a process has used so far, from `/proc/PID/stat`
/// (clock ticks of 1/100 s, Linux's `USER_HZ`).
pub fn process_cpu_time(pid: u32) -> Result<Duration, LoadError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| LoadError::Proc(pid, e.to_string()))?;
    // Fields after the command name (which may contain spaces) start at `) `.
    let rest = stat
        .rsplit_once(") ")
        .map(|(_, r)| r)
        .ok_or_else(|| LoadError::Proc(pid, "unreadable stat".into()))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(u), Some(s)) => Ok(Duration::from_millis((u + s) * 10)),
        _ => Err(LoadError::Proc(pid, "no utime/stime".into())),
    }
}

/// Server CPU used between two readings, when the pid is known and readable.
pub(crate) fn cpu_since(pid: Option<u32>, start: Option<Duration>) -> Option<Duration> {
    let now = process_cpu_time(pid?).ok()?;
    Some(now.saturating_sub(start?))
}
