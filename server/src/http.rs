//! The HTTP face of the carrier: `GET /` upgrades (after admission; so do the attachment's
//! other paths, such as `/robota`), `/healthz`, `/metrics`, and the files the attached profile
//! serves for its web clients (the agent protocol's `/console` and the JavaScript client,
//! `/client.js` and the modules it imports). [`CarrierService`] is also what a host mounts, at
//! any path, in its own hyper or axum server.

mod request_rules;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, SEC_WEBSOCKET_PROTOCOL,
    SEC_WEBSOCKET_VERSION,
};
use hyper::{Method, Request, Response, StatusCode};

use super::connection::{self, Linger};

use super::profile::Asset;
use super::shared::Shared;
use carrier_protocol::admission::{admit, bearer, query_param, Admission, AdmissionRequest, Peer};

/// The response body type of every carrier response.
pub type Body = Full<Bytes>;

/// A `tower::Service` (and hyper service) answering every carrier route, with the same admission
/// as the carrier's own listener. Cheap to clone. Get one from
/// [`WsTransport::service`](super::WsTransport::service).
///
/// It works at whatever path the host mounts it under. With axum:
///
/// - `Router::new().route_service("/agent", transport.service())`: the WebSocket endpoint is
///   `/agent` (one route, so only the socket).
/// - `Router::new().nest_service("/agent", transport.service())`: the whole carrier under
///   `/agent/` — the socket at `/agent` and `/agent/`, the web console at `/agent/console`,
///   its JavaScript modules beside it, `/agent/healthz` and `/agent/metrics`. The console and
///   the modules refer to each other and to the socket by relative URL.
///
/// The service routes on the last segment of the path it is given: `healthz`, `metrics` and
/// the attached profile's files (`console`, `client.js`, …) are those routes, and any other
/// path the host sends it is the WebSocket endpoint (a request without an upgrade there gets
/// 426). The carrier's own listener, which owns the whole server, keeps the exact paths (`/`,
/// `/console`, …; 404 elsewhere).
///
/// The upgrade needs the request's `hyper::upgrade::OnUpgrade` extension, which hyper (served
/// `with_upgrades()`) and axum provide. `examples/axum_mount.rs` is a complete host.
#[derive(Clone)]
pub struct CarrierService {
    pub(crate) shared: Arc<Shared>,
    /// Mounted by a host (route on the path's last segment) rather than the carrier's own
    /// listener (exact paths from the root).
    pub(crate) mounted: bool,
    /// How its requests reach it: over TCP (also every mounted service), or from the server's
    /// own user on its Unix socket.
    pub(crate) peer: Peer,
}

/// Where a request goes among the carrier's routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// The WebSocket endpoint.
    Socket,
    Healthz,
    Metrics,
    /// One of the attached profile's files, by index.
    Asset(usize),
    NotFound,
}

/// The route of `path`: from the root for the carrier's own listener, by the last segment
/// when a host mounted the service (it may or may not have stripped its prefix).
fn route(path: &str, mounted: bool, assets: &[Asset]) -> Route {
    let name = if mounted {
        path.rsplit_once('/').map_or(path, |(_, name)| name)
    } else {
        match path.strip_prefix('/') {
            Some(name) if !name.contains('/') => name,
            _ => return Route::NotFound,
        }
    };
    match name {
        "" => Route::Socket,
        "healthz" => Route::Healthz,
        "metrics" => Route::Metrics,
        _ => match assets.iter().position(|asset| asset.name == name) {
            Some(i) => Route::Asset(i),
            None if mounted => Route::Socket,
            None => Route::NotFound,
        },
    }
}

/// The attachment's own upgrade path a request is for (`/robota`; `/` is left to
/// [`route`]): the whole path on the carrier's own listener, its last segment when mounted.
fn profile_path(shared: &Shared, path: &str, mounted: bool) -> Option<&'static str> {
    let path = if mounted {
        path.rfind('/').map_or(path, |i| &path[i..])
    } else {
        path
    };
    shared.route(path).filter(|route| *route != "/")
}

impl<B: Send + 'static> tower_service::Service<Request<B>> for CarrierService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(handle(req, service)) })
    }
}

impl<B: Send + 'static> hyper::service::Service<Request<B>> for CarrierService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(handle(req, service)) })
    }
}

fn text(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-store"));
    r
}

fn plain(status: StatusCode, body: &'static str) -> Response<Body> {
    text(status, "text/plain; charset=utf-8", body)
}

