//! Reference payload channels, built only on carrier's public API.
//!
//! This crate (`carrier-channels`) is not part of the `carrier` library: it depends on it like
//! any host would, without its default features, so it can reach nothing but what the library
//! exports — the proof that the public API is enough to write a channel. The `carrier` binary
//! mounts these with `--channel`.
//!
//! - [`echo`] — every frame back to its sender, with the server's own seq.
//! - [`relay`] — every frame to every other connection.
//! - [`files`] — chunked upload into a directory, verified by size and sha256.
//!
//! [`mount`] parses the CLI's `--channel NAME:KIND[:ARG]` and registers one of them;
//! `NAME:echo:bulk` and `NAME:relay:bulk` mount echo and relay with the `bulk` delivery class.

pub mod echo;
mod error;
pub mod files;
pub mod relay;

use std::path::PathBuf;

use carrier::server::{ChannelHandle, WsTransport};

pub use error::MountError;

/// A `--channel NAME:KIND[:ARG]` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelSpec {
    /// `NAME:echo`, or `NAME:echo:bulk` for the bulk delivery class.
    Echo(String, Delivery),
    /// `NAME:relay`, or `NAME:relay:bulk`.
    Relay(String, Delivery),
    /// `NAME:files:DIR`
    Files(String, PathBuf),
}

impl std::str::FromStr for ChannelSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.splitn(3, ':');
        let name = parts.next().unwrap_or_default();
        let kind = parts.next();
        let arg = parts.next();
        if name.is_empty() || name.len() > 255 {
            return Err(format!(
                "channel {s:?}: the name must be 1 to 255 bytes (NAME:KIND[:ARG])"
            ));
        }
        match (kind, arg) {
            (Some("echo"), None) => Ok(ChannelSpec::Echo(name.into(), Delivery::Reliable)),
            (Some("relay"), None) => Ok(ChannelSpec::Relay(name.into(), Delivery::Reliable)),
            (Some("echo"), Some("bulk")) => Ok(ChannelSpec::Echo(name.into(), Delivery::Bulk)),
            (Some("relay"), Some("bulk")) => Ok(ChannelSpec::Relay(name.into(), Delivery::Bulk)),
            (Some("files"), Some(dir)) if !dir.is_empty() => {
                Ok(ChannelSpec::Files(name.into(), PathBuf::from(dir)))
            }
            (Some("files"), _) => Err(format!(
                "channel {s:?}: files needs a directory, e.g. {name}:files:./inbox"
            )),
            (Some(k @ ("echo" | "relay")), Some(_)) => Err(format!(
                "channel {s:?}: {k} takes no argument but bulk ({name}:{k}:bulk)"
            )),
            _ => Err(format!(
                "channel {s:?}: KIND must be echo, relay or files (NAME:KIND[:ARG])"
            )),
        }
    }
}

/// How a reference `echo` or `relay` channel delivers (docs/protocol.md, "Channels").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The default class: never dropped; a reader past its budget is failed.
    Reliable,
    /// Flow-controlled, lowest priority: a slow reader is paced, not failed.
    Bulk,
}

/// Registers the channel a spec names. Needs a tokio runtime (the files channel spawns a task).
pub fn mount(transport: &WsTransport, spec: &ChannelSpec) -> Result<ChannelHandle, MountError> {
    match spec {
        ChannelSpec::Echo(name, Delivery::Reliable) => Ok(echo::mount(transport.registry(), name)?),
        ChannelSpec::Echo(name, Delivery::Bulk) => {
            Ok(echo::mount_bulk(transport.registry(), name)?)
        }
        ChannelSpec::Relay(name, Delivery::Reliable) => {
            Ok(relay::mount(transport.registry(), name)?)
        }
        ChannelSpec::Relay(name, Delivery::Bulk) => {
            Ok(relay::mount_bulk(transport.registry(), name)?)
        }
        ChannelSpec::Files(name, dir) => files::mount(transport.registry(), name, dir),
    }
}
