//! The exporter on real packets: two or three network namespaces joined by
//! veth links (198.18.1.0/24), an exporter in each, probing each other.
//! Loss comes from nftables in a namespace or from taking the link down.
//! Metrics are scraped on each namespace's loopback, so faults on the data
//! plane never hide the exporter itself.

use anyhow::{bail, Context, Result};
use skeletonhunter_tests::netns::veth;
use skeletonhunter_tests::servers::TempDir;
use skeletonhunter_tests::{bin_path, http_get, require_privileges, wait_until, ChildGuard, Netns};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

const METRICS: &str = "127.0.0.1:9465";
const UDP: u16 = 7477;
const TCP: u16 = 7478;

/// Two namespaces `a` (198.18.1.1) and `b` (198.18.1.2) on one veth link.
struct Pair {
    a: Netns,
    b: Netns,
}

fn pair(tag: &str) -> Result<Pair> {
    let a = Netns::new(&format!("{tag}a"))?;
    let b = Netns::new(&format!("{tag}b"))?;
    veth(&a, "a0", "198.18.1.1/24", &b, "b0", "198.18.1.2/24")?;
    Ok(Pair { a, b })
}

fn config(
    node: &str,
    ip: &str,
    interval: &str,
    timeout: &str,
    protocols: &str,
    discovery: &str,
) -> String {
    format!(
        "listen: \"{METRICS}\"\n\
         identity: {{node: \"{node}\", host: \"host-{node}\", tor: \"tor1\", spine: \"s1\"}}\n\
         responder: {{udp: \"{ip}:{UDP}\", tcp: \"{ip}:{TCP}\"}}\n\
         probe: {{interval: {interval}, timeout: {timeout}, protocols: [{protocols}], udp_port: {UDP}, tcp_port: {TCP}}}\n\
         discovery:\n  ebpf: false\n{discovery}"
    )
}

fn static_peer(ip: &str) -> String {
    format!("  static:\n    - {{address: \"{ip}\"}}\n")
}

fn start(ns: &Netns, dir: &Path, name: &str, cfg: &str) -> Result<ChildGuard> {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, cfg)?;
    let bin = bin_path("skeletonhunter-exporter");
    let mut cmd = ns.command(bin.to_str().context("utf-8 binary path")?);
    cmd.arg("--config").arg(&path).env("RUST_LOG", "info");
    let mut child = ChildGuard::spawn(name, cmd)?;
    wait_until(
        &format!("{name} /healthz"),
        Duration::from_secs(10),
        Duration::from_millis(50),
        || {
            let addr: SocketAddr = METRICS.parse().ok()?;
            match ns.run_in(move || http_get(addr, "/healthz", Duration::from_secs(1))) {
                Ok(Ok((200, _))) => Some(()),
                _ => None,
            }
        },
    )?;
    child.check_running()?;
    Ok(child)
}

fn scrape(ns: &Netns) -> Result<String> {
    let addr: SocketAddr = METRICS.parse()?;
    let (status, body) =
        ns.run_in(move || http_get(addr, "/metrics", Duration::from_secs(2)))??;
    if status != 200 {
        bail!("/metrics returned {status}: {body}");
    }
    Ok(body)
}

/// Sum of the samples of `name` whose label set contains every `labels`
/// fragment (e.g. `dst_node="b"`). `None` when no sample matches.
fn sample(body: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in body.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let (series, value) = rest.rsplit_once(' ')?;
        if labels.iter().all(|l| series.contains(l)) {
            *found.get_or_insert(0.0) += value.parse::<f64>().ok()?;
        }
    }
    found
}

/// (sent, lost, answered) of one pair and protocol.
fn counts(body: &str, dst: &str, proto: &str) -> (f64, f64, f64) {
    let l = [dst, proto];
    (
        sample(body, "skeletonhunter_probe_sent_total", &l).unwrap_or(0.0),
        sample(body, "skeletonhunter_probe_lost_total", &l).unwrap_or(0.0),
        sample(body, "skeletonhunter_probe_rtt_seconds_count", &l).unwrap_or(0.0),
    )
}

