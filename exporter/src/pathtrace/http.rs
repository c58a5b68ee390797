//! `/trace?target=ADDR[&flow=N]` (start a trace of a skeleton peer's probe
//! flow N, default 0) and `/traces` (the last traces as JSON). The HTTP layer applies the method check
//! before calling [`handle`].

use super::context::Context;
use super::tracer::{Start, TraceReason};
use hyper::StatusCode;
use skeletonhunter_common::http::{Reply, Request as HttpRequest};
use std::net::{IpAddr, Ipv4Addr};

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

/// `/trace?target=ADDR` (start a trace to a skeleton peer) and
/// `/traces` (the last traces as JSON); `None` for other paths.
pub fn handle(ctx: &Context, req: &HttpRequest) -> Option<Reply> {
    match req.path.as_str() {
        "/traces" => Some(Reply::json(ctx.tracer.to_json())),
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
        let req = |path: &str, query: Option<&str>| HttpRequest {
            method: Method::GET,
            path: path.into(),
            query: query.map(str::to_string),
            accept: None,
        };
        let r = handle(&ctx, &req("/trace", Some("target=1.2.3"))).unwrap();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&r.body).contains("1.2.3"));
        let r = handle(&ctx, &req("/trace", Some("target=198.18.9.9"))).unwrap();
        assert_eq!(r.status, StatusCode::NOT_FOUND, "not a peer: never traced");
        let r = handle(&ctx, &req("/trace", Some("target=198.18.9.9&flow=2"))).unwrap();
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "two flows: 0 and 1");
        let r = handle(&ctx, &req("/traces", None)).unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(&r.body[..], br#"{"traces":[]}"#);
        assert!(handle(&ctx, &req("/metrics", None)).is_none());
    }
}
