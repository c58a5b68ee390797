//! From one cycle's report and pairs to what the page shows: verdicts with
//! measured evidence and the ToR × ToR loss matrix. Pure.

use super::{Cell, Evidence, Matrix, Verdict, VerdictState, LINES_CAP};
use crate::engine::model::{PairStats, Report, Symptom};
use crate::engine::stats;
use crate::jobs::impact::summary;
use crate::online::alerts::{severity, AlertKey, Finding};
use crate::online::overview::combined_loss;
use skeletonhunter_common::topology::{path_class, Component, PathClass};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The verdicts of a cycle: `found` are the findings made from
/// `report.faults` (in the same order), `pairs` the analyzed pairs the
/// faults' hit pairs index. All start [`VerdictState::Pending`]; see
/// [`mark_states`].
pub fn verdicts(report: &Report, found: &[Finding], pairs: &[PairStats]) -> Vec<Verdict> {
    // Every pair's path class, once for all the faults' latency shifts.
    let classes: Vec<PathClass> = match report.faults.is_empty() {
        true => Vec::new(),
        false => pairs.iter().map(|p| path_class(&p.src, &p.dst)).collect(),
    };
    report
        .faults
        .iter()
        .zip(found)
        .map(|(fault, f)| {
            let hit: Vec<&PairStats> = fault
                .hit_pairs
                .iter()
                .filter_map(|&i| pairs.get(i))
                .collect();
            Verdict {
                component: f.component.clone(),
                symptom: f.symptom,
                severity: f.key().severity,
                state: VerdictState::Pending,
                score: Some(f.score),
                p_value: Some(f.p_value),
                pairs: f.pairs,
                evidence: Evidence {
                    hit_pairs: hit.len(),
                    loss: ratio(hit.iter().map(|p| (p.lost, p.sent))),
                    unanswered: ratio(hit.iter().map(|p| (p.failed_dials, p.rounds))),
                    latency_shift_seconds: latency_shift(&fault.hit_pairs, pairs, &classes),
                    lines: jobs_line(f)
                        .into_iter()
                        .chain(f.evidence.iter().cloned())
                        .take(LINES_CAP)
                        .collect(),
                },
            }
        })
        .collect()
}

/// The jobs a finding hurts, as the first evidence line an on-call
/// engineer reads (none when it touches no job).
fn jobs_line(f: &Finding) -> Option<String> {
    (!f.jobs.is_empty()).then(|| format!("jobs hurt: {}", summary(&f.jobs, JOBS_SHOWN)))
}

/// Jobs named on a verdict's line of the page.
const JOBS_SHOWN: usize = 3;

/// Mark which verdicts are alerted (`active`: the alerts held firing after
/// the cycle, with their symptom), add the alerted components not blamed
/// this cycle as [`VerdictState::Kept`], and sort: firing, pending, kept,
/// then by component.
pub fn mark_states<'a>(
    verdicts: &mut Vec<Verdict>,
    active: impl IntoIterator<Item = (&'a AlertKey, Symptom)>,
) {
    let active: Vec<(&AlertKey, Symptom)> = active.into_iter().collect();
    let alerted: BTreeSet<(_, &str)> = active
        .iter()
        .map(|(k, _)| (k.kind, k.id.as_str()))
        .collect();
    for v in verdicts.iter_mut() {
        if alerted.contains(&(v.component.kind, v.component.id.as_str())) {
            v.state = VerdictState::Firing;
        }
    }
    let blamed: BTreeSet<Component> = verdicts.iter().map(|v| v.component.clone()).collect();
    for (k, symptom) in active {
        let c = Component::new(k.kind, k.id.clone());
        if blamed.contains(&c) {
            continue;
        }
        verdicts.push(Verdict {
            severity: severity(k.kind, symptom),
            component: c,
            symptom,
            state: VerdictState::Kept,
            score: None,
            p_value: None,
            pairs: 0,
            evidence: Evidence::default(),
        });
    }
    verdicts.sort_by(|a, b| {
        (a.state, a.severity, &a.component).cmp(&(b.state, b.severity, &b.component))
    });
    verdicts.dedup_by(|a, b| a.component == b.component && a.severity == b.severity);
}

/// Σ numerator / Σ denominator; `None` when the denominator is 0.
fn ratio(parts: impl Iterator<Item = (f64, f64)>) -> Option<f64> {
    let (n, d) = parts.fold((0.0, 0.0), |(n, d), (a, b)| (n + a, d + b));
    (d > 0.0).then(|| (n / d).clamp(0.0, 1.0))
}

/// Median of `v` (sorted in place); `None` when empty.
fn median(v: &mut [f64]) -> Option<f64> {
    (!v.is_empty()).then(|| stats::median(v))
}