#[test]
fn exporter_reports_injected_loss_within_binomial_bounds() {
    if !require_privileges("exporter_reports_injected_loss_within_binomial_bounds") {
        return;
    }
    let p = pair("exloss").unwrap();
    let dir = TempDir::new("exloss").unwrap();
    let _b = start(
        &p.b,
        dir.path(),
        "b",
        &config(
            "b",
            "198.18.1.2",
            "10ms",
            "200ms",
            "udp",
            &static_peer("198.18.1.1"),
        ),
    )
    .unwrap();
    let _a = start(
        &p.a,
        dir.path(),
        "a",
        &config(
            "a",
            "198.18.1.1",
            "10ms",
            "200ms",
            "udp",
            &static_peer("198.18.1.2"),
        ),
    )
    .unwrap();
    // Wait for A to learn B's name from B's replies.
    wait_until(
        "a to identify b",
        Duration::from_secs(5),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (counts(&body, "dst_node=\"b\"", "protocol=\"udp\"").2 > 10.0).then_some(())
        },
    )
    .unwrap();

    // 20% of everything B receives from A is dropped: A's requests to B
    // and A's replies to B's probes alike.
    p.b.set_loss(20, "ip saddr 198.18.1.1").unwrap();
    let before_a = counts(&scrape(&p.a).unwrap(), "dst_node=\"b\"", "protocol=\"udp\"");
    let before_b = counts(&scrape(&p.b).unwrap(), "dst_node=\"a\"", "protocol=\"udp\"");
    std::thread::sleep(Duration::from_secs(15));
    // Let every probe sent under loss resolve before reading.
    let after_a = counts(&scrape(&p.a).unwrap(), "dst_node=\"b\"", "protocol=\"udp\"");
    let after_b = counts(&scrape(&p.b).unwrap(), "dst_node=\"a\"", "protocol=\"udp\"");
    p.b.clear_loss().unwrap();

    for (who, before, after) in [("a->b", before_a, after_a), ("b->a", before_b, after_b)] {
        // Resolved probes only: in-flight ones are neither answered nor lost.
        let lost = after.1 - before.1;
        let answered = after.2 - before.2;
        let n = lost + answered;
        let sent = after.0 - before.0;
        assert!(n >= 1000.0, "{who}: only {n} resolved probes (sent {sent})");
        assert!(
            n <= sent + 25.0,
            "{who}: resolved {n} > sent {sent}: double counting"
        );
        // Each probe is lost independently with p = 0.2 (one packet of
        // the round trip crosses the filter), so lost ~ Binomial(n, 0.2):
        // 5 standard deviations make a false failure ~1e-6 likely.
        let p0 = 0.2;
        let sigma = (n * p0 * (1.0 - p0)).sqrt();
        let ratio = lost / n;
        assert!(
            (lost - n * p0).abs() <= 5.0 * sigma,
            "{who}: loss {ratio:.4} over {n} probes, expected 0.2 ± {:.4} (5σ)",
            5.0 * sigma / n
        );
        eprintln!(
            "{who}: loss {ratio:.4} over {n} probes (5σ = {:.4})",
            5.0 * sigma / n
        );
    }
}

