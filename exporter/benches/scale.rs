//! Scale of one exporter: classic histograms (what a text scraper gets,
//! the baseline) against native histograms (what a native-histogram
//! Prometheus stores with the default `both`), in one run.
//!
//! Prints the series budget per peer and protocol (counted on real
//! renders), then runs the exporter twice, one mode after the other, in a
//! fresh network namespace probing N loopback targets (127.1.x.y) at 1 Hz
//! (loopback never drops a packet, so any loss the exporter counts,
//! `lost / sent`, is false loss),
//! and prints side by side: CPU (share of one core), peak RSS, false loss,
//! kernel receive-buffer drops, and `/metrics` as plain text, gzip-coded
//! text, protobuf and gzip-coded protobuf (bytes, fetch time median of 3,
//! the exporter's own encode time), and the series a scrape stores.
//!
//! Run as root (network namespaces; ICMP needs a raw or ping socket):
//!   cargo bench -p skeletonhunter-exporter --bench scale
//! Environment: BENCH_PEERS (default 1000; the figure is 10000),
//! BENCH_SECONDS (measured window, default 30), BENCH_PROTOCOL (icmp, the
//! default, or udp against the exporter's own responder).

#[path = "support/mod.rs"]
mod support;

use skeletonhunter_exporter::model::{HistogramMode, Protocol};
use skeletonhunter_exporter::telemetry::budget;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::{
    cpu_seconds, env_u64, fetch_with, peak_rss_mb, spawn_exporter, sum, targets, wait_ready, Ns,
};

const WARMUP: Duration = Duration::from_secs(5);
const METRICS: &str = "127.0.0.1:9465";
const UDP_PORT: u16 = 9466;

/// One exposition variant: its request headers.
const VARIANTS: [(&str, &str); 4] = [
    ("text", ""),
    ("text+gzip", "Accept-Encoding: gzip\r\n"),
    ("protobuf", PROTOBUF_HEADERS),
    ("protobuf+gzip", PROTOBUF_GZIP_HEADERS),
];
const PROTOBUF_HEADERS: &str = "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited\r\n";
const PROTOBUF_GZIP_HEADERS: &str = "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited\r\nAccept-Encoding: gzip\r\n";

/// One scrape variant's figures.
struct Scrape {
    bytes: usize,
    fetch_ms: f64,
    encode_ms: f64,
}

/// One run's figures.
struct Run {
    mode: HistogramMode,
    cpu_share: f64,
    rss_mb: f64,
    probes: f64,
    loss: f64,
    drops: f64,
    scrapes: Vec<Scrape>,
    /// Series of the text scrape, and as a native-histogram server stores
    /// the protobuf scrape.
    series_text: usize,
    series_stored: usize,
}

fn config(mode: HistogramMode, protocol: Protocol, peers: usize) -> String {
    let responder = match protocol {
        Protocol::Udp => format!("{{udp: \"0.0.0.0:{UDP_PORT}\", tcp: \"off\"}}"),
        _ => "{udp: \"off\", tcp: \"off\"}".to_string(),
    };
    let mut y = format!(
        "listen: {METRICS}\nidentity: {{node: bench}}\nresponder: {responder}\n\
         probe: {{interval: 1s, timeout: 1s, protocols: [{protocol}], udp_port: {UDP_PORT}, flow_traces_per_minute: 0}}\n\
         metrics: {{histograms: {}}}\ndiscovery:\n  ebpf: false\n  static:\n",
        mode.as_str()
    );
    for t in targets(peers) {
        y.push_str(&format!("    - {{address: {t}}}\n"));
    }
    y
}

/// Scrape with `headers` in `ns`, three tries.
fn scrape(ns: &Ns, headers: &'static str) -> (Vec<u8>, f64) {
    let addr: SocketAddr = METRICS.parse().unwrap();
    (0..3)
        .find_map(|_| {
            ns.run_in(move || fetch_with(addr, headers))
                .expect("enter the namespace")
        })
        .expect("scrape failed 3 times")
}

fn text(ns: &Ns) -> String {
    String::from_utf8_lossy(&scrape(ns, "").0).into_owned()
}

/// The exporter's encode time of the previous scrape, in ms.
fn encode_ms(body: &str) -> f64 {
    sum(body, "skeletonhunter_exporter_render_seconds") * 1e3
}

fn variant(ns: &Ns, headers: &'static str) -> Scrape {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..3 {
        let (body, secs) = scrape(ns, headers);
        bytes = body.len();
        times.push(secs * 1e3);
    }
    times.sort_by(f64::total_cmp);
    // The next scrape reports the encode time of this variant's last one.
    let encode_ms = encode_ms(&text(ns));
    Scrape {
        bytes,
        fetch_ms: times[1],
        encode_ms,
    }
}