/// Median RTT of the hit pairs (`hit`, indices into `pairs`) minus the
/// median RTT of the other pairs of the same path classes (the baseline
/// the engine compares against); `classes` is every pair's path class.
fn latency_shift(hit: &[usize], pairs: &[PairStats], classes: &[PathClass]) -> Option<f64> {
    let mut is_hit = vec![false; pairs.len()];
    let mut hit_classes: BTreeSet<PathClass> = BTreeSet::new();
    let mut mine = Vec::with_capacity(hit.len());
    for &i in hit {
        let (Some(p), Some(&class)) = (pairs.get(i), classes.get(i)) else {
            continue;
        };
        is_hit[i] = true;
        hit_classes.insert(class);
        mine.extend(p.rtt_seconds);
    }
    let mut others: Vec<f64> = pairs
        .iter()
        .zip(classes)
        .zip(&is_hit)
        .filter(|((_, class), hit)| !**hit && hit_classes.contains(class))
        .filter_map(|((p, _), _)| p.rtt_seconds)
        .collect();
    Some(median(&mut mine)? - median(&mut others)?)
}

/// Per (source ToR, destination ToR): lost and sent probes, failed and all
/// rounds, pairs.
#[derive(Default, Clone, Copy)]
struct Sums {
    lost: f64,
    sent: f64,
    failed: f64,
    rounds: f64,
    pairs: usize,
}

impl Sums {
    /// A round without any answer counts as all its probes lost.
    fn cell(self) -> Cell {
        Cell {
            loss: combined_loss(self.lost, self.sent, self.failed, self.rounds).unwrap_or(0.0),
            pairs: self.pairs,
        }
    }
}

