//! A synthetic scrape target standing in for a fleet of exporters: a small
//! fabric whose probe counters advance with wall time, with a switchable
//! fault on one component. Real stores scrape it exactly as they scrape
//! exporters, so the localizer sees real PromQL results (`increase()`
//! extrapolation, staleness and all) without namespaces or root.

use anyhow::{Context, Result};
use skeletonhunter_common::topology::{path, Component, Identity};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// UDP probes per second on every pair.
pub const PROBE_RATE: f64 = 200.0;
/// TCP dials per UDP probe (10 dials per second).
const DIALS_PER_PROBE: f64 = 0.05;

/// The counters of one directed pair, advanced with wall time.
struct PairCounters {
    src: Identity,
    dst: Identity,
    sent: f64,
    lost: f64,
    /// RTT histogram bucket counts (cumulative at render time).
    received: f64,
    rtt_seconds: f64,
    /// TCP dials (the exporter counts them as `protocol="tcp"` probes).
    dials: f64,
    dial_failures: f64,
    last_dial_ok: bool,
    dial_budget: f64,
}

/// The synthetic fabric behind the scrape target.
struct FabricState {
    nodes: Vec<Identity>,
    pairs: Vec<PairCounters>,
    /// (component, loss fraction) applied to every pair crossing it; at 1.0
    /// the path is cut and TCP dials fail too (below 1.0 TCP retransmits).
    fault: Option<(Component, f64)>,
    last: Instant,
}

impl FabricState {
    /// Advance every counter to now: whole probes only, so counters stay
    /// integers as a real exporter's do.
    fn advance(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        let n = (dt * PROBE_RATE).floor();
        if n < 1.0 {
            return;
        }
        self.last += Duration::from_secs_f64(n / PROBE_RATE);
        for p in &mut self.pairs {
            let loss = match &self.fault {
                Some((c, f)) if path(&p.src, &p.dst).contains(c) => *f,
                _ => 0.0,
            };
            let lost = (n * loss).round();
            p.sent += n;
            p.lost += lost;
            p.received += n - lost;
            p.dial_budget += n * DIALS_PER_PROBE;
            let dials = p.dial_budget.floor();
            p.dial_budget -= dials;
            if dials > 0.0 {
                p.dials += dials;
                p.last_dial_ok = loss < 1.0;
                if !p.last_dial_ok {
                    p.dial_failures += dials;
                }
            }
        }
    }

    /// The exposition a real exporter fleet would give: node_info, then the
    /// probe counters, then the RTT histogram; with `only`, just what that
    /// node's own exporter would serve (its identity and the pairs it probes).
    fn render(&self, only: Option<&str>) -> String {
        let mine = |node: &str| only.is_none_or(|n| n == node);
        let pairs: Vec<&PairCounters> = self.pairs.iter().filter(|p| mine(&p.src.node)).collect();
        let mut o = String::new();
        o.push_str("# HELP skeletonhunter_node_info Identity of this exporter.\n# TYPE skeletonhunter_node_info gauge\n");
        for n in self.nodes.iter().filter(|n| mine(&n.node)) {
            let labels: Vec<String> = n
                .labels()
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let _ = writeln!(o, "skeletonhunter_node_info{{{}}} 1", labels.join(","));
        }
        render_counters(&pairs, &mut o);
        render_rtt(&pairs, &mut o);
        o
    }
}

/// Sent, lost, dial failures and last dial success of `pairs`.
fn render_counters(pairs: &[&PairCounters], o: &mut String) {
    o.push_str("# HELP skeletonhunter_probe_sent_total Probes sent.\n# TYPE skeletonhunter_probe_sent_total counter\n");
    for p in pairs {
        let _ = writeln!(
            o,
            "skeletonhunter_probe_sent_total{{{}}} {}",
            p.labels("udp"),
            p.sent
        );
        let _ = writeln!(
            o,
            "skeletonhunter_probe_sent_total{{{}}} {}",
            p.labels("tcp"),
            p.dials
        );
    }
    o.push_str("# HELP skeletonhunter_probe_lost_total Probes lost.\n# TYPE skeletonhunter_probe_lost_total counter\n");
    for p in pairs {
        let _ = writeln!(
            o,
            "skeletonhunter_probe_lost_total{{{}}} {}",
            p.labels("udp"),
            p.lost
        );
        let _ = writeln!(
            o,
            "skeletonhunter_probe_lost_total{{{}}} {}",
            p.labels("tcp"),
            p.dial_failures
        );
    }
    o.push_str("# HELP skeletonhunter_probe_dial_failures_total Failed TCP dials.\n# TYPE skeletonhunter_probe_dial_failures_total counter\n");
    for p in pairs {
        let _ = writeln!(
            o,
            "skeletonhunter_probe_dial_failures_total{{{}}} {}",
            p.labels("tcp"),
            p.dial_failures
        );
    }
    o.push_str("# HELP skeletonhunter_probe_dial_success Last TCP dial succeeded.\n# TYPE skeletonhunter_probe_dial_success gauge\n");
    for p in pairs {
        let _ = writeln!(
            o,
            "skeletonhunter_probe_dial_success{{{}}} {}",
            p.labels("tcp"),
            u8::from(p.last_dial_ok)
        );
    }
}

