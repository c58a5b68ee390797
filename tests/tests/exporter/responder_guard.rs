//! Whom the UDP responder answers, on real packets between two namespaces:
//! B's exporter answers its peers (`responder.allow_peers`, A at
//! 198.18.1.1) and one listed address (`responder.allow`, 198.18.1.6);
//! requests from an unlisted address of A's link (198.18.1.5) and from a
//! spoofed source outside the fabric (198.51.100.7, an address B has no
//! route to) get no reply and are counted as `not_allowed`; a flood from an
//! allowed source is cut to `responder.rate_limit` per second and counted
//! as `rate_limited`, while A's probes from another address keep being
//! answered.

use anyhow::{Context, Result};
use skeletonhunter_tests::exporter::{config, counts, pair, scrape, start, static_peer, UDP};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::wait_until;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// Per-source rate of B's responder in this test.
const RATE: u32 = 50;

/// A valid 128-byte echo request with sequence number `seq`, built by hand
/// from the wire format.
fn request(seq: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(b"SKHP");
    r.extend_from_slice(&[1, 1, 0, 0]);
    r.extend_from_slice(&9u64.to_be_bytes()); // session
    r.extend_from_slice(&seq.to_be_bytes());
    r.extend_from_slice(&[0u8; 16]); // tx, delay
    r.extend_from_slice(&[0, 0, 0, 84]); // padding TLV
    r.resize(128, 0);
    r
}

/// Send `n` requests to B from `src` as fast as possible; replies received
/// (until 500 ms of silence) and how long the sending took.
fn send_from(src: &str, n: u64) -> Result<(u64, Duration)> {
    let s = UdpSocket::bind((src, 0)).with_context(|| format!("bind {src}"))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    let to = ("198.18.1.2", UDP);
    let started = Instant::now();
    for seq in 0..n {
        s.send_to(&request(seq), to)?;
    }
    let took = started.elapsed();
    let mut buf = [0u8; 2048];
    let mut replies = 0;
    while s.recv_from(&mut buf).is_ok() {
        replies += 1;
    }
    Ok((replies, took))
}

#[test]
fn unlisted_and_spoofed_sources_are_dropped_and_floods_rate_limited() {
    if !require_privileges("unlisted_and_spoofed_sources_are_dropped_and_floods_rate_limited") {
        return;
    }
    let p = pair("exguard").unwrap();
    for addr in ["198.18.1.5/24", "198.18.1.6/24", "198.51.100.7/32"] {
        p.a.ip(&["addr", "add", addr, "dev", "a0"]).unwrap();
    }
    let dir = TempDir::new("exguard").unwrap();
    let guarded = config(
        "b",
        "198.18.1.2",
        "100ms",
        "500ms",
        "udp",
        &static_peer("198.18.1.1"),
    )
    .replace(
        "tcp: \"198.18.1.2:7478\"}",
        &format!(
            "tcp: \"198.18.1.2:7478\", allow: [\"198.18.1.6/32\"], allow_peers: true, rate_limit: {RATE}}}"
        ),
    );
    assert!(guarded.contains("allow_peers"), "{guarded}");
    let _b = start(&p.b, dir.path(), "b", &guarded).unwrap();
    let a_cfg = config(
        "a",
        "198.18.1.1",
        "100ms",
        "500ms",
        "udp",
        &static_peer("198.18.1.2"),
    );
    let _a = start(&p.a, dir.path(), "a", &a_cfg).unwrap();

    // A peer is answered: A's probes reach B and come back.
    wait_until(
        "A's probes answered",
        Duration::from_secs(15),
        Duration::from_millis(100),
        || {
            (counts(&scrape(&p.a).ok()?, "dst_node=\"b\"", "protocol=\"udp\"").2 > 0.0)
                .then_some(())
        },
    )
    .unwrap();

    // Unlisted and spoofed sources: no reply, every request counted.
    let (unlisted, _) = p.a.run_in(|| send_from("198.18.1.5", 30)).unwrap().unwrap();
    let (spoofed, _) =
        p.a.run_in(|| send_from("198.51.100.7", 20))
            .unwrap()
            .unwrap();
    assert_eq!(
        (unlisted, spoofed),
        (0, 0),
        "the responder answered a source not on its list"
    );
    let not_allowed = |body: &str| {
        sample(
            body,
            "skeletonhunter_responder_dropped_total",
            &["reason=\"not_allowed\""],
        )
    };
    let body = scrape(&p.b).unwrap();
    assert_eq!(not_allowed(&body), Some(50.0), "{body}");

    // A flood from a listed source: cut to its rate, the rest counted.
    let flood = 1000;
    let before = counts(&scrape(&p.a).unwrap(), "dst_node=\"b\"", "protocol=\"udp\"").2;
    let (answered, took) =
        p.a.run_in(move || send_from("198.18.1.6", flood))
            .unwrap()
            .unwrap();
    let allowed_max = f64::from(RATE) * (1.0 + took.as_secs_f64()) + 1.0;
    assert!(answered > 0, "a listed source got no answer");
    assert!(
        (answered as f64) <= allowed_max,
        "{answered} answers to a flood of {flood} in {took:?} (rate {RATE}/s)"
    );
    let body = scrape(&p.b).unwrap();
    let limited = sample(
        &body,
        "skeletonhunter_responder_dropped_total",
        &["reason=\"rate_limited\""],
    );
    assert_eq!(limited, Some((flood - answered) as f64), "{body}");
    assert_eq!(not_allowed(&body), Some(50.0));

    // A's probes, from another address, were not starved by the flood.
    wait_until(
        "A's probes still answered after the flood",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let now = counts(&scrape(&p.a).ok()?, "dst_node=\"b\"", "protocol=\"udp\"").2;
            (now >= before + 5.0).then_some(())
        },
    )
    .unwrap();
    let body = scrape(&p.a).unwrap();
    let (sent, lost, _) = counts(&body, "dst_node=\"b\"", "protocol=\"udp\"");
    assert!(lost <= 0.1 * sent, "A lost {lost} of {sent} probes: {body}");
}
