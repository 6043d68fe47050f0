//! Finding a running carrier, and trusting what is found.
//!
//! - Runtime files (this module): how a local client finds a running carrier without being given
//!   its URL and token.
//! - [`listener`]: whose listener a loopback connection reached, checked by every dial of the
//!   project's clients before a token goes out.
//! - [`User`]: a uid and its name, for the lines that say whose something is.
//! - `socket_file` (Unix): where the carrier's Unix socket may be created, when a stale one is
//!   replaced ([`prepare_socket_path`]), and its removal ([`SocketFile`]).
//!
//! A carrier that advertises itself (`carrier serve` always does; a library host opts in with
//! `WsTransport::with_runtime_file` in `carrier-server`) writes one
//! JSON file, `{pid, url, port, role, token, started, pid_start, socket}`, for as long as it runs, into
//! `$XDG_RUNTIME_DIR/carrier/` or else a per-user directory under the OS temp dir
//! (`/tmp/carrier-UID/`). The directory is 0700 and the file 0600, like Jupyter's runtime files,
//! so only the same user can read the token there. The file is written atomically (a temporary
//! file renamed into place) and removed when the carrier stops cleanly. `socket`, when present,
//! is the carrier's Unix socket (by default `<pid>.sock` beside the file): clients use it
//! rather than the port, checking the listener's peer credentials instead of a socket table.
//!
//! Readers ([`RuntimeDir::scan`]) trust nothing they did not check:
//! - a directory or file that another user owns or can write is ignored with a warning (it could
//!   point a client, and its token, at someone else's server);
//! - a file whose writer is gone is ignored and removed: its pid no longer runs, or now names
//!   another process (pids are reused; `pid_start`, the writer's start time, tells them apart);
//!   so is the socket it lists beside it, when that is this user's and nothing answers on it;
//! - a file without `pid_start` (an older carrier wrote it) whose pid runs cannot be verified: it
//!   is ignored with a warning and left alone;
//! - a file larger than [`MAX_RUNTIME_FILE_BYTES`], or that does not parse, is ignored with a
//!   warning and left alone.
//!
//! ```no_run
//! use carrier_discovery::RuntimeDir;
//!
//! let scan = RuntimeDir::for_user().scan();
//! for warning in &scan.warnings {
//!     eprintln!("warning: {warning}");
//! }
//! for carrier in &scan.carriers {
//!     println!("{} (pid {})", carrier.url, carrier.pid);
//! }
//! ```

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use carrier_protocol::Role;

pub mod listener;
// The two modules that call libc (kill(2), getuid(2), getpwuid_r(3)); each block says why it holds.
#[allow(unsafe_code)]
mod process;
#[cfg(unix)]
mod socket_file;
#[allow(unsafe_code)]
mod user;

pub use process::ProcessStart;
#[cfg(unix)]
pub use socket_file::{prepare_socket_path, SocketFile, SocketPathError};
pub use user::User;

use carrier_protocol::timestamp::rfc3339_utc;
use process::{liveness, Liveness};
use user::real_uid;

/// A runtime file is a few hundred bytes; anything much larger is not one of ours, and is not
/// read into memory.
pub const MAX_RUNTIME_FILE_BYTES: u64 = 64 * 1024;

/// What a runtime file says about one running carrier.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeEntry {
    /// The carrier's process id: the file is stale once this process is gone.
    pub pid: u32,
    /// Where clients connect: `ws://127.0.0.1:PORT/`, or `ws://127.0.0.1:PORT/PATH` for a
    /// carrier a host mounted at a path of its own HTTP server.
    pub url: String,
    /// The bound port.
    pub port: u16,
    /// The most a connection may do on this listener.
    pub role: Role,
    /// The token clients present; `None` when the carrier is open or keeps its token elsewhere
    /// (`--token-file`).
    pub token: Option<String>,
    /// When the carrier started listening (RFC 3339, UTC).
    pub started: String,
    /// When the carrier's process started, so that a later process given the same pid is not
    /// taken for it. `None` where it cannot be read (not Linux), and in files of older carriers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start: Option<ProcessStart>,
    /// The carrier's Unix socket, where it has one: clients of this user connect there instead
    /// of the port. Absent in files of carriers without one (`--no-unix-socket`, not Unix,
    /// older carriers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
}

impl fmt::Debug for RuntimeEntry {
    // The token never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeEntry")
            .field("pid", &self.pid)
            .field("url", &self.url)
            .field("port", &self.port)
            .field("role", &self.role)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("started", &self.started)
            .field("pid_start", &self.pid_start)
            .field("socket", &self.socket)
            .finish()
    }
}