#[test]
fn exporter_link_down_then_up() {
    if !require_privileges("exporter_link_down_then_up") {
        return;
    }
    let p = pair("exlink").unwrap();
    let dir = TempDir::new("exlink").unwrap();
    let _b = start(
        &p.b,
        dir.path(),
        "b",
        &config("b", "198.18.1.2", "20ms", "100ms", "udp, tcp", ""),
    )
    .unwrap();
    let _a = start(
        &p.a,
        dir.path(),
        "a",
        &config(
            "a",
            "198.18.1.1",
            "20ms",
            "100ms",
            "udp, tcp",
            &static_peer("198.18.1.2"),
        ),
    )
    .unwrap();
    let dial = |body: &str| {
        sample(
            body,
            "skeletonhunter_probe_dial_success",
            &["dst_node=\"b\""],
        )
    };
    wait_until(
        "dial success 1",
        Duration::from_secs(5),
        Duration::from_millis(100),
        || (dial(&scrape(&p.a).ok()?) == Some(1.0)).then_some(()),
    )
    .unwrap();

    p.a.link_set("a0", false).unwrap();
    // Past the timeout, everything sent is lost.
    std::thread::sleep(Duration::from_millis(500));
    let b1 = scrape(&p.a).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let b2 = scrape(&p.a).unwrap();
    assert_eq!(dial(&b2), Some(0.0), "dial success with the link down");
    for proto in ["protocol=\"udp\"", "protocol=\"tcp\""] {
        let (s1, l1, a1) = counts(&b1, "dst_node=\"b\"", proto);
        let (s2, l2, a2) = counts(&b2, "dst_node=\"b\"", proto);
        assert_eq!(a2 - a1, 0.0, "{proto}: answers with the link down");
        assert!(s2 - s1 >= 50.0, "{proto}: only {} probes sent", s2 - s1);
        // Every probe of the window is lost, give or take those in flight
        // at either edge (timeout / interval = 5).
        assert!(
            ((l2 - l1) - (s2 - s1)).abs() <= 6.0,
            "{proto}: lost {} of {} with the link down",
            l2 - l1,
            s2 - s1
        );
    }
    let fails = |b: &str| {
        sample(
            b,
            "skeletonhunter_probe_dial_failures_total",
            &["dst_node=\"b\""],
        )
        .unwrap_or(0.0)
    };
    assert!(fails(&b2) - fails(&b1) >= 50.0);

    p.a.link_set("a0", true).unwrap();
    wait_until(
        "dial success back to 1",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || (dial(&scrape(&p.a).ok()?) == Some(1.0)).then_some(()),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let u1 = scrape(&p.a).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let u2 = scrape(&p.a).unwrap();
    assert_eq!(dial(&u2), Some(1.0));
    for proto in ["protocol=\"udp\"", "protocol=\"tcp\""] {
        let (s1, l1, a1) = counts(&u1, "dst_node=\"b\"", proto);
        let (s2, l2, a2) = counts(&u2, "dst_node=\"b\"", proto);
        assert_eq!(l2 - l1, 0.0, "{proto}: loss after the link came back");
        assert!(
            a2 - a1 >= 50.0 && s2 - s1 >= 50.0,
            "{proto}: answered {} of {}",
            a2 - a1,
            s2 - s1
        );
    }
}

#[test]
fn exporter_responder_drops_and_counts_bad_datagrams() {
    if !require_privileges("exporter_responder_drops_and_counts_bad_datagrams") {
        return;
    }
    let p = pair("exfuzz").unwrap();
    let dir = TempDir::new("exfuzz").unwrap();
    let _b = start(
        &p.b,
        dir.path(),
        "b",
        &config("b", "198.18.1.2", "20ms", "200ms", "udp", ""),
    )
    .unwrap();
    let _a = start(
        &p.a,
        dir.path(),
        "a",
        &config(
            "a",
            "198.18.1.1",
            "20ms",
            "200ms",
            "udp",
            &static_peer("198.18.1.2"),
        ),
    )
    .unwrap();

    // From inside A: garbage of every kind, then one valid request.
    let (replies_to_garbage, valid_reply, sent) =
        p.a.run_in(|| -> Result<(usize, Vec<u8>, [usize; 5])> {
            let s = std::net::UdpSocket::bind("198.18.1.1:0")?;
            s.set_read_timeout(Some(Duration::from_millis(300)))?;
            let to = "198.18.1.2:7477";
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            let mut rand = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // A valid 128-byte request, built by hand from the wire format.
            let mut good = Vec::new();
            good.extend_from_slice(b"SKHP");
            good.extend_from_slice(&[1, 1, 0, 0]);
            good.extend_from_slice(&7u64.to_be_bytes()); // session
            good.extend_from_slice(&42u64.to_be_bytes()); // seq
            good.extend_from_slice(&[0u8; 16]); // tx, delay
            good.extend_from_slice(&[0, 0, 0, 84]); // padding TLV
            good.resize(128, 0);
            let mut counts = [0usize; 5]; // bad_magic, truncated, oversized, bad_tlv, not_request
            for i in 0..200 {
                // Random bytes not starting with the magic.
                let len = 1 + (rand() % 1400) as usize;
                let mut b: Vec<u8> = (0..len).map(|_| rand() as u8).collect();
                b[0] = b'X';
                if len >= 40 {
                    s.send_to(&b, to)?;
                    counts[0] += 1;
                } else {
                    s.send_to(&b, to)?;
                    counts[1] += 1;
                }
                // Truncated valid requests (header cut short).
                s.send_to(&good[..(i % 40)], to)?;
                counts[1] += 1;
            }
            for _ in 0..20 {
                s.send_to(&vec![0u8; 5000], to)?; // oversized
                counts[2] += 1;
                let mut t = good.clone();
                t[42] = 0xff; // padding TLV length beyond the datagram
                s.send_to(&t, to)?;
                counts[3] += 1;
                let mut r = good.clone();
                r[5] = 2; // a reply sent to a responder: never echoed
                s.send_to(&r, to)?;
                counts[4] += 1;
            }
            let mut buf = [0u8; 65536];
            let mut garbage_replies = 0;
            while s.recv_from(&mut buf).is_ok() {
                garbage_replies += 1;
            }
            s.send_to(&good, to)?;
            let (n, _) = s
                .recv_from(&mut buf)
                .context("no reply to a valid request")?;
            Ok((garbage_replies, buf[..n].to_vec(), counts))
        })
        .unwrap()
        .unwrap();
    assert_eq!(replies_to_garbage, 0, "the responder answered garbage");
    assert!(
        valid_reply.len() <= 128,
        "reply {} bytes > request 128",
        valid_reply.len()
    );
    assert_eq!(&valid_reply[..4], b"SKHP");
    assert_eq!(valid_reply[5], 2, "reply type");
    assert_eq!(
        &valid_reply[16..24],
        &42u64.to_be_bytes(),
        "sequence echoed"
    );
    // The node name TLV (type 1) is first after the header.
    assert_eq!(&valid_reply[40..44], &[0, 1, 0, 1]);
    assert_eq!(valid_reply[44], b'b');

    let body = scrape(&p.b).unwrap();
    let dropped = |r: &str| {
        sample(
            &body,
            "skeletonhunter_responder_dropped_total",
            &[&format!("reason=\"{r}\"")],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(dropped("bad_magic"), sent[0] as f64, "{body}");
    assert_eq!(dropped("truncated"), sent[1] as f64);
    assert_eq!(dropped("oversized"), sent[2] as f64);
    assert_eq!(dropped("bad_tlv"), sent[3] as f64);
    assert_eq!(dropped("not_request"), sent[4] as f64);

    // Still serving: A's probes keep being answered.
    let before = counts(&scrape(&p.a).unwrap(), "dst_node=\"b\"", "protocol=\"udp\"").2;
    std::thread::sleep(Duration::from_millis(500));
    let after = counts(&scrape(&p.a).unwrap(), "dst_node=\"b\"", "protocol=\"udp\"").2;
    assert!(
        after - before >= 10.0,
        "answers stalled: {before} -> {after}"
    );
}

#[test]
fn exporter_metrics_pass_promtool() {
    if !require_privileges("exporter_metrics_pass_promtool") {
        return;
    }
    let p = pair("exprom").unwrap();
    let dir = TempDir::new("exprom").unwrap();
    let _b = start(
        &p.b,
        dir.path(),
        "b",
        &config("b", "198.18.1.2", "20ms", "100ms", "udp, tcp", ""),
    )
    .unwrap();
    let _a = start(
        &p.a,
        dir.path(),
        "a",
        &config(
            "a",
            "198.18.1.1",
            "20ms",
            "100ms",
            "udp, tcp, icmp",
            &static_peer("198.18.1.2"),
        ),
    )
    .unwrap();
    let body = wait_until(
        "all three protocols answered",
        Duration::from_secs(5),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            ["udp", "tcp", "icmp"]
                .iter()
                .all(|pr| counts(&body, "dst_node=\"b\"", &format!("protocol=\"{pr}\"")).2 > 0.0)
                .then_some(body)
        },
    )
    .unwrap();
    for family in [
        "skeletonhunter_probe_rtt_seconds_bucket",
        "skeletonhunter_probe_sent_total",
        "skeletonhunter_probe_lost_total",
        "skeletonhunter_probe_dial_success",
        "skeletonhunter_probe_dial_failures_total",
        "skeletonhunter_node_info",
        "skeletonhunter_skeleton_peers",
        "skeletonhunter_exporter_build_info",
    ] {
        assert!(body.contains(family), "{family} missing");
    }
    assert!(body.contains(
        "skeletonhunter_node_info{node=\"a\",nic=\"\",host=\"host-a\",tor=\"tor1\",spine=\"s1\",pod=\"\",tenant=\"\"} 1"
    ) || body.contains("skeletonhunter_node_info{node=\"a\",nic=\"198.18.1.1\""), "{body}");
    let path = dir.path().join("metrics.txt");
    std::fs::write(&path, &body).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .expect("promtool (Debian package prometheus) must be installed");
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn exporter_drops_series_of_removed_peers_and_stops_cleanly() {
    if !require_privileges("exporter_drops_series_of_removed_peers_and_stops_cleanly") {
        return;
    }
    let p = pair("exgone").unwrap();
    let dir = TempDir::new("exgone").unwrap();
    let list = dir.path().join("mesh.yaml");
    let write_list = |extra: bool| {
        let mut y = String::from(
            "- {address: 198.18.1.1, tor: tor1, node: a}\n- {address: 198.18.1.2, tor: tor1}\n- {address: 198.18.1.9, tor: tor2, node: other-rack}\n",
        );
        if extra {
            // Same rack, nobody there: probed (and lost) until removed.
            y.push_str("- {address: 198.18.1.3, tor: tor1, node: ghost}\n");
        }
        std::fs::write(&list, y).unwrap();
    };
    write_list(true);
    let mesh = format!(
        "  tor_mesh: {{file: \"{}\", refresh: 200ms}}\n",
        list.display()
    );
    let _b = start(
        &p.b,
        dir.path(),
        "b",
        &config("b", "198.18.1.2", "20ms", "100ms", "udp", ""),
    )
    .unwrap();
    let mut a = start(
        &p.a,
        dir.path(),
        "a",
        &config("a", "198.18.1.1", "20ms", "100ms", "udp, tcp", &mesh),
    )
    .unwrap();
    let body = wait_until(
        "both mesh peers probed",
        Duration::from_secs(5),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            let ghost = counts(&body, "dst_node=\"ghost\"", "protocol=\"udp\"");
            let b = counts(&body, "dst_node=\"b\"", "protocol=\"udp\"");
            (ghost.1 > 0.0 && b.2 > 0.0).then_some(body)
        },
    )
    .unwrap();
    assert_eq!(
        sample(
            &body,
            "skeletonhunter_skeleton_peers",
            &["source=\"tor_mesh\""]
        ),
        Some(2.0)
    );
    assert!(
        !body.contains("other-rack"),
        "a peer of another ToR was probed"
    );
    assert!(
        !body.contains("dst_node=\"a\""),
        "the exporter probes itself"
    );

    write_list(false);
    let body = wait_until(
        "ghost series removed",
        Duration::from_secs(5),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (!body.contains("ghost")).then_some(body)
        },
    )
    .unwrap();
    assert_eq!(
        sample(
            &body,
            "skeletonhunter_skeleton_peers",
            &["source=\"tor_mesh\""]
        ),
        Some(1.0)
    );
    assert!(
        counts(&body, "dst_node=\"b\"", "protocol=\"udp\"").2 > 0.0,
        "b's series went too"
    );
    assert!(!body.contains("198.18.1.3"));

    let status = a.terminate(Duration::from_secs(5)).unwrap();
    assert!(status.success(), "exit status after SIGTERM: {status}");
    assert!(a.log().contains("stopped"), "{}", a.log());
}

/// A minimal DNS server for A queries, on a thread inside `ns`: answers
/// every A question with the current `records` (TTL 1 s) and every other
/// question with an empty NOERROR. Enough for the exporter's resolver.
fn dns_server(
    ns: &Netns,
    addr: &'static str,
    records: std::sync::Arc<std::sync::Mutex<Vec<std::net::Ipv4Addr>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let path = format!("/run/netns/{}", ns.name());
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).expect("open netns");
        // SAFETY: setns on this thread only.
        assert_eq!(
            unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns"
        );
        let s = std::net::UdpSocket::bind(addr).expect("bind dns");
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 1500];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, from)) = s.recv_from(&mut buf) else {
                continue;
            };
            let q = &buf[..n];
            if n < 12 {
                continue;
            }
            // Question: labels up to the root, then type and class.
            let mut i = 12;
            while i < n && q[i] != 0 {
                i += 1 + q[i] as usize;
            }
            if i + 5 > n {
                continue;
            }
            let qtype = u16::from_be_bytes([q[i + 1], q[i + 2]]);
            let question = &q[12..i + 5];
            let ips = if qtype == 1 {
                records.lock().unwrap().clone()
            } else {
                Vec::new()
            };
            let mut r = Vec::new();
            r.extend_from_slice(&q[..2]); // id
            r.extend_from_slice(&[0x81, 0x80, 0, 1]); // response, RD, RA; 1 question
            r.extend_from_slice(&(ips.len() as u16).to_be_bytes());
            r.extend_from_slice(&[0, 0, 0, 0]);
            r.extend_from_slice(question);
            for ip in ips {
                r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4]);
                r.extend_from_slice(&ip.octets());
            }
            let _ = s.send_to(&r, from);
        }
    })
}

