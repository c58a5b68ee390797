use super::*;
use crate::online::fixtures::{self, fabric_node};
use skeletonhunter_common::topology::{path, Identity, Kind};

/// Node `t<T>-h<H>` of a 2 ToR x 2 host fabric.
fn id(t: u32, h: u32) -> Identity {
    fabric_node(format!("t{t}-h{h}"), t, h, "job".into())
}

fn finding(kind: Kind, cid: &str, symptom: Symptom) -> Finding {
    let component = Component::new(kind, cid);
    let nodes: Vec<Identity> = (0..2).flat_map(|t| (0..2).map(move |h| id(t, h))).collect();
    let mut hit_pairs = Vec::new();
    for a in &nodes {
        for b in &nodes {
            if a.node != b.node && path(a, b).contains(&component) {
                hit_pairs.push((a.clone(), b.clone()));
            }
        }
    }
    Finding {
        score: 1.0,
        ..fixtures::finding(component, symptom, hit_pairs)
    }
}

fn tor() -> Finding {
    finding(Kind::Tor, "tor1", Symptom::Unreachable)
}

/// 3 transitions within 20 cycles.
fn detector() -> FlapDetector {
    FlapDetector::new(3, 20)
}

fn all(_: &Component) -> bool {
    true
}

/// The output's (component, symptom) pairs.
fn seen(v: &[Finding]) -> Vec<(String, Symptom)> {
    v.iter()
        .map(|f| (f.component.to_string(), f.symptom))
        .collect()
}

/// Run `pattern` ('x': the ToR's alert admitted, '.': a clean cycle) and
/// return each cycle's output.
fn run(d: &mut FlapDetector, pattern: &str) -> Vec<Vec<(String, Symptom)>> {
    pattern
        .chars()
        .map(|ch| {
            let found = if ch == 'x' { vec![tor()] } else { vec![] };
            seen(&d.observe(found, &all))
        })
        .collect()
}

/// Whether every output of `run` is the ToR's own (unreachable) finding.
fn never_flapping(out: &[Vec<(String, Symptom)>]) -> bool {
    out.iter()
        .flatten()
        .all(|(_, s)| *s == Symptom::Unreachable)
}

#[test]
fn a_flapping_tor_is_one_flapping_incident_until_quiet() {
    let mut d = detector();
    // Down at cycle 0, up at 4, down again at 7: flapping from there on,
    // through the clean spells, with one finding per cycle.
    let out = run(&mut d, "xxxx...xxx...xxx...xxx");
    let flapping = vec![("tor/tor1".to_string(), Symptom::Flapping)];
    for (i, o) in out.iter().enumerate() {
        if i < 7 {
            assert!(
                o.iter().all(|(_, s)| *s == Symptom::Unreachable),
                "cycle {i}: {o:?}"
            );
        } else {
            assert_eq!(o, &flapping, "cycle {i}");
        }
    }
    // Quiet: flapping for 19 more clean cycles, then the raw (empty) output.
    let out = run(&mut d, &".".repeat(25));
    for (i, o) in out.iter().enumerate() {
        if i < 19 {
            assert_eq!(o, &flapping, "quiet cycle {i}");
        } else {
            assert!(o.is_empty(), "quiet cycle {i}: {o:?}");
        }
    }
    assert_eq!(d.flapping().count(), 0);
    assert_eq!(d.tracked(), 0, "forgotten once out of the window");
}

#[test]
fn a_single_fault_stays_a_normal_fault() {
    let mut d = detector();
    let out = run(&mut d, &format!("{}{}", "x".repeat(15), ".".repeat(30)));
    for (i, o) in out.iter().enumerate() {
        assert!(
            o.iter().all(|(_, s)| *s == Symptom::Unreachable),
            "cycle {i}: {o:?}"
        );
    }
    assert_eq!(d.tracked(), 0);
}

#[test]
fn a_healthy_fabric_is_never_tracked() {
    let mut d = detector();
    assert!(run(&mut d, &".".repeat(100)).iter().all(Vec::is_empty));
    assert_eq!(d.tracked(), 0);
}

