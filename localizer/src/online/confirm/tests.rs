use super::*;
use crate::online::fixtures;
use skeletonhunter_common::topology::{Identity, Kind};

fn finding(kind: Kind, cid: &str, symptom: &str) -> Finding {
    let symptom = match symptom {
        "loss" => Symptom::Loss,
        "unreachable" => Symptom::Unreachable,
        _ => Symptom::Latency,
    };
    Finding {
        pairs: 0,
        ..fixtures::e2e_finding(kind, cid, symptom)
    }
}

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
}

fn names(v: &[Finding]) -> Vec<String> {
    v.iter().map(|f| f.component.to_string()).collect()
}

/// 2 cycles to confirm, hold 11 s (10 s window + 1 s scrapes), a cycle
/// every 2 s as in the e2e test.
fn confirmer() -> Confirmer {
    Confirmer::new(2, Duration::from_secs(11))
}

/// `c` once it has confirmed `f` (reported at 0 s and 2 s).
fn confirm(mut c: Confirmer, f: &Finding) -> Confirmer {
    c.admit(vec![f.clone()], at(0));
    c.admit(vec![f.clone()], at(2));
    c
}

#[test]
fn a_new_fault_fires_on_its_second_consecutive_cycle() {
    let mut c = confirmer();
    let tor = || finding(Kind::Tor, "tor1", "loss");
    let (a, h) = c.admit(vec![tor()], at(0));
    assert!(a.is_empty());
    assert_eq!(h[0].1, Held::Unconfirmed { seen: 1 });
    let (a, _) = c.admit(vec![tor()], at(2));
    assert_eq!(names(&a), ["tor/tor1"]);
    // Stays without delay; a symptom change of an alerting component is
    // not a new fault.
    let (a, _) = c.admit(vec![finding(Kind::Tor, "tor1", "unreachable")], at(4));
    assert_eq!(names(&a), ["tor/tor1"]);
}

#[test]
fn an_unreachable_alert_does_not_turn_into_a_loss_alert_while_clearing() {
    let mut c = confirmer();
    let host = |s: &str| finding(Kind::Host, "host-t0-h1", s);
    let symptoms = |v: &[Finding]| -> Vec<&str> { v.iter().map(|f| f.symptom.as_str()).collect() };
    c.admit(vec![host("loss")], at(0));
    // Onset: partial loss first, then the window holds only the outage.
    assert_eq!(symptoms(&c.admit(vec![host("loss")], at(2)).0), ["loss"]);
    assert_eq!(
        symptoms(&c.admit(vec![host("unreachable")], at(4)).0),
        ["unreachable"]
    );
    // The link is back: leftover partial loss keeps the unreachable alert.
    assert_eq!(
        symptoms(&c.admit(vec![host("loss")], at(6)).0),
        ["unreachable"]
    );
    assert_eq!(
        symptoms(&c.admit(vec![host("loss")], at(8)).0),
        ["unreachable"]
    );
    assert!(c.admit(vec![], at(10)).0.is_empty());
    // A later fault on it starts afresh.
    c.admit(vec![], at(30));
    c.admit(vec![host("loss")], at(32));
    assert_eq!(symptoms(&c.admit(vec![host("loss")], at(34)).0), ["loss"]);
}

#[test]
fn a_one_cycle_blip_never_fires_and_a_gap_restarts_the_count() {
    let mut c = confirmer();
    let node = || finding(Kind::Node, "t0-h0-c0", "loss");
    assert!(c.admit(vec![node()], at(0)).0.is_empty());
    assert!(c.admit(vec![], at(2)).0.is_empty());
    assert!(c.admit(vec![node()], at(4)).0.is_empty());
    assert_eq!(names(&c.admit(vec![node()], at(6)).0), ["node/t0-h0-c0"]);
}

#[test]
fn confirm_cycles_of_one_fires_at_once() {
    let mut c = Confirmer::new(1, Duration::from_secs(11));
    let (a, _) = c.admit(vec![finding(Kind::Tor, "tor1", "loss")], at(0));
    assert_eq!(names(&a), ["tor/tor1"]);
}

