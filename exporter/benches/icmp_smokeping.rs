//! ICMP probing cost, side by side with prometheus-smokeping-prober.
//!
//! Both probers ping the same N loopback targets (127.1.x.y) once a second
//! inside a fresh network namespace (loopback never drops a packet, so any
//! loss reported is false loss), one after the other so they do not compete
//! for CPU. For each: CPU seconds and share of one core over the measured
//! window, peak RSS, false loss, and the size and fetch time of /metrics.
//!
//! Run as root (raw ICMP sockets, network namespaces):
//!   cargo bench -p skeletonhunter-exporter --bench icmp_smokeping
//! Environment: BENCH_SECONDS (measured window, default 60), BENCH_PEERS
//! (default 1000), BENCH_BIG_PEERS (our exporter alone, default 10000;
//! 0 skips), BENCH_SMOKEPING=0 skips the reference.

#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use support::{
    cpu_seconds, env_u64, fetch, peak_rss_mb, spawn_exporter, sum, targets, wait_ready, Ns,
};

const WARMUP: Duration = Duration::from_secs(5);

struct Figures {
    name: String,
    peers: usize,
    window: f64,
    cpu: f64,
    rss_mb: f64,
    probes: f64,
    loss: f64,
    metrics_bytes: usize,
    render_ms: f64,
    render_min_ms: f64,
    encode_ms: Option<f64>,
    /// Seconds from start until /metrics answered.
    startup: f64,
}

impl Figures {
    fn print(&self) {
        println!(
            "{:<28} peers={:<6} window={:.0}s cpu={:.2}s ({:.2}% of a core) peak_rss={:.1}MB probes={:.0} false_loss={:.2}% metrics={:.0}KB fetch(median/min of 5)={:.1}/{:.1}ms startup={:.1}s",
            self.name,
            self.peers,
            self.window,
            self.cpu,
            100.0 * self.cpu / self.window,
            self.rss_mb,
            self.probes,
            100.0 * self.loss,
            self.metrics_bytes as f64 / 1024.0,
            self.render_ms,
            self.render_min_ms,
            self.startup
        );
        if let Some(e) = self.encode_ms {
            println!(
                "{:<28} /metrics encode time (exporter's own measure): {e:.1}ms",
                ""
            );
        }
    }
}

/// A prober under measure: its name, the tag of its network namespace and
/// scratch directory, where it serves /metrics, the counters that give its
/// probes and answers, its config file for a number of targets (name and
/// text) and how it starts in a namespace with that file.
struct Subject {
    name: &'static str,
    tag: &'static str,
    addr: &'static str,
    sent: &'static str,
    answered: &'static str,
    config: fn(usize) -> (String, String),
    spawn: fn(&Ns, &Path) -> Child,
}

const OURS: Subject = Subject {
    name: "skeletonhunter-exporter",
    tag: "ours",
    addr: "127.0.0.1:9465",
    sent: "skeletonhunter_probe_sent_total",
    answered: "skeletonhunter_probe_rtt_seconds_count",
    config: ours_config,
    spawn: spawn_exporter,
};

const SMOKEPING: Subject = Subject {
    name: "prometheus-smokeping-prober",
    tag: "smokeping",
    addr: "127.0.0.1:9374",
    sent: "smokeping_requests_total",
    answered: "smokeping_response_duration_seconds_count",
    config: smokeping_config,
    spawn: spawn_smokeping,
};

