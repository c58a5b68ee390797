//! Localization of one window: per symptom, Lasso screening then the greedy
//! confirmation; then one verdict per component and the report.
//!
//! Path health is the product of component health (after Deepview), so for
//! the binomial symptoms `log(1 - loss_i) = Σ_{j ∈ path(i)} β_j` with
//! `β_j ≤ 0`; for latency the delays add up. The regression targets built
//! here feed [`super::solver`]; the verdicts come from
//! [`super::hypothesis`] via [`super::greedy`].

use super::equivalence::{equivalent_components, same_evidence};
use super::family::latency::LatencyFamily;
use super::family::{BinomialFamily, Family};
use super::greedy::confirm;
use super::hypothesis::{Tester, Verdict};
use super::solver::{nonpositive_lasso, penalties};
use crate::engine::detect::{BinomialObs, Evidence, LatencyObs};
use crate::engine::model::{Blame, Config, Fault, Report, Symptom};
use crate::engine::stats::{binomial_upper_tail, normal_upper_quantile};
use crate::engine::topology::PathMatrix;
use skeletonhunter_common::topology::Kind;
use std::collections::HashMap;

/// Weighted least-squares target of one symptom: per pair the response,
/// its weight and its null variance.
struct Regression {
    y: Vec<f64>,
    w: Vec<f64>,
    var: Vec<f64>,
}

/// Localize faults from the per-pair evidence.
pub fn localize(m: &PathMatrix, ev: &Evidence, config: &Config) -> Report {
    let npairs = m.pairs();
    let ncol = m.columns.len().max(1);
    let level = config.alpha / ncol as f64;
    let spines = m.columns.iter().filter(|c| c.kind == Kind::Spine).count();
    // The ECMP count is asked of spines only (see `Tester::ecmp_level`).
    let levels = (level, config.alpha / spines.max(1) as f64);
    let mut found: Vec<(Symptom, Verdict)> = Vec::new();
    let mut blame: Vec<Blame> = Vec::new();

    let unreachable = unreachable_beside_loss(ev, config);
    for symptom in [Symptom::Loss, Symptom::Unreachable] {
        let obs = if symptom == Symptom::Loss {
            &ev.loss
        } else {
            &unreachable
        };
        let reg = binomial_regression(obs);
        let present: Vec<bool> = obs.n.iter().map(|&n| n > 0.0).collect();
        let family = BinomialFamily {
            obs,
            config,
            lone_flows_are_rare: symptom == Symptom::Loss && !ev.paths_traced,
        };
        let (mut acc, clr) = run_symptom(&family, m, &reg, config, levels, &present);
        // A lossy pair's dials, left out of the unreachable test above,
        // are evidence still: its dials went through.
        let probed = if symptom == Symptom::Loss {
            present
        } else {
            ev.unreachable.n.iter().map(|&n| n > 0.0).collect()
        };
        with_same_evidence(m, &probed, &mut acc);
        push_results(m, symptom, acc, clr, &mut found, &mut blame);
    }
    {
        let obs = &ev.latency;
        let reg = latency_regression(obs);
        let family = LatencyFamily {
            obs,
            config,
            z_cov: normal_upper_quantile(config.coverage_alpha),
        };
        let (mut acc, clr) = run_symptom(&family, m, &reg, config, levels, &obs.present);
        with_same_evidence(m, &obs.present, &mut acc);
        push_results(m, Symptom::Latency, acc, clr, &mut found, &mut blame);
    }

    let faults = faults_of(m, one_symptom_per_component(found, config));
    Report {
        faults,
        pairs_observed: npairs,
        pairs_anomalous: 0,
        blame,
    }
}

