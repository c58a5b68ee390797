//! Paris traceroute along the probe flow, on a routed fabric:
//!
//! ```text
//!   A (198.18.40.2) ── R (198.18.40.1 | 198.18.41.1) ── B (198.18.41.2)
//! ```
//!
//! A probes B through router R. A trace to B — when A maps its probe flow
//! at start, on demand through `POST /trace?target=`, and automatically
//! when the pair turns anomalous (loss injected on B) — must find exactly
//! R's A-side address, then B, and publish them in `/traces` and as
//! `skeletonhunter_path_hop_info` under the path's id.

use anyhow::{Context, Result};
use skeletonhunter_tests::exporter::Launch;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::http::http_request;
use skeletonhunter_tools::netns::veth;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{http_get, wait_until, ChildGuard, Netns};
use std::net::SocketAddr;
use std::time::Duration;

const METRICS: &str = "127.0.0.1:9482";
const UDP: u16 = 7497;
const TCP: u16 = 7498;

fn config(node: &str, own: &str, peer: Option<&str>) -> String {
    let statics = match peer {
        Some(p) => format!("  static:\n    - {{address: {p}}}\n"),
        None => String::new(),
    };
    format!(
        "listen: \"{METRICS}\"\n\
         identity:\n  node: \"{node}\"\n  host: \"host-{node}\"\n  tor: \"tor-{node}\"\n\
         responder:\n  udp: \"{own}:{UDP}\"\n  tcp: \"{own}:{TCP}\"\n\
         probe:\n  interval: 100ms\n  timeout: 400ms\n  protocols: [udp]\n  udp_port: {UDP}\n  tcp_port: {TCP}\n\
         discovery:\n  ebpf: false\n{statics}"
    )
}

fn start(
    ns: &Netns,
    dir: &std::path::Path,
    node: &str,
    own: &str,
    peer: Option<&str>,
) -> Result<ChildGuard> {
    Launch::new(&format!("trace-{node}"))
        .within(ns)
        .spawn(dir, &config(node, own, peer))
}

fn get(ns: &Netns, path: &'static str) -> Option<(u16, String)> {
    let addr: SocketAddr = METRICS.parse().ok()?;
    ns.run_in(move || http_get(addr, path, Duration::from_secs(2)))
        .ok()?
        .ok()
}

/// `POST path` to A's exporter (starting a trace is a POST).
fn post(ns: &Netns, path: &'static str) -> Result<(u16, String)> {
    let addr: SocketAddr = METRICS.parse()?;
    ns.run_in(move || http_request(addr, "POST", path, None, Duration::from_secs(2)))?
}

/// The finished trace towards `dst` in `/traces`, if any.
fn finished_trace(ns: &Netns, dst: &str, reason: &str) -> Option<serde_json::Value> {
    finished_trace_since(ns, dst, &[reason], 0.0)
}

/// The finished trace to `dst` for one of `reasons` that started at or
/// after `since` (Unix seconds).
fn finished_trace_since(
    ns: &Netns,
    dst: &str,
    reasons: &[&str],
    since: f64,
) -> Option<serde_json::Value> {
    let (status, body) = get(ns, "/traces")?;
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["traces"]
        .as_array()?
        .iter()
        .find(|t| {
            t["destination"] == dst
                && reasons.iter().any(|r| t["reason"] == *r)
                && t["running"] == false
                && t["trace"]["started_unix_seconds"]
                    .as_f64()
                    .is_some_and(|s| s >= since)
        })
        .cloned()
}