fn header<B>(req: &Request<B>, name: hyper::header::HeaderName) -> Option<&str> {
    // A header that is not visible ASCII becomes "\u{0}", which matches nothing.
    req.headers()
        .get(name)
        .map(|v| v.to_str().unwrap_or("\u{0}"))
}

/// Largest request head the carrier serves: header names and values plus the URI. hyper's
/// `max_buf_size` only bounds a head that arrives in several reads (one that fits a single read
/// is parsed whole), so the bound is enforced here too. Browsers send a few KiB.
const MAX_HEAD_BYTES: usize = 32 * 1024;

fn head_bytes<B>(req: &Request<B>) -> usize {
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    headers + req.uri().to_string().len()
}

fn handle<B: Send + 'static>(mut req: Request<B>, service: CarrierService) -> Response<Body> {
    let CarrierService {
        shared,
        mounted,
        peer,
    } = service;
    if head_bytes(&req) > MAX_HEAD_BYTES {
        return plain(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request head too large\n",
        );
    }
    let endpoint = profile_path(&shared, req.uri().path(), mounted);
    let assets = shared.assets();
    let route = match endpoint {
        Some(_) => Route::Socket,
        None => route(req.uri().path(), mounted, &assets),
    };
    if let Some((status, why)) =
        request_rules::check(&req, &shared.policy, peer, route == Route::Socket)
    {
        let mut response = plain(status, why);
        if status == StatusCode::UPGRADE_REQUIRED {
            // RFC 6455 §4.2.2: name the version this server speaks.
            response
                .headers_mut()
                .insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        }
        return response;
    }
    if route == Route::Healthz {
        return text(StatusCode::OK, "application/json", r#"{"status":"ok"}"#);
    }
    // Every other route is behind the Host check (DNS-rebinding defence).
    let host_only = AdmissionRequest {
        host: header(&req, HOST),
        peer,
        ..Default::default()
    };
    if let Admission::Refuse(why) = admit(&shared.policy, &host_only) {
        tracing::debug!(%why, "refused before upgrade");
        return plain(
            StatusCode::FORBIDDEN,
            "forbidden: Host is not a loopback name\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match route {
        Route::Socket if fastwebsockets::upgrade::is_upgrade_request(&req) => {
            upgrade(&mut req, shared, peer, endpoint.unwrap_or("/"))
        }
        Route::Socket => plain(
            StatusCode::UPGRADE_REQUIRED,
            "this is a WebSocket endpoint; see console beside it\n",
        ),
        Route::Metrics => metrics(&req, &shared, peer),
        Route::Asset(i) => text(StatusCode::OK, assets[i].content_type, assets[i].body),
        Route::Healthz | Route::NotFound => plain(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// `/metrics`, behind the token as the socket is: needed over TCP, optional for the same user on
/// the Unix socket (but checked when given).
fn metrics<B>(req: &Request<B>, shared: &Shared, peer: Peer) -> Response<Body> {
    if let Some(expected) = &shared.policy.token {
        let from_query = req.uri().query().and_then(|q| query_param(q, "token"));
        let from_header = header(req, AUTHORIZATION)
            .and_then(bearer)
            .map(str::to_string);
        let ok = match (from_query.or(from_header), peer) {
            (Some(presented), _) => expected.matches(&presented),
            (None, Peer::SameUser) => true,
            (None, Peer::Tcp) => false,
        };
        if !ok {
            let mut r = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: pass ?token= or Authorization: Bearer\n",
            );
            r.headers_mut()
                .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    let mut body = shared.metrics.render();
    // Held in the transport's shared state rather than in the counters, so it is read here.
    body.push_str(&format!(
        "# HELP carrier_inbound_bytes Bytes of client messages paid from the shared inbound budget (the budget in use).\n\
         # TYPE carrier_inbound_bytes gauge\ncarrier_inbound_bytes {}\n\
         # HELP carrier_bulk_credit_bytes Bytes bulk frames waiting for their host within their sender's credit are charged (buffered credit).\n\
         # TYPE carrier_bulk_credit_bytes gauge\ncarrier_bulk_credit_bytes {}\n\
         # HELP carrier_bulk_frames_dropped_total Bulk frames dropped because their connection closed before the host took them.\n\
         # TYPE carrier_bulk_frames_dropped_total counter\ncarrier_bulk_frames_dropped_total {}\n",
        shared.inbound.in_use(),
        shared.registry.buffered_credit_bytes(),
        shared.registry.bulk_frames_dropped(),
    ));
    text(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        body,
    )
}

fn upgrade<B: Send + 'static>(
    req: &mut Request<B>,
    shared: Arc<Shared>,
    peer: Peer,
    route: &'static str,
) -> Response<Body> {
    let decision = admit(
        &shared.policy,
        &AdmissionRequest {
            host: header(req, HOST),
            origin: header(req, ORIGIN),
            query: req.uri().query(),
            protocols: header(req, SEC_WEBSOCKET_PROTOCOL),
            authorization: header(req, AUTHORIZATION),
            peer,
        },
    );
    let (protocol, verdict) = match decision {
        Admission::Refuse(why) => {
            tracing::info!(%why, "upgrade refused");
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: Host or Origin not allowed\n",
            );
        }
        Admission::Upgrade { protocol, verdict } => (protocol, verdict),
    };
    if shared.running.read().map(|r| r.is_none()).unwrap_or(true) {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "carrier is not running\n");
    }
    let slot = if verdict.is_ok() {
        let Some(slot) = shared.reserve_slot() else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "too many connections\n");
        };
        slot
    } else {
        shared.reserve_refused()
    };
    let (response, upgrade_fut) = match fastwebsockets::upgrade::upgrade(&mut *req) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::debug!(error = %e, "bad upgrade request");
            return plain(StatusCode::BAD_REQUEST, "bad WebSocket upgrade request\n");
        }
    };
    let (mut parts, _) = response.into_parts();
    if let Some(p) = protocol.and_then(|p| HeaderValue::from_str(&p).ok()) {
        parts.headers.insert(SEC_WEBSOCKET_PROTOCOL, p);
    }
    tokio::spawn(async move {
        let linger = match (&verdict, slot.lingers()) {
            (Ok(_), _) => Linger::Grace,
            (Err(_), true) => Linger::Refused,
            (Err(_), false) => Linger::None,
        };
        let _slot = slot;
        match upgrade_fut.await {
            Ok(ws) => {
                let io = ws.into_inner().into_inner();
                connection::run(io, verdict, linger, shared, route).await
            }
            Err(e) => tracing::debug!(error = %e, "upgrade failed"),
        }
    });
    Response::from_parts(parts, Full::new(Bytes::new()))
}

