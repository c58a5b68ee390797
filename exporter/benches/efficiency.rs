//! Efficiency of the probe path: a baseline exporter binary against this
//! build, side by side in one run on the same machine, at each peer count
//! and for ICMP, UDP and the UDP responder.
//!
//! Each run starts a fresh network namespace. ICMP: one exporter probes N
//! loopback targets (127.1.x.y) at 1 Hz. UDP: one exporter probes them
//! with its responder off, a second one (no peers) is the responder they
//! all answer at, so the prober's and the responder's CPU are apart.
//! Loopback never drops a packet, so any loss counted (`lost / sent`) is
//! false loss. A reference pinger in the bench measures the same path at
//! the same time, one quiet probe at a time (see `efficiency/reference.rs`);
//! the RTT error is the exporter's median (native histograms, ~4 %
//! resolution) minus the reference's. Runs alternate baseline and new.
//! Each round also runs the floor (`efficiency/floor.rs`): a bare prober
//! sending the same probes on the same schedule with nothing but the
//! system calls, whose CPU is what the kernel alone charges for them here;
//! the table ends with it and each build's CPU over it.
//!
//! Run as root (network namespaces, raw ICMP):
//!   BENCH_BASELINE_BIN=/path/to/old/skeletonhunter-exporter \
//!   cargo bench -p skeletonhunter-exporter --bench efficiency
//! Environment: BENCH_PEERS (comma-separated, default 1000,10000),
//! BENCH_PROTOCOLS (default icmp,udp), BENCH_SECONDS (measured window per
//! run, default 20), BENCH_ROUNDS (runs per build, alternating the order;
//! the table shows medians and summed probe counts, default 1). Without
//! BENCH_BASELINE_BIN only this build runs.
//!
//! Compare like with like: `cargo bench` builds the exporter binary with
//! the dev-dependencies' features unified in, so it is not the binary
//! `cargo build --release` makes from the same source (docs/exporter.md,
//! "Probe-path cost"). Build both sources with `cargo build --release`
//! (after `cargo bench --no-run`, which would rebuild the binary) and run
//! the executable `cargo bench --no-run` named, with `--bench`.

#[path = "efficiency/floor.rs"]
mod floor;
#[path = "efficiency/native.rs"]
mod native;
#[path = "efficiency/reference.rs"]
mod reference;
// Shared with the other benches: not every helper is used here.
#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use skeletonhunter_exporter::model::Protocol;
use skeletonhunter_exporter::telemetry::budget;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};
use support::{cpu_seconds, env_u64, fetch_with, peak_rss_mb, sum, targets, wait_ready, Ns};

const WARMUP: Duration = Duration::from_secs(5);
const PROBER_METRICS: &str = "127.0.0.1:9465";
const RESPONDER_METRICS: &str = "127.0.0.1:9467";
const UDP_PORT: u16 = 9466;
const PROTOBUF: &str = "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited\r\n";

/// One exporter process under measurement.
struct Process {
    child: Child,
    metrics: SocketAddr,
}

/// One run's figures.
#[derive(Default)]
struct Figures {
    cpu: f64,
    rss_mb: f64,
    sent: f64,
    lost: f64,
    rtt_error_us: Option<f64>,
    rtt_us: Option<f64>,
    responder_cpu: Option<f64>,
    responder_rss_mb: Option<f64>,
    replies: f64,
}

fn prober_config(protocol: Protocol, peers: usize) -> String {
    let mut y = format!(
        "listen: {PROBER_METRICS}\nidentity: {{node: bench}}\nresponder: {{udp: \"off\", tcp: \"off\"}}\n\
         probe: {{interval: 1s, timeout: 1s, protocols: [{protocol}], udp_port: {UDP_PORT}, flow_traces_per_minute: 0}}\n\
         metrics: {{histograms: native}}\ndiscovery:\n  ebpf: false\n  static:\n"
    );
    for t in targets(peers) {
        y.push_str(&format!("    - {{address: {t}}}\n"));
    }
    y
}

