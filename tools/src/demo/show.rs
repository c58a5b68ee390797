//! What the demo prints: the fabric, the per-pair loss matrix, the
//! localization and the alert as Alertmanager holds it.

use crate::fabric::{ports, Stack, StackOpts};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Wait for the localizer's alert on an expected component, then show the
/// localization and the alert as Alertmanager holds it.
pub(super) fn alert(
    stack: &mut Stack,
    opts: &StackOpts,
    expect: &[(&str, String)],
    t0: Instant,
) -> Result<()> {
    let alert = loop {
        stack.check_running()?;
        let alerts = stack.component_alerts()?;
        // Every demo fault drops packets: wait for a loss or
        // unreachable verdict, not a latency one.
        if let Some(a) = alerts.iter().find(|a| {
            a.symptom != "latency"
                && (expect.is_empty()
                    || expect
                        .iter()
                        .any(|(k, c)| *k == a.kind && *c == a.component))
        }) {
            break a.clone();
        }
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("no alert for {expect:?} within 120 s; alerts held: {alerts:#?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    println!(
        "alerted {:.1} s after injection: {} on {} {} ({})",
        t0.elapsed().as_secs_f64(),
        alert.alertname,
        alert.kind,
        alert.component,
        alert.symptom
    );
    if expect.is_empty() {
        super::fault::print_link_verdict(&alert.kind, &alert.component);
    }
    // Let the localizer's window fill with the fault before showing
    // its full picture (the first alert comes from partial evidence).
    let settle = opts.localizer_window;
    println!(
        "letting the fault stand {} s so the localizer's window holds only faulty data...",
        settle.as_secs()
    );
    std::thread::sleep(settle);
    pairs(stack, "with the fault")?;
    println!("\nlocalization (the localizer's last analysis, GET /report):");
    println!("{}", serde_json::to_string_pretty(&localization(stack)?)?);
    // The alert as it is now (re-posted, possibly updated evidence).
    let now = stack.component_alerts()?;
    let current = now
        .iter()
        .find(|a| a.kind == alert.kind && a.component == alert.component)
        .unwrap_or(&alert);
    println!("\nthe alert as Alertmanager holds it (GET /api/v2/alerts):");
    println!("{}", serde_json::to_string_pretty(&current.json)?);
    let others: Vec<String> = now
        .iter()
        .filter(|a| !(a.kind == alert.kind && a.component == alert.component))
        .map(|a| format!("{}/{} ({}, {})", a.kind, a.component, a.symptom, a.state))
        .collect();
    if !others.is_empty() {
        println!("other component alerts held: {}", others.join(", "));
    }
    Ok(())
}

/// The fabric's layout: every node with its addresses and place, and
/// where the servers listen.
pub(super) fn fabric(stack: &Stack) {
    let f = &stack.fabric;
    println!(
        "fabric: {} ToRs x {} hosts x {} containers under {} spine(s) ({}){}; monitoring namespace {}",
        f.spec.tors,
        f.spec.hosts_per_tor,
        f.spec.containers_per_host,
        f.spec.spines,
        f.spine_name,
        if stack.containers.is_some() { ", one exporter per host probing from its containers" } else { "" },
        f.mon.name()
    );
    for n in &f.nodes {
        let id = &n.identity;
        println!(
            "  {:<10} data {:<14} mgmt {:<15} nic {:<12} {:<11} {:<5} {}",
            id.node,
            n.data_ip.to_string(),
            n.mgmt_ip.to_string(),
            id.nic,
            id.host,
            id.tor,
            id.tenant
        );
    }
    println!(
        "Prometheus {}  Alertmanager {}  (inside {})",
        stack.prometheus.url(),
        stack.alertmanager.url(),
        f.mon.name()
    );
}

/// Per-pair UDP loss (a src × dst matrix) and RTT spread over the last 5 s,
/// from Prometheus.
pub(super) fn pairs(stack: &Stack, when: &str) -> Result<()> {
    let stats = PairStats::query(stack)?;
    let nodes: Vec<&str> = stack
        .fabric
        .nodes
        .iter()
        .map(|n| n.identity.node.as_str())
        .collect();
    println!("skeleton probe loss, src (rows) -> dst (columns), UDP over the last 5 s ({when}):");
    print!("  {:<9}", "");
    for d in &nodes {
        print!(" {d:>8}");
    }
    println!();
    let mut rtts = Vec::new();
    for src in &nodes {
        print!("  {src:<9}");
        for dst in &nodes {
            let text = if is_skeleton(stack, src, dst) {
                let (l, r) = stats.cell(src, dst);
                if r.is_finite() {
                    rtts.push(r);
                }
                if l.is_finite() {
                    format!("{:.0}%", l * 100.0)
                } else {
                    "?".to_string()
                }
            } else {
                ".".to_string()
            };
            print!(" {text:>8}");
        }
        println!();
    }
    rtts.sort_by(f64::total_cmp);
    if !rtts.is_empty() {
        println!(
            "  ('.' = not a skeleton pair)  per-pair median RTT: min {:.0} µs, median {:.0} µs, max {:.0} µs",
            rtts[0] * 1e6,
            rtts[rtts.len() / 2] * 1e6,
            rtts[rtts.len() - 1] * 1e6
        );
    }
    Ok(())
}

/// Whether `src` probes `dst` (a pair of the traffic skeleton).
fn is_skeleton(stack: &Stack, src: &str, dst: &str) -> bool {
    stack.fabric.node(src).is_ok_and(|n| {
        stack
            .fabric
            .peers_of(n)
            .iter()
            .any(|p| p.identity.node == dst)
    })
}

/// Per-pair UDP loss ratio and median RTT over the last 5 s.
struct PairStats {
    loss: Vec<Value>,
    rtt: Vec<Value>,
}

impl PairStats {
    /// Both matrices from Prometheus, as of now.
    fn query(stack: &Stack) -> Result<PairStats> {
        let loss = stack.prometheus.query(
            "sum by (src_node, dst_node) (increase(skeletonhunter_probe_lost_total{protocol=\"udp\"}[5s])) \
             / sum by (src_node, dst_node) (increase(skeletonhunter_probe_sent_total{protocol=\"udp\"}[5s]))",
        )?;
        let rtt = stack.prometheus.query(
            "histogram_quantile(0.5, sum by (src_node, dst_node, le) \
             (rate(skeletonhunter_probe_rtt_seconds_bucket{protocol=\"udp\"}[5s])))",
        )?;
        Ok(PairStats { loss, rtt })
    }

    /// (loss ratio, median RTT in seconds) of `src -> dst`; NaN when unknown.
    fn cell(&self, src: &str, dst: &str) -> (f64, f64) {
        let find = |series: &[Value]| {
            series
                .iter()
                .find(|v| {
                    v["metric"]["src_node"].as_str().unwrap_or("?") == src
                        && v["metric"]["dst_node"].as_str().unwrap_or("?") == dst
                })
                .and_then(|v| v["value"][1].as_str())
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        (find(&self.loss), find(&self.rtt))
    }
}

/// The localizer's last analysis when it serves one (`/report`: the same
/// JSON document `skeletonhunter-localizer analyze` prints, with its
/// `faults` list), else its verdict read from `/metrics`.
fn localization(stack: &Stack) -> Result<Value> {
    let addr = SocketAddr::from(([127, 0, 0, 1], ports::LOCALIZER));
    let get = move |path: &'static str| {
        stack
            .fabric
            .mon
            .run_in(move || crate::http_get(addr, path, Duration::from_secs(5)))
    };
    if let Ok(Ok((200, body))) = get("/report") {
        if let Ok(v) = serde_json::from_str::<Value>(&body) {
            if v.get("faults").is_some() {
                return Ok(v);
            }
        }
    }
    let (status, body) = get("/metrics")??;
    if status != 200 {
        bail!("localizer /metrics: HTTP {status}");
    }
    let mut blamed = Vec::new();
    let mut faulty = Vec::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let label = |name: &str| {
            series
                .split_once(&format!("{name}=\""))
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(v, _)| v.to_string())
                .unwrap_or_default()
        };
        if series.starts_with("skeletonhunter_component_blame{") && value > 0.0 {
            blamed.push(json!({"kind": label("kind"), "id": label("id"), "blame": value}));
        } else if series.starts_with("skeletonhunter_component_faulty{") && value == 1.0 {
            faulty.push(json!({"kind": label("kind"), "id": label("id")}));
        }
    }
    blamed.sort_by(|a, b| {
        b["blame"]
            .as_f64()
            .partial_cmp(&a["blame"].as_f64())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    blamed.truncate(5);
    Ok(json!({"faulty": faulty, "top_blame": blamed}))
}
