//! Exposition cost: prometheus-client (what we use) against the `prometheus`
//! crate, on the exporter's real metric shape (an RTT histogram plus sent and
//! lost counters per peer pair and protocol).
//!
//! Run: `cargo bench -p skeletonhunter-common --bench encoding [-- PAIRS ITERATIONS]`
//! Prints both render times and their ratio; the machines are noisy, so read
//! the ratio, not the absolute numbers.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::hint::black_box;
use std::time::Instant;

type Labels = Vec<(&'static str, String)>;

fn buckets() -> Vec<f64> {
    exponential_buckets(1e-6, 2.0, 24).collect()
}

fn ours(pairs: usize) -> Registry {
    let mut reg = Registry::default();
    let rtt = Family::<Labels, Histogram>::new_with_constructor(|| Histogram::new(buckets()));
    let sent = Family::<Labels, Counter>::default();
    let lost = Family::<Labels, Counter>::default();
    reg.register(
        "skeletonhunter_probe_rtt_seconds",
        "Probe round-trip time",
        rtt.clone(),
    );
    reg.register("skeletonhunter_probe_sent", "Probes sent", sent.clone());
    reg.register("skeletonhunter_probe_lost", "Probes lost", lost.clone());
    for i in 0..pairs {
        let l: Labels = vec![
            ("src_node", "node-0".to_string()),
            ("dst_node", format!("node-{i}")),
            ("protocol", "udp".to_string()),
        ];
        rtt.get_or_create(&l).observe(20e-6 + i as f64 * 1e-7);
        sent.get_or_create(&l).inc_by(100);
        lost.get_or_create(&l).inc();
    }
    reg
}

fn theirs(pairs: usize) -> prometheus::Registry {
    let reg = prometheus::Registry::new();
    let labels = &["src_node", "dst_node", "protocol"];
    let rtt = prometheus::HistogramVec::new(
        prometheus::HistogramOpts::new("skeletonhunter_probe_rtt_seconds", "Probe round-trip time")
            .buckets(buckets()),
        labels,
    )
    .expect("histogram");
    let sent = prometheus::IntCounterVec::new(
        prometheus::Opts::new("skeletonhunter_probe_sent_total", "Probes sent"),
        labels,
    )
    .expect("counter");
    let lost = prometheus::IntCounterVec::new(
        prometheus::Opts::new("skeletonhunter_probe_lost_total", "Probes lost"),
        labels,
    )
    .expect("counter");
    reg.register(Box::new(rtt.clone())).expect("register");
    reg.register(Box::new(sent.clone())).expect("register");
    reg.register(Box::new(lost.clone())).expect("register");
    for i in 0..pairs {
        let dst = format!("node-{i}");
        let l = ["node-0", dst.as_str(), "udp"];
        rtt.with_label_values(&l).observe(20e-6 + i as f64 * 1e-7);
        sent.with_label_values(&l).inc_by(100);
        lost.with_label_values(&l).inc();
    }
    reg
}

/// Median seconds per call of `f` over `iters` calls, and the output size.
fn time(iters: usize, mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut samples = Vec::with_capacity(iters);
    let mut size = 0;
    for _ in 0..iters {
        let t = Instant::now();
        size = black_box(f());
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], size)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let pairs = args.first().copied().unwrap_or(1000);
    let iters = args.get(1).copied().unwrap_or(50).max(1);

    let a = ours(pairs);
    let b = theirs(pairs);
    let (ta, sa) = time(iters, || {
        let mut s = String::with_capacity(1 << 20);
        encode(&mut s, &a).expect("encode");
        s.len()
    });
    let (tb, sb) = time(iters, || {
        let mut buf = Vec::with_capacity(1 << 20);
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &b.gather(), &mut buf)
            .expect("encode");
        buf.len()
    });
    println!(
        "exposition of {pairs} pairs (histogram + 2 counters each), median of {iters} renders"
    );
    println!("  prometheus-client: {:8.3} ms  {sa} bytes", ta * 1e3);
    println!("  prometheus crate:  {:8.3} ms  {sb} bytes", tb * 1e3);
    println!(
        "  ratio (prometheus crate / prometheus-client): {:.1}x",
        tb / ta
    );
}
