//! The server a load run talks to: a `ws://` URL on a loopback address, or the carrier's Unix
//! socket (`unix:PATH[:/PATH]`, as the client takes it), nothing else.

use std::net::SocketAddr;

use carrier::client::WsOptions;
use carrier::discovery::listener::{loopback_ip, Endpoint};

/// Why a URL is not a target the load generator will send traffic to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not a URL at all.
    #[error("not a URL: {0}")]
    Invalid(String),
    /// Only plain `ws://` is spoken (the carrier binds loopback without TLS).
    #[error("only ws:// URLs are supported, got {0:?}")]
    Scheme(String),
    /// The host is not a loopback address.
    #[error(
        "refusing {0:?}: the load generator only targets loopback (127.0.0.0/8, localhost, [::1])"
    )]
    NotLoopback(String),
}

/// A parsed, loopback-only WebSocket endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Where to connect: a loopback TCP address or a Unix socket.
    pub endpoint: Endpoint,
    /// The `Host` header (`host:port`).
    pub host_header: String,
    /// Path and query of the upgrade request, with the token appended when one was given.
    pub path_and_query: String,
    /// The URL as given (the dialer resolves it again).
    pub url: String,
    /// The token, sent by the dialer only to a listener of this user.
    pub token: Option<String>,
}

impl Target {
    /// Parses `url` (e.g. `ws://127.0.0.1:7070/`, or `unix:/run/user/1000/carrier/4242.sock`)
    /// and appends `token` as `?token=`. Refuses any host that is not loopback: this tool never
    /// sends load off the machine.
    pub fn parse(url: &str, token: Option<&str>) -> Result<Target, TargetError> {
        if url.starts_with("unix:") {
            // The client's own reading of the URL: the dialer resolves it again the same way.
            let endpoint = WsOptions::new(url)
                .endpoint()
                .map_err(|e| TargetError::Invalid(e.to_string()))?;
            return Ok(Target {
                endpoint,
                host_header: "localhost".to_owned(),
                path_and_query: "/".to_owned(),
                url: url.to_owned(),
                token: token.map(str::to_owned),
            });
        }
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| TargetError::Invalid(e.to_string()))?;
        match uri.scheme_str() {
            Some("ws") => {}
            other => return Err(TargetError::Scheme(other.unwrap_or("").to_string())),
        }
        let host = uri
            .host()
            .ok_or_else(|| TargetError::Invalid(format!("{url}: no host")))?;
        let ip = loopback_ip(host).ok_or_else(|| TargetError::NotLoopback(host.to_string()))?;
        let port = uri.port_u16().unwrap_or(80);
        let mut path_and_query = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".to_string());
        if path_and_query.is_empty() {
            path_and_query.push('/');
        }
        if let Some(token) = token {
            let sep = if path_and_query.contains('?') {
                '&'
            } else {
                '?'
            };
            path_and_query.push(sep);
            path_and_query.push_str("token=");
            path_and_query.push_str(
                &percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        }
        Ok(Target {
            endpoint: SocketAddr::new(ip, port).into(),
            host_header: format!("{host}:{port}"),
            path_and_query,
            url: url.to_owned(),
            token: token.map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_are_accepted_and_the_token_is_appended() {
        let t = Target::parse("ws://127.0.0.1:7070/", Some("abc")).unwrap();
        assert_eq!(t.endpoint, "127.0.0.1:7070".parse::<SocketAddr>().unwrap());
        assert_eq!(t.path_and_query, "/?token=abc");
        let t = Target::parse("ws://localhost:9/x?role=observe", Some("a-b")).unwrap();
        assert_eq!(t.path_and_query, "/x?role=observe&token=a%2Db");
        let t = Target::parse("ws://[::1]:9", None).unwrap();
        assert_eq!(t.endpoint, "[::1]:9".parse::<SocketAddr>().unwrap());
        let t = Target::parse("unix:/run/c/1.sock", Some("t")).unwrap();
        assert_eq!(t.endpoint, Endpoint::Unix("/run/c/1.sock".into()));
        assert_eq!(t.path_and_query, "/");
        assert!(Target::parse("ws://127.3.2.1:9/", None).is_ok());
    }

    #[test]
    fn non_loopback_hosts_and_other_schemes_are_refused() {
        for url in [
            "ws://10.0.0.1:7070/",
            "ws://192.168.1.2/",
            "ws://example.com/",
            "ws://0.0.0.0:7070/",
        ] {
            assert!(
                matches!(Target::parse(url, None), Err(TargetError::NotLoopback(_))),
                "{url}"
            );
        }
        assert!(matches!(
            Target::parse("wss://127.0.0.1/", None),
            Err(TargetError::Scheme(_))
        ));
        assert!(matches!(
            Target::parse("http://127.0.0.1/", None),
            Err(TargetError::Scheme(_))
        ));
    }
}