/// Start `child` (`subject`) in `ns`, let it warm up, measure for
/// `window`, scrape.
fn measure(
    subject: &Subject,
    ns: &Ns,
    mut child: Child,
    peers: usize,
    window: Duration,
) -> Figures {
    let Subject {
        name,
        sent,
        answered,
        ..
    } = *subject;
    let addr: SocketAddr = subject.addr.parse().unwrap();
    let pid = child.id();
    let started = wait_ready(name, ns, &mut child, addr);
    std::thread::sleep(WARMUP);
    let scrape = |what: &str| {
        (0..3)
            .find_map(|_| ns.run_in(move || fetch(addr)).expect("enter the namespace"))
            .unwrap_or_else(|| panic!("{name}: scrape {what} failed 3 times"))
    };
    let (b1, _) = scrape("at window start");
    let c1 = cpu_seconds(pid);
    let t1 = Instant::now();
    std::thread::sleep(window);
    let c2 = cpu_seconds(pid);
    let t2 = t1.elapsed().as_secs_f64();
    let (b2, _) = scrape("at window end");
    // Fetch time: median of 5, after the CPU window so scrapes are not
    // counted as probing cost.
    let mut times: Vec<f64> = (0..5).map(|_| scrape("for timing").1).collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // Our exporter also reports its own encoding time (of the previous
    // scrape): the render cost without HTTP transfer and client effects.
    let encode_ms = scrape("for the encode time")
        .0
        .lines()
        .find_map(|l| l.strip_prefix("skeletonhunter_exporter_render_seconds "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| s * 1e3);
    let rss = peak_rss_mb(pid);
    let _ = child.kill();
    let _ = child.wait();
    // Same formula for both: 1 - answers / requests over the window. On
    // loopback a reply takes microseconds, so probes in flight at the two
    // scrapes are a handful at most; anything more is the prober missing
    // replies.
    let probes = sum(&b2, sent) - sum(&b1, sent);
    let answers = sum(&b2, answered) - sum(&b1, answered);
    let loss = ((probes - answers).max(0.0) / probes.max(1.0)).min(1.0);
    Figures {
        name: name.to_string(),
        peers,
        window: t2,
        cpu: c2 - c1,
        rss_mb: rss,
        probes,
        loss,
        metrics_bytes: b2.len(),
        render_ms: times[2] * 1e3,
        render_min_ms: times[0] * 1e3,
        encode_ms,
        startup: started,
    }
}

/// Measure `subject` probing `peers` targets for `window`, in a fresh
/// namespace, its config in a scratch directory.
fn run(subject: &Subject, peers: usize, window: Duration) -> Figures {
    let ns = Ns::new(&format!("bench-{}", subject.tag)).expect("create a network namespace");
    let dir = std::env::temp_dir().join(format!("shbench-{}-{}", subject.tag, std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (file, text) = (subject.config)(peers);
    let cfg = dir.join(file);
    std::fs::write(&cfg, text).unwrap();
    let child = (subject.spawn)(&ns, &cfg);
    let f = measure(subject, &ns, child, peers, window);
    let _ = std::fs::remove_dir_all(&dir);
    f
}

fn ours_config(peers: usize) -> (String, String) {
    let mut y = String::from(
        "listen: 127.0.0.1:9465\nidentity: {node: bench}\nresponder: {udp: \"off\", tcp: \"off\"}\nprobe: {interval: 1s, timeout: 1s, protocols: [icmp]}\ndiscovery:\n  ebpf: false\n  static:\n",
    );
    for t in targets(peers) {
        y.push_str(&format!("    - {{address: {t}}}\n"));
    }
    (format!("exporter-{peers}.yaml"), y)
}

fn smokeping_config(peers: usize) -> (String, String) {
    let mut y = String::from(
        "targets:\n  - interval: 1s\n    network: ip4\n    protocol: icmp\n    hosts:\n",
    );
    for t in targets(peers) {
        y.push_str(&format!("      - {t}\n"));
    }
    ("smokeping.yml".to_string(), y)
}

fn spawn_smokeping(ns: &Ns, cfg: &Path) -> Child {
    ns.command("prometheus-smokeping-prober")
        .arg(format!("--config.file={}", cfg.display()))
        .arg("--web.listen-address=127.0.0.1:9374")
        .arg("--privileged")
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus-smokeping-prober (Debian package prometheus-smokeping-prober)")
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing
    // useful either. Only run when asked for benchmarks.
    if !std::env::args().any(|a| a == "--bench") {
        println!("icmp_smokeping: run with `cargo bench -p skeletonhunter-exporter --bench icmp_smokeping`");
        return;
    }
    if !skeletonhunter_exporter::sys::host::is_root() {
        eprintln!("icmp_smokeping: needs root (raw ICMP sockets, network namespaces); skipped");
        return;
    }
    let window = Duration::from_secs(env_u64("BENCH_SECONDS", 60));
    let peers = env_u64("BENCH_PEERS", 1000) as usize;
    let big = env_u64("BENCH_BIG_PEERS", 10_000) as usize;
    println!(
        "ICMP probing of {peers} loopback targets at 1 Hz, measured over {}s after {}s warm-up",
        window.as_secs(),
        WARMUP.as_secs()
    );
    let mut rows = vec![run(&OURS, peers, window)];
    rows[0].print();
    if env_u64("BENCH_SMOKEPING", 1) != 0 {
        let s = run(&SMOKEPING, peers, window);
        s.print();
        let o = &rows[0];
        println!(
            "ratio smokeping/ours: cpu {:.1}x, peak rss {:.1}x",
            s.cpu / o.cpu.max(1e-9),
            s.rss_mb / o.rss_mb.max(1e-9)
        );
        rows.push(s);
    }
    if big > 0 {
        let b = run(&OURS, big, window);
        b.print();
        rows.push(b);
    }
}