fn responder_config() -> String {
    format!(
        "listen: {RESPONDER_METRICS}\nidentity: {{node: responder}}\n\
         responder: {{udp: \"0.0.0.0:{UDP_PORT}\", tcp: \"off\", allow: [127.0.0.0/8], rate_limit: 0}}\n\
         probe: {{protocols: [udp], flow_traces_per_minute: 0}}\n\
         discovery:\n  ebpf: false\n"
    )
}

fn spawn(ns: &Ns, bin: &Path, dir: &Path, name: &str, cfg: String, metrics: &str) -> Process {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, cfg).expect("write the configuration");
    let mut child = ns
        .command(bin.to_str().expect("a UTF-8 binary path"))
        .arg("--config")
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the exporter");
    let metrics = metrics.parse().expect("an address");
    wait_ready(name, ns, &mut child, metrics);
    Process { child, metrics }
}

fn scrape(ns: &Ns, addr: SocketAddr, headers: &'static str) -> Vec<u8> {
    (0..3)
        .find_map(|_| {
            ns.run_in(move || fetch_with(addr, headers))
                .expect("enter the namespace")
        })
        .expect("scrape failed 3 times")
        .0
}

fn text(ns: &Ns, p: &Process) -> String {
    String::from_utf8_lossy(&scrape(ns, p.metrics, "")).into_owned()
}

/// The exporter's median RTT of `protocol`, in seconds.
fn exporter_median(ns: &Ns, p: &Process, protocol: Protocol) -> Option<f64> {
    let families = budget::decode(&scrape(ns, p.metrics, PROTOBUF)).ok()?;
    native::median(
        &families,
        "skeletonhunter_probe_rtt_seconds",
        ("protocol", protocol.as_str()),
    )
}

/// A fresh namespace, a directory for the configurations and, for UDP,
/// the responder (`bin`) every probe is answered by.
fn stage(bin: &Path, protocol: Protocol) -> (Ns, PathBuf, Option<Process>) {
    let ns = Ns::new("bench-eff").expect("create a network namespace");
    let dir = std::env::temp_dir().join(format!("shbench-eff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let responder = (protocol == Protocol::Udp).then(|| {
        spawn(
            &ns,
            bin,
            &dir,
            "responder",
            responder_config(),
            RESPONDER_METRICS,
        )
    });
    (ns, dir, responder)
}

/// The bare prober of [`floor`] over the same targets, for `window`
/// (UDP answered by the responder of `bin`).
fn floor_run(bin: &Path, protocol: Protocol, peers: usize, window: Duration) -> floor::Floor {
    let (ns, dir, responder) = stage(bin, protocol);
    let udp = protocol == Protocol::Udp;
    let f = ns
        .run_in(move || floor::run(udp, &targets(peers), UDP_PORT, window))
        .expect("enter the namespace")
        .expect("open the floor's socket");
    teardown(&dir, responder);
    f
}

