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
