//! Why a channel could not be mounted: one error for every reference channel.

use std::path::PathBuf;

use carrier::server::ChannelError;

/// Why a channel could not be mounted.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The registry refused it (name taken, …).
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// The files directory could not be prepared.
    #[error("files channel directory {0}: {1}")]
    Directory(PathBuf, std::io::Error),
}
