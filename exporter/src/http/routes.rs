//! The HTTP endpoints: `/metrics` and `/healthz`.

use crate::metrics::Metrics;
use hyper::{Method, StatusCode};
use skeletonhunter_common::http::{Reply, Request};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Readiness: true while the exporter is probing.
#[derive(Clone, Default)]
pub struct Health(Arc<AtomicBool>);

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }
}

pub fn handler(
    metrics: Arc<Metrics>,
    health: Health,
) -> impl Fn(Request) -> Reply + Send + Sync + 'static {
    move |req: Request| {
        if req.method != Method::GET && req.method != Method::HEAD {
            return Reply::text(StatusCode::METHOD_NOT_ALLOWED, "only GET is supported\n");
        }
        match req.path.as_str() {
            "/metrics" => metrics.render(req.accept.as_deref()),
            "/healthz" => {
                if health.0.load(Ordering::Relaxed) {
                    Reply::text(StatusCode::OK, "ok\n")
                } else {
                    Reply::text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                }
            }
            "/" => Reply::text(
                StatusCode::OK,
                "skeletonhunter-exporter: see /metrics and /healthz\n",
            ),
            p => Reply::not_found(p),
        }
    }
}
