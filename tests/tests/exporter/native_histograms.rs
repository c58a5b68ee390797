//! Native histograms end to end: two exporters probing themselves over
//! loopback (UDP and TCP), one with `metrics.histograms: both`, one with
//! `native`, each scraped by a real Prometheus started with
//! `--enable-feature=native-histograms` (it negotiates the protobuf
//! exposition) and by one without it (text). The native server answers
//! `histogram_quantile` over the native series close to the classic
//! server's answer from the buckets of the same exporter, and stores at
//! most 12 series per peer and protocol; the classic server still reads
//! the classic buckets (`both`) or `_count`/`_sum` (`native`). An exporter
//! on its default configuration is `both`: at most 12 series per peer and
//! protocol on the native server, the classic buckets on the other.
//! Unprivileged: loopback only.

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tests::exporter;
use skeletonhunter_tools::process::{wait_until, ChildGuard};
use skeletonhunter_tools::servers::{self, free_loopback_addr, Server, ServerOpts, TempDir};
use std::net::SocketAddr;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);
const EVERY: Duration = Duration::from_millis(500);

/// Start an exporter in histogram `mode` (`None`: the default, no
/// `metrics:` key) probing its own responders on loopback as the peer
/// `<name>-self`; returns it and its `/metrics` address once that answers.
fn exporter(dir: &TempDir, name: &str, mode: Option<&str>) -> Result<(ChildGuard, SocketAddr)> {
    let (listen, udp, tcp) = (
        free_loopback_addr()?,
        free_loopback_addr()?,
        free_loopback_addr()?,
    );
    let cfg = format!(
        "listen: \"{listen}\"\nidentity: {{node: \"{name}\"}}\n\
         responder: {{udp: \"{udp}\", tcp: \"{tcp}\"}}\n\
         probe: {{interval: 100ms, timeout: 1s, protocols: [udp, tcp], udp_port: {}, tcp_port: {}}}\n\
         {metrics}\
         discovery:\n  ebpf: false\n  static:\n    - {{address: \"127.0.0.1\", name: \"{name}-self\"}}\n",
        udp.port(),
        tcp.port(),
        metrics = mode.map_or(String::new(), |m| format!("metrics: {{histograms: {m}}}\n")),
    );
    let child = exporter::start_on_loopback(dir.path(), name, &cfg, listen)?;
    Ok((child, listen))
}

fn prometheus(targets: &[SocketAddr], native: bool) -> Result<Server> {
    let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    let cfg = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\nscrape_configs:\n  - job_name: exporter\n    static_configs: [{{targets: [{}]}}]\n",
        list.join(", ")
    );
    let mut opts = ServerOpts::new(free_loopback_addr()?, &cfg);
    if native {
        opts = opts.arg("--enable-feature=native-histograms");
    }
    servers::start_prometheus(opts)
}

/// The value of a one-element instant-query answer.
fn scalar(result: &[Value]) -> Option<f64> {
    let [one] = result else { return None };
    one["value"][1]
        .as_str()?
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
}

/// Wait until `promql` answers one finite value on `prom`.
fn value(prom: &Server, promql: &str) -> Result<f64> {
    wait_until(promql, WAIT, EVERY, || {
        prom.query(promql).ok().and_then(|r| scalar(&r))
    })
}

/// Series stored per protocol for the peer `dst`, once every protocol has
/// its series.
fn series_per_protocol(prom: &Server, dst: &str) -> Result<Vec<(String, f64)>> {
    let q = format!("count by (protocol) ({{dst_node=\"{dst}\"}})");
    wait_until(&q, WAIT, EVERY, || {
        let r = prom.query(&q).ok()?;
        let v: Vec<(String, f64)> = r
            .iter()
            .filter_map(|s| {
                let p = s["metric"]["protocol"].as_str()?.to_string();
                Some((p, s["value"][1].as_str()?.parse().ok()?))
            })
            .collect();
        (v.len() == 2).then_some(v)
    })
}

