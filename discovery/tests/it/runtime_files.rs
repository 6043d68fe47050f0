//! How a runtime file is judged (docs/protocol.md, "Discovery and the CLI"): it counts only
//! while the process that wrote it runs. A file naming a pid that another process now has (it
//! started after the file's writer), or a pid from before the last boot, is ignored and
//! removed; an older carrier's file without a start time is removed once its pid runs no more;
//! the file of the process that wrote it is live. (What the CLI's commands do with such files
//! is the CLI's test: `cli/tests/it/owner.rs`.) Linux: start times come from `/proc`.
#![cfg(target_os = "linux")]

use carrier_discovery::RuntimeDir;
use carrier_test_support::runtime_file::{
    boot_id, start_ticks, write_runtime_file, Recorder, Sleeper,
};
use serde_json::json;

#[test]
fn a_runtime_file_naming_a_pid_its_writer_no_longer_has_is_ignored_and_removed() {
    let runtime = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start();
    // A live process of this user that started after the file's writer did: the pid was reused.
    let sleeper = Sleeper::start();
    let reused = start_ticks(sleeper.pid()) + 1;
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": reused})),
    );

    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert!(scan.carriers.is_empty(), "{:?}", scan.carriers);
    assert_eq!(scan.removed, std::slice::from_ref(&file));
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    assert!(!file.exists());

    // A file from before the last boot: the same.
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({
            "boot_id": "00000000-0000-0000-0000-000000000000",
            "ticks_since_boot": start_ticks(sleeper.pid()),
        })),
    );
    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert!(scan.carriers.is_empty() && !file.exists(), "{scan:?}");

    // The file of the process that wrote it is live.
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": start_ticks(sleeper.pid())})),
    );
    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert_eq!(scan.carriers.len(), 1, "{scan:?}");
    assert!(file.exists());
}

#[test]
fn an_older_carrier_s_file_without_a_start_time_is_removed_once_its_pid_runs_no_more() {
    let runtime = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start();
    let sleeper = Sleeper::start();
    let file = write_runtime_file(runtime.path(), sleeper.pid(), recorder.port(), None);

    // Once its pid runs no more, it is removed as before.
    let pid = sleeper.pid();
    drop(sleeper);
    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert_eq!(scan.removed, [file], "pid {pid}: {scan:?}");
}
