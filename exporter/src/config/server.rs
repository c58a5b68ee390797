//! The HTTP server's bounds (`--http-*` flags): connections, requests in
//! flight, header and idle time; and its web configuration
//! (`--web.config.file`).

use super::args::Args;
use super::error::ConfigError;
use skeletonhunter_common::duration;
use skeletonhunter_common::http::Limits;
use skeletonhunter_common::web::WebSource;
use std::sync::Arc;
use std::time::Duration;

/// `--web.config.file`, loaded (so a bad file stops the start with exit 2).
pub(super) fn web_config(args: &Args) -> Result<Option<Arc<WebSource>>, ConfigError> {
    match &args.web_config_file {
        Some(path) => Ok(Some(Arc::new(WebSource::open(path)?))),
        None => Ok(None),
    }
}

/// `--http-max-connections`, `--http-max-in-flight`, `--http-header-timeout`.
pub(super) fn http_limits(args: &Args) -> Result<Limits, ConfigError> {
    let mut limits = Limits::default();
    if let Some(n) = args.http_max_connections {
        limits.max_connections = at_least_one("--http-max-connections", n)?;
    }
    if let Some(n) = args.http_max_in_flight {
        limits.max_in_flight = at_least_one("--http-max-in-flight", n)?;
    }
    if let Some(v) = &args.http_header_timeout {
        let key = "--http-header-timeout";
        let d = duration::parse(v).map_err(|e| ConfigError::invalid(key, e))?;
        if d < Duration::from_millis(100) {
            return Err(ConfigError::invalid(key, "must be at least 100ms"));
        }
        limits.header_timeout = d;
    }
    Ok(limits)
}

/// The share of the open-file limit the HTTP server may hold: a quarter.
/// The rest is the reserve for probing (TCP dials, sockets), discovery and
/// path tracing, so no number of HTTP clients can make a probe fail here.
pub fn http_connection_cap(nofile: u64) -> usize {
    usize::try_from(nofile / 4).unwrap_or(usize::MAX).max(1)
}

/// Default of `--web.telemetry-path`.
pub const DEFAULT_TELEMETRY_PATH: &str = "/metrics";

/// Paths the exporter serves itself, which metrics cannot take over.
const RESERVED_PATHS: [&str; 7] = [
    "/",
    "/-/healthy",
    "/-/ready",
    "/-/reload",
    "/healthz",
    "/trace",
    "/traces",
];

/// `--web.telemetry-path`: an absolute path that no other endpoint uses.
pub(super) fn telemetry_path(args: &Args) -> Result<String, ConfigError> {
    let key = "--web.telemetry-path";
    let p = args
        .web_telemetry_path
        .as_deref()
        .unwrap_or(DEFAULT_TELEMETRY_PATH)
        .trim();
    if !p.starts_with('/') || p.contains(['?', '#', ' ']) {
        return Err(ConfigError::invalid(
            key,
            format!("{p:?} is not an absolute URL path (e.g. /metrics)"),
        ));
    }
    if RESERVED_PATHS.contains(&p) {
        return Err(ConfigError::invalid(
            key,
            format!("{p:?} is already an endpoint of the exporter"),
        ));
    }
    Ok(p.to_string())
}

fn at_least_one(key: &str, n: usize) -> Result<usize, ConfigError> {
    if n == 0 {
        return Err(ConfigError::invalid(key, "must be at least 1"));
    }
    Ok(n)
}