#[test]
fn exporter_follows_dns_peers() {
    if !require_privileges("exporter_follows_dns_peers") {
        return;
    }
    use std::net::Ipv4Addr;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    let p = pair("exdns").unwrap();
    let dir = TempDir::new("exdns").unwrap();
    // The name lists A itself (left out), B, and an address nobody has.
    let records = Arc::new(Mutex::new(vec![
        Ipv4Addr::new(198, 18, 1, 1),
        Ipv4Addr::new(198, 18, 1, 2),
        Ipv4Addr::new(198, 18, 1, 3),
    ]));
    let stop = Arc::new(AtomicBool::new(false));
    let server = dns_server(&p.a, "127.0.0.1:5353", records.clone(), stop.clone());
    let dns = "  dns:\n    - {name: peers.test., record: a, refresh: 300ms, nameserver: \"127.0.0.1:5353\"}\n";
    let _b = start(
        &p.b,
        dir.path(),
        "b",
        &config("b", "198.18.1.2", "20ms", "100ms", "udp", ""),
    )
    .unwrap();
    let _a = start(
        &p.a,
        dir.path(),
        "a",
        &config("a", "198.18.1.1", "20ms", "100ms", "udp", dns),
    )
    .unwrap();
    let body = wait_until(
        "DNS peers probed",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            let b = counts(&body, "dst_node=\"b\"", "protocol=\"udp\"");
            let ghost = counts(&body, "dst_node=\"198.18.1.3\"", "protocol=\"udp\"");
            (b.2 > 0.0 && ghost.1 > 0.0).then_some(body)
        },
    )
    .unwrap();
    assert_eq!(
        sample(&body, "skeletonhunter_skeleton_peers", &["source=\"dns\""]),
        Some(2.0),
        "{body}"
    );
    assert!(
        !body.contains("dst_node=\"198.18.1.1\""),
        "the exporter probes itself"
    );

    records
        .lock()
        .unwrap()
        .retain(|ip| *ip != Ipv4Addr::new(198, 18, 1, 3));
    let body = wait_until(
        "removed DNS peer's series gone",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (!body.contains("198.18.1.3")).then_some(body)
        },
    )
    .unwrap();
    assert_eq!(
        sample(&body, "skeletonhunter_skeleton_peers", &["source=\"dns\""]),
        Some(1.0)
    );
    assert!(counts(&body, "dst_node=\"b\"", "protocol=\"udp\"").2 > 0.0);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().unwrap();
}
