//! RDMA probing on a host without an RDMA device (this machine and CI):
//! two exporters in a namespace pair, both configured with `rdma` among
//! their protocols. Each must say once, clearly, why RDMA probing is off —
//! `RDMA probing disabled: <reason>` — and keep probing with UDP and TCP.
//!
//! ```text
//!   A (198.18.30.1) ── veth ── B (198.18.30.2)
//! ```
//!
//! On a host with an RNIC the same exporters would probe over RDMA
//! instead; that path is covered by the unit tests of the exchange logic
//! and by docs/rdma.md's verification steps.

use anyhow::Result;
use skeletonhunter_tests::exporter::Launch;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::netns::veth;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{http_get, wait_until, ChildGuard, Netns};
use std::net::SocketAddr;
use std::time::Duration;

const METRICS: &str = "127.0.0.1:9481";
const UDP: u16 = 7487;
const TCP: u16 = 7488;
const DISABLED: &str = "RDMA probing disabled: ";

fn config(node: &str, own: &str, peer: &str) -> String {
    format!(
        "listen: \"{METRICS}\"\n\
         identity:\n  node: \"{node}\"\n  host: \"host-{node}\"\n  tor: \"tor0\"\n  nic: \"{own}\"\n\
         responder:\n  udp: \"{own}:{UDP}\"\n  tcp: \"{own}:{TCP}\"\n\
         probe:\n  interval: 200ms\n  timeout: 500ms\n  protocols: [udp, tcp, rdma]\n  udp_port: {UDP}\n  tcp_port: {TCP}\n\
         discovery:\n  ebpf: false\n  static:\n    - {{address: {peer}}}\n"
    )
}

fn start(
    ns: &Netns,
    dir: &std::path::Path,
    node: &str,
    own: &str,
    peer: &str,
) -> Result<ChildGuard> {
    Launch::new(&format!("rdma-{node}"))
        .within(ns)
        .spawn(dir, &config(node, own, peer))
}

fn scrape(ns: &Netns) -> Option<String> {
    let addr: SocketAddr = METRICS.parse().ok()?;
    match ns.run_in(move || http_get(addr, "/metrics", Duration::from_secs(2))) {
        Ok(Ok((200, body))) => Some(body),
        _ => None,
    }
}

/// Sum of the samples of `metric` whose labels contain every one of `labels`.
fn total(body: &str, metric: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with('{'))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn rdma_disabled_without_device_and_udp_tcp_keep_probing() -> Result<()> {
    if !require_privileges("rdma_disabled_without_device_and_udp_tcp_keep_probing") {
        return Ok(());
    }
    let _turn = crate::beside_others();
    let a = Netns::new("rda")?;
    let b = Netns::new("rdb")?;
    veth(&a, "a0", "198.18.30.1/24", &b, "b0", "198.18.30.2/24")?;
    let tmp = TempDir::new("rdma")?;
    let dir = tmp.path();
    let mut eb = start(&b, dir, "node-b", "198.18.30.2", "198.18.30.1")?;
    let mut ea = start(&a, dir, "node-a", "198.18.30.1", "198.18.30.2")?;

    // UDP and TCP probes from A to B produce samples.
    let dst = "dst_node=\"node-b\"";
    let body = wait_until(
        "UDP and TCP samples from A to B",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            let body = scrape(&a)?;
            let udp = total(
                &body,
                "skeletonhunter_probe_rtt_seconds_count",
                &[dst, "protocol=\"udp\""],
            );
            let tcp = total(
                &body,
                "skeletonhunter_probe_rtt_seconds_count",
                &[dst, "protocol=\"tcp\""],
            );
            let dial = total(
                &body,
                "skeletonhunter_probe_dial_success",
                &[dst, "protocol=\"tcp\""],
            );
            (udp >= 5.0 && tcp >= 5.0 && dial == 1.0).then_some(body)
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}; /metrics:\n{}\nlog of A:\n{}",
            scrape(&a).unwrap_or_default(),
            ea.log()
        )
    })?;
    // No RDMA probe was sent (there is nothing to send it with), and no
    // UDP probe was lost on this clean link.
    assert_eq!(
        total(
            &body,
            "skeletonhunter_probe_sent_total",
            &["protocol=\"rdma\""]
        ),
        0.0,
        "{body}"
    );
    assert_eq!(
        total(
            &body,
            "skeletonhunter_probe_lost_total",
            &[dst, "protocol=\"udp\""]
        ),
        0.0,
        "{body}"
    );
    ea.check_running()?;
    eb.check_running()?;

    // The reason is logged exactly once per exporter, and it says why.
    for (name, g) in [("A", &ea), ("B", &eb)] {
        let log = g.log();
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(DISABLED)).collect();
        assert_eq!(
            lines.len(),
            1,
            "exporter {name} must log `{DISABLED}` once; log:\n{log}"
        );
        let reason = lines[0].split(DISABLED).nth(1).unwrap_or("").trim();
        assert!(
            reason.contains("RDMA device") || reason.contains("RDMA port"),
            "exporter {name}: unclear reason {reason:?}"
        );
    }
    ea.terminate(Duration::from_secs(10))?;
    eb.terminate(Duration::from_secs(10))?;
    Ok(())
}
