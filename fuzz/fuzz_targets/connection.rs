//! Drives the real connection task (reader, RFC 6455 checks, reassembly with its caps, routing by
//! opcode, the channel registry with an `echo` channel, the single writer, the handshake and
//! liveness timers) with arbitrary sequences of client frames over an in-memory stream.
//!
//! Each input is a byte program (see [`Op`]); it runs on a fresh single-threaded runtime with a
//! paused clock, so the handshake timeout, pings and close grace periods elapse instantly and every
//! run is deterministic. A small reference model of the protocol (docs/protocol.md) predicts what
//! the server must answer; the invariants are:
//! - the connection always ends (no hang), and the server's output is a well-formed stream of
//!   unmasked, unfragmented frames with control payloads of at most 125 bytes, ending at a frame
//!   boundary, with at most one close frame and nothing after it;
//! - a refused connection sends its 1008 close and nothing else;
//! - for well-formed input the server's data answers (echoes, `ok`, `too_large`, protocol errors,
//!   channel echoes) are exactly the model's, in order; its pongs answer pings in the order they
//!   were sent, possibly only the most recent of several (RFC 6455 §5.5.3: pongs owed to a peer
//!   that does not read coalesce), and the last ping is always answered, before the close; after
//!   the first invalid frame the close code is the one docs/protocol.md or RFC 6455 names for that
//!   violation (1002 unmasked or mis-sequenced, 1007 invalid UTF-8, 1009 over the cap, 1008 binary
//!   before the handshake), and nothing the server wrote after it;
//! - a connection that goes silent is closed: 1008 before the handshake, 1001 after it (no pong).

#![no_main]

use std::time::Duration;

use bytes::Bytes;
use carrier::protocol::channel_frame::{self, ChannelFrame};
use carrier::protocol::Role;
use carrier::protocol::admission::CloseRefusal;
use carrier_channels::echo;
use carrier::server::{
    CarrierConfig, CarrierContext, Connection, Limits, TextProfile, TextSession, WsTransport,
};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MAX_TEXT: usize = 64;
const MAX_MESSAGE: usize = 1024;
const MAX_OUTPUT: usize = 4 << 20;

/// `hs` completes the handshake and answers `ok`; any other text is echoed.
struct Harness;
struct HarnessSession(Connection);

impl TextProfile for Harness {
    fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(HarnessSession(conn))
    }
}

impl TextSession for HarnessSession {
    fn on_text(&mut self, text: &str) {
        if text == "hs" {
            self.0.mark_handshaken();
            let _ = self.0.send_text("ok");
        } else {
            let _ = self.0.send_text(text.to_owned());
        }
    }
}

/// One step of the client program.
#[derive(Debug)]
enum Op {
    /// A frame: first header byte (FIN, opcode), masked or not, payload.
    Frame { fin: bool, opcode: u8, masked: bool, payload: Vec<u8> },
    /// Bytes written as they are (any framing, any garbage).
    Raw(Vec<u8>),
}

/// Decodes the program: per op, a selector byte, a length byte, then payload bytes (padded with
/// `a` when the input runs out). Selector low 3 bits: 0 text, 1 binary, 2 continuation, 3 ping,
/// 4 pong, 5 close, 6 raw bytes, 7 the text `hs`. Bit 3: FIN. Bits 4 and 5 both set: unmasked.
/// Bit 7: length × 16. A binary payload starting with 0xEE becomes a channel frame for `echo`.
fn parse_program(mut data: &[u8]) -> Vec<Op> {
    let mut ops = Vec::new();
    while let [sel, len, rest @ ..] = data {
        let mut n = *len as usize;
        if sel & 0x80 != 0 {
            n *= 16;
        }
        let take = n.min(rest.len());
        let mut payload = rest[..take].to_vec();
        payload.resize(n, b'a');
        data = &rest[take..];
        let fin = sel & 0x08 != 0;
        let masked = sel & 0x30 != 0x30;
        let opcode = match sel & 0x07 {
            0 => 0x1,
            1 => {
                if payload.first() == Some(&0xEE) {
                    let body = Bytes::from(payload[1..].to_vec());
                    if let Ok(f) =
                        channel_frame::encode("echo", n as u32, &channel_frame::FrameBody::Binary(body))
                    {
                        payload = [&f.head[..], &f.body[..]].concat();
                    }
                }
                0x2
            }
            2 => 0x0,
            3 => 0x9,
            4 => 0xA,
            5 => 0x8,
            6 => {
                ops.push(Op::Raw(payload));
                continue;
            }
            _ => {
                ops.push(Op::Frame { fin: true, opcode: 0x1, masked: true, payload: b"hs".to_vec() });
                continue;
            }
        };
        ops.push(Op::Frame { fin, opcode, masked, payload });
    }
    ops
}

