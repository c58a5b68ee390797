//! Serving the fleet: every node's `/metrics` at `/node/<index>/metrics`
//! on each of a few loopback ports (through `skeletonhunter_common::http`,
//! the exporter's own server code: limits, content negotiation, gzip), the
//! driver thread that steps the probes, and the byte counts a benchmark
//! prints whatever store scrapes.

use super::sim::Fleet;
use anyhow::{Context, Result};
use hyper::{Method, StatusCode};
use serde::Serialize;
use skeletonhunter_common::http::{self, Limits, Reply, Request};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest request path answered with more than a 404 (`/node/<u32>/metrics`
/// is at most 24 bytes).
const MAX_PATH: usize = 64;

/// Scrape counts of the fleet, shared by every port.
#[derive(Debug)]
pub struct ScrapeStats {
    scrapes: AtomicU64,
    bytes: AtomicU64,
    not_found: AtomicU64,
    /// Body size (before gzip) of each node's last scrape.
    last: Vec<AtomicU64>,
}

/// A snapshot of [`ScrapeStats`] and the driver, as `/-/stats` serves it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatsSnapshot {
    /// Nodes (scrape targets).
    pub nodes: usize,
    /// Directed probe pairs.
    pub pairs: usize,
    /// Node scrapes answered.
    pub scrapes_total: u64,
    /// Exposition bytes served in total, before any gzip.
    pub bytes_total: u64,
    /// Sum of every node's last exposition size: the bytes of one scrape
    /// round of the whole fleet, before any gzip.
    pub round_bytes: u64,
    /// Nodes scraped at least once.
    pub nodes_scraped: usize,
    /// Requests answered 404 (bad paths).
    pub not_found_total: u64,
}

impl ScrapeStats {
    fn new(nodes: usize) -> ScrapeStats {
        ScrapeStats {
            scrapes: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            not_found: AtomicU64::new(0),
            last: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn snapshot(&self, fleet: &Fleet) -> StatsSnapshot {
        let last: Vec<u64> = self
            .last
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        StatsSnapshot {
            nodes: fleet.nodes(),
            pairs: fleet.fabric().pairs.len(),
            scrapes_total: self.scrapes.load(Ordering::Relaxed),
            bytes_total: self.bytes.load(Ordering::Relaxed),
            round_bytes: last.iter().sum(),
            nodes_scraped: last.iter().filter(|&&b| b > 0).count(),
            not_found_total: self.not_found.load(Ordering::Relaxed),
        }
    }
}

/// The node index of a `/node/<index>/metrics` path.
pub fn node_of_path(path: &str) -> Option<usize> {
    if path.len() > MAX_PATH {
        return None;
    }
    let index = path.strip_prefix("/node/")?.strip_suffix("/metrics")?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    index.parse().ok()
}

/// The path node `i` is served at (its `__metrics_path__`).
pub fn node_path(i: usize) -> String {
    format!("/node/{i}/metrics")
}

/// Answer one request: a node's exposition, the stats as JSON, or 404/405.
pub fn handle(fleet: &Fleet, stats: &ScrapeStats, req: &Request) -> Reply {
    if req.method != Method::GET && req.method != Method::HEAD {
        return Reply::method_not_allowed("GET, HEAD");
    }
    if req.path == "/-/stats" {
        let body = serde_json::to_vec(&stats.snapshot(fleet)).unwrap_or_default();
        return Reply::json(body);
    }
    if req.path == "/-/healthy" {
        return Reply::text(StatusCode::OK, "ok\n");
    }
    let Some((i, metrics)) = node_of_path(&req.path).and_then(|i| Some((i, fleet.node(i)?))) else {
        stats.not_found.fetch_add(1, Ordering::Relaxed);
        let shown: String = req.path.chars().take(MAX_PATH).collect();
        return Reply::not_found(&shown);
    };
    let reply = metrics.render(req.accept.as_deref());
    let n = reply.body.len() as u64;
    stats.scrapes.fetch_add(1, Ordering::Relaxed);
    stats.bytes.fetch_add(n, Ordering::Relaxed);
    stats.last[i].store(n, Ordering::Relaxed);
    reply
}

/// The running fleet: its ports, the driver, the stats. Everything stops
/// on drop.
pub struct FleetServer {
    fleet: Arc<Fleet>,
    stats: Arc<ScrapeStats>,
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    runtime: Option<tokio::runtime::Runtime>,
    driver: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for FleetServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetServer")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl FleetServer {
    /// Serve `fleet` on `listen` (port 0: a free one each) and step its
    /// probes every `tick` on a driver thread. Node `i` is a target of
    /// port `i % listen.len()` (any port answers any node).
    pub fn start(fleet: Arc<Fleet>, listen: &[SocketAddr], tick: Duration) -> Result<FleetServer> {
        anyhow::ensure!(!listen.is_empty(), "the fleet needs at least one port");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fleet-http")
            .enable_all()
            .build()
            .context("start the fleet's HTTP runtime")?;
        let stats = Arc::new(ScrapeStats::new(fleet.nodes()));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let mut addrs = Vec::with_capacity(listen.len());
        for &addr in listen {
            let listener = runtime.block_on(http::bind(addr))?;
            addrs.push(listener.local_addr()?);
            let (f, s, mut rx) = (fleet.clone(), stats.clone(), rx.clone());
            // A scraper holds a descriptor per kept-alive target: closing a
            // connection idle for 5 s keeps 28,000 targets scraped every
            // 30 s under a 20,000-descriptor limit, and the connection cap
            // stays above the targets a port serves in those 5 s.
            let limits = Limits {
                max_connections: 4096,
                max_in_flight: 8,
                header_timeout: Duration::from_secs(5),
            };
            let handler = move |req: Request| handle(&f, &s, &req);
            let shutdown = async move {
                let _ = rx.wait_for(|stop| *stop).await;
            };
            runtime.spawn(http::serve_with(listener, handler, limits, shutdown));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (f, s) = (fleet.clone(), stop.clone());
        let driver = std::thread::Builder::new()
            .name("fleet-driver".into())
            .spawn(move || drive(&f, tick, &s))
            .context("start the fleet's driver thread")?;
        Ok(FleetServer {
            fleet,
            stats,
            addrs,
            stop,
            shutdown: Some(tx),
            runtime: Some(runtime),
            driver: Some(driver),
        })
    }

    /// The fleet served.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// The bound addresses, in the order of `listen`.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The address node `i` is a target of.
    pub fn addr_of(&self, i: usize) -> SocketAddr {
        self.addrs[i % self.addrs.len()]
    }

    /// The scrape counts so far.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot(&self.fleet)
    }
}

/// Step `fleet` every `tick` until `stop`; sleeps in short slices so a
/// stop is seen within 100 ms.
fn drive(fleet: &Fleet, tick: Duration, stop: &AtomicBool) {
    let mut next = Instant::now() + tick;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            fleet.step(tick);
            next = (next + tick).max(Instant::now());
            continue;
        }
        std::thread::sleep((next - now).min(Duration::from_millis(100)));
    }
}

