//! CPU cost of traffic discovery at 10,000 connection events per second,
//! with the polling fallback side by side.
//!
//! Run as root: `cargo bench -p skeletonhunter-exporter --bench discovery`
//! (optional arguments: seconds to run, default 10; target events/s,
//! default 10000).
//!
//! The benchmark moves itself into a fresh network namespace (nothing leaves
//! the machine) with 32 addresses on its loopback, loads the exporter's
//! real BPF program, and opens and closes real TCP connections at a steady
//! rate: each connection is four state-change events (client and server
//! socket, each up and down). It reports
//! * the user-space consumer (ring buffer read, decode, skeleton update),
//!   measured as that thread's CPU time;
//! * the kernel-side program, from the kernel's BPF run-time statistics;
//! * the polling fallback reading /proc/net/tcp{,6} with 1,000 established
//!   connections, per poll and at the default 2 s interval.

use discovery::skeleton::Tracker;
use skeletonhunter_exporter::discovery;
use skeletonhunter_exporter::model::traffic::{Filter, Timing};
use skeletonhunter_exporter::sys::ebpf::{self, EbpfSource};
use skeletonhunter_exporter::sys::{host, time};
use skeletonhunter_exporter::wire::discovery::Event;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REMOTES: u8 = 32;
const PORT: u16 = 29500;

fn thread_cpu() -> Duration {
    time::thread_cpu_time()
}

fn sh(args: &[&str]) {
    let st = std::process::Command::new(args[0])
        .args(&args[1..])
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", args[0]));
    assert!(st.success(), "{args:?} failed");
}

/// A private network namespace with 198.18.0.1..=32 on its loopback
/// interface (non-loopback addresses, so the skeleton filter keeps them).
fn private_net() {
    // Before any other thread exists: new threads inherit the namespace.
    if let Err(e) = host::unshare_network() {
        panic!("unshare(CLONE_NEWNET): {e} (run as root)");
    }
    sh(&["ip", "link", "set", "lo", "up"]);
    for i in 1..=REMOTES {
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("198.18.0.{i}/32"),
            "dev",
            "lo",
        ]);
    }
}

fn remote(i: u64) -> SocketAddr {
    let host = 1 + (i % REMOTES as u64) as u8;
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, host), PORT))
}

/// What the consumer thread measured.
struct Consumed {
    events: u64,
    bad: u64,
    cpu: Duration,
    wall: Duration,
    dropped: u64,
    prog: Option<(Duration, u64)>,
    remotes: usize,
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let secs: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let rate: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000.0);
    if !host::is_root() {
        eprintln!("discovery benchmark: needs root (BPF and a network namespace)");
        std::process::exit(1);
    }
    private_net();
    let netns = ebpf::own_netns().expect("netns");
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
    let src = EbpfSource::load(netns, true).expect("load BPF (root, tracefs)");
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = spawn_acceptor(&stop);
    let consumer = spawn_consumer(src, stop.clone());
    let (made, failed) = generate(secs, rate);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let c = consumer.join().unwrap();
    println!("traffic discovery benchmark ({secs:.0} s, target {rate:.0} events/s)");
    println!(
        "  connections made        {made} ({failed} failed), accepted {}",
        accepted.load(Ordering::Relaxed)
    );
    report(&c);
    poll_reference(netns);
}

/// Accept (and close) every connection until `stop`; returns the count.
fn spawn_acceptor(stop: &Arc<AtomicBool>) -> Arc<AtomicU64> {
    let listener = TcpListener::bind(("0.0.0.0", PORT)).expect("bind");
    let accepted = Arc::new(AtomicU64::new(0));
    let (stop, count) = (stop.clone(), accepted.clone());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((s, _)) => {
                    count.fetch_add(1, Ordering::Relaxed);
                    drop(s);
                }
                Err(_) => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    });
    accepted
}

