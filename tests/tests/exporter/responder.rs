//! The exporter's responder and exposition on real packets: malformed
//! datagrams are dropped and counted, and the `/metrics` text passes
//! promtool. Two namespaces on one veth link (198.18.1.0/24), an exporter in
//! each, metrics scraped on each namespace's loopback.

use anyhow::{Context, Result};
use skeletonhunter_tests::exporter::{counts, pair, scrape, start_both, static_peer, Probing};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::wait_until;
use std::time::Duration;

#[test]
fn exporter_responder_drops_and_counts_bad_datagrams() {
    if !require_privileges("exporter_responder_drops_and_counts_bad_datagrams") {
        return;
    }
    let p = pair("exfuzz").unwrap();
    let dir = TempDir::new("exfuzz").unwrap();
    let (_a, _b) = start_both(
        &p,
        dir.path(),
        Probing {
            interval: "20ms",
            timeout: "200ms",
            protocols: "udp",
        },
        &static_peer("198.18.1.2"),
        "",
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
    let (_a, _b) = start_both(
        &p,
        dir.path(),
        Probing {
            interval: "20ms",
            timeout: "100ms",
            protocols: "udp, tcp, icmp",
        },
        &static_peer("198.18.1.2"),
        "",
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
        "skeletonhunter_node_info{node_id=\"a\",nic=\"\",host=\"host-a\",tor=\"tor1\",spine=\"s1\",network_pod=\"\",tenant=\"\"} 1"
    ) || body.contains("skeletonhunter_node_info{node_id=\"a\",nic=\"198.18.1.1\""), "{body}");
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
