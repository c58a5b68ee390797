//! What the exporter's process benchmarks share: loopback targets, a
//! network namespace, CPU and memory of a process, scraping `/metrics`
//! with given request headers, and summing samples.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// The test suite's namespace helper: deleted on drop, and every process
/// still inside (a prober left running by a failed run) killed first.
pub type Ns = skeletonhunter_tools::Netns;

/// An environment variable as a number, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `n` loopback targets, 127.1.x.y (250 per /24).
pub fn targets(n: usize) -> Vec<Ipv4Addr> {
    (0..n)
        .map(|i| Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8))
        .collect()
}

/// utime + stime of `pid` in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    cpu_seconds_in(&format!("/proc/{pid}/stat"))
}

/// utime + stime, in seconds, of the process or thread whose stat(5)
/// file is `path` (`/proc/thread-self/stat`: the calling thread).
pub fn cpu_seconds_in(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the parenthesised command name.
    let rest = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let hz = skeletonhunter_exporter::sys::host::clock_ticks_per_second();
    ticks / hz
}

/// Peak resident set size of `pid` in MB (VmHWM).
pub fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// GET /metrics with extra request `headers` (each ending in `\r\n`):
/// (raw body, seconds from connect to last byte).
pub fn fetch_with(addr: SocketAddr, headers: &str) -> Option<(Vec<u8>, f64)> {
    let t = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(30)).ok()?;
    // An overloaded prober can take many seconds to answer.
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n{headers}\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let secs = t.elapsed().as_secs_f64();
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some((buf.split_off(end + 4), secs))
}

/// GET /metrics as text: (body, seconds from connect to last byte).
pub fn fetch(addr: SocketAddr) -> Option<(String, f64)> {
    let (body, secs) = fetch_with(addr, "")?;
    Some((String::from_utf8_lossy(&body).into_owned(), secs))
}

/// Sum of every sample of `name` (any labels).
pub fn sum(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .map(|r| r.starts_with('{') || r.starts_with(' '))
                .unwrap_or(false)
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Wait until `child` serves `/metrics`; returns the start-up time in s.
pub fn wait_ready(name: &str, ns: &Ns, child: &mut Child, addr: SocketAddr) -> f64 {
    let ready = Instant::now();
    loop {
        if ns
            .run_in(move || fetch(addr))
            .expect("enter the namespace")
            .is_some()
        {
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("{name} exited early: {st}");
        }
        // smokeping_prober starts its pingers one by one and only then
        // listens; at 1,000 targets that takes a minute or more.
        assert!(
            ready.elapsed() < Duration::from_secs(300),
            "{name} never served /metrics"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    ready.elapsed().as_secs_f64()
}

/// Start the exporter under test in `ns` with `cfg`, quiet but for warnings.
pub fn spawn_exporter(ns: &Ns, cfg: &std::path::Path) -> Child {
    ns.command(env!("CARGO_BIN_EXE_skeletonhunter-exporter"))
        .arg("--config")
        .arg(cfg)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start skeletonhunter-exporter")
}
