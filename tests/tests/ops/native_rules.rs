//! The RTT recording rules on a mixed fleet, with a real Prometheus 2.42
//! started with `--enable-feature=native-histograms`: four exporters
//! probing each other on loopback, `a` and `b` (ToR t1) with
//! `metrics.histograms: native`, `c` and `d` (ToR t2) with `classic`; both
//! ToRs under spine s1; a, b, c in tenant x, d in tenant y. One server loads
//! the pair detail's recording rules rendered with
//! `_config.nativeHistograms: true` (and every per-pair quantile and the
//! mean, `pairRttQuantiles`, `pairRttMean`) and records RTT quantiles per
//! pair, protocol, ToR, spine and tenant from both shapes; another loads the
//! shipped ones (`rules/pair-detail/`) and records the pair p99 and the
//! protocol quantiles of the native pairs too. Prints each rule group's
//! evaluation time and the series each recording level holds.
//! Unprivileged: loopback only (127.0.0.2-5).

use anyhow::{Context, Result};
use skeletonhunter_tests::exporter::start_on_loopback;
use skeletonhunter_tools::deploy::require_tool;
use skeletonhunter_tools::process::{run_tool, wait_until, ChildGuard};
use skeletonhunter_tools::repo::{repo_root, PAIR_DETAIL_RULES};
use skeletonhunter_tools::servers::{
    self, free_addr_on, free_loopback_addr, Server, ServerOpts, TempDir,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(180);
const EVERY: Duration = Duration::from_millis(500);

/// name, histogram mode, tor, tenant; the address is 127.0.0.(2 + index).
const NODES: [(&str, &str, &str, &str); 4] = [
    ("a", "native", "t1", "x"),
    ("b", "native", "t1", "x"),
    ("c", "classic", "t2", "x"),
    ("d", "classic", "t2", "y"),
];

/// A UDP and a TCP port free on `ip` a moment ago, picked outside the
/// ephemeral range: a port the kernel handed out for port 0 was taken by
/// another test's probe flow before this exporter bound it.
fn free_ports(ip: Ipv4Addr) -> Result<(u16, u16)> {
    Ok((free_addr_on(ip)?.port(), free_addr_on(ip)?.port()))
}

/// Start the four exporters; returns them and their `/metrics` addresses.
fn fleet(dir: &TempDir) -> Result<(Vec<ChildGuard>, Vec<SocketAddr>)> {
    let ips: Vec<Ipv4Addr> = (0..NODES.len())
        .map(|i| Ipv4Addr::new(127, 0, 0, 2 + i as u8))
        .collect();
    let ports = ips
        .iter()
        .map(|&ip| free_ports(ip))
        .collect::<Result<Vec<_>>>()?;
    let (mut guards, mut addrs) = (Vec::new(), Vec::new());
    for (i, (name, mode, tor, tenant)) in NODES.iter().enumerate() {
        let listen = free_loopback_addr()?;
        let peers: String = (0..NODES.len())
            .filter(|&j| j != i)
            .map(|j| {
                format!(
                    "    - {{address: \"{}\", name: \"{}\", udp_port: {}, tcp_port: {}}}\n",
                    ips[j], NODES[j].0, ports[j].0, ports[j].1
                )
            })
            .collect();
        let cfg = format!(
                "listen: \"{listen}\"\n\
                 identity: {{node: \"{name}\", host: \"h{name}\", tor: \"{tor}\", spine: \"s1\", pod: \"p1\", tenant: \"{tenant}\"}}\n\
                 responder: {{udp: \"{ip}:{u}\", tcp: \"{ip}:{t}\"}}\n\
                 probe: {{interval: 100ms, timeout: 1s, protocols: [udp, tcp]}}\n\
                 metrics: {{histograms: {mode}}}\n\
                 discovery:\n  ebpf: false\n  static:\n{peers}",
                ip = ips[i],
                u = ports[i].0,
                t = ports[i].1,
            );
        let child = start_on_loopback(dir.path(), &format!("exporter-{name}"), &cfg, listen)?;
        guards.push(child);
        addrs.push(listen);
    }
    Ok((guards, addrs))
}

/// The recording-rule files of the pair detail under `rules` (a
/// `rules/pair-detail` directory) copied into a native-histogram Prometheus
/// that scrapes `targets` and itself.
fn prometheus(rules: &Path, targets: &[SocketAddr]) -> Result<Server> {
    let listen = free_loopback_addr()?;
    let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    let cfg = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 2s}}\n\
         rule_files: ['rules/*.yml']\n\
         scrape_configs:\n  - job_name: skeletonhunter-exporter\n    static_configs: [{{targets: [{}]}}]\n\
         \x20 - job_name: prometheus\n    static_configs: [{{targets: ['{listen}']}}]\n",
        list.join(", ")
    );
    let mut opts = ServerOpts::new(listen, &cfg).arg("--enable-feature=native-histograms");
    for f in ["skeletonhunter.rules.yml", "skeletonhunter.aggregates.yml"] {
        opts = opts.copy_file(&format!("rules/{f}"), &rules.join(f))?;
    }
    servers::start_prometheus(opts)
}