/// Stop `processes` and remove the run's directory.
fn teardown(dir: &Path, processes: impl IntoIterator<Item = Process>) {
    for mut p in processes {
        let _ = p.child.kill();
        let _ = p.child.wait();
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn run(bin: &Path, protocol: Protocol, peers: usize, window: Duration) -> Figures {
    let (ns, dir, responder) = stage(bin, protocol);
    let prober = spawn(
        &ns,
        bin,
        &dir,
        "prober",
        prober_config(protocol, peers),
        PROBER_METRICS,
    );
    std::thread::sleep(WARMUP);
    let b1 = text(&ns, &prober);
    let r1 = responder.as_ref().map(|r| text(&ns, r));
    let pid = |p: &Process| p.child.id();
    let c1 = (
        cpu_seconds(pid(&prober)),
        responder.as_ref().map(|r| cpu_seconds(pid(r))),
    );
    let t1 = Instant::now();
    let reference = ns
        .run_in(move || reference::median(protocol, UDP_PORT, window))
        .expect("enter the namespace");
    let secs = t1.elapsed().as_secs_f64();
    let mut f = Figures {
        cpu: (cpu_seconds(pid(&prober)) - c1.0) / secs,
        ..Figures::default()
    };
    let b2 = text(&ns, &prober);
    f.sent =
        sum(&b2, "skeletonhunter_probe_sent_total") - sum(&b1, "skeletonhunter_probe_sent_total");
    f.lost =
        sum(&b2, "skeletonhunter_probe_lost_total") - sum(&b1, "skeletonhunter_probe_lost_total");
    f.rtt_us = exporter_median(&ns, &prober, protocol).map(|m| m * 1e6);
    f.rtt_error_us = f.rtt_us.zip(reference).map(|(m, r)| m - r * 1e6);
    f.rss_mb = peak_rss_mb(pid(&prober));
    if let (Some(r), Some(c)) = (&responder, c1.1) {
        f.responder_cpu = Some((cpu_seconds(pid(r)) - c) / secs);
        f.responder_rss_mb = Some(peak_rss_mb(pid(r)));
        let replies = "skeletonhunter_responder_replies_total";
        f.replies = sum(&text(&ns, r), replies) - r1.as_deref().map_or(0.0, |b| sum(b, replies));
    }
    teardown(&dir, [Some(prober), responder].into_iter().flatten());
    f
}

/// Print one table: a column per build, a row per figure, and the ratio
/// new / baseline where there is a baseline.
fn print_table(protocol: Protocol, peers: usize, names: &[&str], runs: &[Figures]) {
    println!("\n{protocol}, {peers} peers at 1 Hz");
    print!("{:<28}", "");
    names.iter().for_each(|n| print!("{n:>22}"));
    println!("{:>10}", if runs.len() > 1 { "new/base" } else { "" });
    let row = |label: &str, val: &dyn Fn(&Figures) -> Option<f64>, fmt: &dyn Fn(f64) -> String| {
        if runs.iter().all(|r| val(r).is_none()) {
            return;
        }
        print!("{label:<28}");
        runs.iter()
            .for_each(|r| print!("{:>22}", val(r).map_or("-".into(), fmt)));
        match (runs.first().and_then(val), runs.get(1).and_then(val)) {
            (Some(b), Some(n)) if b != 0.0 => println!("{:>10.2}", n / b),
            _ => println!(),
        }
    };
    let pct = |v: f64| format!("{v:.2} %");
    row("prober CPU (% of a core)", &|r| Some(100.0 * r.cpu), &pct);
    row("prober peak RSS (MB)", &|r| Some(r.rss_mb), &|v| {
        format!("{v:.1}")
    });
    row(
        "false loss (% of sent)",
        &|r| Some(100.0 * r.lost / r.sent.max(1.0)),
        &|v| format!("{v:.3} %"),
    );
    row("probes sent (all rounds)", &|r| Some(r.sent), &|v| {
        format!("{v:.0}")
    });
    row("p50 RTT (µs)", &|r| r.rtt_us, &|v| format!("{v:.1}"));
    row("p50 RTT error (µs)", &|r| r.rtt_error_us, &|v| {
        format!("{v:+.1}")
    });
    row(
        "responder CPU (% of a core)",
        &|r| r.responder_cpu.map(|c| 100.0 * c),
        &pct,
    );
    row("responder peak RSS (MB)", &|r| r.responder_rss_mb, &|v| {
        format!("{v:.1}")
    });
    row(
        "responder replies (all rounds)",
        &|r| r.responder_cpu.map(|_| r.replies),
        &|v| format!("{v:.0}"),
    );
}

/// The floor's median CPU and each build's CPU against it.
fn print_floor(floors: &[floor::Floor], runs: &[Figures]) {
    let mut cpu: Vec<f64> = floors.iter().map(|f| f.cpu).collect();
    cpu.sort_by(f64::total_cmp);
    let Some(&c) = cpu.get(cpu.len() / 2) else {
        return;
    };
    let sent: u64 = floors.iter().map(|f| f.sent).sum();
    let answered: u64 = floors.iter().map(|f| f.answered).sum();
    print!(
        "{:<28}{:>22}",
        "floor CPU (bare syscalls)",
        format!("{:.2} %", 100.0 * c)
    );
    println!("   ({answered} answers to {sent} probes)");
    print!("{:<28}", "prober CPU / floor");
    runs.iter()
        .for_each(|r| print!("{:>22}", format!("{:.2}", r.cpu / c.max(1e-9))));
    println!();
}

fn list<T>(name: &str, default: &str, parse: impl Fn(&str) -> T) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| parse(s.trim()))
        .collect()
}

