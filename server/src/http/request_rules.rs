//! What RFC 7230 and RFC 6455 require of a request before the carrier routes it, checked
//! before any route: one `Host` (400 otherwise, RFC 7230 §5.4), an absolute-form target
//! whose authority passes the same Host rule (403: the authority replaces `Host`, §5.4), one
//! `Origin` (403: which of two would admission judge?), and for a WebSocket upgrade of the endpoint a
//! `GET` (§4.1 of RFC 6455) over HTTP/1.1 with exactly one `Sec-WebSocket-Key` that is 16
//! bytes in base64 (400) and `Sec-WebSocket-Version: 13` (426 for another version, §4.2.2;
//! 400 when missing).
//!
//! Pure: no I/O. The Host and Origin rules themselves stay with [`carrier_protocol::admission::admit`].

use hyper::header::{HeaderName, HOST, ORIGIN, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION};
use hyper::{Method, Request, StatusCode, Version};

use carrier_protocol::admission::{admit, Admission, AdmissionPolicy, AdmissionRequest, Peer};

/// Why a request is refused before routing: the status and a one-line body.
pub(crate) type Refusal = (StatusCode, &'static str);

/// The first rule `req` breaks, if any.
/// `peer` is how it reached the server (the authority's Host rule depends on it); `socket`
/// says the request is for the WebSocket endpoint, where an upgrade's rules apply.
pub(crate) fn check<B>(
    req: &Request<B>,
    policy: &AdmissionPolicy,
    peer: Peer,
    socket: bool,
) -> Option<Refusal> {
    if count(req, HOST) > 1 {
        return Some((
            StatusCode::BAD_REQUEST,
            "bad request: more than one Host header\n",
        ));
    }
    if let Some(authority) = req.uri().authority() {
        let as_host = AdmissionRequest {
            host: Some(authority.as_str()),
            peer,
            ..Default::default()
        };
        if let Admission::Refuse(_) = admit(policy, &as_host) {
            return Some((
                StatusCode::FORBIDDEN,
                "forbidden: the request target's authority is not a loopback name\n",
            ));
        }
    }
    if count(req, ORIGIN) > 1 {
        return Some((
            StatusCode::FORBIDDEN,
            "forbidden: more than one Origin header\n",
        ));
    }
    if socket && fastwebsockets::upgrade::is_upgrade_request(req) {
        return check_upgrade(req);
    }
    None
}

fn check_upgrade<B>(req: &Request<B>) -> Option<Refusal> {
    if req.method() != Method::GET {
        return Some((
            StatusCode::BAD_REQUEST,
            "bad WebSocket upgrade request: the method must be GET\n",
        ));
    }
    if req.version() != Version::HTTP_11 {
        return Some((
            StatusCode::BAD_REQUEST,
            "bad WebSocket upgrade request: it needs HTTP/1.1\n",
        ));
    }
    // RFC 6455 §4.2.2: a version the server does not speak is answered with 426 and the
    // version it does (the caller adds the header for this status).
    let mut versions = req.headers().get_all(SEC_WEBSOCKET_VERSION).iter();
    match (versions.next(), versions.next()) {
        (None, _) => {
            return Some((
                StatusCode::BAD_REQUEST,
                "bad WebSocket upgrade request: Sec-WebSocket-Version is missing\n",
            ))
        }
        (Some(version), None) if version.as_bytes().trim_ascii() == b"13" => {}
        _ => {
            return Some((
                StatusCode::UPGRADE_REQUIRED,
                "this server speaks WebSocket version 13 only\n",
            ))
        }
    }
    let mut keys = req.headers().get_all(SEC_WEBSOCKET_KEY).iter();
    let key = keys.next().map(|v| v.as_bytes());
    if keys.next().is_some() || !key.is_some_and(is_websocket_key) {
        return Some((
            StatusCode::BAD_REQUEST,
            "bad WebSocket upgrade request: Sec-WebSocket-Key must be one 16-byte base64 value\n",
        ));
    }
    None
}

fn count<B>(req: &Request<B>, name: HeaderName) -> usize {
    req.headers().get_all(name).iter().count()
}

/// Whether `key` (optional whitespace around it) is 16 bytes in padded base64: 22 characters
/// of the standard alphabet, then `==`. The last character's 4 unused bits are not checked,
/// so every key a lenient decoder reads as 16 bytes is accepted.
fn is_websocket_key(key: &[u8]) -> bool {
    let key = key.trim_ascii();
    key.len() == 24
        && key[22..] == *b"=="
        && key[..22]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier_protocol::Role;

    fn policy() -> AdmissionPolicy {
        AdmissionPolicy {
            token: Some("t".into()),
            grant: Role::Drive,
            allowed_hosts: vec!["myhost.test".into()],
            allowed_origins: Vec::new(),
        }
    }

    fn upgrade(uri: &str) -> hyper::http::request::Builder {
        Request::builder()
            .uri(uri)
            .header("host", "127.0.0.1:7070")
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
    }

    fn status(req: Request<()>) -> Option<StatusCode> {
        let socket = req.uri().path() == "/";
        check(&req, &policy(), Peer::Tcp, socket).map(|(status, _)| status)
    }

    #[test]
    fn every_valid_key_is_accepted() {
        // RFC 6455's sample key, the extremes of the alphabet, and optional whitespace.
        for key in [
            "dGhlIHNhbXBsZSBub25jZQ==".to_owned(),
            "AAAAAAAAAAAAAAAAAAAAAA==".to_owned(),
            "/////////////////////w==".to_owned(),
            format!("{}==", "+".repeat(22)),
            "  x3JJHMbDL1EzLkh9GBhXDw==  ".to_owned(),
        ] {
            assert!(is_websocket_key(key.as_bytes()), "{key:?}");
        }
        // Every 16-byte value encodes to an accepted key.
        for seed in 0u8..=255 {
            let bytes: Vec<u8> = (0..16u8)
                .map(|i| i.wrapping_mul(37).wrapping_add(seed))
                .collect();
            let key = data_encoding::BASE64.encode(&bytes);
            assert!(is_websocket_key(key.as_bytes()), "{key:?}");
        }
    }

    #[test]
    fn keys_that_are_not_16_bytes_of_base64_are_refused() {
        for key in [
            "",
            "dGhlIHNhbXBsZSBub25jZQ",    // unpadded
            "dGhlIHNhbXBsZSBub25jZQ=",   // 23 characters
            "dGhlIHNhbXBsZSBub25jZQ===", // 25
            "dGhlIHNhbXBsZSBub25jZSE=",  // 17 bytes
            "dGhlIHNhbXBsZSBub25j-_==",  // base64url
            "dGhlIHNhbXBsZSBub2 jZQ==",  // a space inside
            "dGhlIHNhbXBsZSBub25jZQ==x", // trailing garbage
        ] {
            assert!(!is_websocket_key(key.as_bytes()), "{key:?}");
        }
    }

    #[test]
    fn a_valid_upgrade_passes_and_each_broken_rule_is_refused() {
        let ok = |b: hyper::http::request::Builder| {
            b.header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        };
        assert_eq!(status(ok(upgrade("/")).body(()).unwrap()), None);
        assert_eq!(
            status(ok(upgrade("http://localhost:7070/")).body(()).unwrap()),
            None,
            "an absolute-form target with a loopback authority"
        );
        assert_eq!(
            status(ok(upgrade("http://myhost.test/")).body(()).unwrap()),
            None,
            "an allowed host as the authority"
        );
        let cases = [
            (
                ok(upgrade("/")).header("host", "127.0.0.1"),
                StatusCode::BAD_REQUEST,
            ),
            (ok(upgrade("http://evil.example/")), StatusCode::FORBIDDEN),
            (
                ok(upgrade("/"))
                    .header("origin", "http://127.0.0.1")
                    .header("origin", "http://x"),
                StatusCode::FORBIDDEN,
            ),
            (ok(upgrade("/")).method("HEAD"), StatusCode::BAD_REQUEST),
            (
                ok(upgrade("/")).version(Version::HTTP_10),
                StatusCode::BAD_REQUEST,
            ),
            (upgrade("/"), StatusCode::BAD_REQUEST),
            (
                upgrade("/").header("sec-websocket-key", "short"),
                StatusCode::BAD_REQUEST,
            ),
            (
                ok(upgrade("/")).header("sec-websocket-key", "x3JJHMbDL1EzLkh9GBhXDw=="),
                StatusCode::BAD_REQUEST,
            ),
        ];
        for (i, (req, expected)) in cases.into_iter().enumerate() {
            assert_eq!(status(req.body(()).unwrap()), Some(expected), "case {i}");
        }
    }

    #[test]
    fn plain_requests_are_left_to_the_routes() {
        let get = |uri: &str| Request::builder().uri(uri).header("host", "localhost");
        assert_eq!(status(get("/healthz").body(()).unwrap()), None);
        assert_eq!(
            status(get("/console").method("HEAD").body(()).unwrap()),
            None
        );
        assert_eq!(
            status(get("/").version(Version::HTTP_10).body(()).unwrap()),
            None,
            "not an upgrade: answered 426 by the route"
        );
    }
}
