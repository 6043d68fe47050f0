//! Admission: the one place that decides who may connect (docs/protocol.md,
//! "Endpoint and admission"). Pure rules, no I/O: the server applies them to each upgrade
//! request, and a fuzzer or another implementation can run them alone.
//!
//! [`admit`] looks at the upgrade request's `Host`, `Origin`, query string and
//! `Sec-WebSocket-Protocol` header, in that order, and returns a [`Admission`]: refuse with an
//! HTTP status before the upgrade (Host/Origin), or upgrade and then either admit with a role or
//! close with 1008 before any data frame (token/role).
//!
//! How the request reached the server ([`Peer`]) changes two rules. Over TCP anyone on the
//! machine, a browser page included, may be on the other end, so the token decides. Over the
//! carrier's Unix socket the listener has already checked the peer's credentials and admitted
//! only a process of the server's own user (the uid rule is `carrier_discovery`'s, applied by
//! the server's listener before a byte is read): there the token may be left out (one that is
//! sent must still be right), and since no browser can reach a Unix socket, only a loopback
//! `Host` is accepted and an `Origin`, if any, must be loopback — `allowed_hosts` and
//! `allowed_origins` are for pages on TCP and do not apply.

use core::net::Ipv6Addr;
use std::fmt;

use subtle::ConstantTimeEq;

use crate::Role;

/// The credential every connection presents (docs/protocol.md, "Endpoint and admission"). Its
/// `Debug` never shows it, so a configuration or a policy can be logged whole; the secret is read
/// only through [`Token::expose`] (to hand it out), and compared only in constant time
/// ([`Token::matches`]).
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps `token`. Its shape (URL-safe characters) is the server configuration's to check.
    pub fn new(token: impl Into<String>) -> Self {
        Token(token.into())
    }

    /// The secret itself, for handing it out (the `listening` line, the runtime file).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, compared in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        tokens_equal(&self.0, presented)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug output ends up in logs: neither the token nor its length.
        f.write_str("Token(<redacted>)")
    }
}

impl From<String> for Token {
    fn from(token: String) -> Self {
        Token(token)
    }
}

impl From<&str> for Token {
    fn from(token: &str) -> Self {
        Token(token.to_owned())
    }
}

/// What admission needs to know about the listener.
#[derive(Debug, Clone)]
pub struct AdmissionPolicy {
    /// The token every connection must present; `None` only in open mode.
    pub token: Option<Token>,
    /// The most this listener grants.
    pub grant: Role,
    /// Extra bare host names accepted besides loopback (compared case-insensitively).
    pub allowed_hosts: Vec<String>,
    /// Extra exact origins accepted besides loopback.
    pub allowed_origins: Vec<String>,
}

/// How a request reached the server, as its listener knows before reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Peer {
    /// TCP on loopback: any local process, or a browser page, may be on the other end; the
    /// token decides.
    #[default]
    Tcp,
    /// The carrier's Unix socket, from a process whose credentials (`SO_PEERCRED`,
    /// `getpeereid`) show the server's own user: it may leave the token out.
    SameUser,
}

/// The parts of an upgrade request admission reads. Header values that are not valid UTF-8 are
/// passed as `Some("")`-like invalid values by the caller (they never match). Its `Debug` leaves
/// the query out: it carries the token.
#[derive(Clone, Copy, Default)]
pub struct AdmissionRequest<'a> {
    /// The `Host` header, if present.
    pub host: Option<&'a str>,
    /// The `Origin` header, if present.
    pub origin: Option<&'a str>,
    /// The raw query string (after `?`), if any.
    pub query: Option<&'a str>,
    /// The `Sec-WebSocket-Protocol` header, if present.
    pub protocols: Option<&'a str>,
    /// The `Authorization` header, if present (a token as `Bearer TOKEN`).
    pub authorization: Option<&'a str>,
    /// How the request reached the server.
    pub peer: Peer,
}

