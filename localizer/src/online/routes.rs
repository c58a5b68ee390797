//! The localizer's HTTP endpoints and its reload.
//!
//! `/-/healthy` (and the older `/healthz`): the process is up and serving.
//! `/-/ready`: the last cycle that analyzed complete data ended within two
//! intervals (503 before the first one and while Prometheus is unusable), so
//! a load balancer or an orchestrator can tell a localizer that localizes
//! from one that only runs. `POST /-/reload` and SIGHUP reload what can be
//! reloaded: the localizer is configured by flags alone, so nothing is
//! re-read; the request is logged and counted as a successful reload, and
//! the process lives on.

use super::metrics::unix_now;
use super::metrics::Metrics;
use super::status::Board;
use hyper::{Method, StatusCode};
use skeletonhunter_common::http::{Reply, Request};
use std::sync::Arc;
use std::time::Duration;

/// What a reload says when it has nothing to re-read.
const NOTHING_TO_RELOAD: &str = "nothing to reload: the localizer is configured by its flags alone, which stay as started (restart it to change them)";

/// Reload on `trigger` (`SIGHUP`, `POST /-/reload`): re-read what can be
/// re-read — today nothing — log it and record the reload as successful.
pub fn reload(metrics: &Metrics, trigger: &str) -> Result<String, String> {
    tracing::info!("{trigger}: {NOTHING_TO_RELOAD}");
    loaded(metrics);
    Ok(format!("{NOTHING_TO_RELOAD}\n"))
}

/// Record a successful load: at start, and every reload (Prometheus'
/// convention: the reload gauge is 1 once the first load succeeded).
/// Written at once, not with a cycle: a reload is no part of one.
pub fn loaded(metrics: &Metrics) {
    metrics.reload_successful.set(1);
    metrics.reload_success_time.set(unix_now());
}

/// Whether the localizer is ready: a cycle analyzed complete data within
/// `2 × interval`.
pub fn is_ready(metrics: &Metrics, interval: Duration) -> bool {
    metrics.since_cycle_ok().is_some_and(|d| d <= interval * 2)
}

/// The HTTP handler: metrics at `telemetry_path` (`--web.telemetry-path`),
/// `/report` (last analysis JSON), `/jobs` (the last usable cycle's jobs,
/// JSON), `/-/healthy` (`/healthz`), `/-/ready`,
/// `POST /-/reload`, and the status page at `/` (from `board`, which
/// links to the others).
pub fn handler(
    metrics: Arc<Metrics>,
    board: Arc<Board>,
    interval: Duration,
    telemetry_path: String,
) -> impl Fn(Request) -> Reply + Send + Sync + 'static {
    move |req: Request| match req.path.as_str() {
        p if p == telemetry_path => metrics.encode(req.accept.as_deref()),
        "/-/healthy" | "/healthz" => Reply::text(StatusCode::OK, "healthy\n"),
        "/-/ready" => ready(&metrics, interval),
        "/-/reload" => {
            if req.method != Method::POST && req.method != Method::PUT {
                return Reply::text(StatusCode::METHOD_NOT_ALLOWED, "use POST to reload\n");
            }
            match reload(&metrics, "POST /-/reload") {
                Ok(msg) => Reply::text(StatusCode::OK, msg),
                Err(msg) => Reply::text(StatusCode::INTERNAL_SERVER_ERROR, msg),
            }
        }
        "/report" => Reply::json(metrics.report()),
        "/jobs" => board.jobs(),
        "/" => board.page(),
        other => Reply::not_found(other),
    }
}

fn ready(metrics: &Metrics, interval: Duration) -> Reply {
    if is_ready(metrics, interval) {
        return Reply::text(StatusCode::OK, "ready\n");
    }
    let why = match metrics.since_cycle_ok() {
        None => "not ready: no cycle has analyzed complete data yet\n".to_string(),
        Some(d) => format!(
            "not ready: the last cycle that analyzed complete data ended {:.0}s ago (more than 2 x --interval)\n",
            d.as_secs_f64()
        ),
    };
    Reply::text(StatusCode::SERVICE_UNAVAILABLE, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> Arc<Board> {
        Arc::new(Board::new(super::super::status::PageInfo {
            telemetry_path: "/metrics".into(),
            ..Default::default()
        }))
    }

    fn req(method: Method, p: &str) -> Request {
        Request {
            method,
            path: p.into(),
            query: None,
            accept: None,
        }
    }

    #[test]
    fn handler_routes() {
        let m = Arc::new(Metrics::new());
        m.set_report("{\"faults\":[]}".into());
        let h = handler(m, board(), Duration::from_secs(10), "/metrics".into());
        assert_eq!(h(req(Method::GET, "/metrics")).status, StatusCode::OK);
        assert_eq!(&h(req(Method::GET, "/report")).body[..], b"{\"faults\":[]}");
        assert_eq!(h(req(Method::GET, "/nope")).status, StatusCode::NOT_FOUND);
        let jobs = h(req(Method::GET, "/jobs"));
        assert_eq!(jobs.content_type, "application/json");
        assert_eq!(&jobs.body[..], b"{\"at\":null,\"jobs\":[],\"omitted\":0}");
        let page = h(req(Method::GET, "/"));
        assert_eq!(page.content_type, "text/html; charset=utf-8");
        assert!(String::from_utf8_lossy(&page.body).contains("<a href=\"/metrics\">"));
    }

    #[test]
    fn health_tells_up_from_ready() {
        let m = Arc::new(Metrics::new());
        let interval = Duration::from_millis(50);
        let h = handler(m.clone(), board(), interval, "/metrics".into());
        let get = |p: &str| h(req(Method::GET, p)).status;
        assert_eq!(get("/-/healthy"), StatusCode::OK);
        assert_eq!(get("/healthz"), StatusCode::OK);
        assert_eq!(get("/-/ready"), StatusCode::SERVICE_UNAVAILABLE);
        m.mark_cycle_ok();
        assert_eq!(get("/-/ready"), StatusCode::OK);
        // No successful cycle for more than two intervals: not ready again.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while get("/-/ready") == StatusCode::OK {
            assert!(std::time::Instant::now() < deadline, "still ready");
            std::thread::yield_now();
        }
        assert!(m.since_cycle_ok().unwrap() > interval * 2);
        let body = h(req(Method::GET, "/-/ready")).body;
        assert!(String::from_utf8_lossy(&body).contains("ago"));
        assert_eq!(get("/-/healthy"), StatusCode::OK);
    }

    #[test]
    fn reload_is_post_only_and_recorded() {
        let m = Arc::new(Metrics::new());
        let h = handler(
            m.clone(),
            board(),
            Duration::from_secs(10),
            "/metrics".into(),
        );
        assert_eq!(
            h(req(Method::GET, "/-/reload")).status,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(m.reload_successful.get(), 0);
        let r = h(req(Method::POST, "/-/reload"));
        assert_eq!(r.status, StatusCode::OK);
        assert!(String::from_utf8_lossy(&r.body).contains("nothing to reload"));
        assert_eq!(m.reload_successful.get(), 1);
        assert!(m.reload_success_time.get() > 0.0);
    }
}
