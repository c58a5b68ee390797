//! Running `skeletonhunter-localizer run` and the stores around it on
//! loopback, for the online tests.

use super::synthetic::FakeFabric;
use crate::exposition::metric_value;
use crate::process::{bin_path, http_get, wait_until, ChildGuard};
use crate::servers::{self, free_loopback_addr, Server, ServerOpts};
use anyhow::Result;
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

/// An Alertmanager config that groups at once and notifies nobody.
const AM_CONFIG: &str = "route:\n  receiver: 'null'\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: 'null'\n";

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

impl Localizer {
    /// Start `run` against `prometheus` (and `alertmanager`, a comma list,
    /// if given) and wait for its `/healthz`.
    pub fn start(prometheus: &str, alertmanager: Option<&str>) -> Result<Localizer> {
        let listen = free_loopback_addr()?;
        let mut cmd = Command::new(bin_path("skeletonhunter-localizer"));
        cmd.args([
            "run",
            "--prometheus",
            prometheus,
            "--listen",
            &listen.to_string(),
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
        ]);
        if let Some(am) = alertmanager {
            cmd.args(["--alertmanager", am]);
        }
        cmd.env("RUST_LOG", "info");
        // ChildGuard names its log file after the name: keep it unique
        // across the tests of this binary, which run in parallel.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!("localizer-{}", N.fetch_add(1, Ordering::Relaxed));
        let mut child = ChildGuard::spawn(&name, cmd)?;
        wait_until(
            "localizer /healthz",
            Duration::from_secs(10),
            Duration::from_millis(100),
            || {
                http_get(listen, "/healthz", Duration::from_secs(1))
                    .ok()
                    .filter(|(s, _)| *s == 200)
            },
        )?;
        child.check_running()?;
        Ok(Localizer { child, listen })
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
}
