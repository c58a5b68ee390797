//! Running `skeletonhunter-localizer run` and the stores around it on
//! loopback, for the online tests.

use super::synthetic::FakeFabric;
use crate::exposition::metric_value;
use anyhow::{bail, Result};
use skeletonhunter_tools::process::{bin_path, http_get, wait_until, ChildGuard};
use skeletonhunter_tools::repo::repo_root;
use skeletonhunter_tools::servers::{self, free_loopback_addr, Server, ServerOpts};
use skeletonhunter_tools::sink::Sink;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Which time-series store the localizer queries.
#[derive(Clone, Copy, Debug)]
pub enum Store {
    /// Prometheus from the Debian package.
    Prometheus,
    /// VictoriaMetrics single-node from the Debian package.
    VictoriaMetrics,
}

/// Start `store` on a free loopback port, scraping `fabric` every second.
pub fn start_store(store: Store, fabric: &FakeFabric) -> Result<Server> {
    let opts = ServerOpts::new(free_loopback_addr()?, &fabric.scrape_config());
    match store {
        Store::Prometheus => servers::start_prometheus(opts),
        Store::VictoriaMetrics => servers::start_victoria_metrics(opts),
    }
}

/// Prometheus scraping every node of `fabric` as its own target (see
/// [`FakeFabric::scrape_config_per_node`]).
pub fn start_prometheus_per_node(fabric: &FakeFabric) -> Result<Server> {
    servers::start_prometheus(ServerOpts::new(
        free_loopback_addr()?,
        &fabric.scrape_config_per_node(),
    ))
}

/// Alertmanager with the shipped configuration (routes, grouping,
/// inhibition, templates), its receivers pointed at `sink`; group waits
/// shortened to 1 s and, when given, the group interval to `group_interval`.
pub fn start_shipped_alertmanager(sink: &Sink, group_interval: Option<&str>) -> Result<Server> {
    let root = repo_root();
    let mut config = std::fs::read_to_string(root.join("alertmanager/alertmanager.yml"))?
        .replace("127.0.0.1:9095", &sink.addr.to_string())
        .replace("group_wait: 10s", "group_wait: 1s")
        .replace("group_wait: 30s", "group_wait: 1s");
    if let Some(gi) = group_interval {
        config = config
            .replace("group_interval: 1m", &format!("group_interval: {gi}"))
            .replace("group_interval: 5m", &format!("group_interval: {gi}"));
    }
    if !config.contains(&sink.addr.to_string()) {
        bail!("the shipped alertmanager.yml no longer has the 127.0.0.1:9095 placeholder");
    }
    let mut opts = ServerOpts::new(free_loopback_addr()?, &config);
    for entry in std::fs::read_dir(root.join("alertmanager/templates"))? {
        let p = entry?.path();
        let name = format!(
            "templates/{}",
            p.file_name().unwrap_or_default().to_string_lossy()
        );
        opts = opts.copy_file(&name, &p)?;
    }
    servers::start_alertmanager(opts)
}

/// An Alertmanager config that groups at once and notifies nobody.
pub const AM_CONFIG: &str = "route:\n  receiver: 'null'\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: 'null'\n";

/// Start Alertmanager on `addr` with a config that only holds alerts.
pub fn start_alertmanager(addr: SocketAddr) -> Result<Server> {
    servers::start_alertmanager(ServerOpts::new(addr, AM_CONFIG))
}

/// The localizer under test, with a 1 s cycle over a 5 s window.
pub struct Localizer {
    /// The process, for its log and liveness.
    pub child: ChildGuard,
    listen: SocketAddr,
}

/// A wrapper for [`Localizer::start_behind`]: the command runs in its own
/// mount namespace with `hosts` bind-mounted on `/etc/hosts`, so a name can
/// stand for several loopback addresses (as a headless Service's name
/// stands for its pods) without touching the machine's own file. Needs root.
pub fn with_hosts_file(hosts: &std::path::Path) -> Vec<String> {
    [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
    ]
    .map(String::from)
    .into_iter()
    .chain([hosts.display().to_string()])
    .collect()
}

impl Localizer {
    /// Start `run` against `prometheus` (and `alertmanager`, a comma list,
    /// if given) and wait for its `/healthz`.
    pub fn start(prometheus: &str, alertmanager: Option<&str>) -> Result<Localizer> {
        Self::start_with(prometheus, alertmanager, &[])
    }

