//! `carrier schema --out DIR | --check DIR [--ts FILE]`: the JSON Schemas derived from the
//! method catalog, and the same types as TypeScript declarations for the JavaScript package.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use carrier::protocol::schema::{check_schemas, write_schemas};
use carrier::protocol::typescript::{check_typescript, write_typescript};
use clap::Args;

/// Flags of `carrier schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Write one JSON Schema per params/result/event type into DIR.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "check",
        required_unless_present = "check"
    )]
    out: Option<PathBuf>,
    /// Exit non-zero if the schemas in DIR (and the --ts file) are stale, missing or unexpected.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
    /// Also write (with --out) or check (with --check) the TypeScript declarations of the wire
    /// types in FILE, e.g. js/wire.d.ts.
    #[arg(long, value_name = "FILE")]
    ts: Option<PathBuf>,
}

/// Runs `carrier schema`.
pub fn run(args: SchemaArgs) -> ExitCode {
    if let Some(dir) = args.out {
        return write(&dir, args.ts.as_deref());
    }
    match args.check {
        Some(dir) => check(&dir, args.ts.as_deref()),
        None => ExitCode::from(2),
    }
}

fn write(dir: &Path, ts: Option<&Path>) -> ExitCode {
    match write_schemas(dir) {
        Ok(files) => println!("wrote {} schemas to {}", files.len(), dir.display()),
        Err(e) => {
            eprintln!("carrier schema: cannot write {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    if let Some(file) = ts {
        if let Err(e) = write_typescript(file) {
            eprintln!("carrier schema: cannot write the TypeScript declarations: {e}");
            return ExitCode::from(1);
        }
        println!("wrote the TypeScript declarations to {}", file.display());
    }
    ExitCode::SUCCESS
}

fn check(dir: &Path, ts: Option<&Path>) -> ExitCode {
    let regenerate = match ts {
        Some(file) => format!(
            "cargo run -- schema --out {} --ts {}",
            dir.display(),
            file.display()
        ),
        None => format!("cargo run -- schema --out {}", dir.display()),
    };
    let mut ok = true;
    match check_schemas(dir) {
        Ok(()) => println!("schemas in {} are up to date", dir.display()),
        Err(e) => {
            eprintln!("carrier schema: {e}");
            ok = false;
        }
    }
    if let Some(file) = ts {
        match check_typescript(file) {
            Ok(()) => println!(
                "TypeScript declarations in {} are up to date",
                file.display()
            ),
            Err(e) => {
                eprintln!("carrier schema: {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("regenerate with: {regenerate}");
        ExitCode::from(1)
    }
}