impl RuntimeEntry {
    /// The entry for a carrier of this process listening on `port` now.
    pub fn for_this_process(port: u16, role: Role, token: Option<String>) -> RuntimeEntry {
        RuntimeEntry {
            pid: std::process::id(),
            url: format!("ws://127.0.0.1:{port}/"),
            port,
            role,
            token,
            started: rfc3339_utc(SystemTime::now()),
            pid_start: ProcessStart::of_this_process(),
            socket: None,
        }
    }

    /// The same entry at `path` of its port (a carrier mounted inside a host's own HTTP
    /// server): `url` becomes `ws://127.0.0.1:PORT` followed by `path`. Fails, naming why, for
    /// a path a reader would refuse ([`url_path`]).
    pub fn at_path(mut self, path: &str) -> Result<RuntimeEntry, String> {
        let url = format!("ws://127.0.0.1:{}{path}", self.port);
        url_path(&url, self.port)?;
        self.url = url;
        Ok(self)
    }

    /// The path of `url` (`/` for a carrier's own listener, the mount path otherwise).
    pub fn path(&self) -> &str {
        url_path(&self.url, self.port).unwrap_or("/")
    }

    /// The same entry, listing the carrier's Unix socket.
    pub fn with_socket(mut self, path: impl Into<PathBuf>) -> RuntimeEntry {
        self.socket = Some(path.into());
        self
    }

    /// Where a client of this user connects: `unix:PATH` when the carrier lists a socket, else
    /// its `ws://` URL.
    pub fn client_url(&self) -> String {
        match &self.socket {
            Some(path) => format!("unix:{}", path.display()),
            None => self.url.clone(),
        }
    }

    /// One line for a person: URL, pid and start time.
    pub fn describe(&self) -> String {
        format!("{} (pid {}, started {})", self.url, self.pid, self.started)
    }
}

/// A runtime file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeFileError {
    /// The directory exists but cannot be trusted (another owner, writable by others, a link).
    #[error("the runtime directory {path} is not safe to use: {reason}")]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file system refused.
    #[error("cannot write the runtime file in {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The directory runtime files live in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeDir {
    path: PathBuf,
}

/// What [`RuntimeDir::scan`] found.
#[derive(Debug, Default)]
pub struct Scan {
    /// The carriers whose writing process still runs, oldest first.
    pub carriers: Vec<RuntimeEntry>,
    /// Files and directories ignored because they cannot be trusted or read, one sentence each.
    pub warnings: Vec<String>,
    /// Stale files (their writer is gone: the pid runs no more or names another process) that
    /// were removed.
    pub removed: Vec<PathBuf>,
}

/// The name a carrier of this process publishes under (`<pid>` or `<pid>-N`), claimed before
/// the file is written so that its socket can be bound beside it first
/// ([`RuntimeDir::claim`]).
#[derive(Debug)]
pub struct RuntimeSlot {
    dir: PathBuf,
    stem: String,
}

impl RuntimeSlot {
    /// `<stem>.sock` in the runtime directory: where the carrier's Unix socket goes by default.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join(format!("{}.sock", self.stem))
    }

    /// Writes `entry` as `<stem>.json`; the file is 0600 and appears whole or not at all.
    pub fn publish(self, entry: &RuntimeEntry) -> Result<RuntimeFile, RuntimeFileError> {
        let io = |source| RuntimeFileError::Io {
            path: self.dir.clone(),
            source,
        };
        let name = format!("{}.json", self.stem);
        let path = self.dir.join(&name);
        let temporary = self.dir.join(format!(".{name}.tmp"));
        let body = serde_json::to_vec_pretty(entry).map_err(|e| io(std::io::Error::other(e)))?;
        let written = write_private(&temporary, &body)
            // A file already at `path` names this pid, so its writer is gone: replace it.
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(io(e));
        }
        Ok(RuntimeFile { path })
    }
}

/// The runtime file of a running carrier; dropping it removes the file.
#[derive(Debug)]
pub struct RuntimeFile {
    path: PathBuf,
}

impl RuntimeFile {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RuntimeFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the runtime file");
            }
        }
    }
}

/// Files this process has published, so a second carrier in one process gets its own name.
static PUBLISHED: AtomicU32 = AtomicU32::new(0);

