//! `files`: chunked upload into a directory.
//!
//! Protocol on the channel: event `begin {name, size, sha256}`, binary chunks, event `end {}`;
//! the server answers `saved {name, size, sha256}` or `error {code, message}`. The upload is
//! written to a hidden temporary file in the directory and renamed into place only after its
//! size and sha256 match, so nothing partial is ever left: every failure, and a connection that
//! goes away mid-upload, removes the temporary file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use carrier::protocol::channel_frame::FrameBody;
use carrier::server::{
    Binary, ChannelDescriptor, ChannelHandle, ChannelInbound, ChannelRegistry, ConnectionId,
    InboundBody,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::error::MountError;

/// Registers a files channel named `name` that stores uploads in `dir` (created if missing).
pub fn mount(
    registry: &ChannelRegistry,
    name: &str,
    dir: &Path,
) -> Result<ChannelHandle, MountError> {
    std::fs::create_dir_all(dir).map_err(|e| MountError::Directory(dir.to_path_buf(), e))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| MountError::Directory(dir.to_path_buf(), e))?;
    let handle = registry.register(ChannelDescriptor::new(
        name,
        &["begin", "end", "saved", "error"],
        Binary::Accepted,
    ))?;
    let inbound = handle.inbound(64);
    tokio::spawn(run(handle.clone(), inbound, dir));
    Ok(handle)
}

/// An upload in progress on one connection.
struct Upload {
    name: String,
    size: u64,
    sha256: String,
    received: u64,
    hasher: Sha256,
    temp: PathBuf,
    file: tokio::fs::File,
}

/// A refusal sent back as `error {code, message}`.
struct Refusal(&'static str, String);

async fn run(
    handle: ChannelHandle,
    mut inbound: tokio::sync::mpsc::Receiver<ChannelInbound>,
    dir: PathBuf,
) {
    let mut uploads: HashMap<ConnectionId, Upload> = HashMap::new();
    while let Some(msg) = inbound.recv().await {
        let conn = msg.connection;
        let outcome = match msg.body {
            InboundBody::Event(event) if event.event() == "begin" => {
                discard(uploads.remove(&conn)).await;
                // The router checked the body as far as its name; the payload is read here.
                let payload = event.payload().unwrap_or(serde_json::Value::Null);
                match begin(&dir, &payload).await {
                    Ok(upload) => {
                        uploads.insert(conn, upload);
                        Ok(None)
                    }
                    Err(r) => Err(r),
                }
            }
            InboundBody::Binary(chunk) => match uploads.get_mut(&conn) {
                None => Err(Refusal(
                    "no_upload",
                    "binary chunk without a begin event".into(),
                )),
                Some(upload) => match write_chunk(upload, &chunk).await {
                    Ok(()) => Ok(None),
                    Err(r) => {
                        discard(uploads.remove(&conn)).await;
                        Err(r)
                    }
                },
            },
            InboundBody::Event(event) if event.event() == "end" => match uploads.remove(&conn) {
                None => Err(Refusal("no_upload", "end without a begin event".into())),
                Some(upload) => finish(&dir, upload).await.map(Some),
            },
            InboundBody::Event(event) => Err(Refusal(
                "unexpected_event",
                format!(
                    "clients send begin, binary chunks and end, not {:?}",
                    event.event()
                ),
            )),
            InboundBody::Disconnected => {
                discard(uploads.remove(&conn)).await;
                continue;
            }
        };
        let reply = match outcome {
            Ok(None) => continue,
            Ok(Some(saved)) => FrameBody::Event {
                event: "saved".into(),
                payload: saved,
            },
            Err(Refusal(code, message)) => FrameBody::Event {
                event: "error".into(),
                payload: json!({ "code": code, "message": message }),
            },
        };
        let _ = handle.send_to(conn, reply);
    }
}

/// A plain file name: no separators, no `.`/`..`, no control characters, not hidden.
fn plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name.contains(['/', '\\', ':'])
        && !name.chars().any(char::is_control)
        && Path::new(name).file_name().and_then(|n| n.to_str()) == Some(name)
}

async fn begin(dir: &Path, payload: &Value) -> Result<Upload, Refusal> {
    let name = payload
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let size = payload.get("size").and_then(Value::as_u64);
    let sha256 = payload
        .get("sha256")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let (Some(size), Some(sha256)) = (size, sha256) else {
        return Err(Refusal(
            "invalid_begin",
            "begin needs {name: string, size: integer, sha256: hex string}".into(),
        ));
    };
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Refusal(
            "invalid_begin",
            "sha256 must be 64 hex characters".into(),
        ));
    }
    if !plain_file_name(name) {
        return Err(Refusal(
            "invalid_name",
            format!("{name:?} is not a plain file name inside the upload directory"),
        ));
    }
    if tokio::fs::symlink_metadata(dir.join(name)).await.is_ok() {
        return Err(Refusal("exists", format!("{name:?} already exists")));
    }
    let temp = dir.join(format!(
        ".upload-{}.part",
        hex::encode(rand::random::<[u8; 8]>())
    ));
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .await
        .map_err(|e| Refusal("io", format!("cannot create the upload file: {e}")))?;
    Ok(Upload {
        name: name.to_string(),
        size,
        sha256,
        received: 0,
        hasher: Sha256::new(),
        temp,
        file,
    })
}

async fn write_chunk(upload: &mut Upload, chunk: &Bytes) -> Result<(), Refusal> {
    upload.received += chunk.len() as u64;
    if upload.received > upload.size {
        return Err(Refusal(
            "size_mismatch",
            format!("more than the announced {} bytes", upload.size),
        ));
    }
    upload.hasher.update(chunk);
    upload
        .file
        .write_all(chunk)
        .await
        .map_err(|e| Refusal("io", format!("write failed: {e}")))
}

async fn finish(dir: &Path, mut upload: Upload) -> Result<Value, Refusal> {
    let result = async {
        if upload.received != upload.size {
            return Err(Refusal(
                "size_mismatch",
                format!("received {} of {} bytes", upload.received, upload.size),
            ));
        }
        let digest = hex::encode(std::mem::take(&mut upload.hasher).finalize());
        if digest != upload.sha256 {
            return Err(Refusal(
                "hash_mismatch",
                format!("sha256 is {digest}, announced {}", upload.sha256),
            ));
        }
        upload
            .file
            .sync_all()
            .await
            .map_err(|e| Refusal("io", format!("sync failed: {e}")))?;
        let target = dir.join(&upload.name);
        if tokio::fs::symlink_metadata(&target).await.is_ok() {
            return Err(Refusal(
                "exists",
                format!("{:?} already exists", upload.name),
            ));
        }
        tokio::fs::rename(&upload.temp, &target)
            .await
            .map_err(|e| Refusal("io", format!("rename failed: {e}")))?;
        Ok(json!({ "name": upload.name, "size": upload.size, "sha256": digest }))
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&upload.temp).await;
    }
    result
}

async fn discard(upload: Option<Upload>) {
    if let Some(upload) = upload {
        drop(upload.file);
        let _ = tokio::fs::remove_file(&upload.temp).await;
    }
}

#[cfg(test)]
mod tests {
    use super::plain_file_name;

    #[test]
    fn plain_names_only() {
        for ok in ["a.txt", "report 2026.pdf", "ünïcode.bin"] {
            assert!(plain_file_name(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../escape",
            "a/b",
            "a\\b",
            ".hidden",
            "c:x",
            "nul\0",
            "x\n",
        ] {
            assert!(!plain_file_name(bad), "{bad:?}");
        }
    }
}
