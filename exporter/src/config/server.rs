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

fn at_least_one(key: &str, n: usize) -> Result<usize, ConfigError> {
    if n == 0 {
        return Err(ConfigError::invalid(key, "must be at least 1"));
    }
    Ok(n)
}
