//! `skeletonhunter-localizer run` and `rules` against real servers: Prometheus,
//! VictoriaMetrics and Alertmanager from the Debian packages, on loopback.
//!
//! The probe data comes from a scrape target served by the test itself: a
//! small fabric (2 ToRs under one spine, 3 hosts each, one container per
//! host, full-mesh skeleton) whose counters advance with wall time, with a
//! switchable packet loss on every pair crossing one ToR. The stores scrape it
//! exactly as they would scrape exporters, so the localizer sees real PromQL
//! results (`increase()` extrapolation, staleness and all), and the alerts it
//! posts are checked in Alertmanager's own API.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_common::topology::{path, Component, Identity, Kind};
use skeletonhunter_tests::servers::{self, free_loopback_addr, Server, ServerOpts};
use skeletonhunter_tests::{bin_path, http_get, wait_until, ChildGuard};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// UDP probes per second on every pair.
const PROBE_RATE: f64 = 200.0;
/// TCP dials per UDP probe (10 dials per second).
const DIALS_PER_PROBE: f64 = 0.05;
const ALERT: &str = "SkeletonHunterComponentFaulty";

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

    fn render(&self) -> String {
        let mut o = String::new();
        let pl = |p: &PairCounters| {
            format!(
                "src_node=\"{}\",dst_node=\"{}\",protocol=\"udp\"",
                p.src.node, p.dst.node
            )
        };
        let tcp = |p: &PairCounters| {
            format!(
                "src_node=\"{}\",dst_node=\"{}\",protocol=\"tcp\"",
                p.src.node, p.dst.node
            )
        };
        o.push_str("# HELP skeletonhunter_node_info Identity of this exporter.\n# TYPE skeletonhunter_node_info gauge\n");
        for n in &self.nodes {
            let labels: Vec<String> = n
                .labels()
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let _ = writeln!(o, "skeletonhunter_node_info{{{}}} 1", labels.join(","));
        }
        o.push_str("# HELP skeletonhunter_probe_sent_total Probes sent.\n# TYPE skeletonhunter_probe_sent_total counter\n");
        for p in &self.pairs {
            let _ = writeln!(o, "skeletonhunter_probe_sent_total{{{}}} {}", pl(p), p.sent);
            let _ = writeln!(
                o,
                "skeletonhunter_probe_sent_total{{{}}} {}",
                tcp(p),
                p.dials
            );
        }
        o.push_str("# HELP skeletonhunter_probe_lost_total Probes lost.\n# TYPE skeletonhunter_probe_lost_total counter\n");
        for p in &self.pairs {
            let _ = writeln!(o, "skeletonhunter_probe_lost_total{{{}}} {}", pl(p), p.lost);
            let _ = writeln!(
                o,
                "skeletonhunter_probe_lost_total{{{}}} {}",
                tcp(p),
                p.dial_failures
            );
        }
        o.push_str("# HELP skeletonhunter_probe_dial_failures_total Failed TCP dials.\n# TYPE skeletonhunter_probe_dial_failures_total counter\n");
        for p in &self.pairs {
            let _ = writeln!(
                o,
                "skeletonhunter_probe_dial_failures_total{{{}}} {}",
                tcp(p),
                p.dial_failures
            );
        }
        o.push_str("# HELP skeletonhunter_probe_dial_success Last TCP dial succeeded.\n# TYPE skeletonhunter_probe_dial_success gauge\n");
        for p in &self.pairs {
            let _ = writeln!(
                o,
                "skeletonhunter_probe_dial_success{{{}}} {}",
                tcp(p),
                u8::from(p.last_dial_ok)
            );
        }
        o.push_str("# HELP skeletonhunter_probe_rtt_seconds Probe RTT.\n# TYPE skeletonhunter_probe_rtt_seconds histogram\n");
        for p in &self.pairs {
            let mut le = 1e-6;
            for _ in 0..24 {
                let c = if p.rtt_seconds <= le { p.received } else { 0.0 };
                let _ = writeln!(
                    o,
                    "skeletonhunter_probe_rtt_seconds_bucket{{{},le=\"{le:e}\"}} {c}",
                    pl(p)
                );
                le *= 2.0;
            }
            let _ = writeln!(
                o,
                "skeletonhunter_probe_rtt_seconds_bucket{{{},le=\"+Inf\"}} {}",
                pl(p),
                p.received
            );
            let _ = writeln!(
                o,
                "skeletonhunter_probe_rtt_seconds_sum{{{}}} {}",
                pl(p),
                p.received * p.rtt_seconds
            );
            let _ = writeln!(
                o,
                "skeletonhunter_probe_rtt_seconds_count{{{}}} {}",
                pl(p),
                p.received
            );
        }
        o
    }
}

