//! What the online loop is told: endpoints, timing, engine tuning. Plain
//! data, filled by `commands::run` from its flags, so this layer does not
//! depend on the command line.

use crate::clients::http::ClientError;
use crate::clients::EndpointConfig;
use crate::engine::model::Config;
use crate::input::histograms::RttForm;
use crate::online::alerts::AlertLinks;
use skeletonhunter_common::web::WebSource;
use skeletonhunter_common::Protocol;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Settings of the online loop (see `skeletonhunter-localizer run --help`
/// for what each means to an operator).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Prometheus-compatible API root.
    pub prometheus: String,
    /// TLS and credentials for Prometheus.
    pub prometheus_http: EndpointConfig,
    /// Alertmanager roots; each gets every alert.
    pub alertmanagers: Vec<String>,
    /// TLS and credentials for every Alertmanager.
    pub alertmanager_http: EndpointConfig,
    /// Address of `/metrics`, `/report`, `/healthz`.
    pub listen: SocketAddr,
    /// Where metrics are served (`--web.telemetry-path`).
    pub telemetry_path: String,
    /// TLS and authentication of that server (`--web.config.file`).
    pub web: Option<Arc<WebSource>>,
    /// Time between cycles.
    pub interval: Duration,
    /// Range of the per-pair aggregates.
    pub window: Duration,
    /// Lookback for node identities and traced hops.
    pub topology_window: Duration,
    /// How long node identities are reused before they are queried again.
    pub topology_refresh: Duration,
    /// `--pair-shards`: the per-pair queries read in this many parts.
    pub pair_shards: usize,
    /// Fewest node identities at which those parts are used (`auto`);
    /// `0`: whenever the node names allow.
    pub pair_shards_min_nodes: usize,
    /// Timeout of each Alertmanager request and of connecting to the store.
    pub timeout: Duration,
    /// Bound of each query (`--query.timeout`); `None`: the larger of
    /// `interval` and `timeout`.
    pub query_timeout: Option<Duration>,
    /// The RTT histogram form (`--histograms`); `None`: `auto`, asked of
    /// the store.
    pub histograms: Option<RttForm>,
    /// Largest Prometheus answer read, in bytes.
    pub max_response: usize,
    /// Most bytes of answers held at once (`--max-cycle-response-size`).
    pub max_cycle_response: usize,
    /// `endsAt` horizon of firing alerts; `None`: 4 × interval, at least 30 s.
    pub alert_ttl: Option<Duration>,
    /// Packet-probe protocols analyzed.
    pub protocols: Vec<Protocol>,
    /// Extra label matchers of every query.
    pub matchers: Option<String>,
    /// `generatorURL` of the alerts.
    pub external_url: String,
    /// Base of the alerts' `runbook_url` (docs/runbooks.md as published).
    pub runbook_url: String,
    /// Grafana root of the alerts' `dashboard_url` ("" for a relative path).
    pub grafana_url: String,
    /// Resolutions queued per unreachable Alertmanager.
    pub queue_capacity: usize,
    /// Consecutive cycles a new finding needs before it fires.
    pub confirm_cycles: u32,
    /// Covered, clean cycles an alerting component needs before it resolves.
    pub resolve_cycles: u32,
    /// `--flap-transitions`: alert fire/resolve transitions within
    /// `flap_window_cycles` that make a component flapping (0: off).
    pub flap_transitions: u32,
    /// `--flap-window-cycles`: the cycles those transitions are counted
    /// over, and the quiet cycles that end flapping.
    pub flap_window_cycles: u32,
    /// Fraction of a component's expected pairs that must have fresh data
    /// for its state to change.
    pub min_coverage: f64,
    /// Exporter scrape interval (margin of the hold after a clear).
    pub scrape_interval: Duration,
    /// Engine tuning.
    pub engine: Config,
    /// One cycle, report on stdout, exit.
    pub once: bool,
}

impl Settings {
    /// How long Alertmanager keeps a firing alert without a re-post.
    pub fn ttl(&self) -> Duration {
        self.alert_ttl
            .unwrap_or_else(|| (self.interval * 4).max(Duration::from_secs(30)))
    }

    /// The bound of each query: `--query.timeout`, else two cycles' budget
    /// (the queries run concurrently; cycles never overlap, so a slow one
    /// delays the next instead of failing), never below `--timeout`.
    pub fn query_timeout(&self) -> Duration {
        self.query_timeout
            .unwrap_or_else(|| (self.interval * 2).max(self.timeout))
    }

    /// Consecutive cycles a finding needs to fire with `shards` in use:
    /// `--confirm-cycles`, and as many more as a sharded reading repeats
    /// (`shards` − 1), so an unsharded fleet confirms as fast as ever.
    pub fn confirm_after(&self, shards: usize) -> u32 {
        self.confirm_cycles.saturating_add(shard_repeats(shards))
    }

    /// How long a cleared component is held before it may fire again with
    /// `shards` in use: the window plus a scrape interval, and the
    /// intervals a sharded reading repeats.
    pub fn clear_hold(&self, shards: usize) -> Duration {
        self.window + self.scrape_interval + self.interval.saturating_mul(shard_repeats(shards))
    }

    /// How long a new finding beneath a component that alerted recently
    /// (and is neither reported nor alerting now) is held with `shards` in
    /// use: a scrape interval and two cycles, by when that component's
    /// return would show on all its pairs; plus the intervals a sharded
    /// reading repeats.
    pub fn recent_hold(&self, shards: usize) -> Duration {
        self.scrape_interval + self.interval.saturating_mul(2 + shard_repeats(shards))
    }

    /// The links every alert carries.
    pub fn alert_links(&self) -> AlertLinks {
        AlertLinks {
            generator_url: self.external_url.clone(),
            runbook_base: self.runbook_url.clone(),
            grafana_base: self.grafana_url.clone(),
        }
    }
}

/// Cycles a sharded reading repeats for after the one that read it.
fn shard_repeats(shards: usize) -> u32 {
    u32::try_from(shards.max(1) - 1).unwrap_or(u32::MAX)
}

/// Why the online loop could not start or (with `once`) had nothing to say.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The Prometheus URL is unusable.
    #[error("--prometheus: {0}")]
    Prometheus(ClientError),
    /// An Alertmanager URL is unusable.
    #[error("--alertmanager: {0}")]
    Alertmanager(ClientError),
    /// A `dns+` Alertmanager URL names no host to look up.
    #[error("--alertmanager: {0}")]
    AlertmanagerDns(crate::clients::dns::DnsUrlError),
    /// Tokio could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The metrics endpoint could not bind.
    #[error("{0}")]
    Listen(String),
    /// `--once` and the cycle's data was unusable.
    #[error("no usable data from {0} this cycle (see the log above)")]
    NoData(String),
}
