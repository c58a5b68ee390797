//! The link stage on a 3-ToR, 2-spine fabric of traced ECMP flows.

use super::*;
use crate::engine::model::PathObs;
use skeletonhunter_common::topology::Identity;

/// A deterministic stand-in for an ECMP hash.
fn hash(a: usize, b: usize, f: usize, salt: usize) -> usize {
    (a * 7919 + b * 104_729 + f * 31 + salt * 1_000_003).wrapping_mul(2_654_435_761) >> 7
}

/// A 3-ToR, 2-spine fabric, `per_tor` single-host nodes per ToR, every
/// ordered pair probed over 16 flows of 50 probes. Flow f of a -> b
/// leaves its host (`h<a>`), goes up `u<ta><s>` and down `d<s><tb>`
/// through spine s into b's host (`x<b>`), its reply through an
/// independently hashed spine. `faulty` maps a link (or `node:<name>`)
/// to its loss; the counts are the expected ones.
pub(crate) fn fabric(per_tor: usize, faulty: &[(&str, f64)]) -> Vec<PairStats> {
    let loss = |name: &str| {
        faulty
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |(_, q)| *q)
    };
    let nodes: Vec<(String, usize)> = (0..3 * per_tor)
        .map(|i| (format!("n{i}"), i / per_tor))
        .collect();
    let ident = |(n, t): &(String, usize)| Identity {
        node: n.clone(),
        nic: format!("nic-{n}"),
        host: format!("host-{n}"),
        tor: format!("t{t}"),
        spine: "block".into(),
        ..Default::default()
    };
    let mut out = Vec::new();
    for (ai, a) in nodes.iter().enumerate() {
        for (bi, b) in nodes.iter().enumerate() {
            if ai == bi {
                continue;
            }
            let pair_survival =
                (1.0 - loss(&format!("node:{}", a.0))) * (1.0 - loss(&format!("node:{}", b.0)));
            let mut rows: Vec<PathObs> = Vec::new();
            for f in 0..16 {
                let hops: Vec<String> = if a.1 == b.1 {
                    vec![format!("h{}", a.0), format!("x{}", b.0)]
                } else {
                    let s = hash(ai, bi, f, 1) % 2;
                    vec![
                        format!("h{}", a.0),
                        format!("u{}{s}", a.1),
                        format!("d{s}{}", b.1),
                        format!("x{}", b.0),
                    ]
                };
                let mut surv = pair_survival;
                for h in &hops {
                    surv *= 1.0 - loss(h);
                }
                if a.1 != b.1 {
                    let r = hash(bi, ai, f, 2) % 2;
                    surv *= (1.0 - loss(&format!("u{}{r}", b.1)))
                        * (1.0 - loss(&format!("d{r}{}", a.1)));
                }
                let lost = (50.0 * (1.0 - surv)).round();
                match rows.iter_mut().find(|p| p.hops == hops) {
                    Some(p) => {
                        p.probes += 50.0;
                        p.lost += lost;
                    }
                    None => rows.push(PathObs {
                        id: hops.join(">"),
                        hops,
                        probes: 50.0,
                        lost,
                    }),
                }
            }
            let (sent, lost) = rows
                .iter()
                .fold((0.0, 0.0), |(s, l), p| (s + p.probes, l + p.lost));
            out.push(PairStats {
                src: ident(a),
                dst: ident(b),
                rounds: 10.0,
                sent,
                lost,
                paths: rows,
                ..Default::default()
            });
        }
    }
    out
}

fn run(pairs: &[PairStats]) -> LinkReport {
    localize(&pairs.iter().collect::<Vec<_>>(), &Config::default())
}

fn names(r: &LinkReport) -> Vec<String> {
    r.faults
        .iter()
        .map(|f| format!("{}:{}", f.id, f.symptom))
        .collect()
}

