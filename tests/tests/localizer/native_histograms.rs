//! The localizer reads RTT from whichever histograms the store has
//! (`run --histograms`): two real exporters with `metrics.histograms:
//! native` probing each other over loopback, scraped by a real Prometheus
//! with `--enable-feature=native-histograms` (which then keeps one native
//! series per pair and protocol, no `_bucket`), give every pair a median
//! RTT with `--histograms native` and with `auto` (which asks the store and
//! reads native-or-classic per pair), and none with `classic` (the series
//! it asks for do not exist). Against VictoriaMetrics, which does not know
//! `histogram_count`, `auto` reads classic and still gets its medians.
//! Unprivileged: loopback only.

use anyhow::{Context, Result};
use skeletonhunter_tests::exporter;
use skeletonhunter_tests::localizer::{start_store, FakeFabric, Localizer, Store};
use skeletonhunter_tools::process::ChildGuard;
use skeletonhunter_tools::servers::{self, free_loopback_addr, Server, ServerOpts, TempDir};
use skeletonhunter_tools::wait_until;
use std::net::SocketAddr;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);
const EVERY: Duration = Duration::from_millis(500);

/// Addresses of one loopback exporter.
struct Ports {
    listen: SocketAddr,
    udp: SocketAddr,
    tcp: SocketAddr,
}

fn ports() -> Result<Ports> {
    Ok(Ports {
        listen: free_loopback_addr()?,
        udp: free_loopback_addr()?,
        tcp: free_loopback_addr()?,
    })
}

/// Exporter `name` (native histograms only) probing `peer`'s responders
/// as the peer `peer_name`.
fn exporter(
    dir: &TempDir,
    name: &str,
    me: &Ports,
    peer_name: &str,
    peer: &Ports,
) -> Result<ChildGuard> {
    let cfg = format!(
        "listen: \"{}\"\nidentity: {{node: \"{name}\", host: \"h-{name}\", tor: \"t1\", spine: \"s1\"}}\n\
         responder: {{udp: \"{}\", tcp: \"{}\"}}\n\
         probe: {{interval: 100ms, timeout: 1s, protocols: [udp, tcp], udp_port: {}, tcp_port: {}}}\n\
         metrics: {{histograms: native}}\n\
         discovery:\n  ebpf: false\n  static:\n    - {{address: \"127.0.0.1\", name: \"{peer_name}\"}}\n",
        me.listen,
        me.udp,
        me.tcp,
        peer.udp.port(),
        peer.tcp.port()
    );
    exporter::start_on_loopback(dir.path(), name, &cfg, me.listen)
}

/// A localizer with `--histograms mode` on `store`, once it has a trusted
/// cycle over both pairs: (its `pairs_with_rtt`, its histograms mode line).
fn pairs_with_rtt(store: &Server, mode: &str, pairs: f64) -> Result<(f64, String)> {
    let loc = Localizer::start_with(&store.url(), None, &[format!("--histograms={mode}")])?;
    wait_until(
        &format!("--histograms {mode}: a cycle over {pairs} pairs"),
        WAIT,
        EVERY,
        || (loc.metric("skeletonhunter_localizer_pairs_observed") == Some(pairs)).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    let info = wait_until("the histograms mode", WAIT, EVERY, || {
        loc.metrics()
            .lines()
            .find(|l| l.starts_with("skeletonhunter_localizer_histograms_info{"))
            .map(str::to_string)
    })?;
    let with_rtt = loc
        .metric("skeletonhunter_localizer_pairs_with_rtt")
        .context("pairs_with_rtt")?;
    let text = loc.metrics();
    assert!(
        text.contains("skeletonhunter_localizer_query_duration_seconds_count{query=\"rtt_p50\"}"),
        "{text}"
    );
    eprintln!("--histograms {mode}: {with_rtt} of {pairs} pairs with RTT; {info}");
    Ok((with_rtt, info))
}

#[test]
fn rtt_medians_come_from_native_histograms() -> Result<()> {
    let dir = TempDir::new("loc-native")?;
    let (a, b) = (ports()?, ports()?);
    let _a = exporter(&dir, "nh-a", &a, "nh-b", &b)?;
    let _b = exporter(&dir, "nh-b", &b, "nh-a", &a)?;
    let cfg = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\nscrape_configs:\n  - job_name: exporter\n    static_configs: [{{targets: ['{}', '{}']}}]\n",
        a.listen, b.listen
    );
    let prom = servers::start_prometheus(
        ServerOpts::new(free_loopback_addr()?, &cfg).arg("--enable-feature=native-histograms"),
    )?;
    // The store has the native series and no bucket series.
    wait_until("native RTT series", WAIT, EVERY, || {
        let r = prom.query("skeletonhunter_probe_rtt_seconds").ok()?;
        (r.len() >= 4).then_some(())
    })?;
    assert!(prom
        .query("skeletonhunter_probe_rtt_seconds_bucket")?
        .is_empty());

    let (native, info) = pairs_with_rtt(&prom, "native", 2.0)?;
    assert_eq!(native, 2.0, "--histograms native");
    assert!(info.contains("mode=\"native\"} 1"), "{info}");
    let (auto, info) = pairs_with_rtt(&prom, "auto", 2.0)?;
    assert_eq!(auto, 2.0, "--histograms auto");
    assert!(info.contains("mode=\"native_or_classic\"} 1"), "{info}");
    // What the localizer read before: no bucket series, no median.
    let (classic, info) = pairs_with_rtt(&prom, "classic", 2.0)?;
    assert_eq!(classic, 0.0, "--histograms classic on a native-only store");
    assert!(info.contains("mode=\"classic\"} 1"), "{info}");
    Ok(())
}

#[test]
fn auto_reads_classic_from_victoriametrics() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let vm = start_store(Store::VictoriaMetrics, &fabric)?;
    let (with_rtt, info) = pairs_with_rtt(&vm, "auto", 30.0)?;
    assert!(info.contains("mode=\"classic\"} 1"), "{info}");
    assert!(with_rtt > 0.0, "no RTT median from VictoriaMetrics");
    Ok(())
}
