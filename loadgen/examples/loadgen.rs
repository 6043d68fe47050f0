//! `carrier bench` as a standalone program, for `benches/compare.sh` and for branches where the
//! binary does not wire the subcommand yet: `cargo run --release --example loadgen -- URL …`
//! takes exactly the arguments of `carrier bench`.

use carrier_loadgen::args as bench;
use clap::Parser;

/// Load-test a running server on loopback; prints one JSON line.
#[derive(Parser)]
#[command(name = "loadgen")]
struct Cli {
    #[command(flatten)]
    args: bench::BenchArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(bench::run_bench(cli.args)),
        Err(e) => {
            eprintln!("loadgen: cannot start the runtime: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