/// Consumer: what the exporter's discovery thread does.
fn spawn_consumer(mut src: EbpfSource, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Consumed> {
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let cpu0 = thread_cpu();
        let mut tracker = Tracker::new(Timing::default(), Filter::default(), t0);
        let (mut events, mut bad) = (0u64, 0u64);
        let mut next_tick = t0;
        while !stop.load(Ordering::Relaxed) {
            src.wait(Duration::from_millis(100));
            let now = Instant::now();
            src.drain(|e| match e {
                Ok(Event::TcpUp { conn, .. }) => {
                    events += 1;
                    tracker.up(conn, now);
                }
                Ok(Event::TcpDown { key, .. }) => {
                    events += 1;
                    tracker.down(key, now);
                }
                Ok(_) => events += 1,
                Err(_) => bad += 1,
            });
            if now >= next_tick {
                tracker.tick(now);
                next_tick = now + Duration::from_millis(250);
            }
        }
        Consumed {
            events,
            bad,
            cpu: thread_cpu() - cpu0,
            wall: t0.elapsed(),
            dropped: src.dropped(),
            prog: src.tracepoint_stats(),
            remotes: tracker.remotes(),
        }
    })
}

/// Generator: `rate` events/s = rate/4 connections/s, paced every 10 ms.
/// Returns (connections made, failed).
fn generate(secs: f64, rate: f64) -> (u64, u64) {
    let conns_per_sec = rate / 4.0;
    let start = Instant::now();
    let mut made = 0u64;
    let mut failed = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let due = (start.elapsed().as_secs_f64() * conns_per_sec) as u64;
        while made < due {
            match TcpStream::connect_timeout(&remote(made), Duration::from_secs(1)) {
                Ok(s) => {
                    // RST on close: no TIME_WAIT pile-up over the run.
                    let _ = socket_linger0(&s);
                    drop(s);
                }
                Err(_) => failed += 1,
            }
            made += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (made, failed)
}

fn report(c: &Consumed) {
    let ev_rate = c.events as f64 / c.wall.as_secs_f64();
    let consumer_pct = 100.0 * c.cpu.as_secs_f64() / c.wall.as_secs_f64();
    println!(
        "  events decoded          {} ({ev_rate:.0}/s), malformed {}, dropped in kernel {}",
        c.events, c.bad, c.dropped
    );
    println!("  remotes tracked         {}", c.remotes);
    println!(
        "  user-space consumer     {:.3} s CPU = {consumer_pct:.2}% of one core, {:.2} us/event",
        c.cpu.as_secs_f64(),
        1e6 * c.cpu.as_secs_f64() / c.events.max(1) as f64
    );
    let mut kernel_pct = 0.0;
    match c.prog {
        Some((rt, cnt)) if cnt > 0 => {
            kernel_pct = 100.0 * rt.as_secs_f64() / c.wall.as_secs_f64();
            println!(
                "  BPF program (kernel)    {cnt} runs, {:.0} ns/run = {kernel_pct:.3}% of one core",
                rt.as_nanos() as f64 / cnt as f64
            );
        }
        _ => println!("  BPF program (kernel)    no run-time statistics (kernel < 5.8?)"),
    }
    println!(
        "  discovery total         {:.2}% of one core at {ev_rate:.0} events/s",
        consumer_pct + kernel_pct
    );
}

/// Reference: the polling fallback with 1,000 established connections.
fn poll_reference(netns: u32) {
    let mut held = Vec::new();
    let listener2 = TcpListener::bind(("0.0.0.0", PORT + 1)).expect("bind");
    for i in 0..1000u64 {
        let mut a = remote(i);
        a.set_port(PORT + 1);
        let c = TcpStream::connect(a).expect("connect");
        let (s, _) = listener2.accept().expect("accept");
        held.push((c, s));
    }
    let mut tracker = Tracker::new(Timing::default(), Filter::default(), Instant::now());
    let polls = 20;
    let cpu0 = thread_cpu();
    let mut seen = 0;
    for _ in 0..polls {
        let socks = discovery::sockdiag::established(std::path::Path::new("/proc/self")).unwrap();
        seen = socks.len();
        let conns = discovery::sockdiag::to_conns(&socks, netns, &std::collections::HashMap::new());
        tracker.sync(&conns, Instant::now());
        tracker.tick(Instant::now());
    }
    let per_poll = (thread_cpu() - cpu0).as_secs_f64() / polls as f64;
    println!(
        "  polling fallback        {seen} sockets: {:.2} ms CPU per poll = {:.3}% of one core at the default 2 s interval (sees only connections open at a poll)",
        per_poll * 1e3,
        100.0 * per_poll / 2.0
    );
}

fn socket_linger0(s: &TcpStream) -> std::io::Result<()> {
    socket2::SockRef::from(s).set_linger(Some(Duration::ZERO))
}
