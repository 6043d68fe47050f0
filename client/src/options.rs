//! Where and how the WebSocket client dials: [`WsOptions`] (URL, token and its placement,
//! role, timeouts, bounds, whose listeners it talks to) and the target a URL resolves to.
//!
//! A URL is `ws://HOST:PORT/PATH` on a loopback host, or `unix:SOCKET` — the carrier's Unix
//! socket, `/` on it — and `unix:SOCKET:/PATH` for another path (`unix:/run/…/4242.sock:/robota`),
//! the form Node's `ws` writes `ws+unix:`. [`WsOptions::unix_socket`] names the socket beside a
//! `ws://` URL instead, as `ws`'s socket-path option does.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hyper::Uri;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::reconnect::DEFAULT_OUTBOUND_BUDGET;
use super::transport::TransportError;
use super::url_secrets::{has_userinfo, redact_url, split_url_token};
use carrier_discovery::listener::{loopback_ip, Endpoint, OwnerCheck, OwnerPolicy, SocketTables};
use carrier_protocol::Role;

/// How the token reaches the server (docs/protocol.md, "Endpoint and admission", step 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenPlacement {
    /// As the `token` query parameter (the default).
    #[default]
    Query,
    /// As the first `Sec-WebSocket-Protocol` value, the way browsers send it; the token never
    /// appears in a URL.
    Subprotocol,
}

/// Where and how [`WsClientTransport`](super::WsClientTransport) connects.
#[derive(Clone)]
pub struct WsOptions {
    url: String,
    token: Option<String>,
    token_placement: TokenPlacement,
    role: Option<Role>,
    connect_timeout: Duration,
    max_message_bytes: usize,
    max_parsed_bytes: usize,
    owner_check: OwnerCheck,
    outbound_budget: usize,
    reconnect: bool,
    unix_socket: Option<PathBuf>,
}

impl WsOptions {
    /// Options for `url` (`ws://HOST:PORT/PATH`, HOST `127.0.0.1`, `localhost`, `[::1]` or
    /// another loopback address; or `unix:SOCKET[:/PATH]`, the carrier's Unix socket), no token,
    /// the listener's default role, a 10 s connect timeout, a 64 MiB inbound message cap, 64 MiB
    /// for one message parsed, and only listeners of this user.
    pub fn new(url: impl Into<String>) -> WsOptions {
        WsOptions {
            url: url.into(),
            token: None,
            token_placement: TokenPlacement::Query,
            role: None,
            connect_timeout: Duration::from_secs(10),
            max_message_bytes: 64 << 20,
            max_parsed_bytes: 64 << 20,
            owner_check: OwnerCheck::own_user(),
            outbound_budget: DEFAULT_OUTBOUND_BUDGET,
            reconnect: true,
            unix_socket: None,
        }
    }

    /// Dials the Unix socket at `path` instead of the `ws://` URL's host and port, which then
    /// give only the request's path, query and `Host` (a loopback name, as on TCP). The
    /// listener is attributed by its peer credentials, on any Unix; see
    /// [`carrier_discovery::listener`].
    pub fn unix_socket(mut self, path: impl Into<PathBuf>) -> WsOptions {
        self.unix_socket = Some(path.into());
        self
    }

    /// Sends `token` for admission.
    pub fn token(mut self, token: impl Into<String>) -> WsOptions {
        self.token = Some(token.into());
        self
    }

    /// Sends the token as the WebSocket subprotocol instead of in the query string.
    pub fn token_in_subprotocol(mut self) -> WsOptions {
        self.token_placement = TokenPlacement::Subprotocol;
        self
    }

    /// Asks for `role` with `?role=`; the server grants it only if it is not above the
    /// listener's grant (otherwise it closes with 1008).
    pub fn role(mut self, role: Role) -> WsOptions {
        self.role = Some(role);
        self
    }