impl RuntimeDir {
    /// `$XDG_RUNTIME_DIR/carrier` when that variable names an absolute path, else
    /// `carrier-UID` in the OS temp dir.
    pub fn for_user() -> RuntimeDir {
        match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
            Some(base) if base.is_absolute() => RuntimeDir::at(base.join("carrier")),
            _ => RuntimeDir::at(std::env::temp_dir().join(format!("carrier-{}", real_uid()))),
        }
    }

    /// A directory of the caller's choosing (tests, or a host with its own layout).
    pub fn at(path: impl Into<PathBuf>) -> RuntimeDir {
        RuntimeDir { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `entry` as `<pid>.json` (a second carrier of the same process: `<pid>-N.json`),
    /// creating the directory 0700 if needed; the file is 0600 and appears whole or not at all.
    pub fn publish(&self, entry: &RuntimeEntry) -> Result<RuntimeFile, RuntimeFileError> {
        self.claim(entry.pid)?.publish(entry)
    }

    /// Claims the name the next carrier of process `pid` publishes under (`<pid>`, or
    /// `<pid>-N` for a second carrier of the same process), creating the directory 0700 if
    /// needed; [`RuntimeSlot::publish`] writes the file.
    pub fn claim(&self, pid: u32) -> Result<RuntimeSlot, RuntimeFileError> {
        self.prepare()?;
        let stem = match PUBLISHED.fetch_add(1, Ordering::Relaxed) {
            0 => pid.to_string(),
            n => format!("{pid}-{n}"),
        };
        Ok(RuntimeSlot {
            dir: self.path.clone(),
            stem,
        })
    }

    /// Creates the directory 0700, or checks the one that is there (tightening our own to 0700).
    fn prepare(&self) -> Result<(), RuntimeFileError> {
        let unsafe_dir = |reason: String| RuntimeFileError::UnsafeDirectory {
            path: self.path.clone(),
            reason,
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        if let Err(source) = builder.create(&self.path) {
            return Err(RuntimeFileError::Io {
                path: self.path.clone(),
                source,
            });
        }
        let meta =
            std::fs::symlink_metadata(&self.path).map_err(|source| RuntimeFileError::Io {
                path: self.path.clone(),
                source,
            })?;
        untrusted_dir(&meta).map_or(Ok(()), |reason| Err(unsafe_dir(reason)))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if meta.permissions().mode() & 0o777 != 0o700 {
                std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o700))
                    .map_err(|source| RuntimeFileError::Io {
                        path: self.path.clone(),
                        source,
                    })?;
            }
        }
        Ok(())
    }

    /// Reads every runtime file: the carriers that run, warnings for what cannot be trusted,
    /// and stale files removed. A missing directory is an empty scan.
    pub fn scan(&self) -> Scan {
        let mut scan = Scan::default();
        let dir = self.path.display();
        match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return scan,
            Err(e) => {
                scan.warnings
                    .push(format!("cannot read the runtime directory {dir}: {e}"));
                return scan;
            }
            Ok(meta) => {
                if let Some(reason) = untrusted_dir(&meta) {
                    scan.warnings
                        .push(format!("ignoring the runtime directory {dir}: it {reason}"));
                    return scan;
                }
            }
        }
        let entries = match std::fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) => {
                scan.warnings
                    .push(format!("cannot list the runtime directory {dir}: {e}"));
                return scan;
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                name.ends_with(".json") && !name.starts_with('.')
            })
            .collect();
        paths.sort();
        for path in paths {
            let entry = match read_entry(&path) {
                Ok(entry) => entry,
                Err(reason) => {
                    scan.warnings.push(format!(
                        "ignoring the runtime file {}: {reason}",
                        path.display()
                    ));
                    continue;
                }
            };
            match liveness(entry.pid, entry.pid_start.as_ref()) {
                Liveness::Writer => scan.carriers.push(entry),
                Liveness::Gone(why) => {
                    tracing::debug!(path = %path.display(), %why, "removing a stale runtime file");
                    self.remove_stale_socket(&entry);
                    match std::fs::remove_file(&path) {
                        Ok(()) => scan.removed.push(path),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => scan.warnings.push(format!(
                            "cannot remove the stale runtime file {} ({why}): {e}",
                            path.display()
                        )),
                    }
                }
                Liveness::Unverifiable(reason) => scan.warnings.push(format!(
                    "ignoring the runtime file {}: {reason}; to use that carrier, name it: `carrier doctor {}`",
                    path.display(),
                    entry.url
                )),
            }
        }
        scan.carriers
            .sort_by(|a, b| (&a.started, a.pid, a.port).cmp(&(&b.started, b.pid, b.port)));
        scan
    }
}

impl RuntimeDir {
    /// Removes the socket a stale runtime file lists, when it is in this directory (where the
    /// carrier put it by default), this user's, and nothing answers on it.
    fn remove_stale_socket(&self, entry: &RuntimeEntry) {
        #[cfg(unix)]
        if let Some(socket) = entry
            .socket
            .as_deref()
            .filter(|s| s.parent() == Some(self.path.as_path()))
        {
            if let Err(e) = prepare_socket_path(socket) {
                tracing::debug!(error = %e, "the stale runtime file's socket stays");
            }
        }
        #[cfg(not(unix))]
        let _ = entry;
    }
}

