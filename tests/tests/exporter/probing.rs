//! The exporter on real packets: two or three network namespaces joined by
//! veth links (198.18.1.0/24), an exporter in each, probing each other.
//! Loss comes from nftables in a namespace or from taking the link down.
//! Metrics are scraped on each namespace's loopback, so faults on the data
//! plane never hide the exporter itself.
//!
//! This file: loss and link faults, and the default flow rotation seen on
//! the wire. Responder hardening and the exposition are in
//! `exporter/responder.rs`, peer lifecycle (removal, DNS) in
//! `exporter/peers.rs`; the shared helpers in `skeletonhunter_tests::exporter`.

use skeletonhunter_tests::exporter::{
    config, counts, pair, scrape, start, start_both, static_peer, FakePeer, Probing, UDP,
};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::wait_until;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn exporter_reports_injected_loss_within_binomial_bounds() {
    if !require_privileges("exporter_reports_injected_loss_within_binomial_bounds") {
        return;
    }
    let p = pair("exloss").unwrap();
    let dir = TempDir::new("exloss").unwrap();
    let (_a, _b) = start_both(
        &p,
        dir.path(),
        Probing {
            interval: "10ms",
            timeout: "200ms",
            protocols: "udp",
        },
        &static_peer("198.18.1.2"),
        &static_peer("198.18.1.1"),
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
    let (_a, _b) = start_both(
        &p,
        dir.path(),
        Probing {
            interval: "20ms",
            timeout: "100ms",
            protocols: "udp, tcp",
        },
        &static_peer("198.18.1.2"),
        "",
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
    let in_a_row = |b: &str, proto: &str| {
        sample(
            b,
            "skeletonhunter_probe_consecutive_lost",
            &["dst_node=\"b\"", proto],
        )
    };
    for proto in ["protocol=\"udp\"", "protocol=\"tcp\""] {
        // Every loss since the link went down is one run: at least the
        // losses between the two scrapes.
        let (_, l1, _) = counts(&b1, "dst_node=\"b\"", proto);
        let (_, l2, _) = counts(&b2, "dst_node=\"b\"", proto);
        let run = in_a_row(&b2, proto).unwrap_or(0.0);
        assert!(run >= l2 - l1, "{proto}: {run} in a row, {} lost", l2 - l1);
    }

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
        assert_eq!(in_a_row(&u2, proto), Some(0.0), "{proto}: the run ended");
    }
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

/// An exporter whose config leaves `probe.ecmp_width` and `probe.flows`
/// unset (the shipped default, width 4: 21 flows) sends its UDP probes to
/// one peer from several source ports in turn — at least one per path of
/// the default width — as a plain socket at the peer's address sees them
/// on the wire. With `ecmp_width: 1` every probe would leave from one port.
#[test]
fn exporter_default_udp_probes_rotate_over_ecmp_flows() {
    if !require_privileges("exporter_default_udp_probes_rotate_over_ecmp_flows") {
        return;
    }
    let p = pair("exflow").unwrap();
    let dir = TempDir::new("exflow").unwrap();
    // The peer is the test's own socket at B's responder address: it
    // records the source port of every echo request (magic `SKHP`,
    // version 1, type 1) and answers none.
    let ports = Arc::new(Mutex::new(BTreeSet::new()));
    let seen = ports.clone();
    let addr = SocketAddr::from(([198, 18, 1, 2], UDP));
    let recorder = FakePeer::start(&p.b, addr, move |_, _, from| {
        seen.lock().unwrap().insert(from.port());
    })
    .unwrap();
    let cfg = config(
        "a",
        "198.18.1.1",
        "20ms",
        "200ms",
        "udp",
        &static_peer("198.18.1.2"),
    );
    assert!(
        !cfg.contains("ecmp_width") && !cfg.contains("flows"),
        "{cfg}"
    );
    let mut a = start(&p.a, dir.path(), "a", &cfg).unwrap();
    // Probe n of the pair leaves from flow n mod K: K probes, 20 ms apart,
    // show K ports; 10 s is hundreds of probes.
    let got = wait_until(
        "probes from 4 distinct source ports",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || {
            let seen = ports.lock().unwrap();
            (seen.len() >= 4).then(|| seen.clone())
        },
    );
    drop(recorder);
    let seen = ports.lock().unwrap().clone();
    let got = got.unwrap_or_else(|e| panic!("{e}: source ports {seen:?}; log:\n{}", a.log()));
    eprintln!(
        "default exporter probed from {} source ports: {seen:?}",
        seen.len()
    );
    assert!(got.iter().all(|&port| port != 0 && port != UDP), "{got:?}");
    a.check_running().unwrap();
}