fn main() {
    // Only run when asked for benchmarks (`cargo test --benches` passes
    // no --bench).
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "efficiency: run with `cargo bench -p skeletonhunter-exporter --bench efficiency`"
        );
        return;
    }
    if !skeletonhunter_exporter::sys::host::is_root() {
        eprintln!("efficiency: the runs need root (network namespaces); skipped");
        return;
    }
    let peers = list("BENCH_PEERS", "1000,10000", |s| {
        s.parse::<usize>().expect("BENCH_PEERS")
    });
    let protocols = list("BENCH_PROTOCOLS", "icmp,udp", |s| {
        s.parse::<Protocol>().expect("BENCH_PROTOCOLS: icmp or udp")
    });
    let window = Duration::from_secs(env_u64("BENCH_SECONDS", 20));
    let rounds = env_u64("BENCH_ROUNDS", 1).max(1);
    let new = PathBuf::from(env!("CARGO_BIN_EXE_skeletonhunter-exporter"));
    let mut builds = Vec::new();
    if let Ok(base) = std::env::var("BENCH_BASELINE_BIN") {
        builds.push(("baseline", PathBuf::from(base)));
    }
    builds.push(("new", new));
    let names: Vec<&str> = builds.iter().map(|b| b.0).collect();
    println!(
        "{rounds} round(s) of {} s measured per run after {} s warm-up; builds: {}",
        window.as_secs(),
        WARMUP.as_secs(),
        builds
            .iter()
            .map(|(n, p)| format!("{n} = {}", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for &n in &peers {
        for &p in &protocols {
            // Rounds alternate the order of the builds, so drift in the
            // machine's load does not favour one.
            let mut per_build: Vec<Vec<Figures>> = builds.iter().map(|_| Vec::new()).collect();
            let mut floors = Vec::new();
            for round in 0..rounds {
                let mut order: Vec<usize> = (0..builds.len()).collect();
                if round % 2 == 1 {
                    order.reverse();
                }
                for b in order {
                    per_build[b].push(run(&builds[b].1, p, n, window));
                }
                floors.push(floor_run(&builds[builds.len() - 1].1, p, n, window));
            }
            let runs: Vec<Figures> = per_build.iter().map(|r| median(r)).collect();
            print_table(p, n, &names, &runs);
            print_floor(&floors, &runs);
        }
    }
}

/// The median of each figure over `runs` (one run: itself).
fn median(runs: &[Figures]) -> Figures {
    let med = |f: &dyn Fn(&Figures) -> Option<f64>| {
        let mut v: Vec<f64> = runs.iter().filter_map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    Figures {
        cpu: med(&|r| Some(r.cpu)).unwrap_or(0.0),
        rss_mb: med(&|r| Some(r.rss_mb)).unwrap_or(0.0),
        // Loss is summed: one false loss in any run shows.
        sent: runs.iter().map(|r| r.sent).sum(),
        lost: runs.iter().map(|r| r.lost).sum(),
        rtt_error_us: med(&|r| r.rtt_error_us),
        rtt_us: med(&|r| r.rtt_us),
        responder_cpu: med(&|r| r.responder_cpu),
        responder_rss_mb: med(&|r| r.responder_rss_mb),
        replies: runs.iter().map(|r| r.replies).sum(),
    }
}