#[test]
fn onset_blames_a_node_first_then_the_tor_without_delay() {
    // Partial evidence at onset: one cycle points at a node under the
    // ToR, then the ToR's evidence is complete.
    let mut c = confirmer();
    let node = finding(Kind::Node, "t1-h0-c0", "loss");
    let tor = || finding(Kind::Tor, "tor1", "loss");
    assert!(c.admit(vec![node], at(0)).0.is_empty());
    assert!(c.admit(vec![tor()], at(2)).0.is_empty());
    assert_eq!(names(&c.admit(vec![tor()], at(4)).0), ["tor/tor1"]);
}

#[test]
fn resolution_is_immediate() {
    let mut c = confirmer();
    let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
    c.admit(vec![host()], at(0));
    assert_eq!(names(&c.admit(vec![host()], at(2)).0), ["host/host-t0-h1"]);
    let (a, h) = c.admit(vec![], at(4));
    assert!(a.is_empty() && h.is_empty());
}

#[test]
fn leftovers_of_a_cleared_fault_do_not_page() {
    let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
    let mut c = confirm(confirmer(), &host());
    // Last reported at 4 s; the link came back at some point before.
    c.admit(vec![host()], at(4));
    // Staggered scrapes: only one container's pairs still show loss,
    // for three cycles.
    let node = || finding(Kind::Node, "t0-h1-c0", "loss");
    let (a, h) = c.admit(vec![node()], at(6));
    assert!(a.is_empty(), "{:?}", names(&a));
    assert_eq!(h[0].1, Held::Unconfirmed { seen: 1 });
    for t in [8, 10, 12, 14] {
        let (a, h) = c.admit(vec![node()], at(t));
        assert!(a.is_empty(), "at {t}: {:?}", names(&a));
        assert_eq!(
            h[0].1,
            Held::AfterClear {
                cleared: Component::new(Kind::Host, "host-t0-h1")
            }
        );
    }
    // The same after a ToR fault: the spine explains its cross-ToR pairs.
    let tor = || finding(Kind::Tor, "tor1", "loss");
    let mut c = confirm(confirmer(), &tor());
    let spine = || finding(Kind::Spine, "spine0", "unreachable");
    c.admit(vec![spine()], at(4));
    assert!(c.admit(vec![spine()], at(6)).0.is_empty());
}

#[test]
fn a_held_finding_that_persists_past_the_hold_fires() {
    let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
    let mut c = confirm(confirmer(), &host());
    let node = || finding(Kind::Node, "t0-h1-c0", "unreachable");
    for t in (4..=12).step_by(2) {
        assert!(c.admit(vec![node()], at(t)).0.is_empty(), "at {t}");
    }
    // 2 s + 11 s: the host's leftovers are out of the window.
    assert_eq!(names(&c.admit(vec![node()], at(14)).0), ["node/t0-h1-c0"]);
}

#[test]
fn a_new_fault_elsewhere_is_not_held() {
    let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
    let mut c = confirm(confirmer(), &host());
    // A container on another host of the other rail: none of its pairs
    // cross host-t0-h1.
    let other = || finding(Kind::Node, "t1-h2-c1", "unreachable");
    assert!(c.admit(vec![other()], at(4)).0.is_empty());
    assert_eq!(names(&c.admit(vec![other()], at(6)).0), ["node/t1-h2-c1"]);
}

#[test]
fn a_fault_with_evidence_the_cleared_one_cannot_explain_is_not_held() {
    // tor1 clears, tor0 fails at once: most of tor0's pairs cross tor1
    // too, but its pairs inside tor0 do not.
    let tor1 = finding(Kind::Tor, "tor1", "loss");
    let mut c = confirm(confirmer(), &tor1);
    let tor0 = || finding(Kind::Tor, "tor0", "loss");
    assert!(c.admit(vec![tor0()], at(4)).0.is_empty());
    assert_eq!(names(&c.admit(vec![tor0()], at(6)).0), ["tor/tor0"]);
}

#[test]
fn a_second_fault_while_the_first_stands_is_only_confirmed() {
    let tor = || finding(Kind::Tor, "tor1", "loss");
    let mut c = confirm(confirmer(), &tor());
    // Most of this node's pairs cross tor1, which still stands.
    let node = || finding(Kind::Node, "t0-h0-c0", "unreachable");
    assert!(c.admit(vec![tor(), node()], at(4)).0.len() == 1);
    let (a, _) = c.admit(vec![tor(), node()], at(6));
    assert_eq!(names(&a), ["tor/tor1", "node/t0-h0-c0"]);
}