impl Drop for FleetServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::sim::FleetSpec;
    use skeletonhunter_exporter::model::HistogramMode;
    use skeletonhunter_localizer::sim::FabricSpec;

    fn get(path: &str, method: Method) -> Request {
        Request {
            method,
            path: path.to_string(),
            query: None,
            accept: None,
        }
    }

    #[test]
    fn nodes_are_served_and_counted_bad_requests_refused() {
        let fleet = Fleet::new(FleetSpec {
            fabric: FabricSpec {
                hosts: 4,
                rails: 2,
                hosts_per_tor: 2,
                ..FabricSpec::default()
            },
            histograms: HistogramMode::Classic,
            probe_rate: 10.0,
            seed: 1,
        });
        let stats = ScrapeStats::new(fleet.nodes());
        let ok = handle(&fleet, &stats, &get("/node/3/metrics", Method::GET));
        assert_eq!(ok.status, StatusCode::OK);
        let node = &fleet.fabric().nodes[3].node;
        let text = String::from_utf8_lossy(&ok.body);
        assert!(text.contains(&format!("src_node=\"{node}\"")), "{text}");
        let bad = "/node/8/metrics".to_string() + &"x".repeat(200);
        for path in ["/node/8/metrics", "/metrics", bad.as_str()] {
            let r = handle(&fleet, &stats, &get(path, Method::GET));
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
            assert!(r.body.len() < 200, "{path}");
        }
        let post = handle(&fleet, &stats, &get("/node/3/metrics", Method::POST));
        assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
        let snap = stats.snapshot(&fleet);
        assert_eq!((snap.scrapes_total, snap.nodes_scraped), (1, 1));
        assert_eq!(snap.round_bytes, ok.body.len() as u64);
        assert_eq!(snap.not_found_total, 3);
    }

    #[test]
    fn paths_are_validated() {
        assert_eq!(node_of_path("/node/0/metrics"), Some(0));
        assert_eq!(node_of_path(&node_path(4711)), Some(4711));
        for bad in [
            "/node//metrics",
            "/node/+1/metrics",
            "/node/-1/metrics",
            "/node/1/metrics/",
            "/node/1",
            "/metrics",
            "/node/99999999999999999999999/metrics",
        ] {
            assert_eq!(node_of_path(bad), None, "{bad}");
        }
        assert_eq!(
            node_of_path(&format!("/node/{}/metrics", "1".repeat(80))),
            None
        );
    }
}