fn run(mode: HistogramMode, protocol: Protocol, peers: usize, window: Duration) -> Run {
    let ns = Ns::new("bench-scale").expect("create a network namespace");
    let dir = std::env::temp_dir().join(format!("shbench-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("exporter.yaml");
    std::fs::write(&cfg, config(mode, protocol, peers)).unwrap();
    let mut child = spawn_exporter(&ns, &cfg);
    let pid = child.id();
    wait_ready("exporter", &ns, &mut child, METRICS.parse().unwrap());
    std::thread::sleep(WARMUP);
    let b1 = text(&ns);
    let (c1, t1) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(window);
    let (c2, secs) = (cpu_seconds(pid), t1.elapsed().as_secs_f64());
    let b2 = text(&ns);
    let delta = |name: &str| sum(&b2, name) - sum(&b1, name);
    // Loss as operators read it, rate(lost) / rate(sent): both counted by
    // the exporter, so the probes in flight while a large scrape is
    // encoded (sent read after the histograms) do not count as loss.
    let probes = delta("skeletonhunter_probe_sent_total");
    let lost = delta("skeletonhunter_probe_lost_total");
    let drops = delta("skeletonhunter_socket_receive_drops_total")
        + delta("skeletonhunter_host_udp_receive_buffer_errors_total");
    let scrapes: Vec<Scrape> = VARIANTS.iter().map(|(_, h)| variant(&ns, h)).collect();
    let families = budget::decode(&scrape(&ns, PROTOBUF_HEADERS).0).expect("decode protobuf");
    let rss_mb = peak_rss_mb(pid);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        mode,
        cpu_share: (c2 - c1) / secs,
        rss_mb,
        probes,
        loss: lost / probes.max(1.0),
        drops,
        scrapes,
        series_text: budget::text_series(&b2),
        series_stored: budget::protobuf_series(&families),
    }
}

fn print_budget() {
    println!("Series per peer and protocol (text scrape / stored by a native-histogram Prometheus from protobuf):");
    print!("{:<10}", "mode");
    for p in Protocol::ALL {
        print!("{:>14}", p.as_str());
    }
    println!();
    for mode in HistogramMode::ALL {
        print!("{:<10}", mode.as_str());
        for p in Protocol::ALL {
            let s = budget::per_peer(mode, p).expect("count series");
            print!("{:>14}", format!("{} / {}", s.text, s.protobuf));
        }
        println!();
    }
}

fn print_runs(runs: &[Run], peers: usize) {
    let row = |label: &str, f: &dyn Fn(&Run) -> String| {
        print!("{label:<34}");
        for r in runs {
            print!("{:>26}", f(r));
        }
        println!();
    };
    row("", &|r| r.mode.as_str().to_string());
    row("CPU (share of one core)", &|r| {
        format!("{:.2} %", 100.0 * r.cpu_share)
    });
    row("peak RSS", &|r| format!("{:.1} MB", r.rss_mb));
    row("false loss", &|r| {
        format!("{:.3} % of {:.0}", 100.0 * r.loss, r.probes)
    });
    row("kernel receive-buffer drops", &|r| {
        format!("{:.0}", r.drops)
    });
    row("series in the text scrape", &|r| r.series_text.to_string());
    row("series stored (protobuf, native)", &|r| {
        r.series_stored.to_string()
    });
    row("  per peer", &|r| {
        format!("{:.1}", r.series_stored as f64 / peers as f64)
    });
    for (i, (name, _)) in VARIANTS.iter().enumerate() {
        row(&format!("/metrics {name}"), &|r| {
            let s = &r.scrapes[i];
            format!(
                "{:.2} MB {:.0}/{:.0} ms",
                s.bytes as f64 / 1e6,
                s.fetch_ms,
                s.encode_ms
            )
        });
    }
    println!("(/metrics: bytes, fetch time median of 3 / the exporter's encode time)");
}

fn main() {
    // Only run when asked for benchmarks (`cargo test --benches` passes
    // no --bench).
    if !std::env::args().any(|a| a == "--bench") {
        println!("scale: run with `cargo bench -p skeletonhunter-exporter --bench scale`");
        return;
    }
    print_budget();
    if !skeletonhunter_exporter::sys::host::is_root() {
        eprintln!("scale: the runs need root (network namespaces); skipped");
        return;
    }
    let peers = env_u64("BENCH_PEERS", 1000) as usize;
    let window = Duration::from_secs(env_u64("BENCH_SECONDS", 30));
    let protocol: Protocol = std::env::var("BENCH_PROTOCOL")
        .unwrap_or_else(|_| "icmp".into())
        .parse()
        .expect("BENCH_PROTOCOL: icmp or udp");
    println!(
        "\n{protocol} probing of {peers} loopback targets at 1 Hz, measured over {}s after {}s warm-up",
        window.as_secs(),
        WARMUP.as_secs()
    );
    let runs: Vec<Run> = [HistogramMode::Classic, HistogramMode::Native]
        .into_iter()
        .map(|m| run(m, protocol, peers, window))
        .collect();
    print_runs(&runs, peers);
}
