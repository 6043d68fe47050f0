//! The carrier's Unix socket as a file: where it may be created, when a socket already at the
//! path may be replaced, and removing it again ([`SocketFile`]).
//!
//! The socket is the carrier's door for its own user, so the path must be one nobody else can
//! put something at: its directory is a real directory (not a symbolic link) that this user
//! owns and no other user can write, and the path itself is not a symbolic link. A socket left
//! at the path by a carrier that was killed (SIGKILL leaves the file behind) is replaced only
//! when it is this user's and nothing answers on it; anything else there — another user's
//! socket, a live listener, a file that is not a socket — is refused, never removed.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::user::{effective_uid, User};

/// Why a path cannot take the carrier's socket.
#[derive(Debug, thiserror::Error)]
pub enum SocketPathError {
    /// The path or its directory is not one this user alone controls.
    #[error("refusing the socket path {}: {reason}", path.display())]
    Unsafe {
        /// The socket's path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A listener answers at the path (another carrier, or another program).
    #[error("refusing the socket path {}: a listener already answers there", path.display())]
    InUse {
        /// The socket's path.
        path: PathBuf,
    },
    /// The file system refused.
    #[error("cannot use the socket path {}: {source}", path.display())]
    Io {
        /// The socket's path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Makes `path` ready for a new socket: checks its directory, and removes a stale socket of
/// this user that nobody answers on. Anything else at the path is an error and stays.
///
/// Whether a socket is stale is learnt by connecting to it (blocking, like any local connect:
/// it returns at once unless a live listener's backlog is full, and then as soon as that
/// listener accepts). No other user can create anything at the path meanwhile: its directory
/// was just checked to be this user's alone.
pub fn prepare_socket_path(path: &Path) -> Result<(), SocketPathError> {
    let unsafe_path = |reason: String| SocketPathError::Unsafe {
        path: path.to_owned(),
        reason,
    };
    let io = |source| SocketPathError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    if let Some(reason) = untrusted_socket_dir(&meta) {
        return Err(unsafe_path(format!("its directory {}", reason)));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
        Ok(meta) => meta,
    };
    if meta.file_type().is_symlink() {
        return Err(unsafe_path("it is a symbolic link".into()));
    }
    if !meta.file_type().is_socket() {
        return Err(unsafe_path("something other than a socket is there".into()));
    }
    let you = effective_uid();
    if meta.uid() != you {
        return Err(unsafe_path(format!(
            "a socket of {} is there, not yours (uid {you})",
            User::by_uid(meta.uid())
        )));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(SocketPathError::InUse {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "replacing a stale socket nobody answers on");
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
                _ => Ok(()),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(e)),
    }
}

/// Why a directory cannot hold the carrier's socket (`None`: it can). Like the runtime
/// directory's rule, with the effective uid: the socket's owner.
fn untrusted_socket_dir(meta: &std::fs::Metadata) -> Option<String> {
    if meta.file_type().is_symlink() {
        return Some("is a symbolic link".into());
    }
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    let you = effective_uid();
    if meta.uid() != you {
        return Some(format!(
            "belongs to {}, not to you (uid {you})",
            User::by_uid(meta.uid())
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Some(format!("can be written by other users (mode {mode:o})"));
    }
    None
}

/// A socket this process bound; dropping it removes the file, unless something else has
/// replaced it at the path since.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// Device and inode of the socket bound: the file removed on drop must be this one.
    identity: (u64, u64),
}

impl SocketFile {
    /// Takes charge of the socket just bound at `path`: readable and writable by its owner only
    /// (connecting takes write permission), removed on drop.
    pub fn bound(path: &Path) -> Result<SocketFile, SocketPathError> {
        let io = |source| SocketPathError::Io {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::symlink_metadata(path).map_err(io)?;
        if !meta.file_type().is_socket() {
            return Err(SocketPathError::Unsafe {
                path: path.to_owned(),
                reason: "what was bound is not a socket any more".into(),
            });
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        Ok(SocketFile {
            path: path.to_owned(),
            identity: (meta.dev(), meta.ino()),
        })
    }

    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.identity);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the socket");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        dir
    }

    #[test]
    fn a_free_path_in_a_private_directory_is_ready() {
        let dir = private_dir();
        prepare_socket_path(&dir.path().join("c.sock")).expect("ready");
    }

    #[test]
    fn a_stale_socket_of_ours_is_replaced_and_a_live_one_is_refused() {
        let dir = private_dir();
        let path = dir.path().join("c.sock");
        let live = UnixListener::bind(&path).expect("bind");
        let error = prepare_socket_path(&path).expect_err("a listener answers");
        assert!(matches!(error, SocketPathError::InUse { .. }), "{error}");
        assert!(path.exists());
        drop(live); // the file stays, as after a SIGKILL
        assert!(path.exists());
        prepare_socket_path(&path).expect("stale: replaced");
        assert!(!path.exists());
    }

    #[test]
    fn links_files_and_open_directories_are_refused_and_left_alone() {
        let dir = private_dir();
        let target = dir.path().join("elsewhere.sock");
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let error = prepare_socket_path(&link).expect_err("a link");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(link.symlink_metadata().is_ok());

        let file = dir.path().join("file.sock");
        std::fs::write(&file, b"x").expect("write");
        let error = prepare_socket_path(&file).expect_err("a file");
        assert!(error.to_string().contains("other than a socket"), "{error}");
        assert!(file.exists());

        let linked_dir = dir.path().join("linked");
        std::os::unix::fs::symlink(dir.path(), &linked_dir).expect("symlink");
        let error = prepare_socket_path(&linked_dir.join("c.sock")).expect_err("linked dir");
        assert!(error.to_string().contains("symbolic link"), "{error}");

        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let error = prepare_socket_path(&dir.path().join("c.sock")).expect_err("open dir");
        assert!(
            error.to_string().contains("written by other users"),
            "{error}"
        );
    }

    #[test]
    fn the_file_is_private_and_removed_on_drop_only_while_it_is_ours() {
        let dir = private_dir();
        let path = dir.path().join("c.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        let file = SocketFile::bound(&path).expect("bound");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        drop(file);
        assert!(!path.exists());
        drop(listener);

        // Replaced meanwhile: the new socket stays.
        let first = UnixListener::bind(&path).expect("bind");
        let file = SocketFile::bound(&path).expect("bound");
        std::fs::remove_file(&path).expect("rm");
        let _second = UnixListener::bind(&path).expect("bind again");
        drop(file);
        assert!(path.exists());
        drop(first);
    }
}