#[test]
fn the_same_component_coming_back_is_confirmed_again_not_held() {
    let tor = || finding(Kind::Tor, "tor1", "loss");
    let mut c = confirm(confirmer(), &tor());
    c.admit(vec![], at(4));
    assert!(c.admit(vec![tor()], at(6)).0.is_empty());
    assert_eq!(names(&c.admit(vec![tor()], at(8)).0), ["tor/tor1"]);
}

#[test]
fn resolution_needs_several_covered_clean_cycles() {
    let mut c = confirmer().resolve_after(3);
    let tor = || finding(Kind::Tor, "tor1", "loss");
    c.admit(vec![tor()], at(0));
    assert_eq!(names(&c.admit(vec![tor()], at(2)).0), ["tor/tor1"]);
    assert_eq!(names(&c.admit(vec![], at(4)).0), ["tor/tor1"]);
    assert_eq!(c.kept(), [(tor().component, Kept::Clearing { clean: 1 })]);
    assert_eq!(names(&c.admit(vec![], at(6)).0), ["tor/tor1"]);
    assert!(c.admit(vec![], at(8)).0.is_empty());
    assert!(c.kept().is_empty());
}

#[test]
fn a_report_during_clearing_starts_the_count_again() {
    let tor = || finding(Kind::Tor, "tor1", "unreachable");
    let mut c = confirm(confirmer().resolve_after(2), &tor());
    assert_eq!(names(&c.admit(vec![], at(4)).0), ["tor/tor1"]);
    // Back again: no new confirmation, the alert just stays.
    assert_eq!(names(&c.admit(vec![tor()], at(6)).0), ["tor/tor1"]);
    assert_eq!(names(&c.admit(vec![], at(8)).0), ["tor/tor1"]);
    assert!(c.admit(vec![], at(10)).0.is_empty());
}

#[test]
fn an_unknown_component_keeps_its_alert_and_symptom() {
    let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
    let blind = |_: &Component| false;
    let mut c = confirm(confirmer().resolve_after(2), &host());
    // A data gap: five cycles without fresh pairs for the host.
    for t in (4..=12).step_by(2) {
        let (a, _) = c.admit_covered(vec![], &blind, at(t));
        assert_eq!(names(&a), ["host/host-t0-h1"], "at {t}");
        assert_eq!(a[0].symptom, Symptom::Unreachable);
        assert_eq!(c.kept(), [(host().component, Kept::Unknown)]);
    }
    // Data again, still faulty: the same alert, no confirmation needed.
    assert_eq!(names(&c.admit(vec![host()], at(14)).0), ["host/host-t0-h1"]);
    // Unknown cycles neither count nor reset: clean, unknown, clean.
    assert_eq!(names(&c.admit(vec![], at(16)).0), ["host/host-t0-h1"]);
    assert_eq!(names(&c.admit_covered(vec![], &blind, at(18)).0).len(), 1);
    assert!(c.admit(vec![], at(20)).0.is_empty());
}

/// At a ToR's onset the pairs scraped first are one node's: the node is
/// held while the ToR is reported beside it, and at the ToR's next outage
/// (it alerted moments ago) until the hold has passed; a fault of the
/// node's own persists that long and fires.
#[test]
fn the_onset_of_a_tor_does_not_page_its_nodes() {
    let mut c = confirmer().remember_for(Duration::from_secs(30));
    let tor = || finding(Kind::Tor, "tor0", "unreachable");
    let node = || finding(Kind::Node, "t0-h1-c0", "loss");
    let beneath = Held::Beneath {
        parent: Component::new(Kind::Tor, "tor0"),
    };
    c.admit(vec![tor(), node()], at(0));
    let (a, h) = c.admit(vec![tor(), node()], at(2));
    assert_eq!(names(&a), ["tor/tor0"]);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].1, beneath);
    // The ToR clears; its hold after the clear passes.
    let (a, _) = c.admit(vec![], at(4));
    assert!(a.is_empty(), "{:?}", names(&a));
    // Its next outage starts with the node alone, past the confirmation.
    for t in [20, 22, 24, 30] {
        let (a, h) = c.admit(vec![node()], at(t));
        assert!(a.is_empty(), "at {t}: {:?}", names(&a));
        if t > 20 {
            assert_eq!(h[0].1, beneath, "at {t}");
        }
    }
    // Reported for the whole hold (11 s since 20): its own fault.
    assert_eq!(names(&c.admit(vec![node()], at(32)).0), ["node/t0-h1-c0"]);
    // Without the memory the same node pages at its confirmation.
    let mut c = confirm(confirmer(), &tor());
    c.admit(vec![], at(4));
    c.admit(vec![node()], at(20));
    assert_eq!(names(&c.admit(vec![node()], at(22)).0), ["node/t0-h1-c0"]);
}