/// Why a file is not a runtime file this user can trust, or what it says.
fn read_entry(path: &Path) -> Result<RuntimeEntry, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if meta.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if let Some(reason) = untrusted_owner_or_mode(&meta) {
        return Err(format!("it {reason}"));
    }
    if meta.len() > MAX_RUNTIME_FILE_BYTES {
        return Err(format!(
            "it is {} bytes, more than a runtime file's {MAX_RUNTIME_FILE_BYTES}",
            meta.len()
        ));
    }
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let entry: RuntimeEntry =
        serde_json::from_slice(&text).map_err(|e| format!("it is not a runtime file ({e})"))?;
    url_path(&entry.url, entry.port).map_err(|reason| {
        format!(
            "its url {:?} {reason}",
            carrier_protocol::envelope::truncate(&entry.url, 80),
        )
    })?;
    Ok(entry)
}

/// The longest mount path a runtime file may name.
const MAX_URL_PATH: usize = 1024;

/// The path of a runtime file's `url`, which must be `ws://127.0.0.1:PORT` (its own `port`)
/// followed by an absolute path: `/` for a carrier's own listener, the mount path for one a
/// host serves inside its own HTTP server. Nothing else — no other host, no query, no
/// fragment, no credentials, no backslash or space — so a file cannot point a client, and its
/// token, anywhere but a loopback port of the file's own.
pub fn url_path(url: &str, port: u16) -> Result<&str, String> {
    let origin = format!("ws://127.0.0.1:{port}");
    let path = url
        .strip_prefix(&origin)
        .filter(|path| path.starts_with('/'))
        .ok_or_else(|| format!("is not ws://127.0.0.1:{port}/ or a path under it"))?;
    if path.len() > MAX_URL_PATH {
        return Err(format!("has a path over {MAX_URL_PATH} bytes"));
    }
    let bad = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "/-._~!$&'()*+,;=:@%".contains(*c)));
    match bad {
        Some(c) => Err(format!("has {c:?} in its path")),
        None => Ok(path),
    }
}

/// Writes a new file readable and writable by its owner only.
fn write_private(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(body)?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// Why a directory cannot hold runtime files this user trusts (`None`: it can).
fn untrusted_dir(meta: &std::fs::Metadata) -> Option<String> {
    if meta.file_type().is_symlink() {
        return Some("is a symbolic link".into());
    }
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    untrusted_owner_or_mode(meta)
}

#[cfg(unix)]
fn untrusted_owner_or_mode(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = real_uid();
    if meta.uid() != uid {
        return Some(format!(
            "belongs to uid {}, not to you (uid {uid})",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Some(format!("can be written by other users (mode {mode:o})"));
    }
    None
}

#[cfg(not(unix))]
fn untrusted_owner_or_mode(_meta: &std::fs::Metadata) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_a_loopback_port_of_the_file_and_a_plain_path() {
        assert_eq!(url_path("ws://127.0.0.1:7070/", 7070), Ok("/"));
        assert_eq!(url_path("ws://127.0.0.1:7070/assist", 7070), Ok("/assist"));
        assert_eq!(url_path("ws://127.0.0.1:7070/a/b/", 7070), Ok("/a/b/"));
        for (url, port) in [
            ("ws://127.0.0.1:7071/", 7070),
            ("ws://127.0.0.1:70701/", 7070),
            ("ws://127.0.0.1:7070", 7070),
            ("ws://10.0.0.1:7070/", 7070),
            ("ws://127.0.0.1:7070@evil.example/", 7070),
            ("ws://127.0.0.1:7070/a?token=x", 7070),
            ("ws://127.0.0.1:7070/a#x", 7070),
            ("ws://127.0.0.1:7070/a b", 7070),
            ("ws://127.0.0.1:7070/a\\b", 7070),
            ("wss://127.0.0.1:7070/", 7070),
        ] {
            assert!(url_path(url, port).is_err(), "{url}");
        }
        let entry = RuntimeEntry::for_this_process(7070, Role::Drive, None);
        assert_eq!(entry.path(), "/");
        let mounted = entry.at_path("/assist").expect("a plain path");
        assert_eq!(mounted.url, "ws://127.0.0.1:7070/assist");
        assert_eq!(mounted.path(), "/assist");
        let entry = RuntimeEntry::for_this_process(7070, Role::Drive, None);
        assert!(entry.at_path("assist").is_err());
    }

    #[test]
    fn the_token_stays_out_of_debug_output() {
        let entry = RuntimeEntry::for_this_process(7070, Role::Drive, Some("s3cret".into()));
        assert!(!format!("{entry:?}").contains("s3cret"));
    }
}