#[test]
fn a_dead_uplink_is_blamed_and_explains_both_directions() {
    let pairs = fabric(3, &[("u10", 1.0)]);
    let r = run(&pairs);
    assert_eq!(names(&r), ["u10:unreachable"]);
    assert!(r.faults[0].score > 0.99);
    for (p, &e) in pairs.iter().zip(&r.explained) {
        let touches = (p.src.tor == "t1") != (p.dst.tor == "t1");
        assert_eq!(e, touches, "{} -> {}", p.src.node, p.dst.node);
    }
}

#[test]
fn a_lossy_downlink_and_a_gray_uplink_are_blamed() {
    let r = run(&fabric(3, &[("d02", 0.3)]));
    assert_eq!(names(&r), ["d02:loss"]);
    assert!(
        (r.faults[0].score - 0.3).abs() < 0.05,
        "{}",
        r.faults[0].score
    );
    let r = run(&fabric(4, &[("u21", 0.04)]));
    assert_eq!(names(&r), ["u21:loss"]);
}

/// Both directions of the t1 - spine 0 cable dead: one directed link
/// is blamed, the other listed with it; nothing else.
#[test]
fn a_cable_dead_both_ways_is_one_fault() {
    let r = run(&fabric(3, &[("u10", 1.0), ("d01", 1.0)]));
    assert_eq!(r.faults.len(), 1, "{:?}", names(&r));
    let f = &r.faults[0];
    let mut both: Vec<&str> = f.equivalent.iter().map(|c| c.id.as_str()).collect();
    both.push(&f.id);
    both.sort_unstable();
    assert_eq!(both, ["d01", "u10"]);
    // One direction only: the other is not listed.
    let r = run(&fabric(3, &[("u10", 1.0)]));
    assert!(
        r.faults[0].equivalent.is_empty(),
        "{:?}",
        r.faults[0].equivalent
    );
}

#[test]
fn a_faulty_spine_is_not_blamed_on_its_links() {
    let spine: Vec<(String, f64)> = (0..3)
        .flat_map(|t| [(format!("u{t}1"), 0.3), (format!("d1{t}"), 0.3)])
        .collect();
    let refs: Vec<(&str, f64)> = spine.iter().map(|(n, q)| (n.as_str(), *q)).collect();
    let r = run(&fabric(3, &refs));
    assert!(r.faults.is_empty(), "{:?}", names(&r));
    assert!(r.explained.iter().all(|e| !e));
    assert!(r.blame.iter().any(|b| !b.faulty));
}

#[test]
fn endpoint_faults_and_health_blame_no_link() {
    assert!(run(&fabric(3, &[])).faults.is_empty());
    let r = run(&fabric(3, &[("node:n1", 0.4), ("hn4", 1.0)]));
    assert!(r.faults.is_empty(), "{:?}", names(&r));
    // No path data: nothing to do.
    let mut pairs = fabric(2, &[("u10", 1.0)]);
    for p in &mut pairs {
        p.paths.clear();
    }
    let r = run(&pairs);
    assert!(r.faults.is_empty() && r.explained.iter().all(|e| !e));
}

/// Two links into spine 1 lose 30%: before the rule, the first was
/// blamed, its pairs took the evidence away from spine 1's other
/// links (the router rule could not fire), and a second link of the
/// spine — the wrong one, a downlink — was blamed beside it. Two
/// faulty links of one router are the router; the same holds for a
/// link into it and one out of it.
#[test]
fn two_faulty_links_of_one_spine_are_the_spine() {
    for faulty in [[("u01", 0.3), ("u11", 0.3)], [("u01", 0.1), ("d12", 0.1)]] {
        let r = run(&fabric(3, &faulty));
        assert!(r.faults.is_empty(), "{faulty:?}: {:?}", names(&r));
        assert!(r.explained.iter().all(|e| !e), "{faulty:?}");
        assert!(r.blame.iter().all(|b| !b.faulty), "{faulty:?}");
    }
    // Links of different spines and ToRs are two faults.
    let r = run(&fabric(3, &[("u01", 0.3), ("u20", 0.3)]));
    let mut got = names(&r);
    got.sort();
    assert_eq!(got, ["u01:loss", "u20:loss"]);
}
