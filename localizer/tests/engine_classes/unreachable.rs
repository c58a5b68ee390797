//! Dial failures beside packet loss.

use super::*;

/// A ToR dropping 28% of the packets and, under it, a NIC refusing 60% of
/// its dials (20 rounds a pair). A handshake needs its packets too, so
/// the ToR's pairs may fail dials up to their loss rate; the NIC's pairs
/// fail far more than theirs. Before the fix every dial failure on a lossy
/// pair counted for nothing, so the NIC, whose pairs all cross the lossy
/// ToR, was never tested.
#[test]
fn a_nic_refusing_dials_under_a_lossy_tor_is_found_beside_it() {
    let f = Fabric {
        spine_of: vec![0, 0, 1, 1],
        hosts: 4,
    };
    let mut pairs = window(&f, 200.0, &|k, i| Effect {
        loss: if k == Kind::Tor && i == "tor-0" {
            0.28
        } else {
            0.0
        },
        ..Default::default()
    });
    let nic = "nic-1";
    let mut refusing = 0;
    for p in &mut pairs {
        if p.src.nic == nic || p.dst.nic == nic {
            // 12 of 20 dials fail; the 8 connected rounds keep their share
            // of the probes and of the ToR's loss.
            let connected = 8.0 / 20.0;
            p.failed_dials = 12.0;
            p.sent *= connected;
            p.lost = (p.lost * connected).round();
            refusing += 1;
        }
    }
    assert!(refusing >= 3, "nic-1 has {refusing} pairs");
    let report = analyze(&pairs, &Config::default());
    assert_eq!(
        named(&report),
        ["nic:nic-1:unreachable", "tor:tor-0:loss"],
        "{}",
        detail(&report)
    );
}

/// A host with two NICs losing 13% of its packets, one NIC's only
/// container refusing every dial. Its loss shows on the other NIC's pairs
/// alone: loss cannot tell that NIC (and its container) from the host, and
/// the verdict lists the host as equivalent. Its dials can: the other
/// NIC's pairs connect, so the refusing container's verdict does not.
/// Blind seed 717512629462 window 30 paged the NIC, the true host absent.
#[test]
fn a_lossy_host_seen_through_one_nic_is_equivalent_to_that_nic() {
    let f = Fabric {
        spine_of: vec![0, 1],
        hosts: 4,
    };
    let mut pairs = window(&f, 100.0, &|k, i| Effect {
        loss: if k == Kind::Host && i == "host-1" {
            0.13
        } else {
            0.0
        },
        ..Default::default()
    });
    on_own_nic(&mut pairs, "node-3", "nic-1b");
    for p in &mut pairs {
        if p.src.node == "node-3" || p.dst.node == "node-3" {
            (p.failed_dials, p.sent, p.lost) = (p.rounds, 0.0, 0.0);
        }
    }
    let report = analyze(&pairs, &Config::default());
    let equivalent = |name: &str| {
        let f = report.faults.iter().find(|f| f.id == name);
        f.map(|f| {
            f.equivalent
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(
        named(&report),
        ["node:node-3:unreachable", "node:node-2:loss"],
        "{}",
        detail(&report)
    );
    assert_eq!(
        equivalent("node-2"),
        Some(vec!["nic/nic-1".to_string(), "host/host-1".to_string()])
    );
    assert_eq!(equivalent("node-3"), Some(vec!["nic/nic-1b".to_string()]));
}
