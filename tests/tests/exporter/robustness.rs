//! The exporter under abuse of its own resources and its operators: idle
//! HTTP connections beyond the server's limit must neither stall
//! `/metrics` nor turn into false loss on the TCP dial probes; SIGHUP and
//! `POST /-/reload` reload the peers without losing counters, and a bad
//! new configuration keeps the old one; the memory a burst of connections
//! took is given back. See docs/reliability.md.

use skeletonhunter_tests::exporter::{
    counts, pair, scrape, start_both, start_both_with, static_peer, Probing, METRICS,
};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::http::http_request;
use skeletonhunter_tools::process::{http_get, status_kib};
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::sys::kill;
use skeletonhunter_tools::wait_until;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const IDLE: usize = 400;

/// Both exporters probe each other over UDP and TCP every 50 ms.
const UDP_TCP: Probing = Probing {
    interval: "50ms",
    timeout: "500ms",
    protocols: "udp, tcp",
};

#[test]
fn idle_connections_beyond_the_limit_keep_metrics_and_tcp_probes_honest() {
    if !require_privileges("idle_connections_beyond_the_limit_keep_metrics_and_tcp_probes_honest") {
        return;
    }
    let p = pair("exidle").unwrap();
    let dir = TempDir::new("exidle").unwrap();
    let (a, _b) = start_both_with(
        &p,
        dir.path(),
        UDP_TCP,
        [&static_peer("198.18.1.2"), &static_peer("198.18.1.1")],
        &[
            "--http-max-connections",
            "32",
            "--http-header-timeout",
            "1s",
        ],
    )
    .unwrap();
    let tcp = |body: &str| counts(body, "dst_node=\"b\"", "protocol=\"tcp\"");
    wait_until(
        "a to dial b",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || (tcp(&scrape(&p.a).ok()?).2 > 5.0).then_some(()),
    )
    .unwrap();
    let before = tcp(&scrape(&p.a).unwrap());
    let pid = a.pid();

    // Inside a's namespace: open IDLE silent connections (12x the limit),
    // then scrape while they are held, and count the exporter's descriptors.
    let (answered_after, max_fds, opened) =
        p.a.run_in(move || {
            let addr: SocketAddr = METRICS.parse().unwrap();
            let mut idle = Vec::new();
            let mut max_fds = 0;
            for _ in 0..IDLE {
                if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                    idle.push(s);
                }
                max_fds = max_fds.max(fd_count(pid));
            }
            let started = Instant::now();
            let deadline = started + Duration::from_secs(30);
            let status = loop {
                match http_get(addr, "/metrics", Duration::from_secs(5)) {
                    Ok((200, _)) => break 200,
                    _ if Instant::now() < deadline => {}
                    Ok((s, _)) => break s,
                    Err(_) => break 0,
                }
            };
            max_fds = max_fds.max(fd_count(pid));
            (
                (status == 200).then(|| started.elapsed()),
                max_fds,
                idle.len(),
            )
        })
        .unwrap();
    let waited = answered_after.expect("/metrics did not answer while flooded");
    eprintln!("{opened} idle connections: /metrics answered after {waited:?}; exporter held at most {max_fds} descriptors");
    assert!(opened >= 32, "only {opened} connections opened");
    // The limit (32) plus the exporter's own sockets, nowhere near IDLE.
    assert!(max_fds < 32 + 64, "{max_fds} descriptors");

    // Probes kept running and none was reported lost.
    wait_until(
        "more dials after the flood",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || (tcp(&scrape(&p.a).ok()?).2 > before.2 + 20.0).then_some(()),
    )
    .unwrap();
    let after = tcp(&scrape(&p.a).unwrap());
    assert_eq!(
        after.1, before.1,
        "false TCP loss: before {before:?} after {after:?}"
    );
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

fn reload_ok(body: &str) -> Option<f64> {
    sample(body, "skeletonhunter_config_last_reload_successful", &[])
}

fn post_reload(p: &skeletonhunter_tests::exporter::Pair) -> (u16, String) {
    let addr: SocketAddr = METRICS.parse().unwrap();
    p.a.run_in(move || http_request(addr, "POST", "/-/reload", None, Duration::from_secs(5)))
        .unwrap()
        .unwrap()
}

