//! `POST /trace?target=ADDR[&flow=N]` (start a trace of a skeleton peer's
//! probe flow N, default 0) and `GET /traces` (the last traces as JSON).
//! Starting a trace sends packets, so it is a POST (no link, crawler or
//! prefetch starts one), sits behind the server's authentication like every
//! endpoint, and is rate limited by [`OnDemand`] (429 beyond it).

use super::context::Context;
use super::tracer::{Start, TraceReason};
use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
use skeletonhunter_common::http::{Reply, Request as HttpRequest};
use skeletonhunter_common::ratelimit::TokenBucket;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// On-demand traces started per minute at most, on average.
pub const ON_DEMAND_PER_MINUTE: u32 = 6;
/// On-demand traces that may start back to back.
pub const ON_DEMAND_BURST: u32 = 3;

/// The rate limit of on-demand traces: a token bucket of
/// [`ON_DEMAND_PER_MINUTE`] with a burst of [`ON_DEMAND_BURST`]. A token
/// is taken only when a trace is about to start, so refused requests
/// (bad target, not a peer) do not use up the budget.
#[derive(Debug)]
pub struct OnDemand(Mutex<TokenBucket>);

impl Default for OnDemand {
    fn default() -> Self {
        OnDemand::new(ON_DEMAND_PER_MINUTE, ON_DEMAND_BURST)
    }
}

impl OnDemand {
    /// `per_minute` traces a minute, `burst` back to back.
    pub fn new(per_minute: u32, burst: u32) -> OnDemand {
        let bucket = TokenBucket::new(per_minute, Duration::from_secs(60), burst, Instant::now());
        OnDemand(Mutex::new(bucket))
    }

    /// Take a token now, or the time until one is there.
    fn take(&self) -> Result<(), Duration> {
        let mut b = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        if b.take(now) {
            Ok(())
        } else {
            Err(b.wait(now))
        }
    }
}

/// A `/trace` query without a usable `target`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetQueryError {
    /// No query string at all.
    #[error("missing query: use /trace?target=<IPv4 address>")]
    NoQuery,
    /// No `target=` parameter.
    #[error("missing target parameter: use /trace?target=<IPv4 address>")]
    NoTarget,
    /// `target=` is not an IPv4 address.
    #[error("target={0:?} is not an IPv4 address")]
    NotIpv4(String),
    /// `flow=` is not a flow index of this exporter.
    #[error("flow={0:?} is not a probe flow (0..{1})")]
    BadFlow(String, usize),
}

/// The `flow` parameter of `/trace`: 0 when absent, else below `flows`.
pub fn parse_flow_query(query: Option<&str>, flows: usize) -> Result<usize, TargetQueryError> {
    let Some(v) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|p| p.strip_prefix("flow="))
    else {
        return Ok(0);
    };
    v.parse::<usize>()
        .ok()
        .filter(|f| *f < flows)
        .ok_or_else(|| TargetQueryError::BadFlow(v.to_string(), flows))
}

/// Parse the `target` parameter of `/trace?target=ADDR`.
pub fn parse_target_query(query: Option<&str>) -> Result<Ipv4Addr, TargetQueryError> {
    let q = query.ok_or(TargetQueryError::NoQuery)?;
    for pair in q.split('&') {
        if let Some(v) = pair.strip_prefix("target=") {
            return v
                .parse::<Ipv4Addr>()
                .map_err(|_| TargetQueryError::NotIpv4(v.to_string()));
        }
    }
    Err(TargetQueryError::NoTarget)
}