    /// How long one dial (TCP connect plus upgrade) may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> WsOptions {
        self.connect_timeout = timeout;
        self
    }

    /// The largest inbound message accepted; a bigger one ends the connection with
    /// [`TransportError::MessageTooLarge`] (close 1009, no reconnect).
    pub fn max_message_bytes(mut self, bytes: usize) -> WsOptions {
        self.max_message_bytes = bytes;
        self
    }

    /// The most one inbound text message may take once parsed into JSON values (default
    /// 64 MiB). A parsed message can take far more than its text (a B-tree leaf per object, a
    /// 32-byte node per value), so the text is measured before it is parsed, and a message
    /// whose tree could pass this ends the connection with [`TransportError::ParsedTooLarge`]
    /// (close 1009, no reconnect).
    pub fn max_parsed_bytes(mut self, bytes: usize) -> WsOptions {
        self.max_parsed_bytes = bytes;
        self
    }

    /// Also talks to a listener of another user, or one whose owner cannot be found out — but
    /// **without the token**: it goes only to a listener of this user, whatever this option
    /// says. For an `--open` carrier of someone else, named on purpose. Which kind of listener
    /// the last dial reached: [`WsClientTransport::last_listener`](super::WsClientTransport::last_listener).
    pub fn any_owner(mut self) -> WsOptions {
        self.owner_check = self.owner_check.with_policy(OwnerPolicy::AnyOwner);
        self
    }

    /// Reads the socket tables that attribute a listener from `tables` instead of `/proc/net`
    /// (tests; a system with procfs mounted elsewhere).
    pub fn socket_tables(mut self, tables: SocketTables) -> WsOptions {
        self.owner_check = self.owner_check.with_tables(tables);
        self
    }

    /// Bounds the outbound queue to `bytes` of frames not yet written (default 8 MiB): past
    /// it a synchronous send fails with [`TransportError::BufferFull`] and an async one waits.
    pub fn outbound_budget(mut self, bytes: usize) -> WsOptions {
        self.outbound_budget = bytes;
        self
    }

    /// Makes a break final instead of reconnecting with backoff (for one-shot tools).
    pub fn no_reconnect(mut self) -> WsOptions {
        self.reconnect = false;
        self
    }

    pub(crate) fn budget_bytes(&self) -> usize {
        self.outbound_budget
    }

    pub(crate) fn reconnects(&self) -> bool {
        self.reconnect
    }

    pub(crate) fn owner_check(&self) -> &OwnerCheck {
        &self.owner_check
    }

    pub(crate) fn token_value(&self) -> Option<&str> {
        self.token.as_deref()
    }

    pub(crate) fn placement(&self) -> TokenPlacement {
        self.token_placement
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.connect_timeout
    }

    pub(crate) fn max_message(&self) -> usize {
        self.max_message_bytes
    }

    pub(crate) fn max_parsed(&self) -> usize {
        self.max_parsed_bytes
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Checks the URL without connecting, so a command line can reject it up front.
    pub fn validate(&self) -> Result<(), TransportError> {
        Target::resolve(self).map(drop)
    }

    /// The loopback address the URL dials (checked as [`WsOptions::validate`] checks it); an
    /// error for a Unix socket.
    pub fn socket_addr(&self) -> Result<SocketAddr, TransportError> {
        let target = Target::resolve(self)?;
        target
            .endpoint
            .tcp()
            .ok_or_else(|| TransportError::InvalidUrl {
                url: redact_url(&self.url),
                reason: "it names a Unix socket, not a TCP address".into(),
            })
    }

    /// What the options dial: a loopback address or a Unix socket (checked as
    /// [`WsOptions::validate`] checks it).
    pub fn endpoint(&self) -> Result<Endpoint, TransportError> {
        Target::resolve(self).map(|target| target.endpoint)
    }
}

impl fmt::Debug for WsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsOptions")
            .field("url", &redact_url(&self.url))
            // Never print the token: Debug output ends up in logs.
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_placement", &self.token_placement)
            .field("role", &self.role)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_parsed_bytes", &self.max_parsed_bytes)
            .field("owner_check", &self.owner_check)
            .field("outbound_budget", &self.outbound_budget)
            .field("reconnect", &self.reconnect)
            .field("unix_socket", &self.unix_socket)
            .finish()
    }
}

/// The query-value characters left as they are: RFC 3986 unreserved.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The `Host` a request over a `unix:` URL carries: a loopback name, the only kind the
/// carrier's socket accepts.
const UNIX_HOST: &str = "localhost";

/// What one dial needs, derived from the options.
pub(crate) struct Target {
    pub(crate) endpoint: Endpoint,
    pub(crate) authority: String,
    /// The URL's path and its own query, without token or role.
    path: String,
    query: Option<String>,
    /// The token written into the URL (`?token=`), taken out of the query: like the token of
    /// the options, it goes only to a listener that may receive one.
    url_token: Option<String>,
}