#[test]
fn sighup_and_post_reload_apply_peers_and_keep_counters() {
    if !require_privileges("sighup_and_post_reload_apply_peers_and_keep_counters") {
        return;
    }
    let p = pair("exrld").unwrap();
    let dir = TempDir::new("exrld").unwrap();
    let probing = Probing {
        interval: "20ms",
        timeout: "200ms",
        protocols: "udp",
    };
    let (mut a, _b) = start_both(&p, dir.path(), probing, &static_peer("198.18.1.2"), "").unwrap();
    // a's config as rewritten below: the same probing, other peers.
    let cfg = |disc: &str| probing.config("a", "198.18.1.1", disc);
    let udp = |body: &str| counts(body, "dst_node=\"b\"", "protocol=\"udp\"");
    wait_until(
        "a to probe b",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || (udp(&scrape(&p.a).ok()?).2 > 20.0).then_some(()),
    )
    .unwrap();
    let first = scrape(&p.a).unwrap();
    assert_eq!(reload_ok(&first), Some(1.0));

    // SIGHUP with a second (silent) peer added: the process lives on, the
    // new peer appears, b's counters continue from where they were.
    let two = "  static:\n    - {address: \"198.18.1.2\"}\n    - {address: \"198.18.1.9\"}\n";
    std::fs::write(dir.path().join("a.yaml"), cfg(two)).unwrap();
    let before = udp(&scrape(&p.a).unwrap());
    kill(a.pid() as i32, libc::SIGHUP).unwrap();
    let body = wait_until(
        "the new peer after SIGHUP",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (counts(&body, "dst_node=\"198.18.1.9\"", "protocol=\"udp\"").0 > 0.0).then_some(body)
        },
    )
    .unwrap();
    a.check_running().unwrap();
    let after = udp(&body);
    assert!(
        after.0 >= before.0 && after.2 >= before.2,
        "b's counters reset: {before:?} -> {after:?}"
    );
    assert_eq!(reload_ok(&body), Some(1.0));

    // A bad configuration: refused over HTTP with the key, old peers kept,
    // reload_successful 0, probing goes on.
    std::fs::write(dir.path().join("a.yaml"), "probe: {udp_port: 0}\n").unwrap();
    let (status, text) = post_reload(&p);
    assert_eq!(status, 500, "{text}");
    assert!(text.contains("probe.udp_port"), "{text}");
    let mid = udp(&scrape(&p.a).unwrap());
    let body = wait_until(
        "probing after a refused reload",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (udp(&body).2 > mid.2 + 20.0).then_some(body)
        },
    )
    .unwrap();
    assert_eq!(reload_ok(&body), Some(0.0));
    assert!(
        counts(&body, "dst_node=\"198.18.1.9\"", "protocol=\"udp\"").0 > 0.0,
        "peers of the running config lost"
    );

    // Back to one peer over POST: 200, the silent peer's series go.
    std::fs::write(dir.path().join("a.yaml"), cfg(&static_peer("198.18.1.2"))).unwrap();
    let (status, text) = post_reload(&p);
    assert_eq!(status, 200, "{text}");
    wait_until(
        "the removed peer to leave",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (reload_ok(&body) == Some(1.0) && !body.contains("198.18.1.9")).then_some(())
        },
    )
    .unwrap();
    a.check_running().unwrap();
}

/// Connections in the burst: the HTTP server's default limit.
const BURST: usize = 256;
/// Requests pipelined on each connection of the burst.
const PIPELINED: usize = 30;
/// How far above its resting size the exporter may stay after a burst.
const RETAINED_KIB: u64 = 4 * 1024;

/// One connection of the burst: a request with 60 KB of headers (hyper
/// grows the connection's read buffer for it), `PIPELINED - 1` more, the
/// last with `Connection: close`; then read every answer to the end.
fn pipelined_scrapes(addr: SocketAddr) -> usize {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(60)));
    let mut req = format!(
        "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(60_000)
    );
    for _ in 2..PIPELINED {
        req.push_str("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    }
    req.push_str("GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf)
        .matches("HTTP/1.1 200")
        .count()
}

#[test]
fn a_burst_of_connections_gives_its_memory_back() {
    if !require_privileges("a_burst_of_connections_gives_its_memory_back") {
        return;
    }
    let p = pair("exmem").unwrap();
    let dir = TempDir::new("exmem").unwrap();
    let (a_peers, b_peers) = (static_peer("198.18.1.2"), static_peer("198.18.1.1"));
    let (mut a, _b) = start_both(&p, dir.path(), UDP_TCP, &a_peers, &b_peers).unwrap();
    let udp = |body: &str| counts(body, "dst_node=\"b\"", "protocol=\"udp\"");
    wait_until(
        "a to probe b",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || (udp(&scrape(&p.a).ok()?).2 > 20.0).then_some(()),
    )
    .unwrap();
    let pid = a.pid();
    // The resting size: a warmed-up exporter that has served scrapes.
    for _ in 0..20 {
        scrape(&p.a).unwrap();
    }
    let rest = status_kib(pid, "VmRSS").unwrap();

    let answered =
        p.a.run_in(|| {
            let addr: SocketAddr = METRICS.parse().unwrap();
            let clients: Vec<_> = (0..BURST)
                .map(|_| {
                    std::thread::Builder::new()
                        .stack_size(64 * 1024)
                        .spawn(move || pipelined_scrapes(addr))
                        .unwrap()
                })
                .collect();
            clients
                .into_iter()
                .map(|c| c.join().unwrap_or(0))
                .sum::<usize>()
        })
        .unwrap();
    let peak = status_kib(pid, "VmHWM").unwrap();
    let after_burst = status_kib(pid, "VmRSS").unwrap();
    assert!(
        answered >= BURST * PIPELINED / 2,
        "only {answered} of {} scrapes answered",
        BURST * PIPELINED
    );
    let settled = wait_until(
        "the exporter to give the burst's memory back",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || status_kib(pid, "VmRSS").filter(|rss| *rss <= rest + RETAINED_KIB),
    );
    eprintln!(
        "{answered} scrapes over {BURST} connections: RSS at rest {rest} KiB, peak {peak} KiB, \
         right after {after_burst} KiB, settled {settled:?} KiB"
    );
    settled.unwrap();
    assert!(
        peak > rest + RETAINED_KIB / 2,
        "the burst took no memory (rest {rest} KiB, peak {peak} KiB): it tests nothing"
    );
    // Still serving and probing afterwards.
    a.check_running().unwrap();
    assert!(udp(&scrape(&p.a).unwrap()).2 > 0.0);
}