#[test]
fn prometheus_reads_native_histograms_as_accurately_as_the_buckets() -> Result<()> {
    let dir = TempDir::new("native-hist")?;
    let (_both, both_addr) = exporter(&dir, "nh-both", Some("both"))?;
    let (_native, native_addr) = exporter(&dir, "nh-native", Some("native"))?;
    let targets = [both_addr, native_addr];
    let native_prom = prometheus(&targets, true)?;
    let classic_prom = prometheus(&targets, false)?;

    let sel = |dst: &str| format!("{{dst_node=\"{dst}\",protocol=\"udp\"}}");
    for dst in ["nh-both-self", "nh-native-self"] {
        // Native series: only a native histogram answers this form.
        let native_q = format!(
            "histogram_quantile(0.5, rate(skeletonhunter_probe_rtt_seconds{}[1m]))",
            sel(dst)
        );
        let native_median = value(&native_prom, &native_q)?;
        assert!(
            native_median > 0.0 && native_median < 1.0,
            "{dst}: {native_median}"
        );
        // At most 12 series per peer and protocol on the native server.
        for (protocol, n) in series_per_protocol(&native_prom, dst)? {
            eprintln!("{dst} {protocol}: {n} series on the native server");
            assert!(n <= 12.0, "{dst} {protocol}: {n} series");
        }
        if dst == "nh-both-self" {
            // The same probes through the classic buckets (text scrape).
            let classic_q = format!(
                "histogram_quantile(0.5, sum by (le) (rate(skeletonhunter_probe_rtt_seconds_bucket{}[1m])))",
                sel(dst)
            );
            let classic_median = value(&classic_prom, &classic_q)?;
            // Both estimates lie in the same doubling bucket (native's
            // buckets are ~9 % wide), so they are within a factor 2.
            let ratio = native_median / classic_median;
            eprintln!("{dst}: median native {native_median} classic {classic_median}");
            assert!(
                (0.5..=2.0).contains(&ratio),
                "{dst}: native {native_median} vs classic {classic_median}"
            );
            // The native server keeps no bucket series of the histogram.
            let buckets = native_prom.query(&format!(
                "skeletonhunter_probe_rtt_seconds_bucket{}",
                sel(dst)
            ))?;
            assert!(buckets.is_empty(), "{buckets:?}");
        } else {
            // A server without native histograms still has the mean.
            let mean_q = format!(
                "rate(skeletonhunter_probe_rtt_seconds_sum{s}[1m]) / rate(skeletonhunter_probe_rtt_seconds_count{s}[1m])",
                s = sel(dst)
            );
            let mean = value(&classic_prom, &mean_q).context("mean from text")?;
            assert!(mean > 0.0 && mean < 1.0, "{mean}");
        }
    }
    Ok(())
}

/// The labels of `name`'s probes of itself.
fn self_pair(name: &str) -> String {
    format!("src_node=\"{name}\",dst_node=\"{name}-self\"")
}

/// Series of `name`'s probes of itself, per protocol, that `prom` stores
/// (every `skeletonhunter_probe_*` name: RTT, sent, lost, flows, dials),
/// once both protocols have their RTT histogram in either form.
fn probe_series(prom: &Server, name: &str) -> Result<Vec<(String, f64)>> {
    let pair = self_pair(name);
    let rtt = format!(
        "count by (protocol) ({{__name__=~\"skeletonhunter_probe_rtt_seconds.*\",{pair}}})"
    );
    wait_until(&rtt, WAIT, EVERY, || {
        (prom.query(&rtt).ok()?.len() == 2).then_some(())
    })?;
    let q = format!("count by (protocol) ({{__name__=~\"skeletonhunter_probe_.*\",{pair}}})");
    let r = prom.query(&q)?;
    Ok(r.iter()
        .filter_map(|s| {
            let p = s["metric"]["protocol"].as_str()?.to_string();
            Some((p, s["value"][1].as_str()?.parse().ok()?))
        })
        .collect())
}

#[test]
fn the_default_stores_native_histograms_where_negotiated_and_buckets_elsewhere() -> Result<()> {
    let dir = TempDir::new("native-hist-default")?;
    let name = "nh-default";
    let (_exporter, addr) = exporter(&dir, name, None)?;
    let native_prom = prometheus(&[addr], true)?;
    let classic_prom = prometheus(&[addr], false)?;

    // A native-histogram Prometheus: at most 12 series per peer and
    // protocol in all (classic buckets: 32), the RTT as one native
    // histogram (`histogram_count` answers only for one), no bucket series.
    let pair = self_pair(name);
    let native = probe_series(&native_prom, name)?;
    assert_eq!(native.len(), 2, "{native:?}");
    for (protocol, n) in &native {
        eprintln!("default, native server, {protocol}: {n} series");
        assert!(*n <= 12.0, "{protocol}: {n} series on the native server");
    }
    let hist = format!("histogram_count(skeletonhunter_probe_rtt_seconds{{{pair}}})");
    assert_eq!(native_prom.query(&hist)?.len(), 2, "{hist}");
    let buckets = native_prom.query(&format!(
        "skeletonhunter_probe_rtt_seconds_bucket{{{pair}}}"
    ))?;
    assert!(buckets.is_empty(), "{buckets:?}");

    // A Prometheus without the feature scrapes text: the classic buckets,
    // 24 bounds and +Inf per pair and protocol.
    for (protocol, n) in probe_series(&classic_prom, name)? {
        eprintln!("default, classic server, {protocol}: {n} series");
    }
    let q = format!("count by (protocol) (skeletonhunter_probe_rtt_seconds_bucket{{{pair}}})");
    let per_protocol = classic_prom.query(&q)?;
    assert_eq!(per_protocol.len(), 2, "{per_protocol:?}");
    for s in &per_protocol {
        assert_eq!(s["value"][1].as_str(), Some("25"), "{s}");
    }
    Ok(())
}