impl Target {
    pub(crate) fn resolve(options: &WsOptions) -> Result<Target, TransportError> {
        let invalid = |reason: &str| TransportError::InvalidUrl {
            url: redact_url(&options.url),
            reason: reason.to_owned(),
        };
        if has_userinfo(&options.url) {
            return Err(invalid(
                "user:password@ in the URL is not used by carrier (it would travel in the Host header): give the token with ?token=, --token or CARRIER_TOKEN",
            ));
        }
        let (url, url_token) = split_url_token(&options.url);
        if let Some(rest) = url.strip_prefix("unix:") {
            return Target::unix(rest, url_token).map_err(&invalid);
        }
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| invalid(&e.to_string()))?;
        match uri.scheme_str() {
            Some("ws") => {}
            Some("wss") => {
                return Err(invalid(
                    "wss:// is not supported: carrier listens on loopback without TLS",
                ))
            }
            _ => return Err(invalid("expected ws://HOST:PORT/")),
        }
        let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
        if authority.host().is_empty() {
            return Err(invalid("no host"));
        }
        // A carrier binds 127.0.0.1, and only a loopback listener can be attributed to a local
        // user before the token goes out.
        let ip = loopback_ip(authority.host()).ok_or_else(|| {
            invalid("not a loopback host: carrier clients connect to 127.0.0.1, localhost or [::1] only")
        })?;
        let path = if uri.path().is_empty() {
            "/"
        } else {
            uri.path()
        };
        let endpoint = match &options.unix_socket {
            Some(path) => unix_endpoint(path.clone()).map_err(&invalid)?,
            None => Endpoint::Tcp(SocketAddr::new(ip, authority.port_u16().unwrap_or(80))),
        };
        Ok(Target {
            endpoint,
            authority: authority.as_str().to_owned(),
            path: path.to_owned(),
            query: uri.query().filter(|q| !q.is_empty()).map(str::to_owned),
            url_token,
        })
    }

    /// `unix:` followed by `rest`: `SOCKET`, `SOCKET:/PATH[?QUERY]` or `SOCKET?QUERY` (the token
    /// already taken out of it).
    fn unix(rest: &str, url_token: Option<String>) -> Result<Target, &'static str> {
        // The request path starts at the first `:/` after the socket's first character.
        let (socket, request) = match rest.get(1..).and_then(|r| r.find(":/")) {
            Some(i) => (&rest[..=i], &rest[i + 2..]),
            None => match rest.find('?') {
                Some(q) => (&rest[..q], &rest[q..]),
                None => (rest, ""),
            },
        };
        if socket.is_empty() {
            return Err("expected unix:SOCKET or unix:SOCKET:/PATH");
        }
        let (path, query) = match request.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (request, None),
        };
        Ok(Target {
            endpoint: unix_endpoint(PathBuf::from(socket))?,
            authority: UNIX_HOST.to_owned(),
            path: format!("/{}", path.trim_start_matches('/')),
            query: query.filter(|q| !q.is_empty()).map(str::to_owned),
            url_token,
        })
    }

    /// The token a listener that may receive one gets: the URL's own (`?token=`, as the server
    /// would read the first `token` of the query), else the options'.
    pub(crate) fn token<'a>(&'a self, options: &'a WsOptions) -> Option<&'a str> {
        self.url_token.as_deref().or(options.token_value())
    }

    /// The request target of the upgrade: the URL's path and query, then the token (when it
    /// goes in the query) and the role.
    pub(crate) fn path_and_query(&self, token: Option<&str>, options: &WsOptions) -> String {
        let mut query: Vec<String> = self.query.iter().cloned().collect();
        if let (Some(token), TokenPlacement::Query) = (token, options.token_placement) {
            query.push(format!("token={}", utf8_percent_encode(token, QUERY_VALUE)));
        }
        if let Some(role) = options.role {
            query.push(format!("role={}", role.as_str()));
        }
        if query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, query.join("&"))
        }
    }
}

