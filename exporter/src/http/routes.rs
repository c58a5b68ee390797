//! Routing, the readiness flag and the reload hook. `POST /trace` starts
//! a path trace (rate limited); every other endpoint but `/-/reload` is
//! GET or HEAD. `/-/healthy`: the
//! process is up; `/-/ready` (and the older `/healthz`): probing and
//! discovery have started and the exporter is not stopping.

use crate::pathtrace;
use crate::telemetry::Metrics;
use hyper::{Method, StatusCode};
use skeletonhunter_common::http::{Reply, Request};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Readiness: true while the exporter is probing.
#[derive(Clone, Default)]
pub struct Health(Arc<AtomicBool>);

impl Health {
    /// Report ready (probing) or not (starting, stopping).
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }

    fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A configuration reload, triggered by `POST /-/reload` (the app
/// implements it; the HTTP layer only calls it). `Ok` and `Err` carry the
/// text answered to the client.
pub trait Reload: Send + Sync {
    /// Load and apply the configuration again.
    fn reload(&self) -> Result<String, String>;
}

/// What the handlers read.
#[derive(Clone)]
pub struct State {
    /// Renders `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Answers `/healthz`.
    pub health: Health,
    /// Serves `/trace` and `/traces`.
    pub tracing: Arc<pathtrace::Context>,
    /// Rate limit of `POST /trace`.
    pub trace_limit: Arc<pathtrace::http::OnDemand>,
    /// Serves `POST /-/reload`; `None`: 503.
    pub reload: Option<Arc<dyn Reload>>,
}

/// The exporter's request handler.
pub fn handler(state: State) -> impl Fn(Request) -> Reply + Send + Sync + 'static {
    move |req: Request| route(&state, &req)
}

fn route(state: &State, req: &Request) -> Reply {
    if req.path == "/-/reload" {
        return reload(state, req);
    }
    if let Some(r) = pathtrace::http::handle(&state.tracing, &state.trace_limit, req) {
        return r;
    }
    if req.method != Method::GET && req.method != Method::HEAD {
        return Reply::method_not_allowed("GET, HEAD");
    }
    match req.path.as_str() {
        "/metrics" => state.metrics.render(req.accept.as_deref()),
        "/-/healthy" => Reply::text(StatusCode::OK, "healthy\n"),
        "/healthz" | "/-/ready" => {
            if state.health.is_ready() {
                Reply::text(StatusCode::OK, "ok\n")
            } else {
                Reply::text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
            }
        }
        "/" => Reply::text(
            StatusCode::OK,
            "skeletonhunter-exporter: see /metrics, /-/healthy, /-/ready (/healthz), POST /-/reload\n",
        ),
        p => Reply::not_found(p),
    }
}

/// `POST` (or `PUT`) `/-/reload`, as Prometheus: 200 when the new
/// configuration was applied, 500 with the reason when it was refused.
fn reload(state: &State, req: &Request) -> Reply {
    if req.method != Method::POST && req.method != Method::PUT {
        return Reply::text(StatusCode::METHOD_NOT_ALLOWED, "use POST to reload\n");
    }
    match &state.reload {
        None => Reply::text(StatusCode::SERVICE_UNAVAILABLE, "not started\n"),
        Some(r) => match r.reload() {
            Ok(msg) => Reply::text(StatusCode::OK, msg),
            Err(msg) => Reply::text(StatusCode::INTERNAL_SERVER_ERROR, msg),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::PeerSet;
    use crate::probe::PeerInfo;

    fn state() -> State {
        let metrics = Arc::new(Metrics::new(&Default::default()));
        State {
            metrics: metrics.clone(),
            health: Health::default(),
            tracing: Arc::new(pathtrace::Context::detached(
                PeerSet::new(None),
                PeerInfo::new(metrics, None),
                Vec::new(),
            )),
            reload: None,
            trace_limit: Arc::default(),
        }
    }

    fn req(method: Method, path: &str) -> Request {
        Request {
            method,
            path: path.into(),
            query: Some("target=198.18.9.9".into()),
            accept: None,
        }
    }

    #[test]
    fn every_route_but_trace_and_reload_is_get_only() {
        let s = state();
        for path in ["/metrics", "/healthz", "/traces", "/"] {
            let r = route(&s, &req(Method::POST, path));
            assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
            assert_eq!(r.headers[0].1, "GET, HEAD", "{path}");
        }
        let r = route(&s, &req(Method::GET, "/trace"));
        assert_eq!(
            r.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "starting a trace is a POST"
        );
        assert_eq!(r.headers[0].1, "POST");
        assert_eq!(
            route(&s, &req(Method::POST, "/trace")).status,
            StatusCode::NOT_FOUND,
            "not a peer"
        );
        assert_eq!(
            route(&s, &req(Method::GET, "/healthz")).status,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn health_endpoints_tell_up_from_ready() {
        let s = state();
        let get = |p: &str| route(&s, &req(Method::GET, p)).status;
        assert_eq!(get("/-/healthy"), StatusCode::OK);
        assert_eq!(get("/-/ready"), StatusCode::SERVICE_UNAVAILABLE);
        s.health.set_ready(true);
        assert_eq!(get("/-/ready"), StatusCode::OK);
        assert_eq!(get("/healthz"), StatusCode::OK);
        assert_eq!(get("/-/reload"), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            route(&s, &req(Method::POST, "/-/reload")).status,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