fn encode_client(fin: bool, opcode: u8, masked: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
    let mask_bit = if masked { 0x80 } else { 0 };
    let len = payload.len();
    if len < 126 {
        f.push(mask_bit | len as u8);
    } else if len <= 0xFFFF {
        f.push(mask_bit | 126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        f.push(mask_bit | 127);
        f.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if masked {
        let key = [0x37u8, 0xfa, 0x21, 0x3d];
        f.extend_from_slice(&key);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    } else {
        f.extend_from_slice(payload);
    }
    f
}

/// A frame the server wrote.
#[derive(Debug, Clone, PartialEq)]
struct ServerFrame {
    opcode: u8,
    payload: Vec<u8>,
}

/// Splits the server's output into frames, asserting the framing rules a server must keep.
fn parse_output(mut out: &[u8]) -> Vec<ServerFrame> {
    let mut frames = Vec::new();
    let mut closed = false;
    while !out.is_empty() {
        assert!(out.len() >= 2, "output ends inside a frame header");
        let (b0, b1) = (out[0], out[1]);
        assert_eq!(b0 & 0x80, 0x80, "server frames are never fragmented");
        assert_eq!(b0 & 0x70, 0, "reserved bits set");
        assert_eq!(b1 & 0x80, 0, "server frame is masked");
        let opcode = b0 & 0x0f;
        assert!(matches!(opcode, 1 | 2 | 8 | 9 | 10), "server opcode {opcode}");
        let (hl, len) = match b1 & 0x7f {
            126 => {
                assert!(out.len() >= 4, "output ends inside a frame header");
                let len = u16::from_be_bytes([out[2], out[3]]) as usize;
                assert!(len >= 126, "non-minimal length");
                (4, len)
            }
            127 => {
                assert!(out.len() >= 10, "output ends inside a frame header");
                let len = u64::from_be_bytes(out[2..10].try_into().unwrap()) as usize;
                assert!(len > 0xFFFF, "non-minimal length");
                (10, len)
            }
            n => (2, n as usize),
        };
        assert!(out.len() >= hl + len, "output ends inside a frame payload");
        let payload = out[hl..hl + len].to_vec();
        out = &out[hl + len..];
        if opcode >= 8 {
            assert!(len <= 125, "control frame payload of {len} bytes");
        }
        assert!(!closed, "a frame after the close frame: {opcode}");
        if opcode == 8 {
            closed = true;
            assert!(len >= 2, "the server always sends a close code");
            assert!(std::str::from_utf8(&payload[2..]).is_ok(), "close reason not UTF-8");
        }
        if opcode == 1 {
            assert!(std::str::from_utf8(&payload).is_ok(), "server text is not UTF-8");
        }
        frames.push(ServerFrame { opcode, payload });
    }
    frames
}

/// What the model expects the server to answer.
#[derive(Debug)]
enum Expect {
    Text(Vec<u8>),
    /// A `too_large` answer (JSON, socket stays open).
    TooLarge,
    /// A `protocol_error` event with this code.
    ProtocolError(&'static str),
    /// The echo channel's copy of this frame, or — for anything that is not a frame for `echo`
    /// from a drive connection — a `protocol_error` event.
    Channel(Option<ChannelFrame>),
}

/// How the model expects the connection to end.
#[derive(Debug)]
enum End {
    /// A close frame with one of these codes.
    Close(Vec<u16>),
    /// No close frame: the client went away.
    NoClose,
    /// Raw bytes made the rest unpredictable: only the framing rules apply.
    Unknown,
}

struct Model {
    role: Role,
    handshaken: bool,
    partial: Option<(u8, Vec<u8>)>,
    expect: Vec<Expect>,
    /// Ping payloads, in order: the pongs must be a subsequence of them.
    pings: Vec<Vec<u8>>,
}

fn close_code_allowed(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

impl Model {
    /// Applies one client frame; `Some(end)` when the server stops reading.
    fn frame(&mut self, fin: bool, opcode: u8, masked: bool, payload: &[u8]) -> Option<End> {
        let mut violations = Vec::new();
        if !masked {
            violations.push(1002);
        }
        let control = opcode >= 8;
        // fastwebsockets checks the size cap on every frame, control frames included.
        if payload.len() > MAX_MESSAGE {
            violations.push(1009);
        }
        if control {
            if !fin || payload.len() > 125 {
                violations.push(1002);
            }
            if opcode == 8 {
                match payload {
                    [] => {}
                    [_] => violations.push(1002),
                    [hi, lo, reason @ ..] => {
                        if !close_code_allowed(u16::from_be_bytes([*hi, *lo])) {
                            violations.push(1002);
                        }
                        if std::str::from_utf8(reason).is_err() {
                            violations.push(1007);
                        }
                    }
                }
            }
            if !violations.is_empty() {
                return Some(End::Close(violations));
            }
            match opcode {
                9 => self.pings.push(payload.to_vec()),
                8 => {
                    let code = match payload {
                        [hi, lo, ..] => u16::from_be_bytes([*hi, *lo]),
                        _ => 1000,
                    };
                    return Some(End::Close(vec![code]));
                }
                _ => {}
            }
            return None;
        }
        if opcode == 1 && fin && std::str::from_utf8(payload).is_err() {
            violations.push(1007);
        }
        let message = match (opcode, self.partial.take()) {
            (0, None) => {
                violations.push(1002);
                None
            }
            (0, Some((kind, mut buf))) => {
                buf.extend_from_slice(payload);
                if buf.len() > MAX_MESSAGE {
                    violations.push(1009);
                }
                if kind == 1 {
                    if let Err(e) = std::str::from_utf8(&buf) {
                        if e.error_len().is_some() || fin {
                            violations.push(1007);
                        }
                    }
                }
                if fin {
                    Some((kind, buf))
                } else {
                    self.partial = Some((kind, buf));
                    None
                }
            }
            (_, Some(_)) => {
                violations.push(1002);
                None
            }
            (kind, None) => {
                if kind == 1 && !fin {
                    if let Err(e) = std::str::from_utf8(payload) {
                        if e.error_len().is_some() {
                            violations.push(1007);
                        }
                    }
                }
                if fin {
                    Some((kind, payload.to_vec()))
                } else {
                    self.partial = Some((kind, payload.to_vec()));
                    None
                }
            }
        };
        if !violations.is_empty() {
            return Some(End::Close(violations));
        }
        let (kind, msg) = message?;
        if kind == 1 {
            if msg.len() > MAX_TEXT {
                self.expect.push(Expect::TooLarge);
            } else if msg == b"hs" {
                self.handshaken = true;
                self.expect.push(Expect::Text(b"ok".to_vec()));
            } else {
                self.expect.push(Expect::Text(msg));
            }
            return None;
        }
        if !self.handshaken {
            self.expect.push(Expect::ProtocolError("handshake_required"));
            return Some(End::Close(vec![1008]));
        }
        let echoed = channel_frame::decode(Bytes::from(msg))
            .ok()
            .filter(|f| f.channel == "echo" && self.role == Role::Drive);
        self.expect.push(Expect::Channel(echoed));
        None
    }
}

fn protocol_error_code(payload: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    if v.get("event")? != "protocol_error" {
        return None;
    }
    Some(v.get("payload")?.get("code")?.as_str()?.to_string())
}

fn check(expect: &Expect, got: &ServerFrame) {
    match expect {
        Expect::Text(t) => {
            assert_eq!(got.opcode, 1, "expected text {t:?}, got {got:?}");
            assert_eq!(&got.payload, t);
        }
        Expect::TooLarge => {
            assert_eq!(got.opcode, 1);
            let v: serde_json::Value = serde_json::from_slice(&got.payload).expect("JSON");
            let code = v
                .pointer("/error/code")
                .or_else(|| v.pointer("/payload/code"))
                .and_then(|c| c.as_str());
            assert_eq!(code, Some("too_large"), "{v}");
        }
        Expect::ProtocolError(code) => {
            assert_eq!(got.opcode, 1, "expected protocol_error, got {got:?}");
            assert_eq!(protocol_error_code(&got.payload).as_deref(), Some(*code));
        }
        Expect::Channel(Some(frame)) => {
            assert_eq!(got.opcode, 2, "expected a channel echo, got {got:?}");
            let back = channel_frame::decode(Bytes::from(got.payload.clone())).expect("decodes");
            assert_eq!(back.channel, frame.channel);
            assert_eq!(back.body, frame.body);
        }
        Expect::Channel(None) => {
            assert_eq!(got.opcode, 1, "expected a protocol_error, got {got:?}");
            assert!(protocol_error_code(&got.payload).is_some(), "{got:?}");
        }
    }
}

async fn run(data: &[u8]) {
    let Some((&flags, program)) = data.split_first() else {
        return;
    };
    let shut_after = flags & 1 != 0;
    let role = if flags & 2 != 0 { Role::Observe } else { Role::Drive };
    let refused = flags & 0x0c == 0x0c;
    let ops = parse_program(program);

    let limits = Limits::default()
        .with_max_text_bytes(MAX_TEXT)
        .with_max_message_bytes(MAX_MESSAGE)
        .with_queue_bytes(1 << 20);
    let config = CarrierConfig::default()
        .with_port(0)
        .with_auth(carrier::server::Auth::Open { reason: "fuzzing".into() })
        .with_role(Role::Drive)
        .with_limits(limits);
    let transport = WsTransport::new(config).expect("config");
    transport.attach(std::sync::Arc::new(Harness));
    transport.start_mounted().expect("start");
    let _echo = echo::mount(transport.registry(), "echo").expect("echo channel");

    let (client, server) = tokio::io::duplex(1 << 20);
    let verdict = if refused { Err(CloseRefusal::Unauthorized) } else { Ok(role) };
    let conn = tokio::spawn(transport.serve_upgraded(server, verdict).expect("slot"));
    let (mut rd, mut wr) = tokio::io::split(client);

    let mut wire = Vec::new();
    for op in &ops {
        match op {
            Op::Frame { fin, opcode, masked, payload } => {
                wire.extend(encode_client(*fin, *opcode, *masked, payload))
            }
            Op::Raw(bytes) => wire.extend_from_slice(bytes),
        }
    }
    let writer = tokio::spawn(async move {
        // The server may stop reading and drop its end: later writes fail, which is fine.
        let _ = wr.write_all(&wire).await;
        if shut_after {
            let _ = wr.shutdown().await;
        } else {
            // Stay connected and silent until the server ends the connection.
            std::future::pending::<()>().await;
        }
    });
    let reader = async {
        let mut out = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => return out,
                Ok(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    assert!(out.len() <= MAX_OUTPUT, "output amplification");
                }
            }
        }
    };
    let out = tokio::time::timeout(Duration::from_secs(600), reader)
        .await
        .expect("the server never ended the connection");
    tokio::time::timeout(Duration::from_secs(60), conn)
        .await
        .expect("connection task outlived its socket")
        .expect("connection task panicked");
    writer.abort();

    let frames = parse_output(&out);
    let (pongs, frames): (Vec<_>, Vec<_>) = frames
        .into_iter()
        .filter(|f| f.opcode != 9)
        .partition(|f| f.opcode == 10);
    let (data_frames, close): (Vec<_>, Vec<_>) = frames.into_iter().partition(|f| f.opcode != 8);
    let close_code = close
        .first()
        .map(|c| u16::from_be_bytes([c.payload[0], c.payload[1]]));

    if refused {
        assert!(data_frames.is_empty(), "refused connection got {data_frames:?}");
        assert!(pongs.is_empty(), "refused connection answered pings: {pongs:?}");
        assert_eq!(close_code, Some(1008));
        return;
    }

    let mut model =
        Model { role, handshaken: false, partial: None, expect: Vec::new(), pings: Vec::new() };
    let mut end = None;
    for op in &ops {
        match op {
            Op::Frame { fin, opcode, masked, payload } => {
                if let Some(e) = model.frame(*fin, *opcode, *masked, payload) {
                    end = Some(e);
                    break;
                }
            }
            Op::Raw(_) => {
                end = Some(End::Unknown);
                break;
            }
        }
    }
    let end = end.unwrap_or(if shut_after {
        End::NoClose
    } else if model.handshaken {
        End::Close(vec![1001])
    } else {
        End::Close(vec![1008])
    });
    assert!(
        data_frames.len() >= model.expect.len(),
        "missing answers: expected {:?}, got {data_frames:?}",
        model.expect
    );
    for (e, got) in model.expect.iter().zip(&data_frames) {
        check(e, got);
    }
    // Each pong answers a ping, in order; none is answered twice. (After raw bytes the model
    // does not know what the server parsed, as for the data answers.)
    let mut pings = model.pings.iter();
    for pong in pongs.iter().filter(|_| !matches!(end, End::Unknown)) {
        assert!(
            pings.any(|p| *p == pong.payload),
            "pong {:?} answers no ping in order (pings {:?})",
            pong.payload,
            model.pings
        );
    }
    if !matches!(end, End::Unknown) && !model.pings.is_empty() {
        assert_eq!(
            pongs.last().map(|p| &p.payload),
            model.pings.last(),
            "the last ping went unanswered"
        );
    }
    match end {
        End::Unknown => {}
        End::NoClose => {
            assert_eq!(data_frames.len(), model.expect.len(), "extra answers {data_frames:?}");
            assert_eq!(close_code, None, "closed although the client just went away");
        }
        End::Close(codes) => {
            assert_eq!(data_frames.len(), model.expect.len(), "extra answers {data_frames:?}");
            let code = close_code.expect("no close frame");
            assert!(codes.contains(&code), "close {code}, expected one of {codes:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(run(data));
});
