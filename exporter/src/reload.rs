//! Reloading the configuration on SIGHUP or `POST /-/reload` without a
//! restart and without losing the series of peers that stay.
//!
//! What a reload applies: the peers (`discovery.static`, `--peers`,
//! `discovery.dns`, `discovery.tor_mesh`): the static list is republished
//! and the DNS and ToR-mesh sources are restarted; a peer present before
//! and after keeps its counters and histograms, since the scheduler only
//! forgets peers that leave. The identity's topology fields (`tor`,
//! `spine`, `pod`, `tenant`, from the file or the topology map, which is
//! read again) replace `skeletonhunter_node_info`. What needs a restart
//! (the running value is kept and the reload logs the keys): listen and
//! responder addresses, the HTTP limits, `identity.node`, `nic` and
//! `host`, probe timing, protocols, ports and size, and traffic discovery. A new configuration that does not load is refused
//! whole: the old one stays, the reason is logged, and
//! `skeletonhunter_config_last_reload_successful` drops to 0.
//!
//! `POST /-/reload` needs no authentication without a web configuration,
//! so each kind of reload line is logged at most once a minute, the next
//! one saying how many were not: a flood of reloads cannot flood the log.

use crate::config::identity::{apply_reloadable, restart_fields_differ};
use crate::config::{Args, Config, ConfigError};
use crate::discovery::{registry, PeerSet};
use crate::http::Reload;
use crate::telemetry::{Metrics, Repeats, Verdict};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// The running configuration and the tasks of its reloadable sources.
struct Running {
    cfg: Config,
    sources: JoinSet<()>,
}

/// Loads the configuration again from the same arguments and applies it.
pub struct Reloader {
    args: Args,
    peers: PeerSet,
    metrics: Arc<Metrics>,
    running: Mutex<Running>,
    /// Reload log lines: each kind once a minute, the rest counted.
    log: Mutex<Repeats>,
}

impl Reloader {
    /// Start the reloadable sources of `cfg` (loaded from `args`); must be
    /// called inside the runtime.
    pub fn start(args: Args, cfg: Config, peers: PeerSet, metrics: Arc<Metrics>) -> Reloader {
        let mut sources = JoinSet::new();
        registry::start_configured(&cfg, &peers, &metrics, &mut sources, std::future::pending);
        publish_identity(&cfg, &metrics);
        metrics.config_loaded(true);
        Reloader {
            args,
            peers,
            metrics,
            running: Mutex::new(Running { cfg, sources }),
            log: Mutex::new(Repeats::new(Duration::from_secs(60))),
        }
    }

    /// Stop the reloadable sources (at shutdown).
    pub fn stop(&self) {
        if let Ok(mut r) = self.running.lock() {
            r.sources.abort_all();
        }
    }

    /// Load and apply the configuration; on error the running one stays.
    pub fn reload_now(&self) -> Result<Vec<&'static str>, ConfigError> {
        let loaded = Config::load(&self.args);
        let Ok(mut running) = self.running.lock() else {
            return Err(ConfigError::invalid("reload", "state poisoned"));
        };
        let new = match loaded {
            Ok(c) => c,
            Err(e) => {
                if let Some(n) = self.to_log("reload failed") {
                    tracing::error!(
                        "configuration reload failed, keeping the running one: {e:#} \
                         (and {n} more reloads in the last minute)"
                    );
                }
                self.metrics.config_loaded(false);
                return Err(e);
            }
        };
        let restart = needs_restart(&running.cfg, &new);
        if !restart.is_empty() && self.to_log("restart needed").is_some() {
            tracing::warn!(keys = ?restart, "changed in the configuration but applied only by a restart");
        }
        let mut applied = running.cfg.clone();
        applied.static_peers = new.static_peers;
        applied.dns = new.dns;
        applied.tor_mesh = new.tor_mesh;
        (applied.identity, applied.identity_origin) = apply_reloadable(
            (&running.cfg.identity, &running.cfg.identity_origin),
            (&new.identity, &new.identity_origin),
        );
        publish_identity(&applied, &self.metrics);
        let mut sources = JoinSet::new();
        registry::start_configured(
            &applied,
            &self.peers,
            &self.metrics,
            &mut sources,
            std::future::pending,
        );
        // Dropping the old set aborts the old sources; their slots stay
        // until the new ones publish.
        running.sources = sources;
        running.cfg = applied;
        self.metrics.config_loaded(true);
        if let Some(more) = self.to_log("reloaded") {
            tracing::info!(
                static_peers = running.cfg.static_peers.len(),
                dns = running.cfg.dns.len(),
                tor_mesh = running.cfg.tor_mesh.is_some(),
                tor = %running.cfg.identity.tor,
                "configuration reloaded (and {more} more times in the last minute)"
            );
        }
        Ok(restart)
    }

    /// Whether to log a reload line of `kind` now: `Some(count)` of those
    /// of the last minute that were not.
    fn to_log(&self, kind: &'static str) -> Option<u64> {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match log.hit(kind, Instant::now()) {
            Verdict::Log { repeated } => Some(repeated),
            Verdict::Suppress => None,
        }
    }
}

impl Reload for Reloader {
    fn reload(&self) -> Result<String, String> {
        match self.reload_now() {
            Ok(keys) if keys.is_empty() => Ok("configuration reloaded\n".into()),
            Ok(keys) => Ok(format!(
                "configuration reloaded; changes to {} need a restart\n",
                keys.join(", ")
            )),
            Err(e) => Err(format!("{e:#}\n")),
        }
    }
}

/// Publish the identity and where its fields came from; warn when the
/// topology map has no entry for this host (once per load).
fn publish_identity(cfg: &Config, metrics: &Metrics) {
    metrics.set_identity(&cfg.identity);
    metrics.set_identity_sources(&cfg.identity_origin.sources);
    if let Some(w) = cfg.identity_origin.warning() {
        tracing::warn!("{w}");
    }
}

/// Keys that differ between `old` and `new` but a reload does not apply.
pub fn needs_restart(old: &Config, new: &Config) -> Vec<&'static str> {
    let checks: [(&'static str, bool); 15] = [
        ("listen", old.listen != new.listen),
        ("--http-*", old.http != new.http),
        ("responder.udp", old.udp_listen != new.udp_listen),
        ("responder.tcp", old.tcp_listen != new.tcp_listen),
        (
            "responder.allow, allow_peers, rate_limit",
            old.responder != new.responder,
        ),
        (
            "identity.node, nic, host",
            restart_fields_differ(&old.identity, &new.identity),
        ),
        ("probe.interval", old.interval != new.interval),
        ("probe.timeout", old.timeout != new.timeout),
        ("probe.protocols", old.protocols != new.protocols),
        ("probe.udp_port", old.udp_port != new.udp_port),
        ("probe.tcp_port", old.tcp_port != new.tcp_port),
        ("probe.udp_size", old.udp_size != new.udp_size),
        ("probe.{ecmp_width,flows,flow_*}", old.flows != new.flows),
        ("metrics.histograms", old.histograms != new.histograms),
        (
            "discovery.ebpf",
            format!("{:?}", old.ebpf) != format!("{:?}", new.ebpf),
        ),
    ];
    checks
        .into_iter()
        .filter(|(_, d)| *d)
        .map(|(k, _)| k)
        .collect()
}
