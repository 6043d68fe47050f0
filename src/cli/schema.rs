//! `carrier schema --out DIR | --check DIR`: the JSON Schemas derived from the method catalog.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// Flags of `carrier schema`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct SchemaArgs {
    /// Write one JSON Schema per params/result/event type into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Exit non-zero if the schemas in DIR are stale, missing or unexpected.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
}

/// Runs `carrier schema`.
pub fn run(args: SchemaArgs) -> ExitCode {
    if let Some(dir) = args.out {
        return match carrier::protocol::schema::write_schemas(&dir) {
            Ok(files) => {
                println!("wrote {} schemas to {}", files.len(), dir.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("carrier schema: cannot write {}: {e}", dir.display());
                ExitCode::from(1)
            }
        };
    }
    let Some(dir) = args.check else {
        return ExitCode::from(2);
    };
    match carrier::protocol::schema::check_schemas(&dir) {
        Ok(()) => {
            println!("schemas in {} are up to date", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "carrier schema: {e}\nregenerate with: cargo run -- schema --out {}",
                dir.display()
            );
            ExitCode::from(1)
        }
    }
}