#[test]
fn flaps_slower_than_the_window_are_separate_faults() {
    // Down at 0, up at 4, down at 27: the first transitions are out of the
    // 20-cycle window by then.
    let mut d = detector();
    let out = run(&mut d, &format!("xxxx{}xxxx", ".".repeat(23)));
    assert!(never_flapping(&out), "{out:?}");
}

#[test]
fn unknown_cycles_neither_settle_nor_break_a_flap() {
    let mut d = detector();
    run(&mut d, "xxxx...xxx");
    assert_eq!(d.flapping().count(), 1);
    // A data gap of 40 cycles: flapping holds.
    for _ in 0..40 {
        let out = d.observe(vec![], &|_| false);
        assert_eq!(seen(&out), [("tor/tor1".to_string(), Symptom::Flapping)]);
    }
    // A gap does not count as clean: no up transition either.
    let mut d = detector();
    run(&mut d, "xx");
    for _ in 0..10 {
        d.observe(vec![], &|_| false);
    }
    assert!(d.tracks.values().all(|t| t.down));
}

#[test]
fn findings_on_the_flapping_components_pairs_are_absorbed() {
    let mut d = detector();
    run(&mut d, "xxxx...xxx");
    // Partial evidence at a flap's edge blames a node under the ToR, and a
    // node of the other ToR has a fault of its own.
    let under = finding(Kind::Node, "t1-h0", Symptom::Loss);
    let other = finding(Kind::Node, "t0-h1", Symptom::Loss);
    let out = seen(&d.observe(vec![under, other], &all));
    assert_eq!(
        out,
        [
            ("node/t0-h1".to_string(), Symptom::Loss),
            ("tor/tor1".to_string(), Symptom::Flapping)
        ]
    );
    // A node that flaps with its ToR is the ToR's flap.
    let mut d = detector();
    for ch in "xxxx...xxx".chars() {
        let found = if ch == 'x' {
            vec![tor(), finding(Kind::Node, "t1-h1", Symptom::Loss)]
        } else {
            vec![]
        };
        d.observe(found, &all);
    }
    assert_eq!(d.flapping().count(), 2);
    let out = seen(&d.observe(vec![], &all));
    assert_eq!(out, [("tor/tor1".to_string(), Symptom::Flapping)]);
}

#[test]
fn memory_is_bounded() {
    let mut d = detector();
    // A flap that never stops keeps only the last transitions.
    run(&mut d, &"xxxx....".repeat(200));
    assert!(d.tracks.values().all(|t| t.transitions.len() <= 3));
    // Components beyond the cap pass through untracked.
    let mut d = detector();
    let many: Vec<Finding> = (0..MAX_TRACKED + 5)
        .map(|i| {
            let mut f = tor();
            f.component = Component::new(Kind::Node, format!("n{i}"));
            f
        })
        .collect();
    let out = d.observe(many, &all);
    assert_eq!(out.len(), MAX_TRACKED + 5);
    assert_eq!(d.tracked(), MAX_TRACKED);
    // Each alerted once: all forgotten once their transitions are out of
    // the window.
    for _ in 0..21 {
        d.observe(vec![], &all);
    }
    assert_eq!(d.tracked(), 0);
}

#[test]
fn zero_transitions_disables_the_detector() {
    let mut d = FlapDetector::new(0, 20);
    let out = run(&mut d, &"xxxx....".repeat(10));
    assert!(never_flapping(&out), "{out:?}");
    assert_eq!(d.tracked(), 0);
}

#[test]
fn a_busy_host_coming_and_going_is_not_flapping() {
    let mut d = detector();
    let busy = || finding(Kind::Host, "t0-h0", Symptom::HostStack);
    for ch in "xx...xx...xx...xx".chars() {
        let found = if ch == 'x' { vec![busy()] } else { vec![] };
        let out = d.observe(found, &all);
        assert!(
            out.iter().all(|f| f.symptom == Symptom::HostStack),
            "{:?}",
            seen(&out)
        );
    }
    assert_eq!(d.flapping().count(), 0);
}
