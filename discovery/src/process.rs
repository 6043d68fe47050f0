//! Which process wrote a runtime file, and whether it still runs.
//!
//! A pid alone does not name a process for long: pids wrap (at 32768 on many systems), so the
//! pid of a carrier killed with SIGKILL soon belongs to something else, possibly another user's
//! process. A runtime file therefore records when its writer started ([`ProcessStart`]), and a
//! file counts as live only while a process with its pid runs **and** started at that moment.

use serde::{Deserialize, Serialize};

/// When a process started, precisely enough to tell it from a later process given the same pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStart {
    /// The kernel's id of the current boot (`/proc/sys/kernel/random/boot_id`): tick counts
    /// start again at every boot, and a file in `/tmp` may outlive one.
    pub boot_id: String,
    /// Clock ticks from boot to the process's start (field 22, `starttime`, of
    /// `/proc/PID/stat`).
    pub ticks_since_boot: u64,
}

impl ProcessStart {
    /// This process's start, or `None` where it cannot be read (no `/proc`: not Linux).
    pub fn of_this_process() -> Option<ProcessStart> {
        match read_process_start(std::process::id()) {
            Ok(start) => Some(start),
            Err(error) => {
                if cfg!(target_os = "linux") {
                    tracing::warn!(%error, "cannot read this process's start time; its runtime file cannot be verified");
                }
                None
            }
        }
    }
}

/// What a runtime file's pid says about its writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// The process that wrote the file runs.
    Writer,
    /// The writer is gone: no such process, a zombie, or the pid now names another process.
    /// The file is stale and may be removed.
    Gone(String),
    /// A process with this pid runs but whether it wrote the file cannot be told (a file of an
    /// older carrier without a start time, or an unreadable `/proc`): not used, and not removed
    /// either, since it may belong to a live carrier.
    Unverifiable(String),
}

/// Whether the process that recorded `recorded` as its start still runs as `pid`.
#[cfg(target_os = "linux")]
pub(crate) fn liveness(pid: u32, recorded: Option<&ProcessStart>) -> Liveness {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Liveness::Gone(format!("process {pid} is gone"))
        }
        Err(e) => {
            return Liveness::Unverifiable(format!("cannot read /proc/{pid}/stat: {e}"));
        }
    };
    let Some(fields) = StatFields::parse(&stat) else {
        return Liveness::Unverifiable(format!("cannot parse /proc/{pid}/stat"));
    };
    // A killed carrier whose parent has not reaped it (in a container whose init does not reap,
    // for good) still has its pid, but it listens no more.
    if matches!(fields.state, 'Z' | 'X') {
        return Liveness::Gone(format!("process {pid} has exited"));
    }
    let Some(recorded) = recorded else {
        return Liveness::Unverifiable(format!(
            "it does not record when process {pid} started (an older carrier wrote it), so a process that reused the pid cannot be told from its writer; delete it if no carrier of yours runs as pid {pid}"
        ));
    };
    let boot_id = match read_boot_id() {
        Ok(id) => id,
        Err(e) => return Liveness::Unverifiable(format!("cannot read the boot id: {e}")),
    };
    if boot_id != recorded.boot_id {
        return Liveness::Gone("it was written before the machine last booted".into());
    }
    if fields.start_ticks != recorded.ticks_since_boot {
        return Liveness::Gone(format!(
            "pid {pid} now belongs to another process (started at tick {}, the file's writer at {})",
            fields.start_ticks, recorded.ticks_since_boot
        ));
    }
    Liveness::Writer
}

/// Without `/proc` a process's start time is not read; `kill(pid, 0)` tells whether the pid runs
/// at all, and `EPERM` means it belongs to another user, so it cannot be our carrier (the file
/// was checked to be ours).
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) fn liveness(pid: u32, _recorded: Option<&ProcessStart>) -> Liveness {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return Liveness::Gone(format!("{pid} is not a process id"));
    };
    if raw <= 0 {
        return Liveness::Gone(format!("{pid} is not a process id"));
    }
    // SAFETY: kill(2) with signal 0 performs only the existence and permission checks.
    if unsafe { libc::kill(raw, 0) } == 0 {
        return Liveness::Writer;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EPERM) => Liveness::Gone(format!("pid {pid} now belongs to another user")),
        _ => Liveness::Gone(format!("process {pid} is gone")),
    }
}

#[cfg(not(unix))]
pub(crate) fn liveness(_pid: u32, _recorded: Option<&ProcessStart>) -> Liveness {
    Liveness::Writer
}

/// The two fields of `/proc/PID/stat` that matter here.
struct StatFields {
    // Read by the Linux liveness check only.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    state: char,
    start_ticks: u64,
}

impl StatFields {
    /// `PID (COMM) STATE PPID …`: COMM may itself hold spaces and parentheses, so fields are
    /// counted after the last `)`. STATE is field 3 and `starttime` field 22 of the whole line.
    fn parse(stat: &str) -> Option<StatFields> {
        let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = rest.next()?.chars().next()?;
        let start_ticks = rest.nth(22 - 4)?.parse().ok()?;
        Some(StatFields { state, start_ticks })
    }
}

fn read_process_start(pid: u32) -> std::io::Result<ProcessStart> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields = StatFields::parse(&stat).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("cannot parse /proc/{pid}/stat"),
        )
    })?;
    Ok(ProcessStart {
        boot_id: read_boot_id()?,
        ticks_since_boot: fields.start_ticks,
    })
}

fn read_boot_id() -> std::io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // The name holds spaces and a `)`: only the last one ends it.
        let stat = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1000 200 18446744073709551615";
        let fields = StatFields::parse(stat).expect("parses");
        assert_eq!(fields.state, 'S');
        assert_eq!(fields.start_ticks, 987_654);
        assert!(StatFields::parse("4242 (truncated").is_none());
        assert!(StatFields::parse("4242 (x) S 1 2").is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_its_own_writer_and_not_another_start() {
        let me = std::process::id();
        let start = ProcessStart::of_this_process().expect("Linux has /proc");
        assert_eq!(liveness(me, Some(&start)), Liveness::Writer);
        let later = ProcessStart {
            ticks_since_boot: start.ticks_since_boot + 1,
            ..start.clone()
        };
        assert!(matches!(liveness(me, Some(&later)), Liveness::Gone(_)));
        let other_boot = ProcessStart {
            boot_id: "00000000-0000-0000-0000-000000000000".into(),
            ..start
        };
        assert!(matches!(liveness(me, Some(&other_boot)), Liveness::Gone(_)));
        assert!(matches!(liveness(me, None), Liveness::Unverifiable(_)));
    }
}
