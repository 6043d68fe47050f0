//! Client-side commands of the `carrier` binary (docs/protocol.md, "Discovery and the CLI"):
//! `send`, `connect`, `status` and `doctor`. Argument parsing and wiring only; everything else
//! comes from [`carrier::client`].
//!
//! Each `run_*` returns the exit code: 0 success, 1 runtime failure (unreachable server, token
//! refused, turn aborted), 2 usage error (a URL that is not `ws://HOST:PORT/`, or no URL while
//! not exactly one carrier runs); the reason is one line on stderr.
//!
//! Without a URL, `send`, `connect` and `status` use the runtime file of the one carrier that
//! runs ([`carrier::discovery`]): its Unix socket when it lists one (`unix:PATH`, where the same
//! user needs no token), else its URL; and its token unless one is given. Clap's own parse
//! errors already exit with 2. The `*_with` variants take the output streams (and the console
//! its input lines) so tests can drive them.
//!
//! Every command talks only to a listener of the user running it: the Rust client's dialer
//! checks the listening socket's owner before the upgrade (and the token in it) is written, and
//! another user's listener ends the command with one line naming the port and the owner, exit 1,
//! nothing sent. `--any-owner`, given with a URL, lets `send`, `connect`, `status` and `pipe`
//! talk to another user's listener (an `--open` carrier) — without the token, and saying so.
//!
//! One file per command under `client/` (`send`, `console`, `status`, `doctor`), beside their
//! arguments (`args`) and what they share: the `Failure` a command ends with (`failure`),
//! where it connects (`target`), the session it opens (`session`) and the JSON fields it reads
//! (`fields`). This file only names them and runs each command on the process's streams.

mod args;
mod console;
mod doctor;
pub(crate) mod failure;
mod fields;
mod send;
pub(crate) mod session;
mod status;
pub(crate) mod target;

use std::io;
use std::process::ExitCode;

use carrier::discovery::RuntimeDir;

pub use args::{ConnectArgs, DoctorArgs, SendArgs, StatusArgs, DOCTOR_PORTS};
pub use console::connect_with;
pub use doctor::doctor_with;
pub use send::send_with;
pub use status::status_with;

/// Runs `carrier send` on the process's stdout and stderr.
pub async fn run_send(args: SendArgs) -> ExitCode {
    send_with(args, &mut io::stdout(), &mut io::stderr()).await
}

/// Runs `carrier connect` on the process's stdin, stdout and stderr.
pub async fn run_connect(args: ConnectArgs) -> ExitCode {
    connect_with(
        args,
        console::stdin_lines(),
        &mut io::stdout(),
        &mut io::stderr(),
    )
    .await
}

/// Runs `carrier status` on the process's stdout and stderr.
pub async fn run_status(args: StatusArgs) -> ExitCode {
    status_with(args, &mut io::stdout(), &mut io::stderr()).await
}

/// Runs `carrier doctor` on the process's stdout and stderr.
pub async fn run_doctor(args: DoctorArgs) -> ExitCode {
    doctor_with(
        args,
        DOCTOR_PORTS,
        &RuntimeDir::for_user(),
        &mut io::stdout(),
        &mut io::stderr(),
    )
    .await
}
