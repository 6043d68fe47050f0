//! A carrier in a process of its own, for the server's tests that measure a process's resident
//! memory (`server/tests/it/hostile_clients.rs`): the embedded agent, the reference channels given with
//! `--channel`, the flags and `listening` line of `carrier serve` (`carrier_test_support::host`).
//!
//! ```sh
//! cargo run -p carrier-server --example server_host -- --port 7070 --token t --channel echo1:echo
//! ```

fn main() -> std::process::ExitCode {
    carrier_test_support::host::main()
}