/// `POST /trace?target=ADDR` (start a trace to a skeleton peer) and
/// `GET /traces` (the last traces as JSON), each 405 with `Allow` for
/// other methods; `None` for other paths.
pub fn handle(ctx: &Context, limit: &OnDemand, req: &HttpRequest) -> Option<Reply> {
    let read = req.method == Method::GET || req.method == Method::HEAD;
    match req.path.as_str() {
        "/traces" if read => Some(Reply::json(ctx.tracer.to_json())),
        "/traces" => Some(Reply::method_not_allowed("GET, HEAD")),
        "/trace" if req.method != Method::POST => Some(Reply::method_not_allowed("POST")),
        "/trace" => {
            let parsed = parse_target_query(req.query.as_deref())
                .and_then(|t| Ok((t, parse_flow_query(req.query.as_deref(), ctx.flow_count())?)));
            let (target, flow) = match parsed {
                Ok(t) => t,
                Err(e) => return Some(Reply::text(StatusCode::BAD_REQUEST, format!("{e}\n"))),
            };
            // Only skeleton peers: the endpoint must not turn the
            // exporter into a packet generator towards arbitrary hosts.
            let peer = ctx
                .peers
                .snapshot()
                .into_iter()
                .find(|p| p.addr == IpAddr::V4(target));
            let Some(peer) = peer else {
                return Some(Reply::text(
                    StatusCode::NOT_FOUND,
                    format!("{target} is not a skeleton peer of this exporter\n"),
                ));
            };
            let Some(r) = ctx.request(&peer, flow, TraceReason::OnDemand) else {
                return Some(Reply::text(
                    StatusCode::BAD_REQUEST,
                    "only IPv4 peers can be traced\n",
                ));
            };
            if let Err(wait) = limit.take() {
                let secs = wait.as_secs().max(1).to_string();
                return Some(
                    Reply::text(
                        StatusCode::TOO_MANY_REQUESTS,
                        format!("on-demand traces are limited to {ON_DEMAND_PER_MINUTE} a minute; retry in {secs} s\n"),
                    )
                    .with_header(
                        hyper::header::RETRY_AFTER,
                        HeaderValue::from_str(&secs).unwrap_or(HeaderValue::from_static("10")),
                    ),
                );
            }
            let started = ctx.tracer.start(r);
            let body = serde_json::json!({
                "target": target.to_string(),
                "flow": flow,
                "status": started.as_str(),
                "results": "/traces",
            });
            let status = match started {
                Start::Busy => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::ACCEPTED,
            };
            Some(Reply::new(status, "application/json", body.to_string()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::PeerSet;
    use crate::probe::PeerInfo;
    use crate::telemetry::Metrics;
    use std::sync::Arc;

    #[test]
    fn target_query_parsing() {
        assert_eq!(
            parse_target_query(Some("target=198.18.2.2")),
            Ok(Ipv4Addr::new(198, 18, 2, 2))
        );
        assert_eq!(
            parse_target_query(Some("x=1&target=10.0.0.1")),
            Ok(Ipv4Addr::new(10, 0, 0, 1))
        );
        assert!(parse_target_query(None)
            .unwrap_err()
            .to_string()
            .contains("target"));
        assert!(parse_target_query(Some("target=nope"))
            .unwrap_err()
            .to_string()
            .contains("\"nope\""));
        assert!(parse_target_query(Some("foo=bar")).is_err());
        assert_eq!(parse_flow_query(Some("target=1.2.3.4"), 4), Ok(0));
        assert_eq!(parse_flow_query(Some("target=1.2.3.4&flow=3"), 4), Ok(3));
        for bad in ["flow=4", "flow=-1", "flow=x"] {
            let e = parse_flow_query(Some(bad), 4).unwrap_err().to_string();
            assert!(e.contains("flow=") && e.contains("0..4"), "{e}");
        }
    }

    #[test]
    fn http_routes_validate_before_tracing() {
        use hyper::{Method, StatusCode};
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let ctx = Context::detached(
            PeerSet::new(None),
            PeerInfo::new(metrics, None),
            vec![40000, 40001],
        );
        let req = |method: Method, path: &str, query: Option<&str>| HttpRequest {
            method,
            path: path.into(),
            query: query.map(str::to_string),
            accept: None,
        };
        let limit = OnDemand::default();
        let post = |path, query| handle(&ctx, &limit, &req(Method::POST, path, query)).unwrap();
        let r = post("/trace", Some("target=1.2.3"));
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&r.body).contains("1.2.3"));
        let r = post("/trace", Some("target=198.18.9.9"));
        assert_eq!(r.status, StatusCode::NOT_FOUND, "not a peer: never traced");
        let r = post("/trace", Some("target=198.18.9.9&flow=2"));
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "two flows: 0 and 1");
        let get = |path, query| handle(&ctx, &limit, &req(Method::GET, path, query)).unwrap();
        let r = get("/traces", None);
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(&r.body[..], br#"{"traces":[]}"#);
        let r = get("/trace", Some("target=198.18.9.9"));
        assert_eq!(
            r.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "GET never starts a trace"
        );
        assert_eq!(r.headers[0].1, "POST");
        assert_eq!(post("/traces", None).status, StatusCode::METHOD_NOT_ALLOWED);
        assert!(handle(&ctx, &limit, &req(Method::GET, "/metrics", None)).is_none());
    }

    #[test]
    fn on_demand_traces_are_rate_limited() {
        let limit = OnDemand::new(1, 2);
        assert!(limit.take().is_ok() && limit.take().is_ok(), "the burst");
        let wait = limit.take().unwrap_err();
        assert!(
            wait > Duration::from_secs(50) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
    }
}