/// Label `key` -> value of every sample of `promql`.
fn values(prom: &Server, promql: &str, key: &str) -> Result<Vec<(String, f64)>> {
    Ok(prom
        .query(promql)?
        .iter()
        .filter_map(|s| {
            let k = s["metric"][key].as_str().unwrap_or_default().to_string();
            Some((k, s["value"][1].as_str()?.parse().ok()?))
        })
        .collect())
}

/// Wait until `promql` has a finite sample for each of `want` (values of
/// label `key`), and check each is a plausible loopback RTT (0 < v < 1 s).
fn plausible(prom: &Server, promql: &str, key: &str, want: &[&str]) -> Result<()> {
    let got = wait_until(promql, WAIT, EVERY, || {
        let v = values(prom, promql, key).ok()?;
        let ok = want
            .iter()
            .all(|w| v.iter().any(|(k, x)| k == w && x.is_finite()));
        ok.then_some(v)
    })
    .with_context(|| format!("{promql}: no finite value for each of {want:?}"))?;
    eprintln!("{promql}: {got:?}");
    for (k, v) in got.iter().filter(|(k, _)| want.contains(&k.as_str())) {
        assert!(*v > 0.0 && *v < 1.0, "{promql} {key}={k}: {v}");
    }
    Ok(())
}

/// Print what the rules cost: each group's last evaluation time and the
/// series each recording level holds.
fn print_cost(prom: &Server, what: &str) -> Result<()> {
    for (g, s) in values(
        prom,
        "prometheus_rule_group_last_duration_seconds",
        "rule_group",
    )? {
        eprintln!("{what}: group {g}: {:.1} ms", s * 1e3);
    }
    let levels = r#"count by (level) (label_replace({__name__=~"[a-z_]+:skeletonhunter_probe_.*"}, "level", "$1", "__name__", "([a-z_]+):.*"))"#;
    for (l, n) in values(prom, levels, "level")? {
        eprintln!("{what}: level {l}: {n} series");
    }
    let raw = r#"count({__name__=~"skeletonhunter_probe_rtt_seconds.*"})"#;
    eprintln!("{what}: raw RTT series: {:?}", values(prom, raw, "")?);
    Ok(())
}

#[test]
fn mixed_fleet_records_rtt_quantiles_at_every_level() -> Result<()> {
    let test = "mixed_fleet_records_rtt_quantiles_at_every_level";
    if !require_tool(test, "jsonnet", "apt-get install jsonnet") {
        return Ok(());
    }
    let dir = TempDir::new("native-rules")?;
    let out = dir.path().join("native");
    let render = repo_root().join("mixin/render.sh");
    run_tool(
        "bash",
        &[
            &render.display().to_string(),
            &out.display().to_string(),
            "{nativeHistograms: true, pairRttQuantiles: [0.5, 0.9, 0.99], pairRttMean: true}",
        ],
        None,
    )?
    .ok()?;
    let (_exporters, targets) = fleet(&dir)?;
    let native = prometheus(&out.join(PAIR_DETAIL_RULES), &targets)?;
    let shipped = prometheus(&repo_root().join(PAIR_DETAIL_RULES), &targets)?;

    // The native pairs keep no bucket series, the classic ones do: both
    // shapes are in the store.
    let buckets =
        |src: &str| format!("count(skeletonhunter_probe_rtt_seconds_bucket{{src_node=\"{src}\"}})");
    wait_until("classic buckets of c", WAIT, EVERY, || {
        native.query(&buckets("c")).ok().filter(|r| !r.is_empty())
    })?;
    assert!(native.query(&buckets("a"))?.is_empty(), "a is native");

    let q = |level: &str, p: &str| {
        format!("{level}:skeletonhunter_probe_rtt_seconds:{p}_rate1m{{protocol=\"udp\"}}")
    };
    for p in ["p50", "p90", "p99"] {
        plausible(&native, &q("tor", p), "tor", &["t1", "t2"])?;
        plausible(&native, &q("spine", p), "spine", &["s1"])?;
        plausible(&native, &q("tenant", p), "tenant", &["x"])?;
        plausible(&native, &q("protocol", p), "protocol", &["udp"])?;
    }
    for server in [&native, &shipped] {
        // a->b native, c->d classic.
        plausible(server, &q("pair", "p99"), "src_node", &["a", "c"])?;
        plausible(server, &q("topology", "p99"), "src_node", &["a", "c"])?;
    }
    for p in ["p50", "p90", "mean"] {
        plausible(&native, &q("pair", p), "src_node", &["a", "c"])?;
    }
    // Shipped rules: the ToR t1 quantile reads the pairs to and from it
    // that have buckets (c->a, d->a...), the pairs between a and b are missed.
    plausible(&shipped, &q("tor", "p50"), "tor", &["t2"])?;

    // Cut native buckets and scraped classic ones share their `le`
    // spellings: 25 buckets per protocol, not a set per shape.
    let les = "count by (protocol) (protocol_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m)";
    for (protocol, n) in values(&native, les, "protocol")? {
        assert_eq!(n, 25.0, "{protocol}: {n} le values");
    }
    print_cost(&native, "nativeHistograms: true")?;
    print_cost(&shipped, "shipped rules")?;
    Ok(())
}