/// The scrape target: an HTTP server on loopback answering every request
/// with the fabric's current exposition.
struct FakeFabric {
    addr: SocketAddr,
    state: Arc<Mutex<FabricState>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeFabric {
    /// 2 ToRs (t1, t2) under spine s1, 3 hosts per ToR, one node per host.
    fn start() -> Result<FakeFabric> {
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
        let mut pairs = Vec::new();
        for a in &nodes {
            for b in &nodes {
                if a.node != b.node {
                    let rtt = if a.tor == b.tor { 12e-6 } else { 20e-6 };
                    pairs.push(PairCounters {
                        src: a.clone(),
                        dst: b.clone(),
                        sent: 0.0,
                        lost: 0.0,
                        received: 0.0,
                        rtt_seconds: rtt,
                        dials: 0.0,
                        dial_failures: 0.0,
                        last_dial_ok: true,
                        dial_budget: 0.0,
                    });
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
        let thread = std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
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
                        let body = {
                            let mut g = st.lock().unwrap();
                            g.advance();
                            g.render()
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
        });
        Ok(FakeFabric {
            addr,
            state,
            stop,
            thread: Some(thread),
        })
    }

    fn set_fault(&self, fault: Option<(Component, f64)>) {
        let mut g = self.state.lock().unwrap();
        g.advance();
        g.fault = fault;
    }

    /// A scrape config for this target (VictoriaMetrics rejects unknown
    /// keys such as `evaluation_interval`, so that is left to the caller).
    fn scrape_config(&self) -> String {
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

#[derive(Clone, Copy, Debug)]
enum Store {
    Prometheus,
    VictoriaMetrics,
}

fn start_store(store: Store, fabric: &FakeFabric) -> Result<Server> {
    let opts = ServerOpts::new(free_loopback_addr()?, &fabric.scrape_config());
    match store {
        Store::Prometheus => servers::start_prometheus(opts),
        Store::VictoriaMetrics => servers::start_victoria_metrics(opts),
    }
}

const AM_CONFIG: &str = "route:\n  receiver: 'null'\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: 'null'\n";

fn start_alertmanager(addr: SocketAddr) -> Result<Server> {
    servers::start_alertmanager(ServerOpts::new(addr, AM_CONFIG))
}

/// The localizer under test, with a 1 s cycle over a 5 s window.
struct Localizer {
    child: ChildGuard,
    listen: SocketAddr,
}

impl Localizer {
    fn start(prometheus: &str, alertmanager: Option<&str>) -> Result<Localizer> {
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

    fn metrics(&self) -> String {
        http_get(self.listen, "/metrics", Duration::from_secs(2))
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Value of the first sample whose line starts with `series`.
    fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.metrics(), series)
    }
}

fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Alertmanager's active SkeletonHunter alerts.
fn sh_alerts(am: &Server) -> Result<Vec<Value>> {
    Ok(am
        .alerts()?
        .into_iter()
        .filter(|a| {
            a["labels"]["alertname"]
                .as_str()
                .is_some_and(|n| n.starts_with("SkeletonHunter"))
                && a["status"]["state"] == "active"
        })
        .collect())
}

fn describe(alerts: &[Value]) -> String {
    alerts
        .iter()
        .map(|a| a["labels"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_component(a: &Value, kind: &str, id: &str) -> bool {
    a["labels"]["kind"] == kind && a["labels"]["component"] == id
}

/// Wait for the alert of `kind/id`, failing at once if another component is
/// alerted meanwhile.
fn wait_for_only_alert(am: &Server, kind: &str, id: &str, timeout: Duration) -> Result<Value> {
    let mut alerts = wait_for_alerts_among(am, &[(kind, id)], |_| true, timeout)?;
    Ok(alerts.swap_remove(0))
}

/// Wait until the active alerts satisfy `done`, failing at once if a
/// component outside `allowed` is alerted meanwhile.
fn wait_for_alerts_among(
    am: &Server,
    allowed: &[(&str, &str)],
    done: impl Fn(&[Value]) -> bool,
    timeout: Duration,
) -> Result<Vec<Value>> {
    let deadline = Instant::now() + timeout;
    loop {
        let alerts = sh_alerts(am)?;
        if alerts
            .iter()
            .any(|a| !allowed.iter().any(|(k, i)| is_component(a, k, i)))
        {
            bail!(
                "a component outside {allowed:?} was alerted:\n{}",
                describe(&alerts)
            );
        }
        if !alerts.is_empty() && done(&alerts) {
            return Ok(alerts);
        }
        if Instant::now() > deadline {
            bail!(
                "alerts for {allowed:?} not as expected within {timeout:?}; have:\n{}",
                describe(&alerts)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn tor(id: &str) -> Component {
    Component::new(Kind::Tor, id)
}

/// The whole online story on one store: healthy, one faulty ToR alerted with
/// evidence and nothing else, the alert resolved after the fault clears.
fn fault_is_alerted_and_resolved(store: Store) -> Result<()> {
    let fabric = FakeFabric::start()?;
    let db = start_store(store, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let loc = Localizer::start(&db.url(), Some(&am.url()))?;

    // Healthy: cycles succeed on real data and nothing is alerted.
    wait_until(
        "a successful cycle with all 30 pairs",
        Duration::from_secs(25),
        Duration::from_millis(250),
        || (loc.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )
    .with_context(|| format!("store {store:?}; localizer log:\n{}", loc.child.log()))?;
    std::thread::sleep(Duration::from_secs(2));
    let alerts = sh_alerts(&am)?;
    assert!(
        alerts.is_empty(),
        "healthy fabric alerted:\n{}",
        describe(&alerts)
    );
    assert!(
        loc.metric("skeletonhunter_localizer_last_success_timestamp_seconds")
            .unwrap_or(0.0)
            > 1e9
    );

    // 30% loss on every pair crossing ToR t1.
    let injected = Instant::now();
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let alert = wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(30))
        .with_context(|| format!("store {store:?}; localizer log:\n{}", loc.child.log()))?;
    println!(
        "{store:?}: tor t1 alerted {:.1?} after injection",
        injected.elapsed()
    );
    let l = &alert["labels"];
    assert_eq!(l["alertname"], ALERT);
    assert_eq!(l["symptom"], "loss", "{l}");
    assert_eq!(l["severity"], "critical", "{l}");
    assert_eq!(l["tor"], "t1", "{l}");
    assert_eq!(l["spine"], "s1", "{l}");
    assert_eq!(l["src_tor"], "t1", "{l}");
    assert_eq!(l["dst_tor"], "t1", "{l}");
    let an = &alert["annotations"];
    let pairs: usize = an["pairs"].as_str().unwrap_or("0").parse()?;
    assert!((2..=24).contains(&pairs), "pairs annotation {an}");
    let score: f64 = an["score"].as_str().unwrap_or("nan").parse()?;
    // Early on the window still dilutes the loss; the score is only positive.
    assert!(score > 0.0 && score <= 1.0, "score annotation {an}");
    let p: f64 = an["p_value"].as_str().unwrap_or("nan").parse()?;
    assert!(p < 1e-3, "p_value annotation {an}");
    assert!(
        an["summary"].as_str().unwrap_or("").contains("tor t1"),
        "{an}"
    );
    assert!(
        an["evidence"].as_str().unwrap_or("").contains("% loss"),
        "{an}"
    );

    // Blame metrics agree, and the alert is re-posted while the fault lasts.
    wait_until(
        "faulty metric for tor t1",
        Duration::from_secs(5),
        Duration::from_millis(200),
        || {
            (loc.metric("skeletonhunter_component_faulty{kind=\"tor\",id=\"t1\"}") == Some(1.0))
                .then_some(())
        },
    )?;
    let first_update = alert["updatedAt"].as_str().unwrap_or("").to_string();
    std::thread::sleep(Duration::from_secs(4));
    let again = wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(1))?;
    assert_ne!(
        again["updatedAt"].as_str().unwrap_or(""),
        first_update,
        "alert not re-posted"
    );
    assert_eq!(
        again["startsAt"], alert["startsAt"],
        "startsAt must not move while firing"
    );
    // Once the window holds only faulty time, the score is the ToR's loss.
    let score: f64 = again["annotations"]["score"]
        .as_str()
        .unwrap_or("nan")
        .parse()?;
    assert!(
        (0.2..=0.4).contains(&score),
        "re-posted score {score}, injected 0.3"
    );

    // Clear: the alert resolves (Alertmanager drops it from its active list).
    let cleared = Instant::now();
    fabric.set_fault(None);
    wait_until(
        "the t1 alert to resolve",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || {
            let alerts = sh_alerts(&am).ok()?;
            assert!(
                alerts.iter().all(|a| is_component(a, "tor", "t1")),
                "other component alerted while clearing:\n{}",
                describe(&alerts)
            );
            alerts.is_empty().then_some(())
        },
    )
    .with_context(|| format!("store {store:?}; localizer log:\n{}", loc.child.log()))?;
    println!(
        "{store:?}: resolved {:.1?} after the fault cleared",
        cleared.elapsed()
    );
    let (_, am_metrics) = am.get("/metrics")?;
    assert!(
        metric_value(
            &am_metrics,
            "alertmanager_alerts_received_total{status=\"resolved\",version=\"v2\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "Alertmanager never received the resolution"
    );
    Ok(())
}

#[test]
fn prometheus_fault_is_alerted_and_resolved() -> Result<()> {
    fault_is_alerted_and_resolved(Store::Prometheus)
}

#[test]
fn victoriametrics_fault_is_alerted_and_resolved() -> Result<()> {
    fault_is_alerted_and_resolved(Store::VictoriaMetrics)
}

/// A container cut off entirely (every probe lost, every dial failing) is
/// alerted as unreachable. With one container per host, the container, its
/// NIC and its host are crossed by the same pairs, so any one of them may be
/// named (the others listed as equivalent); nothing else may be.
#[test]
fn isolated_container_is_alerted_unreachable() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let prom = start_store(Store::Prometheus, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    wait_until(
        "a successful cycle with all 30 pairs",
        Duration::from_secs(25),
        Duration::from_millis(250),
        || (loc.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )?;
    let injected = Instant::now();
    fabric.set_fault(Some((Component::new(Kind::Node, "n23"), 1.0)));
    let allowed = [("node", "n23"), ("nic", "198.18.2.3"), ("host", "host23")];
    let alerts = wait_for_alerts_among(
        &am,
        &allowed,
        |alerts| {
            alerts
                .iter()
                .any(|a| a["labels"]["symptom"] == "unreachable")
        },
        Duration::from_secs(30),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    println!(
        "isolated n23 alerted unreachable {:.1?} after injection:\n{}",
        injected.elapsed(),
        describe(&alerts)
    );
    let a = alerts
        .iter()
        .find(|a| a["labels"]["symptom"] == "unreachable")
        .context("unreachable alert")?;
    assert_eq!(a["labels"]["severity"], "critical");
    assert_eq!(a["labels"]["tor"], "t2", "{}", a["labels"]);
    // The two components it could not be told apart from are named.
    let named = format!(
        "{}/{},{}",
        a["labels"]["kind"].as_str().unwrap_or(""),
        a["labels"]["component"].as_str().unwrap_or(""),
        a["annotations"]["equivalent"].as_str().unwrap_or("")
    );
    for (k, i) in allowed {
        assert!(
            named.contains(&format!("{k}/{i}")),
            "{k}/{i} not in {named}"
        );
    }
    assert!(
        a["annotations"]["evidence"]
            .as_str()
            .unwrap_or("")
            .contains("got no answer"),
        "{}",
        a["annotations"]
    );
    fabric.set_fault(None);
    wait_until(
        "the alerts to resolve",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || sh_alerts(&am).ok()?.is_empty().then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    Ok(())
}

#[test]
fn unreachable_prometheus_is_logged_and_alerts_nothing() -> Result<()> {
    let am = start_alertmanager(free_loopback_addr()?)?;
    // Nothing listens on 127.0.0.2 (our servers bind 127.0.0.1), so a free
    // port there cannot be taken by a server of a test running in parallel.
    let dead = format!("http://127.0.0.2:{}", free_loopback_addr()?.port());
    let mut loc = Localizer::start(&dead, Some(&am.url()))?;
    wait_until(
        "three failed cycles",
        Duration::from_secs(15),
        Duration::from_millis(250),
        || {
            (loc.metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")? >= 3.0)
                .then_some(())
        },
    )?;
    loc.child.check_running()?;
    let log = loc.child.log();
    assert!(
        log.contains(&format!("cannot reach {dead}/api/v1/query")),
        "log does not name the unreachable URL:\n{log}"
    );
    let m = loc.metrics();
    assert!(
        metric_value(
            &m,
            "skeletonhunter_localizer_query_errors_total{query=\"sent\",reason=\"unreachable\"}"
        )
        .unwrap_or(0.0)
            >= 3.0,
        "{m}"
    );
    assert_eq!(
        metric_value(
            &m,
            "skeletonhunter_localizer_last_success_timestamp_seconds"
        ),
        Some(0.0)
    );
    assert!(sh_alerts(&am)?.is_empty());
    let (_, am_metrics) = am.get("/metrics")?;
    assert_eq!(
        metric_value(
            &am_metrics,
            "alertmanager_alerts_received_total{status=\"firing\",version=\"v2\"}"
        ),
        Some(0.0),
        "the localizer posted alerts without data"
    );
    Ok(())
}

#[test]
fn prometheus_outage_holds_alerts_without_raising_or_clearing() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let mut prom = start_store(Store::Prometheus, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let mut loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    fabric.set_fault(Some((tor("t2"), 0.3)));
    wait_for_only_alert(&am, "tor", "t2", Duration::from_secs(30))
        .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    // Prometheus goes away; the fault clears where nobody can see it.
    prom.stop()?;
    fabric.set_fault(None);
    let failed_before = loc
        .metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")
        .unwrap_or(0.0);
    wait_until(
        "four failed cycles",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            (loc.metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")?
                >= failed_before + 4.0)
                .then_some(())
        },
    )?;
    loc.child.check_running()?;
    // The last known alert is kept alive, nothing else appears.
    let alerts = sh_alerts(&am)?;
    assert_eq!(alerts.len(), 1, "{}", describe(&alerts));
    assert!(is_component(&alerts[0], "tor", "t2"));
    assert!(loc.child.log().contains("raises and clears no alert"));
    Ok(())
}

#[test]
fn alertmanager_outage_loses_no_alert() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let prom = start_store(Store::Prometheus, &fabric)?;
    // An HA pair: one Alertmanager up throughout, the other down at first.
    let am_up = start_alertmanager(free_loopback_addr()?)?;
    let am_addr = free_loopback_addr()?;
    let am_url = format!("http://{am_addr}");
    let loc = Localizer::start(&prom.url(), Some(&format!("{},{am_url}", am_up.url())))?;
    let queue = format!("skeletonhunter_localizer_alert_queue_length{{alertmanager=\"{am_url}\"}}");
    let faulty = |id: &str| {
        loc.metric(&format!(
            "skeletonhunter_component_faulty{{kind=\"tor\",id=\"{id}\"}}"
        ))
    };

    // While Alertmanager is down: t1 fails and recovers, then t2 fails.
    fabric.set_fault(Some((tor("t1"), 0.3)));
    wait_until(
        "t1 blamed",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || (faulty("t1") == Some(1.0)).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    // The healthy member is not held back by the dead one.
    wait_for_only_alert(&am_up, "tor", "t1", Duration::from_secs(10))?;
    fabric.set_fault(None);
    wait_until(
        "t1 resolution queued",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || {
            (loc.metric(&queue)? >= 1.0
                && loc.metric("skeletonhunter_localizer_alerts_firing")? == 0.0)
                .then_some(())
        },
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    fabric.set_fault(Some((tor("t2"), 0.3)));
    wait_until(
        "t2 blamed",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || (faulty("t2") == Some(1.0)).then_some(()),
    )?;
    assert!(
        loc.metric(&format!(
            "skeletonhunter_localizer_alert_post_errors_total{{alertmanager=\"{am_url}\"}}"
        ))
        .unwrap_or(0.0)
            >= 1.0
    );
    assert!(loc
        .child
        .log()
        .contains(&format!("cannot reach {am_url}/api/v2/alerts")));

    // Alertmanager comes up: the firing t2 alert and the t1 resolution arrive.
    let am = start_alertmanager(am_addr)?;
    let alert = wait_for_only_alert(&am, "tor", "t2", Duration::from_secs(15))?;
    assert_eq!(alert["labels"]["symptom"], "loss");
    let (_, am_metrics) = am.get("/metrics")?;
    assert!(
        metric_value(
            &am_metrics,
            "alertmanager_alerts_received_total{status=\"resolved\",version=\"v2\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "the t1 resolution was lost"
    );
    wait_until(
        "the queue to drain",
        Duration::from_secs(5),
        Duration::from_millis(200),
        || (loc.metric(&queue)? == 0.0).then_some(()),
    )?;
    wait_for_only_alert(&am_up, "tor", "t2", Duration::from_secs(5))?;
    Ok(())
}

#[test]
fn generated_rules_pass_promtool_and_evaluate() -> Result<()> {
    let fabric = FakeFabric::start()?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let config = format!(
        "{}rule_files:\n  - 'generated*.yml'\n",
        fabric.scrape_config()
    )
    .replace("global:\n", "global:\n  evaluation_interval: 1s\n");
    let prom = servers::start_prometheus(ServerOpts::new(free_loopback_addr()?, &config))?;
    wait_until(
        "node_info scraped",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || (prom.query("skeletonhunter_node_info").ok()?.len() == 6).then_some(()),
    )?;
    let file = prom.dir().join("generated.yml");
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .args([
            "rules",
            "--prometheus",
            &prom.url(),
            "--window",
            "10s",
            "--output",
        ])
        .arg(&file)
        .output()?;
    assert!(
        out.status.success(),
        "rules failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let check = servers::promtool(&["check", "rules", file.to_str().context("path")?])?.ok()?;
    assert!(check.stdout.contains("SUCCESS"), "{}", check.stdout);
    // 2 ToRs + 1 spine + 1 tenant, each with sent, lost, loss, p50, p90, p99.
    assert!(check.stdout.contains("24 rules found"), "{}", check.stdout);

    // Loaded into the real Prometheus, the aggregates follow the path model:
    // every pair crossing t1 loses 30%; t2 carries 18 such pairs of its 24.
    prom.reload()?;
    let value = |q: &str| -> Option<f64> {
        let r = prom.query(q).ok()?;
        r.first()?["value"][1].as_str()?.parse().ok()
    };
    let (t1, t2, s1) =
        wait_until(
            "recorded aggregates",
            Duration::from_secs(20),
            Duration::from_millis(250),
            || {
                Some((
            value("tor:skeletonhunter_probe_loss:ratio_rate10s{tor=\"t1\",protocol=\"udp\"}")?,
            value("tor:skeletonhunter_probe_loss:ratio_rate10s{tor=\"t2\",protocol=\"udp\"}")?,
            value("spine:skeletonhunter_probe_loss:ratio_rate10s{spine=\"s1\",protocol=\"udp\"}")?,
        ))
            },
        )?;
    assert!((t1 - 0.3).abs() < 0.02, "t1 loss {t1}");
    assert!((t2 - 0.225).abs() < 0.02, "t2 loss {t2}");
    assert!((s1 - 0.3).abs() < 0.02, "s1 loss {s1}");
    let p50 = wait_until(
        "recorded RTT",
        Duration::from_secs(10),
        Duration::from_millis(250),
        || {
            value("tenant:skeletonhunter_probe_rtt_seconds:p50_rate10s{tenant=\"job-a\",protocol=\"udp\"}")
        },
    )?;
    assert!(p50 > 8e-6 && p50 < 32e-6, "tenant p50 RTT {p50}");

    // `run --once` prints the same JSON as `analyze`, from live data.
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .args([
            "run",
            "--once",
            "--prometheus",
            &prom.url(),
            "--window",
            "5s",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run --once failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("run --once printed no JSON; stderr: {stderr}"))?;
    assert_eq!(report["pairs_observed"], 30, "{report}");
    let faults = report["faults"].as_array().context("faults")?;
    assert_eq!(faults.len(), 1, "{report}");
    assert_eq!(
        (&faults[0]["kind"], &faults[0]["id"]),
        (&"tor".into(), &"t1".into()),
        "{report}"
    );
    Ok(())
}

#[test]
fn bad_flags_get_clear_errors() -> Result<()> {
    let run = |args: &[&str]| -> Result<(bool, String)> {
        let out = Command::new(bin_path("skeletonhunter-localizer"))
            .args(args)
            .output()?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    for (args, expect) in [
        (
            &["run", "--prometheus", "prom:9090", "--once"][..],
            "invalid URL \"prom:9090\"",
        ),
        (
            &[
                "run",
                "--prometheus",
                "http://127.0.0.2:1",
                "--interval",
                "10x",
            ][..],
            "--interval",
        ),
        (
            &[
                "run",
                "--prometheus",
                "http://127.0.0.2:1",
                "--protocol",
                "sctp",
            ][..],
            "--protocol \"sctp\"",
        ),
        (
            &[
                "rules",
                "--prometheus",
                "http://127.0.0.2:1",
                "--window",
                "1x",
            ][..],
            "--window",
        ),
    ] {
        let (ok, stderr) = run(args)?;
        assert!(!ok, "{args:?} succeeded");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // Unreachable store with --once: one failed cycle, a clear error, no hang.
    let (ok, stderr) = run(&[
        "run",
        "--prometheus",
        "http://127.0.0.2:1",
        "--once",
        "--timeout",
        "2s",
    ])?;
    assert!(!ok);
    assert!(
        stderr.contains("cannot reach http://127.0.0.2:1/api/v1/query"),
        "{stderr}"
    );
    Ok(())
}