impl fmt::Debug for AdmissionRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionRequest")
            .field("host", &self.host)
            .field("origin", &self.origin)
            .field("query", &self.query.map(|_| "<redacted>"))
            .field("protocols", &self.protocols)
            .field("authorization", &self.authorization.map(|_| "<redacted>"))
            .field("peer", &self.peer)
            .finish()
    }
}

/// Why a request was refused before the upgrade (HTTP 403).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HttpRefusal {
    /// No `Host` header.
    #[error("missing Host header")]
    MissingHost,
    /// `Host` is neither loopback nor allowed (DNS-rebinding defence).
    #[error("Host is not a loopback name nor in allowed_hosts")]
    ForeignHost,
    /// `Origin: null`.
    #[error("Origin null is refused")]
    NullOrigin,
    /// `Origin` is neither loopback nor allowed.
    #[error("Origin is not a loopback origin nor in allowed_origins")]
    ForeignOrigin,
}

/// Why an upgraded socket is closed with 1008 before any data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CloseRefusal {
    /// No token, or a wrong one.
    #[error("unauthorized")]
    Unauthorized,
    /// `?role=` names no known role.
    #[error("unknown role")]
    UnknownRole,
    /// `?role=` asks for more than the listener grants.
    #[error("role not granted")]
    RoleNotGranted,
}

/// The outcome of admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Answer with HTTP 403 and do not upgrade.
    Refuse(HttpRefusal),
    /// Upgrade, echoing `protocol` in `Sec-WebSocket-Protocol` when set, then apply `verdict`.
    Upgrade {
        /// The subprotocol value to echo (the first one offered), so browsers accept the upgrade.
        protocol: Option<String>,
        /// Admit with a role, or close with 1008.
        verdict: Result<Role, CloseRefusal>,
    },
}

/// Decides admission for one upgrade request. Pure: no I/O, never panics.
pub fn admit(policy: &AdmissionPolicy, req: &AdmissionRequest<'_>) -> Admission {
    // Pages reach the carrier over TCP only: the names allowed for them do not extend to the
    // Unix socket.
    let (allowed_hosts, allowed_origins): (&[String], &[String]) = match req.peer {
        Peer::Tcp => (&policy.allowed_hosts, &policy.allowed_origins),
        Peer::SameUser => (&[], &[]),
    };
    match req.host {
        None => return Admission::Refuse(HttpRefusal::MissingHost),
        Some(host) if !host_allowed(host, allowed_hosts) => {
            return Admission::Refuse(HttpRefusal::ForeignHost)
        }
        Some(_) => {}
    }
    if let Some(origin) = req.origin {
        if origin.trim() == "null" {
            return Admission::Refuse(HttpRefusal::NullOrigin);
        }
        if !origin_allowed(origin, allowed_origins) {
            return Admission::Refuse(HttpRefusal::ForeignOrigin);
        }
    }
    let offered = req.protocols.and_then(first_protocol);
    // The query first, then `Authorization: Bearer`, then the first subprotocol: a client that
    // sends its token in a header may still offer a subprotocol of its own.
    let presented = req
        .query
        .and_then(|q| query_param(q, "token"))
        .or_else(|| req.authorization.and_then(bearer).map(str::to_string))
        .or_else(|| offered.map(str::to_string));
    let verdict = match (&policy.token, presented, req.peer) {
        (None, _, _) => Ok(()),
        (Some(expected), Some(p), _) if expected.matches(&p) => Ok(()),
        (Some(_), None, Peer::SameUser) => Ok(()),
        (Some(_), _, _) => Err(CloseRefusal::Unauthorized),
    }
    .and_then(|()| requested_role(req.query, policy.grant));
    Admission::Upgrade {
        protocol: offered.map(str::to_string),
        verdict,
    }
}

