//! The HTTP face of the carrier: `GET /` upgrades (after admission; so do the attached profile's
//! other paths, such as `/robota`), `/healthz`, `/metrics`,
//! `/console` and the JavaScript client (`/client.js` and the modules it imports). [`CarrierService`] is also what a host mounts in its own
//! hyper or axum server.

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

use super::admission::{admit, query_param, Admission, AdmissionRequest};
use super::connection::{self, Linger};
use super::shared::Shared;

/// The response body type of every carrier response.
pub type Body = Full<Bytes>;

const CONSOLE_HTML: &str = include_str!("../web/console.html");

/// The JavaScript package (`js/`), served file by file with no build step: `/client.js` is its
/// browser entry (it re-exports the whole public API) and imports the others by relative path,
/// so a page resolves them all against the carrier's root.
const CLIENT_MODULES: &[(&str, &str)] = &[
    ("/client.js", include_str!("../../js/client.js")),
    ("/transport.js", include_str!("../../js/transport.js")),
    ("/frames.js", include_str!("../../js/frames.js")),
    ("/errors.js", include_str!("../../js/errors.js")),
    ("/internal.js", include_str!("../../js/internal.js")),
    ("/catalog.js", include_str!("../../js/catalog.js")),
];

/// A `tower::Service` (and hyper service) answering every carrier route, with the same admission
/// as the carrier's own listener. Cheap to clone.
///
/// Mount it on a route of your own server, e.g. with axum:
/// `Router::new().route_service("/agent", transport.service()?)`. The upgrade needs the request's
/// `hyper::upgrade::OnUpgrade` extension, which hyper and axum provide.
#[derive(Clone)]
pub struct CarrierService {
    pub(crate) shared: Arc<Shared>,
}

impl<B: Send + 'static> tower_service::Service<Request<B>> for CarrierService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move { Ok(handle(req, shared)) })
    }
}

impl<B: Send + 'static> hyper::service::Service<Request<B>> for CarrierService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move { Ok(handle(req, shared)) })
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
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

fn head_bytes<B>(req: &Request<B>) -> usize {
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    headers + req.uri().to_string().len()
}

fn handle<B: Send + 'static>(mut req: Request<B>, shared: Arc<Shared>) -> Response<Body> {
    if head_bytes(&req) > MAX_HEAD_BYTES {
        return plain(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request head too large\n",
        );
    }
    if let Some((status, why)) = super::http_strict::check(&req, &shared.policy) {
        let mut response = plain(status, why);
        if status == StatusCode::UPGRADE_REQUIRED {
            // RFC 6455 §4.2.2: name the version this server speaks.
            response
                .headers_mut()
                .insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        }
        return response;
    }
    let path = req.uri().path();
    if path == "/healthz" {
        return text(StatusCode::OK, "application/json", r#"{"status":"ok"}"#);
    }
    // Every other route is behind the Host check (DNS-rebinding defence).
    let host_only = AdmissionRequest {
        host: header(&req, HOST),
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
    // `/`, and the other paths the attached profile upgrades at (`/robota`).
    if let Some(route) = shared.route(path) {
        if !fastwebsockets::upgrade::is_upgrade_request(&req) {
            return plain(
                StatusCode::UPGRADE_REQUIRED,
                "this is a WebSocket endpoint; see /console\n",
            );
        }
        return upgrade(&mut req, shared, route);
    }
    match path {
        "/metrics" => metrics(&req, &shared),
        "/console" => text(StatusCode::OK, "text/html; charset=utf-8", CONSOLE_HTML),
        _ => match CLIENT_MODULES.iter().find(|(route, _)| *route == path) {
            Some((_, module)) => text(StatusCode::OK, "text/javascript", *module),
            None => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
    }
}

fn metrics<B>(req: &Request<B>, shared: &Shared) -> Response<Body> {
    if let Some(expected) = &shared.policy.token {
        let from_query = req.uri().query().and_then(|q| query_param(q, "token"));
        let from_header = header(req, AUTHORIZATION)
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(|t| t.trim().to_string());
        let ok = from_query
            .or(from_header)
            .is_some_and(|t| expected.matches(&t));
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
         # TYPE carrier_inbound_bytes gauge\ncarrier_inbound_bytes {}\n",
        shared.inbound.in_use()
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
    route: &'static str,
) -> Response<Body> {
    let decision = admit(
        &shared.policy,
        &AdmissionRequest {
            host: header(req, HOST),
            origin: header(req, ORIGIN),
            query: req.uri().query(),
            protocols: header(req, SEC_WEBSOCKET_PROTOCOL),
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