fn hop_addresses(entry: &serde_json::Value) -> Vec<String> {
    entry["trace"]["hops"]
        .as_array()
        .map(|hops| {
            hops.iter()
                .map(|h| h["address"].as_str().unwrap_or("*").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn trace_follows_the_routed_path() -> Result<()> {
    if !require_privileges("trace_follows_the_routed_path") {
        return Ok(());
    }
    let _turn = crate::beside_others();
    let a = Netns::new("tra")?;
    let r = Netns::new("trr")?;
    let b = Netns::new("trb")?;
    veth(&a, "a0", "198.18.40.2/24", &r, "r0", "198.18.40.1/24")?;
    veth(&r, "r1", "198.18.41.1/24", &b, "b0", "198.18.41.2/24")?;
    r.enable_forwarding()?;
    // Linux sends a peer at most one ICMP error a second after a burst of
    // 6; the flow mapper traces every flow at start, so without this a hop
    // can fall silent. The multipath fabric turns it off on its routers too.
    r.exec(&["sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"])?;
    a.ip(&["route", "add", "default", "via", "198.18.40.1"])?;
    b.ip(&["route", "add", "default", "via", "198.18.41.1"])?;
    let tmp = TempDir::new("trace")?;
    let dir = tmp.path();
    let _eb = start(&b, dir, "node-b", "198.18.41.2", None)?;
    let mut ea = start(&a, dir, "node-a", "198.18.40.2", Some("198.18.41.2"))?;
    wait_until(
        "A probing B",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || {
            let (_, body) = get(&a, "/metrics")?;
            body.contains(
                "skeletonhunter_probe_rtt_seconds_count{src_node=\"node-a\",dst_node=\"node-b\"",
            )
            .then_some(())
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}; log of A:\n{}", ea.log()))?;

    // The probe flow is mapped at start, without being asked (as a lossy
    // flow if its first probes went out before B's responder was up).
    let mapped = wait_until(
        "the flow mapped at start",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            finished_trace(&a, "198.18.41.2", "mapping")
                .or_else(|| finished_trace(&a, "198.18.41.2", "lossy_flow"))
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}; /traces: {:?}", get(&a, "/traces")))?;
    assert_eq!(
        hop_addresses(&mapped),
        vec!["198.18.40.1", "198.18.41.2"],
        "{mapped}"
    );

    // Bad requests get clear errors; non-peers are refused.
    let (status, body) = get(&a, "/trace?target=198.18.41.2").context("GET /trace")?;
    assert_eq!(status, 405, "a GET never starts a trace: {body}");
    let (status, body) = post(&a, "/trace?target=banana").context("POST /trace")?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("banana"), "{body}");
    let (status, body) = post(&a, "/trace?target=198.18.99.9").context("POST /trace")?;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("not a skeleton peer"), "{body}");
    // The default ECMP width of 4 probes over flows 0-20.
    let (status, body) = post(&a, "/trace?target=198.18.41.2&flow=21").context("POST /trace")?;
    assert_eq!(status, 400, "flows 0-20 only: {body}");
    assert!(body.contains("0..21"), "{body}");

    // On demand.
    let (status, body) = post(&a, "/trace?target=198.18.41.2").context("POST /trace")?;
    assert_eq!(status, 202, "{body}");
    let entry = wait_until(
        "on-demand trace to finish",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || finished_trace(&a, "198.18.41.2", "on_demand"),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}; /traces: {:?}\nlog of A:\n{}",
            get(&a, "/traces"),
            ea.log()
        )
    })?;
    assert_eq!(
        hop_addresses(&entry),
        vec!["198.18.40.1", "198.18.41.2"],
        "{entry}"
    );
    assert_eq!(entry["trace"]["reached"], true, "{entry}");
    assert_eq!(
        entry["trace"]["hops"][0]["answer"], "time_exceeded",
        "{entry}"
    );
    assert_eq!(
        entry["trace"]["hops"][1]["answer"], "destination",
        "{entry}"
    );
    assert_eq!(entry["dst_node"], "node-b", "{entry}");
    // All probes kept the flow's 5-tuple: the trace names one flow.
    assert_eq!(entry["trace"]["flow"]["dst"], "198.18.41.2:7497", "{entry}");
    let path = entry["path"].as_str().context("no path id")?.to_string();
    assert_eq!(path.len(), 8, "{entry}");
    let (_, metrics) = get(&a, "/metrics").context("scrape")?;
    for (hop, addr) in [("1", "198.18.40.1"), ("2", "198.18.41.2")] {
        let line = format!(
            "skeletonhunter_path_hop_info{{src_node=\"node-a\",dst_node=\"node-b\",path=\"{path}\",hop=\"{hop}\",address=\"{addr}\"}} 1"
        );
        assert!(metrics.contains(&line), "missing {line} in:\n{metrics}");
    }
    // The path's loss series sit beside its hops.
    for name in [
        "skeletonhunter_path_loss_ratio",
        "skeletonhunter_path_probes",
    ] {
        let series = format!("{name}{{src_node=\"node-a\",dst_node=\"node-b\",path=\"{path}\"}} ");
        assert!(metrics.contains(&series), "missing {series} in:\n{metrics}");
    }
    // The hop series pass the real linter.
    let path = dir.join("metrics.txt");
    std::fs::write(&path, &metrics)?;
    let out = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&path)?)
        .output()
        .context("promtool (Debian package prometheus) must be installed")?;
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The pair turns anomalous: B drops 60% of A's UDP probes — not the
    // trace's, recognised by their echo-request session "SHTRACE\0" at
    // bytes 16..24 of the UDP header + payload. A traces on its own.
    let injected = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    b.set_loss(
        60,
        "ip saddr 198.18.40.2 udp dport 7497 @th,128,64 != 0x5348545241434500",
    )?;
    // The store keeps one trace per flow: the flow mapper's re-trace of the
    // now lossy flow may replace the anomaly trace; both follow the loss
    // (the log line below shows the anomaly trace ran).
    let entry = wait_until(
        "anomaly-triggered trace",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || finished_trace_since(&a, "198.18.41.2", &["anomaly", "lossy_flow"], injected),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}; /traces: {:?}\nlog of A:\n{}",
            get(&a, "/traces"),
            ea.log()
        )
    })?;
    assert_eq!(
        hop_addresses(&entry),
        vec!["198.18.40.1", "198.18.41.2"],
        "{entry}"
    );
    // The flow mapper's re-trace may finish before the detector logs the
    // anomaly: wait for both lines rather than reading the log once.
    let log = wait_until(
        "the anomaly and its trace in the log",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || {
            let log = ea.log();
            (log.contains("pair turned anomalous")
                && log.contains("tracing the path of an anomalous pair"))
            .then_some(log)
        },
    );
    assert!(log.is_ok(), "{}", ea.log());
    ea.check_running()?;
    Ok(())
}