/// Constant-time token comparison; a length mismatch is answered without panicking (and
/// without comparing bytes).
pub fn tokens_equal(expected: &str, presented: &str) -> bool {
    expected.as_bytes().ct_eq(presented.as_bytes()).into()
}

fn requested_role(query: Option<&str>, grant: Role) -> Result<Role, CloseRefusal> {
    match query.and_then(|q| query_param(q, "role")) {
        None => Ok(grant),
        Some(r) => match Role::parse(&r) {
            None => Err(CloseRefusal::UnknownRole),
            Some(role) if role > grant => Err(CloseRefusal::RoleNotGranted),
            Some(role) => Ok(role),
        },
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme is case-insensitive, as
/// RFC 9110 says); `None` for another scheme or an empty token.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The first comma-separated value of `Sec-WebSocket-Protocol`, trimmed; `None` if empty.
fn first_protocol(header: &str) -> Option<&str> {
    header
        .split(',')
        .next()
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The first value of `name` in a query string, form-decoded (`+` is a space, `%XX` escapes).
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode_component(k).as_deref() == Some(name)).then(|| decode_component(v))?
    })
}

fn decode_component(s: &str) -> Option<String> {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// Splits `host[:port]` / `[v6][:port]` into the host part; `None` if the port is not numeric or
/// the shape is wrong.
fn host_part(authority: &str) -> Option<&str> {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        if !after.is_empty() && !is_port(after.strip_prefix(':')?) {
            return None;
        }
        return Some(&authority[..end + 2]);
    }
    match authority.split_once(':') {
        Some((h, port)) if is_port(port) => Some(h),
        Some(_) => None,
        None => Some(authority),
    }
}

fn is_port(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 5
        && p.bytes().all(|b| b.is_ascii_digit())
        && p.parse::<u16>().is_ok()
}

/// Whether a bare host (no port) is a loopback name: `localhost` (any case), `127.0.0.1`, or a
/// bracketed IPv6 literal equal to `::1`. Trailing dots, other 127/8 addresses and IPv4-mapped
/// forms are refused: admission accepts exactly the names a local client uses.
pub fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1" {
        return true;
    }
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<Ipv6Addr>().ok())
        .is_some_and(|ip| ip == Ipv6Addr::LOCALHOST)
}

fn host_allowed(authority: &str, allowed: &[String]) -> bool {
    match host_part(authority) {
        Some(host) if !host.is_empty() => {
            is_loopback_host(host) || allowed.iter().any(|a| a.eq_ignore_ascii_case(host))
        }
        _ => false,
    }
}

fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https")
        && !authority.contains('/')
        && host_part(authority).is_some_and(is_loopback_host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> AdmissionPolicy {
        AdmissionPolicy {
            token: Some("secret".into()),
            grant: Role::Drive,
            allowed_hosts: vec!["myhost.test".into()],
            allowed_origins: vec!["https://app.example".into()],
        }
    }

    fn req<'a>(
        host: &'a str,
        origin: Option<&'a str>,
        query: Option<&'a str>,
    ) -> AdmissionRequest<'a> {
        AdmissionRequest {
            host: Some(host),
            origin,
            query,
            protocols: None,
            authorization: None,
            peer: Peer::Tcp,
        }
    }

    fn verdict(d: Admission) -> Result<Role, CloseRefusal> {
        match d {
            Admission::Upgrade { verdict, .. } => verdict,
            Admission::Refuse(r) => panic!("refused {r:?}"),
        }
    }

    #[test]
    fn hosts() {
        let p = policy();
        for ok in [
            "127.0.0.1",
            "127.0.0.1:7070",
            "localhost",
            "LocalHost:80",
            "[::1]",
            "[::1]:9",
            "[0:0:0:0:0:0:0:1]:1",
            "myhost.test",
            "MYHOST.test:8080",
        ] {
            assert!(
                matches!(
                    admit(&p, &req(ok, None, Some("token=secret"))),
                    Admission::Upgrade { .. }
                ),
                "{ok}"
            );
        }
        for bad in [
            "evil.com",
            "localhost.",
            "localhost.evil.com",
            "127.0.0.2",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "localhost:abc",
            "localhost:99999",
            "",
            "[::1",
            "myhost.test.",
        ] {
            assert_eq!(
                admit(&p, &req(bad, None, None)),
                Admission::Refuse(HttpRefusal::ForeignHost),
                "{bad}"
            );
        }
        let missing = AdmissionRequest::default();
        assert_eq!(
            admit(&p, &missing),
            Admission::Refuse(HttpRefusal::MissingHost)
        );
    }

    #[test]
    fn origins() {
        let p = policy();
        for ok in [
            "http://127.0.0.1:7070",
            "http://localhost",
            "https://[::1]:3000",
            "https://app.example",
        ] {
            assert!(
                matches!(
                    admit(&p, &req("localhost", Some(ok), None)),
                    Admission::Upgrade { .. }
                ),
                "{ok}"
            );
        }
        assert_eq!(
            admit(&p, &req("localhost", Some("null"), None)),
            Admission::Refuse(HttpRefusal::NullOrigin)
        );
        for bad in [
            "http://evil.com",
            "https://app.example:443",
            "http://localhost.evil.com",
            "file://",
            "http://localhost/x",
        ] {
            assert_eq!(
                admit(&p, &req("localhost", Some(bad), None)),
                Admission::Refuse(HttpRefusal::ForeignOrigin),
                "{bad}"
            );
        }
    }

    #[test]
    fn tokens_and_roles() {
        let p = policy();
        assert_eq!(
            verdict(admit(&p, &req("localhost", None, Some("token=secret")))),
            Ok(Role::Drive)
        );
        assert_eq!(
            verdict(admit(&p, &req("localhost", None, Some("token=secre")))),
            Err(CloseRefusal::Unauthorized)
        );
        assert_eq!(
            verdict(admit(&p, &req("localhost", None, None))),
            Err(CloseRefusal::Unauthorized)
        );
        assert_eq!(
            verdict(admit(&p, &req("localhost", None, Some("token=%73ecret")))),
            Ok(Role::Drive)
        );
        assert_eq!(
            verdict(admit(
                &p,
                &req("localhost", None, Some("token=secret&role=observe"))
            )),
            Ok(Role::Observe)
        );
        assert_eq!(
            verdict(admit(
                &p,
                &req("localhost", None, Some("token=secret&role=admin"))
            )),
            Err(CloseRefusal::UnknownRole)
        );
        let observer = AdmissionPolicy {
            grant: Role::Observe,
            ..policy()
        };
        assert_eq!(
            verdict(admit(
                &observer,
                &req("localhost", None, Some("token=secret&role=drive"))
            )),
            Err(CloseRefusal::RoleNotGranted)
        );
        let sub = AdmissionRequest {
            protocols: Some("secret, other"),
            ..req("localhost", None, None)
        };
        assert_eq!(
            admit(&p, &sub),
            Admission::Upgrade {
                protocol: Some("secret".into()),
                verdict: Ok(Role::Drive)
            }
        );
        let bearer = AdmissionRequest {
            authorization: Some("Bearer secret"),
            ..req("localhost", None, None)
        };
        assert_eq!(verdict(admit(&p, &bearer)), Ok(Role::Drive));
        let lowercase = AdmissionRequest {
            authorization: Some("bearer  secret "),
            ..req("localhost", None, None)
        };
        assert_eq!(verdict(admit(&p, &lowercase)), Ok(Role::Drive));
        for wrong in ["Bearer other", "Basic secret", "Bearer", "secret"] {
            let r = AdmissionRequest {
                authorization: Some(wrong),
                ..req("localhost", None, None)
            };
            assert_eq!(
                verdict(admit(&p, &r)),
                Err(CloseRefusal::Unauthorized),
                "{wrong}"
            );
        }
        // A header token with a subprotocol of the client's own: the header decides, the
        // subprotocol is still echoed.
        let both = AdmissionRequest {
            authorization: Some("Bearer secret"),
            protocols: Some("acp"),
            ..req("localhost", None, None)
        };
        assert_eq!(
            admit(&p, &both),
            Admission::Upgrade {
                protocol: Some("acp".into()),
                verdict: Ok(Role::Drive)
            }
        );
        let open = AdmissionPolicy {
            token: None,
            ..policy()
        };
        assert_eq!(
            verdict(admit(&open, &req("localhost", None, None))),
            Ok(Role::Drive)
        );
    }

    #[test]
    fn the_same_user_on_the_unix_socket_needs_no_token_but_a_token_sent_must_be_right() {
        let p = policy();
        let socket = |query| AdmissionRequest {
            peer: Peer::SameUser,
            ..req("localhost", None, query)
        };
        assert_eq!(verdict(admit(&p, &socket(None))), Ok(Role::Drive));
        assert_eq!(
            verdict(admit(&p, &socket(Some("role=observe")))),
            Ok(Role::Observe)
        );
        assert_eq!(
            verdict(admit(&p, &socket(Some("token=secret")))),
            Ok(Role::Drive)
        );
        assert_eq!(
            verdict(admit(&p, &socket(Some("token=wrong")))),
            Err(CloseRefusal::Unauthorized)
        );
        let wrong_subprotocol = AdmissionRequest {
            protocols: Some("wrong"),
            ..socket(None)
        };
        assert_eq!(
            verdict(admit(&p, &wrong_subprotocol)),
            Err(CloseRefusal::Unauthorized)
        );
        // Role rules as on TCP.
        let observer = AdmissionPolicy {
            grant: Role::Observe,
            ..policy()
        };
        assert_eq!(
            verdict(admit(&observer, &socket(Some("role=drive")))),
            Err(CloseRefusal::RoleNotGranted)
        );
        assert_eq!(verdict(admit(&observer, &socket(None))), Ok(Role::Observe));
    }

    #[test]
    fn the_unix_socket_takes_loopback_names_only_whatever_pages_are_allowed() {
        let p = policy();
        let socket = |host, origin| AdmissionRequest {
            peer: Peer::SameUser,
            ..req(host, origin, None)
        };
        for host in ["localhost", "127.0.0.1:7070", "[::1]"] {
            assert!(
                matches!(admit(&p, &socket(host, None)), Admission::Upgrade { .. }),
                "{host}"
            );
        }
        // Allowed on TCP, not on the socket.
        assert!(matches!(
            admit(&p, &req("myhost.test", None, Some("token=secret"))),
            Admission::Upgrade { .. }
        ));
        assert_eq!(
            admit(&p, &socket("myhost.test", None)),
            Admission::Refuse(HttpRefusal::ForeignHost)
        );
        assert_eq!(
            admit(&p, &socket("localhost", Some("https://app.example"))),
            Admission::Refuse(HttpRefusal::ForeignOrigin)
        );
        assert!(matches!(
            admit(&p, &socket("localhost", Some("http://127.0.0.1:7070"))),
            Admission::Upgrade { .. }
        ));
        assert_eq!(
            admit(&p, &socket("localhost", Some("null"))),
            Admission::Refuse(HttpRefusal::NullOrigin)
        );
    }

    #[test]
    fn debug_of_a_request_never_shows_its_query() {
        let request = req("localhost", None, Some("token=secret&role=drive"));
        let shown = format!("{request:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("localhost"), "{shown}");
    }

    #[test]
    fn debug_of_a_policy_never_shows_the_token() {
        let shown = format!("{:?}", policy());
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("Token(<redacted>)"), "{shown}");
        assert!(policy()
            .token
            .is_some_and(|t| t.matches("secret") && !t.matches("secre")));
    }
}
