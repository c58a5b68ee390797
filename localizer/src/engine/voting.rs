//! The reference the engine is compared with: greedy voting over fixed
//! thresholds, as simple localizers do. A pair is "bad" when its loss
//! exceeds 1%, when at least half its dials failed, or when its RTT exceeds
//! 1.5× the median of its path class; each component gets a vote per bad
//! pair crossing it; greedily, the component with the most votes among those
//! where most of their pairs are bad is blamed and its pairs are removed.
//! It shares the path matrix (so it gets the same `equivalent` lists).

use crate::engine::model::{Fault, PairStats, Report, Symptom};
use crate::engine::stats::median;
use crate::engine::topology::PathMatrix;
use skeletonhunter_common::topology::PathClass;

/// Loss rate above which a pair votes against its path.
pub const LOSS_THRESHOLD: f64 = 0.01;
/// Share of failed dials above which a pair votes unreachable.
pub const DIAL_FAILURE_THRESHOLD: f64 = 0.5;
/// RTT over this multiple of the class median votes latency.
pub const LATENCY_FACTOR: f64 = 1.5;
/// Share of a component's pairs that must vote for it to be blamed.
pub const MAJORITY: f64 = 0.5;

/// The voting baseline's report for `pairs`.
pub fn analyze(pairs: &[PairStats]) -> Report {
    let usable: Vec<&PairStats> = pairs
        .iter()
        .filter(|p| !p.src.node.is_empty() && !p.dst.node.is_empty() && p.rounds > 0.0)
        .collect();
    let m = PathMatrix::build(&usable);
    let bad = votes(&usable, &m);
    let anomalous = bad.iter().filter(|b| b.is_some()).count();
    Report {
        faults: greedy(&m, &bad),
        pairs_observed: usable.len(),
        pairs_anomalous: anomalous,
        blame: Vec::new(),
    }
}

fn class_index(c: PathClass) -> usize {
    match c {
        PathClass::SameHost => 0,
        PathClass::SameTor => 1,
        PathClass::CrossTor => 2,
    }
}

/// Each pair's vote: the symptom it shows over the fixed thresholds.
fn votes(usable: &[&PairStats], m: &PathMatrix) -> Vec<Option<Symptom>> {
    let mut class_rtts: [Vec<f64>; 3] = Default::default();
    for (p, &c) in usable.iter().zip(&m.class) {
        if let Some(r) = p.rtt_seconds {
            class_rtts[class_index(c)].push(r);
        }
    }
    let medians: Vec<f64> = class_rtts
        .iter_mut()
        .map(|v| {
            if v.is_empty() {
                f64::INFINITY
            } else {
                median(v)
            }
        })
        .collect();
    usable
        .iter()
        .zip(&m.class)
        .map(|(p, &c)| {
            if p.failed_dials / p.rounds >= DIAL_FAILURE_THRESHOLD {
                Some(Symptom::Unreachable)
            } else if p.sent > 0.0 && p.lost / p.sent > LOSS_THRESHOLD {
                Some(Symptom::Loss)
            } else if p
                .rtt_seconds
                .is_some_and(|r| r > LATENCY_FACTOR * medians[class_index(c)])
            {
                Some(Symptom::Latency)
            } else {
                None
            }
        })
        .collect()
}

/// Blame the most-voted majority component, remove its pairs, repeat.
fn greedy(m: &PathMatrix, bad: &[Option<Symptom>]) -> Vec<Fault> {
    let mut explained = vec![false; bad.len()];
    let mut faults = Vec::new();
    let mut used = vec![false; m.columns.len()];
    loop {
        let mut best: Option<(usize, usize, f64)> = None;
        for (j, _) in used.iter().enumerate().filter(|(_, &u)| !u) {
            let rows = m.col(j);
            let votes = rows
                .iter()
                .filter(|&&i| bad[i as usize].is_some() && !explained[i as usize])
                .count();
            let ratio = votes as f64 / rows.len() as f64;
            if votes >= 2
                && ratio > MAJORITY
                && best.is_none_or(|(_, v, r)| votes > v || (votes == v && ratio > r))
            {
                best = Some((j, votes, ratio));
            }
        }
        let Some((j, votes, ratio)) = best else { break };
        used[j] = true;
        let mut counts = [0usize; 3];
        for &i in m.col(j) {
            if let Some(s) = bad[i as usize] {
                if !explained[i as usize] {
                    counts[s as usize] += 1;
                }
            }
            explained[i as usize] = true;
        }
        let s = (0..3).max_by_key(|&k| counts[k]).unwrap_or(0);
        faults.push(Fault {
            kind: m.columns[j].kind,
            id: m.columns[j].id.clone(),
            score: ratio,
            p_value: f64::NAN,
            symptom: Symptom::ALL[s],
            pairs: votes,
            equivalent: m.equivalent[j].clone(),
            hit_pairs: Vec::new(),
        });
    }
    faults
}