/// The UDP RTT histogram: every answered probe in the bucket of the
/// pair's fixed RTT.
fn render_rtt(pairs: &[&PairCounters], o: &mut String) {
    o.push_str("# HELP skeletonhunter_probe_rtt_seconds Probe RTT.\n# TYPE skeletonhunter_probe_rtt_seconds histogram\n");
    for p in pairs {
        let pl = p.labels("udp");
        let mut le = 1e-6;
        for _ in 0..24 {
            let c = if p.rtt_seconds <= le { p.received } else { 0.0 };
            let _ = writeln!(
                o,
                "skeletonhunter_probe_rtt_seconds_bucket{{{pl},le=\"{le:e}\"}} {c}"
            );
            le *= 2.0;
        }
        let _ = writeln!(
            o,
            "skeletonhunter_probe_rtt_seconds_bucket{{{pl},le=\"+Inf\"}} {}",
            p.received
        );
        let _ = writeln!(
            o,
            "skeletonhunter_probe_rtt_seconds_sum{{{pl}}} {}",
            p.received * p.rtt_seconds
        );
        let _ = writeln!(
            o,
            "skeletonhunter_probe_rtt_seconds_count{{{pl}}} {}",
            p.received
        );
    }
}

impl PairCounters {
    /// A healthy pair with no probes yet.
    fn new(src: &Identity, dst: &Identity, rtt_seconds: f64) -> PairCounters {
        PairCounters {
            src: src.clone(),
            dst: dst.clone(),
            sent: 0.0,
            lost: 0.0,
            received: 0.0,
            rtt_seconds,
            dials: 0.0,
            dial_failures: 0.0,
            last_dial_ok: true,
            dial_budget: 0.0,
        }
    }

    /// The pair's label set for `protocol`.
    fn labels(&self, protocol: &str) -> String {
        format!(
            "src_node=\"{}\",dst_node=\"{}\",protocol=\"{protocol}\"",
            self.src.node, self.dst.node
        )
    }
}

/// The scrape target: an HTTP server on loopback answering every request
/// with the fabric's current exposition.
pub struct FakeFabric {
    addr: SocketAddr,
    state: Arc<Mutex<FabricState>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeFabric {
    /// 2 ToRs (t1, t2) under spine s1, 3 hosts per ToR, one node per host,
    /// every node probing every other; served on a free loopback port.
    pub fn start() -> Result<FakeFabric> {
        let nodes = identities();
        let mut pairs = Vec::new();
        for a in &nodes {
            for b in &nodes {
                if a.node != b.node {
                    let rtt = if a.tor == b.tor { 12e-6 } else { 20e-6 };
                    pairs.push(PairCounters::new(a, b, rtt));
                }
            }
        }
        let state = Arc::new(Mutex::new(FabricState {
            nodes,
            pairs,
            fault: None,
            last: Instant::now(),
        }));
        let listener = TcpListener::bind("127.0.0.1:0").context("bind fake fabric")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || serve(&listener, &st, &sp));
        Ok(FakeFabric {
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// Apply `fault` (a component and the loss fraction on every pair
    /// crossing it; 1.0 also fails TCP dials), or clear it with `None`.
    pub fn set_fault(&self, fault: Option<(Component, f64)>) {
        let mut g = self.state.lock().unwrap();
        g.advance();
        g.fault = fault;
    }

    /// A scrape config with one job per node, each scraping only what that
    /// node's exporter would serve (`?node=`), as Prometheus scrapes a real
    /// fleet: the targets' scrapes are staggered, so after a gap some
    /// nodes' series are back before others'.
    pub fn scrape_config_per_node(&self) -> String {
        let mut out = "global:\n  scrape_interval: 1s\nscrape_configs:\n".to_string();
        for n in &self.state.lock().unwrap().nodes {
            let _ = write!(
                out,
                "  - job_name: skeletonhunter-{0}\n    scrape_interval: 1s\n    params:\n      node: ['{0}']\n    static_configs:\n      - targets: ['{1}']\n",
                n.node, self.addr
            );
        }
        out
    }

    /// A scrape config for this target (VictoriaMetrics rejects unknown
    /// keys such as `evaluation_interval`, so that is left to the caller).
    pub fn scrape_config(&self) -> String {
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: skeletonhunter\n    scrape_interval: 1s\n    static_configs:\n      - targets: ['{}']\n",
            self.addr
        )
    }
}

impl Drop for FakeFabric {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The nodes of the fake fabric: `n<tor><host>` on host `host<tor><host>`
/// under ToR `t<tor>`, all under spine `s1`, pod `p1`, tenant `job-a`.
fn identities() -> Vec<Identity> {
    let mut nodes = Vec::new();
    for t in 1..=2 {
        for h in 1..=3 {
            nodes.push(Identity {
                node: format!("n{t}{h}"),
                nic: format!("198.18.{t}.{h}"),
                host: format!("host{t}{h}"),
                tor: format!("t{t}"),
                spine: "s1".into(),
                pod: "p1".into(),
                tenant: "job-a".into(),
            });
        }
    }
    nodes
}

/// Answer every request on `listener` with the current exposition until
/// `stop` is set.
fn serve(listener: &TcpListener, state: &Mutex<FabricState>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                let mut req = Vec::new();
                // Read the request head (scrapes have no body).
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&req);
                let only = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|target| target.split_once("?node="))
                    .map(|(_, n)| n.to_string());
                let body = {
                    let mut g = state.lock().unwrap();
                    g.advance();
                    g.render(only.as_deref())
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