/// Beneath a ToR that alerted minutes ago and is quiet now, a node's fault
/// is held only for the recent hold (its return would have shown on the
/// ToR's other pairs by then), not the whole hold; were the ToR reported
/// meanwhile, the node is held as long as ever.
#[test]
fn beneath_a_quiet_tor_that_alerted_recently_the_hold_is_short() {
    let tor = || finding(Kind::Tor, "tor0", "loss");
    let node = || finding(Kind::Node, "t0-h1-c0", "unreachable");
    let start = |recent: u64| {
        let mut c = confirm(
            confirmer()
                .remember_for(Duration::from_secs(300))
                .hold_beneath_recent(Duration::from_secs(recent)),
            &tor(),
        );
        c.admit(vec![], at(4));
        c
    };
    let mut c = start(5);
    // Long after the ToR's leftovers, well inside its memory.
    c.admit(vec![node()], at(100));
    let (a, h) = c.admit(vec![node()], at(102));
    assert!(a.is_empty(), "{:?}", names(&a));
    assert_eq!(
        h[0].1,
        Held::Beneath {
            parent: Component::new(Kind::Tor, "tor0")
        }
    );
    // Reported for the recent hold (5 s since 100), far short of the 11 s.
    assert_eq!(names(&c.admit(vec![node()], at(106)).0), ["node/t0-h1-c0"]);
    // The same, but the ToR comes back beside it: the whole hold.
    let mut c = start(5);
    c.admit(vec![node()], at(100));
    c.admit(vec![node(), tor()], at(102));
    let (a, _) = c.admit(vec![node(), tor()], at(106));
    assert_eq!(names(&a), ["tor/tor0"], "the node is held beneath the ToR");
}

/// A link finding whose pairs are `pairs`.
fn link(name: &str, pairs: impl Fn(&Identity, &Identity) -> bool) -> Finding {
    let mut f = finding(Kind::Link, name, "loss");
    f.hit_pairs = fixtures::e2e_pairs()
        .into_iter()
        .filter(|(a, b)| pairs(a, b))
        .collect();
    f
}

/// A host's uplink goes down: the traces name the access link a cycle
/// before the pair counters name the NIC. The link is held beneath the
/// NIC, the NIC fires, and the cycles that name the link again keep the
/// NIC's alert instead of resolving it. An access link that persists for
/// the whole hold with no NIC beside it is paged; a ToR-spine link, whose
/// pairs start at many NICs, is paged at its confirmation.
#[test]
fn a_hosts_access_link_is_paged_as_its_nic() {
    let at_nic = |a: &Identity, b: &Identity| a.nic == "nic-t0-h1" || b.nic == "nic-t0-h1";
    let uplink = || link("10.0.0.1", at_nic);
    let nic = || finding(Kind::Nic, "nic-t0-h1", "loss");
    let mut c = confirmer();
    c.admit(vec![uplink()], at(0));
    let (a, h) = c.admit(vec![uplink()], at(2));
    assert!(a.is_empty(), "{:?}", names(&a));
    let parent = Component::new(Kind::Nic, "nic-t0-h1");
    assert_eq!(
        h[0].1,
        Held::Beneath {
            parent: parent.clone()
        }
    );
    c.admit(vec![nic()], at(4));
    assert_eq!(names(&c.admit(vec![nic()], at(6)).0), ["nic/nic-t0-h1"]);
    // The link's cycle: still held, and the NIC's alert stays.
    let (a, h) = c.admit(vec![uplink()], at(8));
    assert_eq!(names(&a), ["nic/nic-t0-h1"]);
    assert_eq!(h.len(), 1);
    let child = uplink().component;
    assert_eq!(c.kept(), [(parent, Kept::Beneath { child })]);
    // Clean: the NIC resolves.
    assert!(c.admit(vec![], at(10)).0.is_empty());

    // The access link alone, for longer than the hold: paged.
    let mut c = confirmer();
    for t in [0, 2, 4, 6, 8, 10] {
        assert!(c.admit(vec![uplink()], at(t)).0.is_empty(), "at {t}");
    }
    assert_eq!(names(&c.admit(vec![uplink()], at(12)).0), ["link/10.0.0.1"]);

    // A ToR-spine link: its pairs start at many NICs (and all cross the
    // spine: held beneath it for the short hold only).
    let cross = || link("10.9.0.1", |a, b| a.tor != b.tor);
    let mut c = confirmer().hold_beneath_recent(Duration::from_secs(5));
    c.admit(vec![cross()], at(0));
    assert!(c.admit(vec![cross()], at(2)).0.is_empty());
    assert_eq!(names(&c.admit(vec![cross()], at(6)).0), ["link/10.9.0.1"]);
}