/// A Unix socket to dial, where this system has them.
fn unix_endpoint(path: PathBuf) -> Result<Endpoint, &'static str> {
    if cfg!(unix) {
        Ok(Endpoint::Unix(path))
    } else {
        Err("Unix sockets are not available on this system")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(options: WsOptions) -> Target {
        match Target::resolve(&options) {
            Ok(target) => target,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn token_and_role_go_in_the_query_by_default() {
        let options = WsOptions::new("ws://127.0.0.1:7070/")
            .token("a b&c")
            .role(Role::Observe);
        let target = resolve(options.clone());
        assert_eq!(
            target.endpoint,
            "127.0.0.1:7070".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(target.authority, "127.0.0.1:7070");
        assert_eq!(
            target.path_and_query(Some("a b&c"), &options),
            "/?token=a%20b%26c&role=observe"
        );
        // A listener that is not this user's gets the same request without the token.
        assert_eq!(target.path_and_query(None, &options), "/?role=observe");
    }

    #[test]
    fn subprotocol_placement_keeps_the_token_out_of_the_url() {
        let options = WsOptions::new("ws://localhost:7071")
            .token("secret")
            .token_in_subprotocol();
        let target = resolve(options.clone());
        assert_eq!(target.path_and_query(Some("secret"), &options), "/");
        assert_eq!(
            target.endpoint,
            "127.0.0.1:7071".parse::<SocketAddr>().unwrap()
        );
    }

    #[test]
    fn existing_query_and_ipv6_hosts_are_kept() {
        let options = WsOptions::new("ws://[::1]:7070/x?a=1").token("t");
        let target = resolve(options.clone());
        assert_eq!(target.endpoint, "[::1]:7070".parse::<SocketAddr>().unwrap());
        assert_eq!(target.authority, "[::1]:7070");
        assert_eq!(target.path_and_query(Some("t"), &options), "/x?a=1&token=t");
    }

    #[test]
    fn non_ws_and_non_loopback_urls_are_refused() {
        for url in [
            "http://127.0.0.1:7070/",
            "wss://127.0.0.1/",
            "127.0.0.1:7070",
            "",
            "ws://10.0.0.1:7070/",
            "ws://example.com:7070/",
            "ws://0.0.0.0:7070/",
        ] {
            assert!(
                matches!(
                    WsOptions::new(url).validate(),
                    Err(TransportError::InvalidUrl { .. })
                ),
                "{url}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn unix_urls_name_the_socket_then_the_path_and_query() {
        let options = WsOptions::new("unix:/run/c/42.sock").role(Role::Observe);
        let target = resolve(options.clone());
        assert_eq!(target.endpoint, Endpoint::Unix("/run/c/42.sock".into()));
        assert_eq!(target.authority, "localhost");
        assert_eq!(target.path_and_query(None, &options), "/?role=observe");

        let options = WsOptions::new("unix:/run/c/42.sock:/robota?x=1&token=t");
        let target = resolve(options.clone());
        assert_eq!(target.endpoint, Endpoint::Unix("/run/c/42.sock".into()));
        assert_eq!(target.token(&options), Some("t"));
        assert_eq!(target.path_and_query(None, &options), "/robota?x=1");

        let options = WsOptions::new("unix:rel/c.sock?token=t&role=observe");
        let target = resolve(options.clone());
        assert_eq!(target.endpoint, Endpoint::Unix("rel/c.sock".into()));
        assert_eq!(target.token(&options), Some("t"));
        assert_eq!(target.path_and_query(None, &options), "/?role=observe");

        assert!(WsOptions::new("unix:").validate().is_err());
        assert!(WsOptions::new("unix:/x.sock").socket_addr().is_err());

        // The socket-path option: the ws:// URL gives the request, the socket the endpoint.
        let options = WsOptions::new("ws://localhost/acp").unix_socket("/run/c/42.sock");
        let target = resolve(options.clone());
        assert_eq!(target.endpoint, Endpoint::Unix("/run/c/42.sock".into()));
        assert_eq!(target.authority, "localhost");
        assert_eq!(target.path_and_query(None, &options), "/acp");
    }

    #[test]
    fn debug_output_redacts_the_token() {
        let shown = format!("{:?}", WsOptions::new("ws://127.0.0.1:1/").token("hunter2"));
        assert!(!shown.contains("hunter2"));
        let shown = format!("{:?}", WsOptions::new("ws://127.0.0.1:1/?token=hunter2"));
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn a_token_in_the_url_leaves_the_query_and_is_the_token() {
        let options = WsOptions::new("ws://127.0.0.1:7070/x?a=1&token=from-url").token("given");
        let target = resolve(options.clone());
        assert_eq!(target.token(&options), Some("from-url"));
        // Sent only when the listener may receive it; never from the URL's own query.
        assert_eq!(
            target.path_and_query(Some("from-url"), &options),
            "/x?a=1&token=from-url"
        );
        assert_eq!(target.path_and_query(None, &options), "/x?a=1");
        let plain = WsOptions::new("ws://127.0.0.1:7070/").token("given");
        assert_eq!(resolve(plain.clone()).token(&plain), Some("given"));
    }

    #[test]
    fn credentials_before_the_host_are_refused_and_never_shown() {
        for url in [
            "ws://me:s3cret@127.0.0.1:7070/",
            "ws://s3cret@localhost:7070/?token=s3cret",
        ] {
            let error = WsOptions::new(url).validate().expect_err(url);
            let TransportError::InvalidUrl { url: shown, reason } = &error else {
                panic!("{error:?}");
            };
            assert!(reason.contains("user:password@"), "{reason}");
            assert!(!error.to_string().contains("s3cret"), "{error}");
            assert!(shown.contains("<redacted>@"), "{shown}");
        }
        // Any other invalid URL is shown without its token too.
        let error = WsOptions::new("ws://10.0.0.1:7070/?token=s3cret")
            .validate()
            .expect_err("not loopback");
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }
}