#[cfg(test)]
mod tests {
    use super::{route, Asset, Route};

    /// The agent profile's files, as far as these tests need them.
    const ASSETS: &[Asset] = &[
        asset("console"),
        asset("client.js"),
        asset("transport.js"),
        asset("frames.js"),
        asset("errors.js"),
        asset("internal.js"),
        asset("catalog.js"),
    ];

    const fn asset(name: &'static str) -> Asset {
        Asset {
            name,
            content_type: "text/plain",
            body: "",
        }
    }

    #[test]
    fn the_own_listener_routes_exact_paths_from_the_root() {
        let route = |path| route(path, false, ASSETS);
        assert_eq!(route("/"), Route::Socket);
        assert_eq!(route("/console"), Route::Asset(0));
        assert_eq!(route("/healthz"), Route::Healthz);
        assert_eq!(route("/metrics"), Route::Metrics);
        assert_eq!(route("/client.js"), Route::Asset(1));
        for path in ["/agent", "/agent/console", "/package.json", "", "/console/"] {
            assert_eq!(route(path), Route::NotFound, "{path}");
        }
    }

    #[test]
    fn a_mounted_service_routes_on_the_last_segment_and_is_the_socket_elsewhere() {
        let route = |path: &str| route(path, true, ASSETS);
        // axum's route_service passes the whole path; nest_service strips the prefix; a hyper
        // host may do either.
        for path in ["/agent", "/agent/", "/", "", "/a/b/socket"] {
            assert_eq!(route(path), Route::Socket, "{path}");
        }
        for prefix in ["", "/agent", "/a/b"] {
            assert_eq!(route(&format!("{prefix}/console")), Route::Asset(0));
            assert_eq!(route(&format!("{prefix}/healthz")), Route::Healthz);
            assert_eq!(route(&format!("{prefix}/metrics")), Route::Metrics);
            assert_eq!(route(&format!("{prefix}/catalog.js")), Route::Asset(6));
        }
    }

    #[test]
    fn without_files_only_the_socket_and_the_carrier_own_routes_exist() {
        assert_eq!(route("/console", false, &[]), Route::NotFound);
        assert_eq!(route("/healthz", false, &[]), Route::Healthz);
        assert_eq!(route("/agent/console", true, &[]), Route::Socket);
    }
}