    /// [`Localizer::start`] with `extra` flags (e.g. the endpoints' http
    /// config files).
    pub fn start_with(
        prometheus: &str,
        alertmanager: Option<&str>,
        extra: &[String],
    ) -> Result<Localizer> {
        let mut args = Self::cadence();
        if let Some(am) = alertmanager {
            args.extend(["--alertmanager".to_string(), am.to_string()]);
        }
        args.extend_from_slice(extra);
        Self::start_args(prometheus, &args)
    }

    /// The test cadence: a 1 s cycle over a 5 s window, 1 s scrapes, 2 s
    /// requests.
    pub fn cadence() -> Vec<String> {
        [
            "--interval",
            "1s",
            "--window",
            "5s",
            // The stores here scrape every second (the hold after a clear
            // is window + scrape interval).
            "--scrape-interval",
            "1s",
            "--timeout",
            "2s",
        ]
        .map(String::from)
        .to_vec()
    }

    /// `run` against `prometheus` with exactly `args` besides the listen
    /// address (no test defaults: the benchmark sets its own cadence).
    pub fn start_args(prometheus: &str, args: &[String]) -> Result<Localizer> {
        Self::start_behind(&[], prometheus, args)
    }

    /// [`Localizer::start_args`] run behind `wrap` (a command that ends by
    /// running its arguments, e.g. [`with_hosts_file`]).
    pub fn start_behind(wrap: &[String], prometheus: &str, args: &[String]) -> Result<Localizer> {
        let listen = free_loopback_addr()?;
        let bin = bin_path("skeletonhunter-localizer");
        let mut cmd = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        cmd.args(["run", "--prometheus", prometheus, "--web.listen-address"]);
        cmd.arg(listen.to_string());
        cmd.args(args);
        cmd.env("RUST_LOG", "info");
        // ChildGuard names its log file after the name: keep it unique
        // across the tests of this binary, which run in parallel.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!("localizer-{}", N.fetch_add(1, Ordering::Relaxed));
        let mut child = ChildGuard::spawn(&name, cmd)?;
        // A localizer that refused its flags exits at once: stop waiting
        // then, and say so with its log, rather than that /healthz never
        // answered.
        let up = wait_until(
            "localizer /healthz",
            Duration::from_secs(10),
            Duration::from_millis(100),
            || {
                let healthy = || {
                    http_get(listen, "/healthz", Duration::from_secs(2))
                        .is_ok_and(|(s, _)| s == 200)
                };
                (child.check_running().is_err() || healthy()).then_some(())
            },
        );
        child.check_running()?;
        up?;
        Ok(Localizer { child, listen })
    }

    /// Where its HTTP server listens.
    pub fn addr(&self) -> SocketAddr {
        self.listen
    }

    /// `method path` on its HTTP server: (status, body).
    pub fn request(&self, method: &str, path: &str) -> Result<(u16, String)> {
        skeletonhunter_tools::http::http_request(
            self.listen,
            method,
            path,
            None,
            Duration::from_secs(2),
        )
    }

    /// Its `/metrics` text (empty when unreachable).
    pub fn metrics(&self) -> String {
        http_get(self.listen, "/metrics", Duration::from_secs(2))
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Value of the first sample whose line starts with `series`.
    pub fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.metrics(), series)
    }

    /// Its reads of the per-pair series so far, from one `/metrics`:
    /// (every pair, one shard of `--pair-shards`).
    pub fn pair_reads(&self) -> (f64, f64) {
        let m = self.metrics();
        let n = |read: &str| {
            let series = format!("skeletonhunter_localizer_pair_reads_total{{read=\"{read}\"}}");
            metric_value(&m, &series).unwrap_or(0.0)
        };
        (n("all"), n("shard"))
    }

    /// Its last report (`/report`), once a cycle has made one.
    pub fn report(&self) -> Option<serde_json::Value> {
        let (code, body) = self.request("GET", "/report").ok()?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    }
}

/// What one `run --once` gave.
#[derive(Debug, Clone)]
pub struct OnceRun {
    /// Its JSON report (the `analyze` shape).
    pub report: serde_json::Value,
    /// How long the run took.
    pub took: Duration,
    /// Its log (warnings such as pairs left out).
    pub stderr: String,
}

/// One `skeletonhunter-localizer run --once` against the store at `url`
/// with `--window window` and `extra` flags.
pub fn run_once(url: &str, window: &str, extra: &[&str]) -> Result<OnceRun> {
    let start = std::time::Instant::now();
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .args(["run", "--once", "--prometheus", url, "--window", window])
        .args(extra)
        .output()?;
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!("run --once against {url} failed ({}): {stderr}", out.status);
    }
    let report = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("run --once printed no JSON ({e}); stderr: {stderr}"))?;
    Ok(OnceRun {
        report,
        took,
        stderr,
    })
}
