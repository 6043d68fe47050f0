//! An ACP prompt turn's overhead through carrier, as a ratio in one run: the same SDK agent
//! (`acp/tests/fixtures/bench-agent.mjs`, on `@agentclientprotocol/sdk`) driven by the SDK's
//! own client directly over its stdio, and hosted by this build's `carrier serve --agent-acp`
//! and driven through `/acp` over a WebSocket (agent → carrier → `/acp` client). Both paths are
//! open at once and their turns interleaved in rounds (`bench-client.mjs` says how); the
//! medians, p99s, the overhead and the ratio are printed. Figures: BENCHMARKS.md, "An ACP
//! prompt turn through carrier".
//!
//! `cargo bench -p carrier-cli --bench acp_turn` (`ACP_BENCH_ROUNDS`, `ACP_BENCH_TURNS`,
//! `ACP_BENCH_WARMUP` change the counts: by default 10 rounds of 50 turns on each path after 20
//! to warm up). Under `cargo test --benches` (no `--bench` argument) it runs one short round, a
//! smoke check that both paths answer. Needs Node.js 20+ and npm (the fixtures are installed
//! with `npm ci` from their lock file); every Node run is bounded by the tests' command timeout.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use carrier_test_support::node::{acp_fixtures, run};
use serde_json::Value;

/// The bench's own token: the carrier listens on loopback only and lives for the bench.
const TOKEN: &str = "acp-turn-bench-token";

/// The carrier under test, killed and reaped when dropped.
struct Carrier {
    child: Child,
    port: u16,
    _runtime: tempfile::TempDir,
}

impl Carrier {
    /// `carrier serve` on a free loopback port, hosting `bench-agent.mjs` with `--agent-acp`.
    fn start(fixtures: &std::path::Path) -> Carrier {
        let runtime = tempfile::tempdir().expect("a runtime folder");
        let agent = format!("node '{}'", fixtures.join("bench-agent.mjs").display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_carrier"))
            .args([
                "serve",
                "--port",
                "0",
                "--token",
                TOKEN,
                "--agent-acp",
                &agent,
            ])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("carrier serve starts");
        let stdout = child.stdout.take().expect("serve's stdout");
        let mut line = String::new();
        // serve prints its listening line once the agent is initialized, or exits saying why.
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("serve's listening line");
        let listening: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            let _ = child.kill();
            panic!("carrier serve did not start ({e}): {line:?}")
        });
        let port = listening["port"].as_u64().expect("a port") as u16;
        Carrier {
            child,
            port,
            _runtime: runtime,
        }
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn count(name: &str, default: u32) -> String {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(default)
        .to_string()
}

fn main() {
    let timed = std::env::args().any(|a| a == "--bench");
    let (rounds, turns, warmup) = match timed {
        true => (
            count("ACP_BENCH_ROUNDS", 10),
            count("ACP_BENCH_TURNS", 50),
            count("ACP_BENCH_WARMUP", 20),
        ),
        false => ("1".into(), "3".into(), "1".into()),
    };
    let fixtures = acp_fixtures();
    let carrier = Carrier::start(&fixtures);
    let mut node = Command::new("node");
    node.arg("bench-client.mjs")
        .current_dir(&fixtures)
        .env("ACP_URL", format!("ws://127.0.0.1:{}/acp", carrier.port))
        .env("ACP_TOKEN", TOKEN)
        .env("BENCH_ROUNDS", &rounds)
        .env("BENCH_TURNS", &turns)
        .env("BENCH_WARMUP", &warmup);
    let out = run(node, "node bench-client.mjs");
    drop(carrier);
    assert!(out.success, "the bench client failed:\n{}", out.report());
    let figures: Value =
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.report()));
    if !timed {
        println!("acp_turn: smoke run, both paths answered ({figures})");
        return;
    }
    println!(
        "acp_turn: {rounds} interleaved rounds of {turns} turns per path\n\
         \x20 direct over stdio:  {} µs/turn median (p99 {} µs)\n\
         \x20 through carrier:    {} µs/turn median (p99 {} µs)\n\
         \x20 overhead {} µs/turn, ratio {}",
        figures["direct_median_us"],
        figures["direct_p99_us"],
        figures["carrier_median_us"],
        figures["carrier_p99_us"],
        figures["overhead_us"],
        figures["ratio"],
    );
}
