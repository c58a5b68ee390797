//! The exporter's peer lifecycle on real packets: series of removed peers
//! disappear, SIGTERM stops it cleanly, a stopping peer's departure notice
//! removes its series until it answers again, and DNS-discovered peers are
//! followed as the name's records change. Two namespaces on one veth link
//! (198.18.1.0/24), metrics scraped on each namespace's loopback.

use skeletonhunter_tests::exporter::{
    counts, pair, scrape, start, start_both, static_peer, Probing,
};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{wait_until, Netns};
use std::time::Duration;

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
        "  tor_mesh: {{file: \"{}\", refresh: 1s}}\n",
        list.display()
    );
    let (mut a, _b) = start_both(
        &p,
        dir.path(),
        Probing {
            interval: "20ms",
            timeout: "100ms",
            protocols: "udp, tcp",
        },
        &mesh,
        "",
    )
    .unwrap();
    let body = wait_until(
        "both mesh peers probed",
        Duration::from_secs(15),
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
        Duration::from_secs(15),
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

/// B stops (SIGTERM): its departure notice reaches A, which removes B's
/// series at once and counts the departure, so B's absence is never loss;
/// B started again answers without the notice and A probes and counts it
/// again, under fresh series that lose nothing.
#[test]
fn a_stopping_peers_notice_removes_its_series_until_it_answers_again() {
    if !require_privileges("a_stopping_peers_notice_removes_its_series_until_it_answers_again") {
        return;
    }
    let p = pair("exleave").unwrap();
    let dir = TempDir::new("exleave").unwrap();
    let probing = Probing {
        interval: "100ms",
        timeout: "300ms",
        protocols: "udp, tcp",
    };
    let b_peer = "  static:\n    - {address: \"198.18.1.2\", name: b}\n";
    let (a, mut b) =
        start_both(&p, dir.path(), probing, b_peer, &static_peer("198.18.1.1")).unwrap();
    let udp = |body: &str| counts(body, "dst_node=\"b\"", "protocol=\"udp\"");
    // A's metrics once B has answered 5 UDP probes under its series.
    let answered = |what: &str| {
        wait_until(
            what,
            Duration::from_secs(15),
            Duration::from_millis(100),
            || {
                let body = scrape(&p.a).ok()?;
                (udp(&body).2 >= 5.0).then_some(body)
            },
        )
        .unwrap()
    };
    answered("A probes B");

    let status = b.terminate(Duration::from_secs(10)).unwrap();
    assert!(status.success(), "B's exit status after SIGTERM: {status}");
    assert!(
        b.log().contains("replies say this exporter is leaving"),
        "B gave no notice: {}",
        b.log()
    );
    // B is gone: A has no series of it, and keeps none while B is away.
    let body = scrape(&p.a).unwrap();
    assert!(
        !body.contains("dst_node=\"b\""),
        "B's series stay after its notice:\n{body}"
    );
    assert_eq!(
        sample(&body, "skeletonhunter_peer_departures_total", &[]),
        Some(1.0)
    );
    assert!(a.log().contains("peer is leaving"), "{}", a.log());
    let away_until = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < away_until {
        let body = scrape(&p.a).unwrap();
        assert!(
            !body.contains("dst_node=\"b\""),
            "B's series back while it is away:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let _b = start(
        &p.b,
        dir.path(),
        "b2",
        &probing.config("b", "198.18.1.2", &static_peer("198.18.1.1")),
    )
    .unwrap();
    let body = answered("A probes B again");
    let (sent, lost, answered) = udp(&body);
    assert_eq!(
        lost, 0.0,
        "B back: sent {sent}, lost {lost}, answered {answered}"
    );
    let tcp = counts(&body, "dst_node=\"b\"", "protocol=\"tcp\"");
    assert_eq!(tcp.1, 0.0, "B's TCP dials after its return lost: {tcp:?}");
    assert!(a.log().contains("peer answers again"), "{}", a.log());
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
        let f = std::fs::File::open(&path).expect("open netns");
        skeletonhunter_tools::sys::enter_netns(&f).expect("setns");
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
    let dns = "  dns:\n    - {name: peers.test., record: a, refresh: 1s, nameserver: \"127.0.0.1:5353\"}\n";
    let (_a, _b) = start_both(
        &p,
        dir.path(),
        Probing {
            interval: "20ms",
            timeout: "100ms",
            protocols: "udp",
        },
        dns,
        "",
    )
    .unwrap();
    let body = wait_until(
        "DNS peers probed",
        Duration::from_secs(20),
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
        Duration::from_secs(20),
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
