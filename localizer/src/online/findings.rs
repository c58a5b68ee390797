//! From an engine report to what the online loop acts on: alert findings
//! with their evidence lines, and the blame per component it serves.

use super::alerts::{context_labels, Finding, MAX_JOBS};
use crate::engine::model::{PairStats, Report, Symptom};
use crate::jobs::impact::impact;
use skeletonhunter_common::ranks::Ranks;
use skeletonhunter_common::topology::{crosses, Component, Identity, Kind};
use std::collections::{BTreeMap, HashMap};

/// Up to five paths through link `link` that lose the most, as lines for
/// the alert (the flows of a pair that take that path).
fn link_evidence(link: &str, pairs: &[PairStats]) -> Vec<String> {
    let mut scored: Vec<(f64, String)> = pairs
        .iter()
        .flat_map(|p| p.paths.iter().map(move |x| (p, x)))
        .filter(|(_, x)| x.probes > 0.0 && x.lost > 0.0 && x.hops.iter().any(|h| h == link))
        .map(|(p, x)| {
            let r = x.lost / x.probes;
            let line = format!(
                "{} -> {} over path {}: {:.1}% loss ({:.0} of {:.0} probes)",
                p.src.node,
                p.dst.node,
                x.id,
                100.0 * r,
                x.lost,
                x.probes
            );
            (r, line)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(5).map(|(_, s)| s).collect()
}

/// Up to five pairs crossing `c` that show `symptom` the most (for a link,
/// paths through it), as human-readable lines for the alert.
pub fn evidence(c: &Component, symptom: Symptom, pairs: &[PairStats]) -> Vec<String> {
    if c.kind == Kind::Link {
        return link_evidence(&c.id, pairs);
    }
    let mut scored: Vec<(f64, &PairStats)> = pairs
        .iter()
        .filter(|p| {
            if c.kind == Kind::Hop {
                p.hops.contains(&c.id)
            } else {
                crosses(&p.src, &p.dst, c.kind, &c.id)
            }
        })
        .filter_map(|p| Some((symptom_score(symptom, p)?, p)))
        .collect();
    // Lines only for the pairs that can make the five (ties with the
    // fifth included, ordered by their line below): at 100,000 pairs a
    // line for every crossing pair of a spine was most of this.
    if scored.len() > 5 {
        let mut scores: Vec<f64> = scored.iter().map(|s| s.0).collect();
        let (_, fifth, _) = scores.select_nth_unstable_by(4, |a, b| b.total_cmp(a));
        let fifth = *fifth;
        scored.retain(|s| s.0.total_cmp(&fifth).is_ge());
    }
    let mut lines: Vec<(f64, String)> = scored
        .into_iter()
        .map(|(r, p)| (r, evidence_line(symptom, p, r)))
        .collect();
    lines.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    lines.into_iter().take(5).map(|(_, s)| s).collect()
}

/// How strongly `p` shows `symptom` (loss ratio, unanswered share, median
/// RTT); `None` when it does not show it at all.
fn symptom_score(symptom: Symptom, p: &PairStats) -> Option<f64> {
    match symptom {
        // A busy host's pairs: the loss its stack turned its delays into.
        Symptom::Loss | Symptom::HostStack if p.sent > 0.0 && p.lost > 0.0 => Some(p.lost / p.sent),
        Symptom::Unreachable if p.failed_dials > 0.0 => Some(p.failed_dials / p.rounds),
        Symptom::Latency => p.rtt_seconds,
        _ => None,
    }
}

/// The alert's line for a pair that shows `symptom` with `score`
/// ([`symptom_score`]).
fn evidence_line(symptom: Symptom, p: &PairStats, score: f64) -> String {
    let name = format!("{} -> {}", p.src.node, p.dst.node);
    match symptom {
        Symptom::Loss | Symptom::HostStack => format!(
            "{name}: {:.1}% loss ({:.0} of {:.0} probes)",
            100.0 * score,
            p.lost,
            p.sent
        ),
        Symptom::Unreachable => format!(
            "{name}: {:.0} of {:.0} probe rounds got no answer",
            p.failed_dials, p.rounds
        ),
        Symptom::Latency | Symptom::Flapping => {
            format!("{name}: median RTT {:.1} us", score * 1e6)
        }
    }
}

/// Turn a report into alert findings (`ranks`: the nodes' ranks in their
/// jobs, where known, for the job impact).
pub fn findings(
    report: &Report,
    pairs: &[PairStats],
    topology: &HashMap<String, Identity>,
    ranks: &HashMap<String, Ranks>,
) -> Vec<Finding> {
    report
        .faults
        .iter()
        .map(|f| {
            let c = f.component();
            Finding {
                hit_pairs: f
                    .hit_pairs
                    .iter()
                    .filter_map(|&i| pairs.get(i))
                    .map(|p| (p.src.clone(), p.dst.clone()))
                    .collect(),
                context: context_labels(&c, topology.values()),
                evidence: evidence(&c, f.symptom, pairs),
                jobs: {
                    let ends = pairs.iter().map(|p| (&p.src, &p.dst));
                    let mut jobs = impact(ends, ranks, c.kind, &c.id);
                    jobs.truncate(MAX_JOBS);
                    jobs
                },
                symptom: f.symptom,
                score: f.score,
                p_value: f.p_value,
                pairs: f.pairs,
                equivalent: f.equivalent.clone(),
                component: c,
                layer: None,
            }
        })
        .collect()
}

/// Blame per component for the metrics: max score over symptoms, faulty if
/// any symptom blames it; components with zero blame are left out.
pub fn blame_map(report: &Report) -> BTreeMap<Component, (f64, bool)> {
    let mut out: BTreeMap<Component, (f64, bool)> = BTreeMap::new();
    let mut put = |c: Component, score: f64, faulty: bool| {
        let e = out.entry(c).or_insert((0.0, false));
        if score.is_finite() {
            e.0 = e.0.max(score);
        }
        e.1 |= faulty;
    };
    for b in &report.blame {
        put(b.component.clone(), b.score, b.faulty);
    }
    for f in &report.faults {
        put(f.component(), f.score, true);
    }
    // Components with no blame at all stay out: on a large fabric they
    // would be tens of thousands of all-zero series.
    out.retain(|_, (score, faulty)| *faulty || *score > 0.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::Blame;
    use crate::online::fixtures::{fault, identity as ident};

    fn topo() -> HashMap<String, Identity> {
        [("a", "t1"), ("b", "t2"), ("c", "t2")]
            .into_iter()
            .map(|(n, t)| (n.to_string(), ident(n, t)))
            .collect()
    }

    #[test]
    fn evidence_of_a_hop_lists_the_pairs_that_crossed_it() {
        let mut a = ident("a", "t1");
        a.nic = "198.18.0.1".into();
        let b = ident("b", "t2");
        let lossy = PairStats {
            src: a.clone(),
            dst: b.clone(),
            rounds: 100.0,
            sent: 100.0,
            lost: 20.0,
            hops: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            ..Default::default()
        };
        let other = PairStats {
            src: b,
            dst: a,
            rounds: 100.0,
            sent: 100.0,
            lost: 20.0,
            ..Default::default()
        };
        let ev = evidence(
            &Component::new(Kind::Hop, "10.0.0.1"),
            Symptom::Loss,
            &[lossy, other],
        );
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert!(ev[0].starts_with("a -> b"), "{ev:?}");
    }

    #[test]
    fn evidence_lists_worst_pairs_crossing_the_component() {
        let topo = topo();
        let mk = |s: &str, d: &str, lost: f64| PairStats {
            src: topo[s].clone(),
            dst: topo[d].clone(),
            rounds: 100.0,
            sent: 100.0,
            lost,
            ..Default::default()
        };
        let pairs = [mk("a", "b", 30.0), mk("b", "c", 50.0), mk("a", "c", 10.0)];
        let ev = evidence(&Component::new(Kind::Tor, "t1"), Symptom::Loss, &pairs);
        assert_eq!(
            ev,
            vec![
                "a -> b: 30.0% loss (30 of 100 probes)".to_string(),
                "a -> c: 10.0% loss (10 of 100 probes)".to_string()
            ]
        );
    }

    #[test]
    fn evidence_keeps_the_five_worst_with_ties_at_the_fifth_ordered_by_line() {
        // Twelve pairs out of ToR t1 (and one not crossing it, the worst):
        // losses 5..=60 % with ties, so the fifth place is shared.
        let ids: Vec<Identity> = (0..13).map(|i| ident(&format!("n{i:02}"), "t1")).collect();
        let far = ident("far", "t9");
        let lost = [
            30.0, 60.0, 10.0, 45.0, 45.0, 5.0, 45.0, 60.0, 20.0, 45.0, 15.0, 45.0,
        ];
        let mut pairs: Vec<PairStats> = lost
            .iter()
            .zip(&ids)
            .map(|(&lost, src)| PairStats {
                src: src.clone(),
                dst: far.clone(),
                rounds: 100.0,
                sent: 100.0,
                lost,
                ..Default::default()
            })
            .collect();
        pairs.push(PairStats {
            src: far.clone(),
            dst: ident("far2", "t9"),
            lost: 90.0,
            ..pairs[0].clone()
        });
        let ev = evidence(&Component::new(Kind::Tor, "t1"), Symptom::Loss, &pairs);
        assert_eq!(
            ev,
            [
                "n01 -> far: 60.0% loss (60 of 100 probes)",
                "n07 -> far: 60.0% loss (60 of 100 probes)",
                "n03 -> far: 45.0% loss (45 of 100 probes)",
                "n04 -> far: 45.0% loss (45 of 100 probes)",
                "n06 -> far: 45.0% loss (45 of 100 probes)",
            ]
        );
        let ev = evidence(&Component::new(Kind::Tor, "t1"), Symptom::Latency, &pairs);
        assert!(ev.is_empty(), "no RTT, no latency line: {ev:?}");
    }

    /// The engine's hit pairs (indices into the analyzed pairs) reach the
    /// alert logic as the pairs' identities.
    #[test]
    fn findings_carry_the_pairs_they_explain() {
        let topo = topo();
        let mk = |s: &str, d: &str| PairStats {
            src: topo[s].clone(),
            dst: topo[d].clone(),
            rounds: 100.0,
            sent: 100.0,
            ..Default::default()
        };
        let pairs = [mk("a", "b"), mk("b", "c"), mk("a", "c")];
        let report = Report {
            faults: vec![fault(Kind::Tor, "t1", vec![0, 2, 99])],
            ..Default::default()
        };
        let f = findings(&report, &pairs, &topo, &HashMap::new());
        let got: Vec<(&str, &str)> = f[0]
            .hit_pairs
            .iter()
            .map(|(a, b)| (a.node.as_str(), b.node.as_str()))
            .collect();
        assert_eq!(got, [("a", "b"), ("a", "c")]);
    }

    #[test]
    fn blame_map_takes_max_and_marks_faults() {
        let report = Report {
            faults: vec![fault(Kind::Tor, "t1", vec![])],
            blame: vec![Blame {
                component: Component::new(Kind::Node, "a"),
                symptom: Symptom::Latency,
                score: 0.05,
                p_value: 0.3,
                faulty: false,
            }],
            ..Default::default()
        };
        let m = blame_map(&report);
        assert_eq!(m[&Component::new(Kind::Tor, "t1")], (0.3, true));
        assert_eq!(m[&Component::new(Kind::Node, "a")], (0.05, false));
        let mut zero = report.clone();
        zero.blame[0].score = 0.0;
        assert!(!blame_map(&zero).contains_key(&Component::new(Kind::Node, "a")));
    }

    #[test]
    fn evidence_of_a_link_lists_the_lossiest_paths_through_it() {
        use crate::engine::model::PathObs;
        let path = |id: &str, hops: &[&str], lost: f64| PathObs {
            id: id.into(),
            hops: hops.iter().map(std::string::ToString::to_string).collect(),
            probes: 100.0,
            lost,
        };
        let p = PairStats {
            src: ident("a", "t1"),
            dst: ident("b", "t2"),
            rounds: 1.0,
            paths: vec![
                path("p1", &["10.0.0.1", "198.19.0.2"], 100.0),
                path("p2", &["10.0.0.1", "198.19.1.2"], 0.0),
            ],
            ..Default::default()
        };
        let lines = evidence(
            &Component::new(Kind::Link, "198.19.0.2"),
            Symptom::Unreachable,
            &[p],
        );
        assert_eq!(
            lines,
            vec!["a -> b over path p1: 100.0% loss (100 of 100 probes)"]
        );
    }

    /// A dead ECMP link in a cycle's pairs becomes an alert like any other
    /// component's: kind `link`, the address as component, critical.
    #[test]
    fn a_dead_link_is_alerted_as_a_link() {
        use crate::engine::model::Config;
        use crate::engine::pipeline::analyze;
        use crate::online::alerts::{alert_for, AlertLinks};
        use std::time::{Duration, SystemTime};
        let pairs = crate::engine::links::tests::fabric(3, &[("u10", 1.0)]);
        let topology: HashMap<String, Identity> = pairs
            .iter()
            .map(|p| (p.src.node.clone(), p.src.clone()))
            .collect();
        let report = analyze(&pairs, &Config::default());
        let found = findings(&report, &pairs, &topology, &HashMap::new());
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert!(f.hit_pairs.iter().all(|(s, _)| s.tor == "t1"));
        assert!(f.evidence[0].contains("100.0% loss"), "{:?}", f.evidence);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let a = alert_for(f, f.symptom, now, now, &AlertLinks::default(), false);
        let label = |k: &str| a.labels.get(k).map(String::as_str);
        assert_eq!(label("kind"), Some("link"));
        assert_eq!(label("component"), Some("u10"));
        assert_eq!(label("link"), Some("u10"));
        assert_eq!(label("severity"), Some("critical"));
        assert_eq!(label("symptom"), Some("unreachable"));
        assert!(a.annotations["summary"].starts_with("link u10 is unreachable"));
        let blame = blame_map(&report);
        assert_eq!(
            blame.get(&Component::new(Kind::Link, "u10")),
            Some(&(1.0, true))
        );
    }
}