/// Dial failures on a pair that is losing packets are partly the loss
/// showing (a handshake needs its packets too): up to the pair's loss rate
/// of its dials (a handshake round trip with no retry) they are explained.
/// Such a pair counts only when its dials fail beyond that, and then only
/// the excess is evidence of unreachability: a NIC refusing most dials
/// under a ToR dropping a quarter of the packets still shows, while the
/// ToR's own pairs, failing fewer dials than packets, say nothing (nor do
/// they dilute the fitted share of a ToR so lossy it is unreachable).
fn unreachable_beside_loss(ev: &Evidence, config: &Config) -> BinomialObs {
    let mut u = ev.unreachable.clone();
    u.explained_rate = vec![0.0; u.n.len()];
    for i in 0..ev.loss.n.len().min(u.n.len()) {
        let (n, k) = (ev.loss.n[i], ev.loss.k[i]);
        if n > 0.0
            && k > 0.0
            && binomial_upper_tail(k, n, ev.loss.background) < config.coverage_alpha
        {
            let rate = k / n;
            if u.n[i] > 0.0 && u.k[i] / u.n[i] > rate {
                u.explained_rate[i] = rate;
            } else {
                u.n[i] = 0.0;
                u.k[i] = 0.0;
            }
        }
    }
    u
}

/// Log-survival excess over the background, weighted by trials.
fn binomial_regression(obs: &BinomialObs) -> Regression {
    let npairs = obs.n.len();
    let p0 = obs.background;
    let nbar = {
        let (s, c) = obs
            .n
            .iter()
            .filter(|&&n| n > 0.0)
            .fold((0.0, 0.0), |(s, c), &n| (s + n, c + 1.0));
        if c > 0.0 {
            s / c
        } else {
            1.0
        }
    };
    let mut reg = Regression {
        y: vec![0.0; npairs],
        w: vec![0.0; npairs],
        var: vec![0.0; npairs],
    };
    for i in 0..npairs {
        let (n, k) = (obs.n[i], obs.k[i]);
        if n <= 0.0 {
            continue;
        }
        let r = (k / n).min(1.0 - 0.5 / n.max(1.0));
        let healthy = obs.healthy_survival(i);
        reg.y[i] = (1.0 - r).ln() - healthy.ln();
        reg.w[i] = n / nbar;
        reg.var[i] = p0 / n;
        if healthy < 1.0 - p0 {
            // Its failures vary around what else explains, not around the
            // background.
            reg.var[i] = (1.0 - healthy) / n;
        }
    }
    reg
}

/// Negative excess RTT in units of the smallest noise scale.
fn latency_regression(obs: &LatencyObs) -> Regression {
    let npairs = obs.present.len();
    let mut reg = Regression {
        y: vec![0.0; npairs],
        w: vec![0.0; npairs],
        var: vec![0.0; npairs],
    };
    let smin = obs
        .sigma
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1e-12);
    for i in 0..npairs {
        if obs.present[i] {
            reg.y[i] = -obs.excess[i] / smin;
            let s = obs.sigma[i] / smin;
            reg.w[i] = 1.0 / (s * s);
            reg.var[i] = s * s;
        }
    }
    reg
}

/// The reported faults, most blamed first.
fn faults_of(m: &PathMatrix, best: HashMap<usize, (Symptom, Verdict)>) -> Vec<Fault> {
    let mut faults: Vec<Fault> = best
        .into_values()
        .map(|(s, v)| Fault {
            kind: m.columns[v.col].kind,
            id: m.columns[v.col].id.clone(),
            score: v.score,
            p_value: v.p_value,
            symptom: s,
            pairs: v.hit.len(),
            hit_pairs: v.hit.iter().map(|&i| i as usize).collect(),
            equivalent: equivalent_components(m, &v),
        })
        .collect();
    faults.sort_by(report_order);
    faults
}

/// The report's order: most blamed (highest score) first, then the most
/// significant, then by id.
pub fn report_order(a: &Fault, b: &Fault) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then(a.p_value.total_cmp(&b.p_value))
        .then_with(|| a.id.cmp(&b.id))
}

