//! Feeds arbitrary `Host`, `Origin`, query, `Sec-WebSocket-Protocol` and `Authorization` values
//! to the one admission function (docs/protocol.md, "Endpoint and admission").
//!
//! The input is split on `\n` into up to five fields (host, origin, query, protocols,
//! authorization); a field that is exactly `-` is "header absent". The first byte's low bit
//! picks the listener's grant, its second bit the peer (TCP, or the same user on the Unix
//! socket).
//! Invariants, each checked against a small oracle written independently of the code under test:
//! - `admit` never panics and is deterministic;
//! - a `Host` that is not loopback (`127.0.0.1`, `localhost` in any case, `[::1]` in any IPv6
//!   spelling, with an optional numeric port) nor the allowed host is never upgraded — in
//!   particular trailing dots, other 127/8 addresses, IPv4-mapped forms and DNS names that merely
//!   contain "localhost" are refused;
//! - an `Origin` that is `null`, or neither the exact allowed origin nor an http(s) loopback
//!   origin without a path, is never upgraded;
//! - a connection is admitted only with the exact token, taken from `?token=` (form-decoded),
//!   or, when the query has none, from `Authorization: Bearer`, or else from the first
//!   subprotocol — or, for the same user on the Unix socket, with no token at all; and never
//!   with a role above the grant;
//! - on the Unix socket only loopback hosts and origins pass (the allowed ones are for TCP);
//! - the echoed subprotocol is the first offered value, trimmed, with no comma.

#![no_main]

use std::net::Ipv6Addr;

use carrier::protocol::Role;
use carrier::protocol::admission::{
    admit, query_param, tokens_equal, AdmissionPolicy, AdmissionRequest, CloseRefusal, Admission,
    Peer,
};
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "s3cr3t-T0ken_x";
const ALLOWED_HOST: &str = "app.test";
const ALLOWED_ORIGIN: &str = "https://app.test:8443";

/// Oracle: the lowercased host name of `host[:port]` / `[v6][:port]` (an IPv6 literal equal to
/// `::1` comes back as `[::1]`), or `None` if the port is not a number up to 65535 or the shape is
/// wrong. Splits the port from the right, unlike the implementation.
fn oracle_name(authority: &str) -> Option<String> {
    let a = authority.trim();
    if let Some(rest) = a.strip_prefix('[') {
        let (inner, tail) = rest.split_once(']')?;
        if !tail.is_empty() && !port_ok(tail.strip_prefix(':')?) {
            return None;
        }
        let ip: Ipv6Addr = inner.parse().ok()?;
        return Some(if ip == Ipv6Addr::LOCALHOST {
            "[::1]".to_string()
        } else {
            format!("[{ip}]")
        });
    }
    let name = match a.rsplit_once(':') {
        Some((n, p)) if port_ok(p) => n,
        Some(_) => return None,
        None => a,
    };
    Some(name.to_ascii_lowercase())
}

fn oracle_loopback(authority: &str) -> bool {
    oracle_name(authority).is_some_and(|n| matches!(n.as_str(), "localhost" | "127.0.0.1" | "[::1]"))
}

fn oracle_host_ok(authority: &str) -> bool {
    oracle_loopback(authority) || oracle_name(authority).is_some_and(|n| n == ALLOWED_HOST)
}

fn port_ok(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
}

fn oracle_origin_ok(origin: &str) -> bool {
    if origin == ALLOWED_ORIGIN {
        return true;
    }
    let rest = match origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    {
        Some(r) => r,
        None => return false,
    };
    // An origin has no path, and only loopback names pass without being listed exactly.
    !rest.contains('/') && oracle_loopback(rest)
}

/// The token of `Bearer TOKEN` (any case of the scheme, surrounding blanks trimmed).
fn oracle_bearer(header: &str) -> Option<String> {
    let header = header.trim();
    let space = header.find(' ')?;
    let (scheme, rest) = header.split_at(space);
    let token = rest.trim();
    (scheme.to_ascii_lowercase() == "bearer" && !token.is_empty()).then(|| token.to_string())
}

fn field(s: Option<&str>) -> Option<&str> {
    match s {
        Some("-") | None => None,
        Some(v) => Some(v),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.splitn(5, '\n');
    let req = AdmissionRequest {
        host: field(parts.next()),
        origin: field(parts.next()),
        query: field(parts.next()),
        protocols: field(parts.next()),
        authorization: field(parts.next()),
        peer: if flags & 2 == 0 { Peer::Tcp } else { Peer::SameUser },
    };
    let grant = if flags & 1 == 0 { Role::Drive } else { Role::Observe };
    let policy = AdmissionPolicy {
        token: Some(TOKEN.into()),
        grant,
        allowed_hosts: vec![ALLOWED_HOST.to_string()],
        allowed_origins: vec![ALLOWED_ORIGIN.to_string()],
    };

    let decision = admit(&policy, &req);
    assert_eq!(decision, admit(&policy, &req), "admission is not deterministic");

    let Admission::Upgrade { protocol, verdict } = decision else {
        return;
    };
    let host = req.host.expect("upgraded without a Host header");
    assert!(oracle_host_ok(host), "foreign Host admitted: {host:?}");
    if req.peer == Peer::SameUser {
        assert!(oracle_loopback(host), "allowed Host admitted on the socket: {host:?}");
    }
    if let Some(origin) = req.origin {
        assert_ne!(origin.trim(), "null", "Origin null admitted");
        assert!(oracle_origin_ok(origin), "foreign Origin admitted: {origin:?}");
        if req.peer == Peer::SameUser {
            assert_ne!(origin, ALLOWED_ORIGIN, "allowed Origin admitted on the socket");
        }
    }
    if let Some(p) = &protocol {
        let header = req.protocols.expect("echoed a protocol nobody offered");
        let first = header.split(',').next().unwrap_or("").trim();
        assert_eq!(p, first, "echoed subprotocol is not the first offered");
        assert!(!p.is_empty() && !p.contains(','));
    }
    match verdict {
        Ok(role) => {
            assert!(role <= grant, "role {role:?} above grant {grant:?}");
            let presented = match req.query.and_then(|q| query_param(q, "token")) {
                Some(t) => Some(t),
                None => req.authorization.and_then(oracle_bearer).or_else(|| protocol.clone()),
            };
            match presented {
                Some(presented) => assert_eq!(presented, TOKEN, "admitted with a wrong token"),
                None => assert_eq!(req.peer, Peer::SameUser, "admitted without any token"),
            }
        }
        Err(CloseRefusal::Unauthorized) => {
            if let Some(t) = req.query.and_then(|q| query_param(q, "token")) {
                assert_ne!(t, TOKEN, "refused the right token");
            }
        }
        Err(_) => {}
    }
    // The comparison agrees with plain equality on any pair of strings.
    if let Some(q) = req.query {
        assert_eq!(tokens_equal(TOKEN, q), q == TOKEN);
        assert_eq!(tokens_equal(q, host), q == host);
    }
});