/// A lossy spine drops only the flows hashed onto it: while it alerts the
/// link stage may name one of its links instead (or as its leftovers leave
/// the window). The link is held beneath the spine for as long as the
/// spine alerts, and keeps the spine's alert; once neither is reported
/// the spine resolves. Without the spine alerting, the link is paged.
#[test]
fn a_link_beneath_an_alerting_spine_is_paged_as_the_spine() {
    let cross = || link("10.9.0.1", |a, b| a.tor != b.tor);
    let spine = || finding(Kind::Spine, "spine0", "loss");
    let parent = Component::new(Kind::Spine, "spine0");
    let mut c = confirm(confirmer(), &spine());
    // Longer than the hold: still held, and the spine's alert stays.
    for t in (4..=30).step_by(2) {
        let (a, h) = c.admit(vec![cross()], at(t));
        assert_eq!(names(&a), ["spine/spine0"], "at {t}");
        let why = if t == 4 {
            Held::Unconfirmed { seen: 1 }
        } else {
            Held::Beneath {
                parent: parent.clone(),
            }
        };
        assert_eq!(
            h.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
            [why],
            "at {t}"
        );
        let child = cross().component;
        assert_eq!(c.kept(), [(parent.clone(), Kept::Beneath { child })]);
    }
    assert!(c.admit(vec![], at(32)).0.is_empty(), "clean: resolved");

    // The spine's onset: its link is reported first, held beneath the
    // spine (not yet reported) for the short hold; the spine shows within
    // it, and the link stays held beneath it; one page, the spine's.
    let mut c = confirmer().hold_beneath_recent(Duration::from_secs(5));
    c.admit(vec![cross()], at(0));
    let (a, h) = c.admit(vec![cross()], at(2));
    assert!(a.is_empty(), "{:?}", names(&a));
    assert_eq!(
        h[0].1,
        Held::Beneath {
            parent: parent.clone()
        }
    );
    c.admit(vec![cross(), spine()], at(4));
    let (a, _) = c.admit(vec![cross(), spine()], at(6));
    assert_eq!(names(&a), ["spine/spine0"]);
    // No spine at all: the link is paged once the short hold has passed.
    let mut c = confirmer().hold_beneath_recent(Duration::from_secs(5));
    c.admit(vec![cross()], at(0));
    assert!(c.admit(vec![cross()], at(2)).0.is_empty());
    assert_eq!(names(&c.admit(vec![cross()], at(6)).0), ["link/10.9.0.1"]);
}