/// One entry per component.
///
/// Loss and unreachable verdicts on one component are one fault seen by two
/// probes (a TCP handshake needs its packets too; pairs cut within a short
/// window show only failed dials). `unreachable` means (nearly) nothing gets
/// through, so when both are blamed the fault is `unreachable` only if the
/// loss it adds reaches [`Config::unreachable_min_loss`], else `loss`: a ToR
/// dropping 30% of packets is lossy even when many dials time out. A loss
/// verdict alone at or above that share is `unreachable` too (the same
/// definition, whichever probe saw it). Between that verdict and latency,
/// the larger score wins.
fn one_symptom_per_component(
    found: Vec<(Symptom, Verdict)>,
    config: &Config,
) -> HashMap<usize, (Symptom, Verdict)> {
    let mut by_col: HashMap<usize, Vec<(Symptom, Verdict)>> = HashMap::new();
    for (s, v) in found {
        by_col.entry(v.col).or_default().push((s, v));
    }
    by_col
        .into_iter()
        .map(|(col, mut verdicts)| {
            let loss_score = verdicts
                .iter()
                .find(|(s, _)| *s == Symptom::Loss)
                .map(|(_, v)| v.score);
            if let Some(q) = loss_score {
                let has_unreachable = verdicts.iter().any(|(s, _)| *s == Symptom::Unreachable);
                if q < config.unreachable_min_loss {
                    verdicts.retain(|(s, _)| *s != Symptom::Unreachable);
                } else if has_unreachable {
                    verdicts.retain(|(s, _)| *s != Symptom::Loss);
                } else {
                    // Probes nearly all lost: unreachable, scored by the
                    // share that fails.
                    for (s, _) in &mut verdicts {
                        if *s == Symptom::Loss {
                            *s = Symptom::Unreachable;
                        }
                    }
                }
            }
            let best = verdicts
                .into_iter()
                .reduce(|a, b| if a.1.score >= b.1.score { a } else { b })
                .expect("at least one verdict per column");
            (col, best)
        })
        .collect()
}

/// Lasso screening, then the greedy confirmation, for one symptom, at the
/// Bonferroni level over all columns and the ECMP count's level.
fn run_symptom<F: Family>(
    family: &F,
    m: &PathMatrix,
    reg: &Regression,
    config: &Config,
    (level, ecmp_level): (f64, f64),
    present: &[bool],
) -> (Vec<Verdict>, Vec<Verdict>) {
    let pen = penalties(m, &reg.w, &reg.var);
    let beta = nonpositive_lasso(m, &reg.y, &reg.w, &pen, config.max_sweeps);
    let candidates: Vec<usize> = (0..m.columns.len()).filter(|&j| beta[j] < 0.0).collect();
    let tester = Tester {
        family,
        m,
        config,
        level,
        ecmp_level,
    };
    confirm(&tester, &candidates, present)
}

/// Each accepted verdict's columns crossed by the same pairs with
/// evidence of its symptom, `evidence` (see [`same_evidence`]), reported
/// as equivalent. A partial (ECMP) verdict too: a spine whose other flows
/// are all cut off by a dead ToR has the same evidence as the spine
/// beside it, though its column is the larger, and its sibling test,
/// which hands such flows to the smaller spine, never lets it pass.
fn with_same_evidence(m: &PathMatrix, evidence: &[bool], accepted: &mut [Verdict]) {
    for v in accepted.iter_mut() {
        for j in same_evidence(m, evidence, v.col) {
            if !v.also.contains(&j) {
                v.also.push(j);
            }
        }
    }
}

fn push_results(
    m: &PathMatrix,
    symptom: Symptom,
    accepted: Vec<Verdict>,
    cleared: Vec<Verdict>,
    found: &mut Vec<(Symptom, Verdict)>,
    blame: &mut Vec<Blame>,
) {
    for (v, faulty) in accepted
        .iter()
        .map(|v| (v, true))
        .chain(cleared.iter().map(|v| (v, false)))
    {
        blame.push(Blame {
            component: m.columns[v.col].clone(),
            symptom,
            score: v.score,
            p_value: v.p_value,
            faulty,
        });
    }
    for v in accepted {
        found.push((symptom, v));
    }
}