/// The ToR × ToR loss matrix of `pairs` (pairs without a ToR on either end
/// are left out), showing at most `cap` ToRs: those with the lossiest
/// cells, then the most pairs, then by name.
pub fn tor_matrix(pairs: &[PairStats], cap: usize) -> Matrix {
    let mut sums: HashMap<(&str, &str), Sums> = HashMap::new();
    for p in pairs
        .iter()
        .filter(|p| !p.src.tor.is_empty() && !p.dst.tor.is_empty())
    {
        let s = sums
            .entry((p.src.tor.as_str(), p.dst.tor.as_str()))
            .or_default();
        s.lost += p.lost.max(0.0);
        s.sent += p.sent.max(0.0);
        s.failed += p.failed_dials.max(0.0);
        s.rounds += p.rounds.max(0.0);
        s.pairs += 1;
    }
    let cells: HashMap<(&str, &str), Cell> = sums.into_iter().map(|(k, s)| (k, s.cell())).collect();
    // Rank: worst cell touching the ToR, then its pair count.
    let mut rank: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (&(a, b), c) in &cells {
        for t in [a, b] {
            let r = rank.entry(t).or_default();
            r.0 = r.0.max(c.loss);
            r.1 += c.pairs;
        }
    }
    let total_tors = rank.len();
    let mut ranked: Vec<(&str, (f64, usize))> = rank.into_iter().collect();
    ranked.sort_by(|a, b| {
        b.1 .0
            .total_cmp(&a.1 .0)
            .then(b.1 .1.cmp(&a.1 .1))
            .then(a.0.cmp(b.0))
    });
    let mut tors: Vec<String> = ranked
        .into_iter()
        .take(cap)
        .map(|(t, _)| t.to_string())
        .collect();
    tors.sort();
    let grid = tors
        .iter()
        .flat_map(|a| tors.iter().map(move |b| (a, b)))
        .map(|(a, b)| cells.get(&(a.as_str(), b.as_str())).copied())
        .collect();
    Matrix {
        tors,
        cells: grid,
        total_tors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::online::alerts::Severity;
    use crate::online::fixtures::{fault, identity as node};
    use skeletonhunter_common::topology::Kind;

    fn pair(a: (&str, &str), b: (&str, &str), lost: f64, rtt: f64) -> PairStats {
        PairStats {
            src: node(a.0, a.1),
            dst: node(b.0, b.1),
            rounds: 10.0,
            sent: 100.0,
            lost,
            rtt_seconds: Some(rtt),
            ..Default::default()
        }
    }

    #[test]
    fn matrix_aggregates_by_tor_pair_and_counts_silent_rounds_as_lost() {
        let mut cut = pair(("c", "t2"), ("a", "t1"), 0.0, 1e-4);
        cut.failed_dials = 10.0; // every round unanswered
        let pairs = [
            pair(("a", "t1"), ("b", "t2"), 10.0, 1e-4),
            pair(("a", "t1"), ("c", "t2"), 30.0, 1e-4),
            pair(("a", "t1"), ("d", "t1"), 0.0, 1e-4),
            cut,
            pair(("x", ""), ("a", "t1"), 50.0, 1e-4),
        ];
        let m = tor_matrix(&pairs, 32);
        assert_eq!(m.tors, ["t1", "t2"]);
        assert_eq!(m.total_tors, 2);
        let c = m.cell(0, 1).unwrap();
        assert!((c.loss - 0.2).abs() < 1e-12, "{c:?}");
        assert_eq!(c.pairs, 2);
        assert_eq!(m.cell(0, 0).unwrap().loss, 0.0);
        assert_eq!(m.cell(1, 0).unwrap().loss, 1.0);
        assert_eq!(m.cell(1, 1), None);
    }

    #[test]
    fn matrix_keeps_the_lossiest_tors_when_capped() {
        let pairs: Vec<PairStats> = (0..10)
            .map(|i| {
                let t = format!("t{i}");
                pair(("a", &t), ("b", &t), f64::from(i), 1e-4)
            })
            .collect();
        let m = tor_matrix(&pairs, 3);
        assert_eq!(m.tors, ["t7", "t8", "t9"]);
        assert_eq!(m.total_tors, 10);
        assert_eq!(m.cells.len(), 9);
        assert!(tor_matrix(&[], 3).tors.is_empty());
    }

    fn finding(c: Component, symptom: Symptom) -> Finding {
        Finding {
            pairs: 2,
            evidence: vec!["a -> b: 30.0% loss".into()],
            ..crate::online::fixtures::finding(c, symptom, vec![])
        }
    }

    #[test]
    fn median_of_odd_even_and_empty_lists() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0]), Some(3.0));
        assert_eq!(median(&mut [9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(&mut [9.0, 1.0, 4.0, 2.0]), Some(3.0));
        assert_eq!(median(&mut [2.0, 2.0, 7.0, 1.0, 8.0, 2.0]), Some(2.0));
    }

    #[test]
    fn verdicts_measure_the_hit_pairs_against_their_class() {
        let pairs = [
            pair(("a", "t1"), ("b", "t2"), 30.0, 3e-4),
            pair(("c", "t1"), ("b", "t2"), 10.0, 5e-4),
            pair(("d", "t3"), ("e", "t2"), 0.0, 1e-4),
            pair(("f", "t3"), ("g", "t3"), 0.0, 9e-4),
        ];
        let tor = Component::new(Kind::Tor, "t1");
        let report = Report {
            faults: vec![fault(Kind::Tor, "t1", vec![0, 1, 42])],
            ..Default::default()
        };
        let v = verdicts(&report, &[finding(tor.clone(), Symptom::Loss)], &pairs);
        assert_eq!(v.len(), 1);
        let e = &v[0].evidence;
        assert_eq!(e.hit_pairs, 2);
        assert!((e.loss.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(e.unanswered, Some(0.0));
        // Median 4e-4 against the other cross-ToR pair's 1e-4 (the
        // same-ToR pair is another class).
        assert!((e.latency_shift_seconds.unwrap() - 3e-4).abs() < 1e-12);
        assert_eq!(v[0].severity, Severity::Critical);
        assert_eq!(v[0].state, VerdictState::Pending);
        assert_eq!(e.lines, ["a -> b: 30.0% loss"]);
        // The jobs it hurts come first.
        let mut hurting = finding(tor, Symptom::Loss);
        hurting.jobs = vec![crate::jobs::impact::JobImpact {
            job: "llama".into(),
            ranks_under: 2,
            spans_under: "4-5".into(),
            ranks_hit: 3,
            ranks: 8,
            pairs_hit: 2,
            pairs: 9,
            groups_under: None,
            under: Vec::new(),
        }];
        let v = verdicts(&report, &[hurting], &pairs);
        assert_eq!(
            v[0].evidence.lines,
            [
                "jobs hurt: llama: 2 of 8 ranks under it (4-5), 3 hit (2 of 9 pairs)",
                "a -> b: 30.0% loss"
            ]
        );
    }

    #[test]
    fn states_follow_the_alert_book() {
        let f = |id: &str| {
            let mut v = verdicts(
                &Report {
                    faults: vec![fault(Kind::Node, id, vec![])],
                    ..Default::default()
                },
                &[finding(Component::new(Kind::Node, id), Symptom::Loss)],
                &[],
            );
            v.remove(0)
        };
        let mut v = vec![f("pending"), f("firing")];
        let key = |id: &str, severity| AlertKey {
            kind: Kind::Node,
            id: id.into(),
            severity,
        };
        let (k1, k2) = (
            key("firing", Severity::Warning),
            key("gone", Severity::Critical),
        );
        mark_states(&mut v, [(&k1, Symptom::Loss), (&k2, Symptom::Unreachable)]);
        let got: Vec<(&str, VerdictState)> = v
            .iter()
            .map(|v| (v.component.id.as_str(), v.state))
            .collect();
        assert_eq!(
            got,
            [
                ("firing", VerdictState::Firing),
                ("pending", VerdictState::Pending),
                ("gone", VerdictState::Kept)
            ]
        );
        assert_eq!(v[2].score, None);
        assert_eq!(v[2].severity, Severity::Critical);
    }
}