/// At the onset of a spine that drops only the flows hashed onto it, the
/// first cycles may catch one container's cross-ToR flows (the e2e
/// multipath fabric paged `node/t0-h1-c0` 4 s before the spine): a new
/// finding all of whose anomalous pairs cross one spine is held beneath
/// it for the short hold, the spine shows within it, and one page, the
/// spine's, goes out. A container losing on a same-ToR pair too is
/// paged at its confirmation; one whose every anomalous pair crosses the
/// spine, with no spine beside it, once the short hold has passed.
#[test]
fn the_onset_of_a_partial_spine_fault_does_not_page_a_container() {
    let node = "t0-h1-c0";
    let of_node = |a: &Identity, b: &Identity| a.node == node || b.node == node;
    let cross_only = || {
        let mut f = finding(Kind::Node, node, "loss");
        f.hit_pairs = fixtures::e2e_pairs()
            .into_iter()
            .filter(|(a, b)| of_node(a, b) && a.tor != b.tor)
            .collect();
        assert!(!f.hit_pairs.is_empty());
        f
    };
    let spine = || finding(Kind::Spine, "spine0", "loss");
    let parent = Component::new(Kind::Spine, "spine0");

    let mut c = confirmer().hold_beneath_recent(Duration::from_secs(5));
    c.admit(vec![cross_only()], at(0));
    let (a, h) = c.admit(vec![cross_only()], at(2));
    assert!(a.is_empty(), "{:?}", names(&a));
    assert_eq!(h[0].1, Held::Beneath { parent });
    c.admit(vec![cross_only(), spine()], at(4));
    let (a, _) = c.admit(vec![cross_only(), spine()], at(6));
    assert_eq!(names(&a), ["spine/spine0"]);

    // A container fault of its own shows on its same-ToR pairs too.
    let mut c = confirmer().hold_beneath_recent(Duration::from_secs(5));
    let whole = || finding(Kind::Node, node, "loss");
    assert!(whole().hit_pairs.iter().any(|(a, b)| a.tor == b.tor));
    c.admit(vec![whole()], at(0));
    assert_eq!(
        names(&c.admit(vec![whole()], at(2)).0),
        [format!("node/{node}")]
    );

    // No spine ever: paged once the short hold has passed.
    let mut c = confirmer().hold_beneath_recent(Duration::from_secs(5));
    c.admit(vec![cross_only()], at(0));
    assert!(c.admit(vec![cross_only()], at(2)).0.is_empty());
    assert_eq!(
        names(&c.admit(vec![cross_only()], at(6)).0),
        [format!("node/{node}")]
    );
}

/// A dead cable drops both its directions, and the link stage names
/// whichever is lossier in the cycle, the other as its equivalent: the
/// alert keeps the first name when the engine names the other direction
/// (listed either way round), and resolves only once neither is reported.
/// A link the alerting one does not list, nor lists it, is a fault of its
/// own.
#[test]
fn the_other_direction_of_an_alerting_cable_keeps_its_alert() {
    let up = Component::new(Kind::Link, "10.9.0.1");
    let down = Component::new(Kind::Link, "10.9.0.2");
    let named = |c: &Component, eq: &[&Component]| {
        // Same-ToR pairs too: not beneath the spine (rule 3).
        let mut f = link(&c.id, |a, _| a.tenant == "job0");
        f.equivalent = eq.iter().map(|&e| e.clone()).collect();
        f.context = BTreeMap::from([("link".to_string(), c.id.clone())]);
        f
    };
    for (first, then) in [
        (named(&up, &[&down]), named(&down, &[])),
        (named(&up, &[]), named(&down, &[&up])),
    ] {
        let mut c = confirm(confirmer(), &first);
        assert_eq!(c.admit(vec![first.clone()], at(3)).0.len(), 1, "alerting");
        let (a, h) = c.admit(vec![then.clone()], at(4));
        assert!(h.is_empty(), "{h:?}");
        assert_eq!(names(&a), ["link/10.9.0.1"]);
        assert_eq!(a[0].equivalent, std::slice::from_ref(&down));
        assert_eq!(a[0].context["link"], "10.9.0.1");
        assert!(c.kept().is_empty(), "reported, not kept: {:?}", c.kept());
        assert_eq!(names(&c.admit(vec![then], at(6)).0), ["link/10.9.0.1"]);
        assert!(c.admit(vec![], at(8)).0.is_empty(), "clean: resolved");
    }
    // Neither lists the other: a new link, confirmed on its own.
    let mut c = confirm(confirmer(), &named(&up, &[]));
    let (a, h) = c.admit(vec![named(&down, &[])], at(4));
    assert!(a.is_empty(), "one clean cycle resolves: {:?}", names(&a));
    assert_eq!(h[0].0.component, down);
    assert_eq!(h[0].1, Held::Unconfirmed { seen: 1 });
}
