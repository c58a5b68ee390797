//! Network tomography after Deepview: path health is the product of
//! component health, so `log(1 - loss_i) = Σ_{j ∈ path(i)} β_j` with
//! `β_j ≤ 0`.
//!
//! Per symptom:
//! 1. a non-positive, weighted Lasso (coordinate descent over the sparse
//!    path matrix) selects candidates; each column's penalty is a multiple
//!    of the null standard deviation of its score, so a candidate enters only
//!    when its pairs together deviate from noise (an absolute, not relative,
//!    penalty: a large fault does not hide a small one);
//! 2. candidates are confirmed greedily, strongest first, each against a
//!    model holding the faults accepted so far (explaining away): a one-sided
//!    likelihood-ratio test (binomial for loss / unreachable, Gaussian for
//!    latency) on the candidate's pairs, plus a coverage test — a fault on a
//!    node/nic/host/ToR hits all its pairs, so enough of them must show the
//!    symptom for the fitted size; a spine (ECMP) may hit only some flows, so
//!    there the share of its pairs showing the symptom is tested against the
//!    share elsewhere in the fabric (this is what separates a partial spine
//!    fault from noisy single pairs).

use crate::detect::{BinomialObs, Evidence, LatencyObs};
use crate::stats::{
    binomial_loglik, binomial_upper_tail, normal_upper_quantile, normal_upper_tail,
    one_sided_lr_p_value,
};
use crate::topology::PathMatrix;
use crate::{Blame, Config, Fault, Report, Symptom};
use skeletonhunter_common::topology::Kind;
use std::collections::HashMap;

/// How many null standard deviations a column's score must exceed to enter
/// the Lasso. Lenient: the Lasso only proposes; the tests decide.
const SCREEN_Z: f64 = 3.0;

/// Solve `min ½ Σ w_i (y_i - (Aβ)_i)² + Σ_j λ_j |β_j|` subject to `β ≤ 0`
/// by cyclic coordinate descent with an active set. Pairs with `w_i = 0` do
/// not count. Returns β per column.
pub fn nonpositive_lasso(
    m: &PathMatrix,
    y: &[f64],
    w: &[f64],
    penalty: &[f64],
    max_sweeps: usize,
) -> Vec<f64> {
    let ncol = m.columns.len();
    let mut beta = vec![0.0; ncol];
    let mut resid: Vec<f64> = y.to_vec();
    let zsum: Vec<f64> = (0..ncol)
        .map(|j| m.col(j).iter().map(|&i| w[i as usize]).sum())
        .collect();
    let scale = y
        .iter()
        .zip(w)
        .map(|(y, w)| (y * w).abs())
        .fold(0.0, f64::max)
        .max(1e-300);
    let tol = 1e-9 * scale;
    let update = |j: usize, beta: &mut [f64], resid: &mut [f64]| -> f64 {
        if zsum[j] <= 0.0 {
            return 0.0;
        }
        let rows = m.col(j);
        let mut rho = 0.0;
        for &i in rows {
            rho += w[i as usize] * resid[i as usize];
        }
        rho += zsum[j] * beta[j];
        let new = ((rho + penalty[j]) / zsum[j]).min(0.0);
        let delta = new - beta[j];
        if delta != 0.0 {
            for &i in rows {
                resid[i as usize] -= delta;
            }
            beta[j] = new;
        }
        (delta * zsum[j]).abs()
    };
    let mut sweeps = 0;
    while sweeps < max_sweeps {
        // Full sweep, then iterate on the active set until it settles.
        let mut change = 0.0f64;
        for j in 0..ncol {
            change = change.max(update(j, &mut beta, &mut resid));
        }
        sweeps += 1;
        if change <= tol {
            break;
        }
        let active: Vec<usize> = (0..ncol).filter(|&j| beta[j] < 0.0).collect();
        while sweeps < max_sweeps {
            let mut c = 0.0f64;
            for &j in &active {
                c = c.max(update(j, &mut beta, &mut resid));
            }
            sweeps += 1;
            if c <= tol {
                break;
            }
        }
    }
    beta
}

/// Null-noise penalty per column: `z · sqrt(Σ_{i∈j} w_i² v_i)`.
fn penalties(m: &PathMatrix, w: &[f64], var: &[f64]) -> Vec<f64> {
    (0..m.columns.len())
        .map(|j| {
            let s: f64 = m
                .col(j)
                .iter()
                .map(|&i| w[i as usize] * w[i as usize] * var[i as usize])
                .sum();
            SCREEN_Z * s.sqrt() + 1e-300
        })
        .collect()
}

fn is_ecmp(kind: Kind) -> bool {
    kind == Kind::Spine
}

/// Verdict on one candidate under the current model.
#[derive(Debug, Clone)]
struct Verdict {
    col: usize,
    stat: f64,
    p_value: f64,
    score: f64,
    /// Size of the effect to add to the model (log survival for binomial,
    /// seconds for latency); for ECMP faults the hit pairs are explained
    /// instead.
    effect: f64,
    hit: Vec<u32>,
    ecmp: bool,
    passes: bool,
    /// Other ECMP columns hitting exactly the same pairs: the hit flows
    /// cannot tell them apart (reported as equivalent).
    also: Vec<usize>,
}

/// The model of faults accepted so far, per pair.
struct Model {
    /// Binomial: Σ log(1 - q) of accepted faults on the path; latency: Σ
    /// accepted delays (seconds).
    effect: Vec<f64>,
    /// Pairs fully explained by an accepted ECMP fault.
    explained: Vec<bool>,
}

/// Smallest integer k >= 1 with P(X >= k | n, p) < level.
fn critical_count(n: f64, p: f64, level: f64) -> f64 {
    let (mut lo, mut hi) = (1.0f64, n.ceil().max(1.0));
    if binomial_upper_tail(hi, n, p) >= level {
        return f64::INFINITY;
    }
    while hi - lo > 0.5 {
        let mid = ((lo + hi) / 2.0).floor();
        if binomial_upper_tail(mid, n, p) < level {
            hi = mid;
        } else {
            lo = mid + 1.0;
        }
        if lo >= hi {
            break;
        }
    }
    if binomial_upper_tail(lo, n, p) < level {
        lo
    } else {
        hi
    }
}

/// MLE of the extra failure rate q of one component over pairs with base
/// survival `s_i`: maximizes Σ k ln(1 - s(1-q)) + (n-k) ln(s(1-q)).
fn fit_q(rows: &[(f64, f64, f64)]) -> f64 {
    let grad = |q: f64| -> f64 {
        rows.iter()
            .map(|&(n, k, s)| {
                let fail = (1.0 - s * (1.0 - q)).max(1e-300);
                k * s / fail - (n - k) / (1.0 - q)
            })
            .sum()
    };
    if grad(0.0) <= 0.0 {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0 - 1e-12);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if grad(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

fn loglik_q(rows: &[(f64, f64, f64)], q: f64) -> f64 {
    rows.iter()
        .map(|&(n, k, s)| binomial_loglik(k, n, 1.0 - s * (1.0 - q)))
        .sum()
}

/// One symptom's statistical family: how a candidate's effect is fitted and
/// tested on its pairs. Binomial (loss, unreachable) and Gaussian (latency)
/// implement it; [`evaluate`] holds the decision logic once.
trait Family {
    /// Is pair `i` usable (has data, not explained by an ECMP fault)?
    fn usable(&self, model: &Model, i: usize) -> bool;
    /// Does pair `i` show the symptom beyond the current model (lenient
    /// per-pair level)?
    fn anomalous(&self, model: &Model, i: usize) -> bool;
    /// Fit one extra component effect over `rows`: (parameter, LR statistic).
    fn fit(&self, model: &Model, rows: &[u32]) -> (f64, f64);
    /// Evidence of pair `i` alone (saturated LR statistic), for ranking.
    fn pair_evidence(&self, model: &Model, i: usize) -> f64;
    /// Probability that pair `i` shows the symptom if the component has
    /// effect `param`.
    fn p_hit(&self, model: &Model, i: usize, param: f64) -> f64;
    /// The reported score in [0, 1] for effect `param` over `rows`.
    fn score(&self, rows: &[u32], param: f64) -> f64;
    /// The model effect to add to each of the component's pairs.
    fn effect(&self, param: f64) -> f64;
    /// Is an effect of this size worth reporting?
    fn big_enough(&self, rows: &[u32], param: f64) -> bool;
}

struct BinomialFamily<'a> {
    obs: &'a BinomialObs,
    config: &'a Config,
}

impl BinomialFamily<'_> {
    fn survival(&self, model: &Model, i: usize) -> f64 {
        (1.0 - self.obs.background) * model.effect[i].exp()
    }
    fn rows(&self, model: &Model, rows: &[u32]) -> Vec<(f64, f64, f64)> {
        rows.iter()
            .map(|&i| {
                let i = i as usize;
                (self.obs.n[i], self.obs.k[i], self.survival(model, i))
            })
            .collect()
    }
}

impl Family for BinomialFamily<'_> {
    fn usable(&self, model: &Model, i: usize) -> bool {
        self.obs.n[i] > 0.0 && !model.explained[i]
    }
    fn anomalous(&self, model: &Model, i: usize) -> bool {
        let (n, k) = (self.obs.n[i], self.obs.k[i]);
        n > 0.0
            && k > 0.0
            && !model.explained[i]
            && binomial_upper_tail(k, n, 1.0 - self.survival(model, i)) < self.config.coverage_alpha
    }
    fn fit(&self, model: &Model, rows: &[u32]) -> (f64, f64) {
        let r = self.rows(model, rows);
        let q = fit_q(&r);
        (q, (2.0 * (loglik_q(&r, q) - loglik_q(&r, 0.0))).max(0.0))
    }
    fn pair_evidence(&self, model: &Model, i: usize) -> f64 {
        let (n, k) = (self.obs.n[i], self.obs.k[i]);
        let base = 1.0 - self.survival(model, i);
        let sat = (k / n).max(base);
        2.0 * (binomial_loglik(k, n, sat) - binomial_loglik(k, n, base))
    }
    fn p_hit(&self, model: &Model, i: usize, q: f64) -> f64 {
        let n = self.obs.n[i];
        let s = self.survival(model, i);
        let kc = critical_count(n, 1.0 - s, self.config.coverage_alpha);
        if kc.is_finite() {
            binomial_upper_tail(kc, n, 1.0 - s * (1.0 - q))
        } else {
            0.0
        }
    }
    fn score(&self, _rows: &[u32], q: f64) -> f64 {
        q
    }
    fn effect(&self, q: f64) -> f64 {
        (1.0 - q).max(1e-12).ln()
    }
    fn big_enough(&self, _rows: &[u32], q: f64) -> bool {
        q > 0.0
    }
}

struct LatencyFamily<'a> {
    obs: &'a LatencyObs,
    config: &'a Config,
    z_cov: f64,
}

impl Family for LatencyFamily<'_> {
    fn usable(&self, model: &Model, i: usize) -> bool {
        self.obs.present[i] && !model.explained[i]
    }
    fn anomalous(&self, model: &Model, i: usize) -> bool {
        if !self.usable(model, i) {
            return false;
        }
        let e = self.obs.excess[i] - model.effect[i];
        e > self.z_cov * self.obs.sigma[i] && e >= self.obs.min_excess[i]
    }
    fn fit(&self, model: &Model, rows: &[u32]) -> (f64, f64) {
        let (mut sw, mut swe) = (0.0, 0.0);
        for &i in rows {
            let i = i as usize;
            let s = self.obs.sigma[i];
            sw += 1.0 / (s * s);
            swe += (self.obs.excess[i] - model.effect[i]) / (s * s);
        }
        if sw <= 0.0 || swe <= 0.0 {
            return (0.0, 0.0);
        }
        // Gaussian LR for a non-negative shift: T² with T the z of the
        // weighted mean.
        (swe / sw, swe * swe / sw)
    }
    fn pair_evidence(&self, model: &Model, i: usize) -> f64 {
        let z = (self.obs.excess[i] - model.effect[i]) / self.obs.sigma[i];
        if z > 0.0 {
            z * z
        } else {
            0.0
        }
    }
    fn p_hit(&self, _model: &Model, i: usize, d: f64) -> f64 {
        normal_upper_tail(self.z_cov - d / self.obs.sigma[i])
    }
    fn score(&self, rows: &[u32], d: f64) -> f64 {
        let base = rows
            .iter()
            .map(|&i| self.obs.baseline[i as usize])
            .sum::<f64>()
            / rows.len().max(1) as f64;
        if d > 0.0 {
            d / (d + base.max(1e-12))
        } else {
            0.0
        }
    }
    fn effect(&self, d: f64) -> f64 {
        d
    }
    /// The fitted delay must reach the practical effect size of the pairs
    /// it was fitted on (their mean threshold: the classes may differ).
    fn big_enough(&self, rows: &[u32], d: f64) -> bool {
        let floor = if rows.is_empty() {
            self.config.min_latency_excess_seconds
        } else {
            rows.iter()
                .map(|&i| self.obs.min_excess[i as usize])
                .sum::<f64>()
                / rows.len() as f64
        };
        d >= floor
    }
}

/// Test candidate column `j` under the current model.
///
/// Every candidate needs a significant one-sided LR (Bonferroni level) and
/// at least `min_pairs` pairs showing the symptom. Then:
/// - spine (ECMP): the share of its pairs showing the symptom must exceed,
///   significantly, the share elsewhere in the fabric, and reach
///   `ecmp_min_fraction`; the score is fitted on the hit flows only;
/// - other kinds: the evidence must survive dropping its `min_pairs`
///   strongest pairs (a few noisy pairs are not a component fault), enough
///   pairs must show the symptom for the fitted size (coverage), and the
///   same must hold for its pairs outside its most-hit sub-component (so a
///   NIC is not blamed for one container's fault, nor a ToR for a host's).
fn evaluate<F: Family>(
    f: &F,
    m: &PathMatrix,
    config: &Config,
    level: f64,
    model: &Model,
    j: usize,
    chance: Chance,
) -> Verdict {
    let rows: Vec<u32> = m
        .col(j)
        .iter()
        .copied()
        .filter(|&i| f.usable(model, i as usize))
        .collect();
    let hit: Vec<u32> = rows
        .iter()
        .copied()
        .filter(|&i| f.anomalous(model, i as usize))
        .collect();
    let (param, stat) = f.fit(model, &rows);
    let p_lr = one_sided_lr_p_value(stat);
    let kind = m.columns[j].kind;
    let mut v = Verdict {
        col: j,
        stat,
        p_value: p_lr,
        score: f.score(&rows, param),
        effect: f.effect(param),
        hit: Vec::new(),
        ecmp: is_ecmp(kind),
        passes: false,
        also: Vec::new(),
    };
    let (n_pairs, m_hit) = (rows.len() as f64, hit.len() as f64);
    if rows.is_empty() || hit.len() < config.min_pairs.max(1) || p_lr >= level {
        v.hit = hit;
        return v;
    }
    if v.ecmp {
        let null = chance.outside(m_hit, n_pairs, config.coverage_alpha);
        let p_count = binomial_upper_tail(m_hit, n_pairs, null);
        let (param_hit, stat_hit) = f.fit(model, &hit);
        // Rank by the evidence on the flows it hits: two spines share the
        // cross-block pairs, and the culprit is the one whose hit flows
        // carry more evidence, not the one with fewer healthy flows.
        v.stat = stat_hit;
        v.p_value = p_lr.max(p_count);
        v.score = f.score(&hit, param_hit);
        v.passes = p_count < level
            && m_hit / n_pairs >= config.ecmp_min_fraction
            && f.big_enough(&hit, param_hit);
        v.hit = hit;
        return v;
    }
    // Robustness: drop the strongest `min_pairs` pairs and refit.
    let mut ranked: Vec<(f64, u32)> = rows
        .iter()
        .map(|&i| (f.pair_evidence(model, i as usize), i))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let rest: Vec<u32> = ranked
        .iter()
        .skip(config.min_pairs)
        .map(|&(_, i)| i)
        .collect();
    let (_, stat_rest) = f.fit(model, &rest);
    let robust = one_sided_lr_p_value(stat_rest) < level;
    // Coverage over all its pairs.
    let coverage_ok = |rows: &[u32], hits: f64| -> bool {
        let expected: f64 = rows
            .iter()
            .map(|&i| f.p_hit(model, i as usize, param))
            .sum();
        hits >= config.min_coverage_ratio * expected
    };
    let mut ok = robust && f.big_enough(&rows, param) && coverage_ok(&rows, m_hit);
    if ok {
        // Coverage outside the most-hit sub-component (a column crossing
        // some but not all of its pairs).
        let mut counts: HashMap<u32, (usize, usize)> = HashMap::new();
        for &i in &rows {
            let is_hit = hit.binary_search(&i).is_ok();
            for &c in m.row(i as usize) {
                if c as usize != j {
                    let e = counts.entry(c).or_default();
                    e.0 += is_hit as usize;
                    e.1 += 1;
                }
            }
        }
        let sub = counts
            .iter()
            .filter(|(_, &(h, n))| h > 0 && n < rows.len())
            .max_by_key(|(&c, &(h, _))| (h, std::cmp::Reverse(c)));
        if let Some((&c, _)) = sub {
            let outside: Vec<u32> = rows
                .iter()
                .copied()
                .filter(|&i| !m.row(i as usize).contains(&c))
                .collect();
            let outside_hits = hit
                .iter()
                .filter(|&&i| !m.row(i as usize).contains(&c))
                .count();
            ok = coverage_ok(&outside, outside_hits as f64);
        }
    }
    v.passes = ok;
    v.hit = hit;
    v
}

/// The greedy confirmation loop shared by all symptoms: evaluate every
/// remaining candidate against the model of faults accepted so far, accept
/// the strongest one that passes, update the model, repeat.
fn confirm<E, A>(
    m: &PathMatrix,
    candidates: &[usize],
    min_pairs: usize,
    mut evaluate: E,
    anomalous: A,
    present: &[bool],
) -> (Vec<Verdict>, Vec<Verdict>)
where
    E: FnMut(&Model, usize, Chance) -> Verdict,
    A: Fn(&Model, usize) -> bool,
{
    let npairs = m.pairs();
    let mut model = Model {
        effect: vec![0.0; npairs],
        explained: vec![false; npairs],
    };
    let mut accepted: Vec<Verdict> = Vec::new();
    // The Lasso proposes the sparsest explanation, but with correlated
    // columns (a NIC and its containers, a ToR under another fault) it can
    // pick a sibling of the culprit. Every column that several pairs showing
    // the symptom cross is a candidate too; the tests below decide.
    let mut remaining: Vec<usize> = candidates.to_vec();
    {
        let mut is_candidate = vec![false; m.columns.len()];
        for &j in candidates {
            is_candidate[j] = true;
        }
        let mut count = vec![0usize; m.columns.len()];
        for (i, &p) in present.iter().enumerate() {
            if p && anomalous(&model, i) {
                for &j in m.row(i) {
                    count[j as usize] += 1;
                }
            }
        }
        for (j, &c) in count.iter().enumerate() {
            if c >= min_pairs.max(1) && !is_candidate[j] {
                remaining.push(j);
            }
        }
    }
    let chance_of = |model: &Model| {
        let mut chance = Chance::default();
        for (i, &p) in present.iter().enumerate() {
            if p && !model.explained[i] {
                chance.total += 1.0;
                if anomalous(model, i) {
                    chance.anomalous += 1.0;
                }
            }
        }
        chance
    };
    let apply = |model: &mut Model, v: &Verdict| {
        if v.ecmp {
            for &i in &v.hit {
                model.explained[i as usize] = true;
            }
        } else {
            for &i in m.col(v.col) {
                model.effect[i as usize] += v.effect;
            }
        }
    };
    let fresh = || Model {
        effect: vec![0.0; npairs],
        explained: vec![false; npairs],
    };

    // Forward: accept the strongest passing candidate, explain it away,
    // repeat.
    let mut last: HashMap<usize, Verdict> = HashMap::new();
    loop {
        let chance = chance_of(&model);
        let mut best: Option<Verdict> = None;
        for &j in &remaining {
            let v = evaluate(&model, j, chance);
            if v.passes && best.as_ref().is_none_or(|b| v.stat > b.stat) {
                best = Some(v.clone());
            }
            last.insert(j, v);
        }
        let Some(mut b) = best else { break };
        if b.ecmp {
            for &j in &remaining {
                if let Some(v) = last.get(&j) {
                    if j != b.col && v.ecmp && v.passes && v.hit == b.hit {
                        b.also.push(j);
                    }
                }
            }
        }
        remaining.retain(|&j| j != b.col && !b.also.contains(&j));
        apply(&mut model, &b);
        accepted.push(b);
    }

    // Backward: a fault accepted early may have absorbed the evidence of
    // faults accepted later (a spine over a faulty ToR, hit flows shared by
    // two faults). Re-test each one given all the others; drop those that
    // no longer pass, until every remaining one does. The final verdicts
    // are these "given all others" ones.
    let mut dropped: Vec<Verdict> = Vec::new();
    loop {
        let mut rechecked = Vec::with_capacity(accepted.len());
        let mut drop = None;
        for idx in (0..accepted.len()).rev() {
            let mut model = fresh();
            for (k, a) in accepted.iter().enumerate() {
                if k != idx {
                    let v = evaluate(&model, a.col, chance_of(&model));
                    apply(&mut model, &v);
                }
            }
            let mut v = evaluate(&model, accepted[idx].col, chance_of(&model));
            if !v.passes {
                drop = Some((idx, v));
                break;
            }
            v.also = accepted[idx].also.clone();
            rechecked.push((idx, v));
        }
        match drop {
            Some((idx, v)) => {
                accepted.remove(idx);
                dropped.push(v);
            }
            None => {
                rechecked.sort_by_key(|(idx, _)| *idx);
                accepted = rechecked.into_iter().map(|(_, v)| v).collect();
                break;
            }
        }
    }
    let cleared = remaining
        .iter()
        .filter_map(|j| last.remove(j))
        .chain(dropped)
        .collect();
    (accepted, cleared)
}

/// Fabric-wide count of unexplained pairs and of those showing the symptom.
#[derive(Debug, Clone, Copy, Default)]
struct Chance {
    total: f64,
    anomalous: f64,
}

impl Chance {
    /// Share of pairs showing the symptom outside a candidate (its own
    /// `hit` of `n` pairs removed), floored at the per-pair test level.
    fn outside(&self, hit: f64, n: f64, floor: f64) -> f64 {
        let t = self.total - n;
        let a = (self.anomalous - hit).max(0.0);
        if t > 0.0 {
            (a / t).max(floor)
        } else {
            floor
        }
    }
}

/// Localize faults from the per-pair evidence.
pub fn localize(m: &PathMatrix, ev: &Evidence, config: &Config) -> Report {
    let npairs = m.pairs();
    let ncol = m.columns.len().max(1);
    let level = config.alpha / ncol as f64;
    let mut found: Vec<(Symptom, Verdict)> = Vec::new();
    let mut blame: Vec<Blame> = Vec::new();

    // Dial failures on a pair that is losing packets are the loss showing
    // (a handshake needs its packets too), not a separate fault: such pairs
    // do not count as evidence of unreachability.
    let unreachable = {
        let mut u = ev.unreachable.clone();
        for i in 0..npairs {
            let (n, k) = (ev.loss.n[i], ev.loss.k[i]);
            if n > 0.0
                && k > 0.0
                && binomial_upper_tail(k, n, ev.loss.background) < config.coverage_alpha
            {
                u.n[i] = 0.0;
                u.k[i] = 0.0;
            }
        }
        u
    };
    for symptom in [Symptom::Loss, Symptom::Unreachable] {
        let obs = if symptom == Symptom::Loss {
            &ev.loss
        } else {
            &unreachable
        };
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
        let mut y = vec![0.0; npairs];
        let mut w = vec![0.0; npairs];
        let mut var = vec![0.0; npairs];
        for i in 0..npairs {
            let (n, k) = (obs.n[i], obs.k[i]);
            if n <= 0.0 {
                continue;
            }
            let r = (k / n).min(1.0 - 0.5 / n.max(1.0));
            y[i] = (1.0 - r).ln() - (1.0 - p0).ln();
            w[i] = n / nbar;
            var[i] = p0 / n;
        }
        let present: Vec<bool> = obs.n.iter().map(|&n| n > 0.0).collect();
        let family = BinomialFamily { obs, config };
        let (acc, clr) = run_symptom(&family, m, &y, &w, &var, config, level, &present);
        push_results(m, symptom, acc, clr, &mut found, &mut blame);
    }

    {
        let obs = &ev.latency;
        let mut y = vec![0.0; npairs];
        let mut w = vec![0.0; npairs];
        let mut var = vec![0.0; npairs];
        let smin = obs
            .sigma
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .max(1e-12);
        for i in 0..npairs {
            if obs.present[i] {
                y[i] = -obs.excess[i] / smin;
                let s = obs.sigma[i] / smin;
                w[i] = 1.0 / (s * s);
                var[i] = s * s;
            }
        }
        let family = LatencyFamily {
            obs,
            config,
            z_cov: normal_upper_quantile(config.coverage_alpha),
        };
        let (acc, clr) = run_symptom(&family, m, &y, &w, &var, config, level, &obs.present);
        push_results(m, Symptom::Latency, acc, clr, &mut found, &mut blame);
    }

    let best = one_symptom_per_component(found, config);
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
            equivalent: m.equivalent[v.col]
                .iter()
                .cloned()
                .chain(v.also.iter().flat_map(|&j| {
                    std::iter::once(m.columns[j].clone()).chain(m.equivalent[j].iter().cloned())
                }))
                .collect(),
        })
        .collect();
    faults.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.p_value.total_cmp(&b.p_value))
            .then_with(|| a.id.cmp(&b.id))
    });
    Report {
        faults,
        pairs_observed: npairs,
        pairs_anomalous: 0,
        blame,
    }
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
                    for (s, _) in verdicts.iter_mut() {
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

/// Lasso screening, then the greedy confirmation, for one symptom.
#[allow(clippy::too_many_arguments)]
fn run_symptom<F: Family>(
    family: &F,
    m: &PathMatrix,
    y: &[f64],
    w: &[f64],
    var: &[f64],
    config: &Config,
    level: f64,
    present: &[bool],
) -> (Vec<Verdict>, Vec<Verdict>) {
    let pen = penalties(m, w, var);
    let beta = nonpositive_lasso(m, y, w, &pen, config.max_sweeps);
    let candidates: Vec<usize> = (0..m.columns.len()).filter(|&j| beta[j] < 0.0).collect();
    confirm(
        m,
        &candidates,
        config.min_pairs,
        |model, j, chance| evaluate(family, m, config, level, model, j, chance),
        |model, i| family.anomalous(model, i),
        present,
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{pair_stats, parse_fault, Fabric, FabricSpec, Scenario};
    use crate::{analyze, PairStats};
    use skeletonhunter_common::topology::{Component, Identity};

    fn node(n: &str, host: &str, tor: &str) -> Identity {
        Identity {
            node: n.into(),
            host: host.into(),
            tor: tor.into(),
            ..Default::default()
        }
    }

    /// A 6-pair, 5-column toy matrix with known structure.
    fn toy() -> PathMatrix {
        let a = node("a", "h1", "t1");
        let b = node("b", "h2", "t1");
        let c = node("c", "h3", "t1");
        let d = node("d", "h4", "t1");
        let pairs: Vec<PairStats> = [(&a, &b), (&b, &c), (&c, &d), (&d, &a), (&a, &c), (&b, &d)]
            .iter()
            .map(|(x, y)| PairStats {
                src: (*x).clone(),
                dst: (*y).clone(),
                rounds: 1.0,
                ..Default::default()
            })
            .collect();
        let refs: Vec<&PairStats> = pairs.iter().collect();
        PathMatrix::build(&refs)
    }

    #[test]
    fn lasso_recovers_a_sparse_nonpositive_solution() {
        let m = toy();
        let j = m.find(&Component::new(Kind::Host, "h1")).unwrap();
        // y = A β with β_h1 = -0.3 and nothing else.
        let y: Vec<f64> = (0..m.pairs())
            .map(|i| {
                if m.row(i).contains(&(j as u32)) {
                    -0.3
                } else {
                    0.0
                }
            })
            .collect();
        let w = vec![1.0; m.pairs()];
        let beta = nonpositive_lasso(&m, &y, &w, &vec![1e-6; m.columns.len()], 1000);
        for (k, b) in beta.iter().enumerate() {
            if k == j {
                assert!((b + 0.3).abs() < 1e-3, "beta_h1 = {b}");
            } else {
                assert!(b.abs() < 1e-3, "{} = {b}", m.columns[k]);
            }
        }
        // Positive evidence (a pair better than baseline) never gives a
        // positive beta.
        let y: Vec<f64> = vec![0.2; m.pairs()];
        let beta = nonpositive_lasso(&m, &y, &w, &vec![0.0; m.columns.len()], 1000);
        assert!(beta.iter().all(|&b| b == 0.0));
    }

    #[test]
    fn lasso_penalty_shrinks_and_zeroes_small_effects() {
        let m = toy();
        let j = m.find(&Component::new(Kind::Host, "h1")).unwrap();
        let y: Vec<f64> = (0..m.pairs())
            .map(|i| {
                if m.row(i).contains(&(j as u32)) {
                    -0.01
                } else {
                    0.0
                }
            })
            .collect();
        let w = vec![1.0; m.pairs()];
        // h1 crosses 3 pairs: its score is 0.03; a penalty of 0.05 zeroes it.
        let beta = nonpositive_lasso(&m, &y, &w, &vec![0.05; m.columns.len()], 1000);
        assert!(beta.iter().all(|&b| b == 0.0));
    }

    #[test]
    fn fit_q_is_the_binomial_mle() {
        // Base survival 1: MLE is k / n.
        let q = fit_q(&[(1000.0, 30.0, 1.0), (1000.0, 10.0, 1.0)]);
        assert!((q - 0.02).abs() < 1e-6, "q {q}");
        // Nothing lost: no extra failure.
        assert_eq!(fit_q(&[(1000.0, 0.0, 0.999)]), 0.0);
        // With a base survival of 0.9, an observed 28% loss needs q = 0.2.
        let q = fit_q(&[(10_000.0, 2800.0, 0.9)]);
        assert!((q - 0.2).abs() < 1e-3, "q {q}");
    }

    #[test]
    fn critical_count_is_the_smallest_significant_count() {
        let kc = critical_count(600.0, 1e-4, 0.01);
        assert!(binomial_upper_tail(kc, 600.0, 1e-4) < 0.01);
        assert!(binomial_upper_tail(kc - 1.0, 600.0, 1e-4) >= 0.01);
        assert_eq!(critical_count(1.0, 0.5, 0.01), f64::INFINITY);
    }

    fn small() -> Fabric {
        Fabric::new(FabricSpec {
            hosts: 32,
            rails: 4,
            nodes_per_nic: 2,
            hosts_per_tor: 8,
            tors_per_spine: 2,
            ..Default::default()
        })
    }

    fn run(f: &Fabric, faults: &[&str], seed: u64, noisy: usize, blips: usize) -> Report {
        let mut sc = Scenario::healthy(seed);
        sc.noisy_pairs = noisy;
        sc.blips = blips;
        sc.faults = faults.iter().map(|s| parse_fault(f, s).unwrap()).collect();
        analyze(&pair_stats(f, &sc), &Config::default())
    }

    fn names(r: &Report) -> Vec<String> {
        r.faults
            .iter()
            .map(|f| format!("{}:{}", f.component(), f.symptom))
            .collect()
    }

    #[test]
    fn healthy_fabric_with_noisy_pairs_and_blips_blames_nothing() {
        let f = small();
        for seed in 0..4 {
            let r = run(&f, &[], seed, 3, 8);
            assert!(r.faults.is_empty(), "seed {seed}: {:?}", names(&r));
        }
    }

    /// A ToR dropping 30% of packets, seen in a short window: most of its
    /// pairs are lossy (and some of their dials time out), a few pairs lost
    /// every probe and dial by chance and carry only failed dials. Both the
    /// loss and the unreachable test blame the ToR; it is lossy, not
    /// unreachable: plenty gets through.
    #[test]
    fn partial_loss_is_loss_even_when_dials_fail() {
        let f = small();
        let tor = f.components(Kind::Tor)[3].clone();
        let mut sc = Scenario::healthy(5);
        sc.faults = vec![parse_fault(&f, "tor=3:loss:0.3").unwrap()];
        let mut pairs = pair_stats(&f, &sc);
        let crossing: Vec<usize> = (0..pairs.len())
            .filter(|&i| {
                skeletonhunter_common::topology::path(&pairs[i].src, &pairs[i].dst).contains(&tor)
            })
            .collect();
        assert!(crossing.len() > 40, "{} pairs cross {tor}", crossing.len());
        for &i in crossing.iter().step_by(3) {
            let p = &mut pairs[i];
            (p.failed_dials, p.sent, p.lost, p.rtt_seconds, p.rtt_samples) =
                (p.rounds, 0.0, 0.0, None, 0.0);
        }
        let r = analyze(&pairs, &Config::default());
        let blamed: Vec<Symptom> = r
            .blame
            .iter()
            .filter(|b| b.faulty && b.component == tor)
            .map(|b| b.symptom)
            .collect();
        assert!(
            blamed.contains(&Symptom::Loss) && blamed.contains(&Symptom::Unreachable),
            "both tests should blame {tor}: {blamed:?}"
        );
        assert_eq!(names(&r), vec![format!("{tor}:loss")]);
        assert!((r.faults[0].score - 0.3).abs() < 0.05, "{:?}", r.faults[0]);

        // Nearly nothing gets through: unreachable.
        let mut sc = Scenario::healthy(5);
        sc.faults = vec![parse_fault(&f, "tor=3:loss:0.97").unwrap()];
        let mut pairs = pair_stats(&f, &sc);
        for &i in crossing.iter().step_by(3) {
            let p = &mut pairs[i];
            (p.failed_dials, p.sent, p.lost, p.rtt_seconds, p.rtt_samples) =
                (p.rounds, 0.0, 0.0, None, 0.0);
        }
        let r = analyze(&pairs, &Config::default());
        assert_eq!(names(&r), vec![format!("{tor}:unreachable")]);
        // The same when only the loss test sees it (no pair cut).
        let r = analyze(&pair_stats(&f, &sc), &Config::default());
        assert_eq!(names(&r), vec![format!("{tor}:unreachable")]);
        assert!(r.faults[0].score > 0.9, "{:?}", r.faults[0]);
    }

    #[test]
    fn gray_tor_loss_is_localized() {
        let f = small();
        let tor = f.components(Kind::Tor)[3].clone();
        let r = run(&f, &["tor=3:loss:0.015"], 1, 2, 4);
        assert_eq!(names(&r), vec![format!("{tor}:loss")]);
        assert!(
            (r.faults[0].score - 0.015).abs() < 0.005,
            "{:?}",
            r.faults[0]
        );
        assert!(r.faults[0].p_value < 1e-9);
    }

    #[test]
    fn partial_spine_fault_is_blamed_on_the_spine() {
        let f = Fabric::new(FabricSpec {
            hosts: 64,
            rails: 4,
            hosts_per_tor: 8,
            tors_per_spine: 4,
            ..Default::default()
        });
        let spine = f.components(Kind::Spine)[2].clone();
        let r = run(&f, &["spine=2:loss:0.3:0.3"], 2, 2, 4);
        assert_eq!(names(&r), vec![format!("{spine}:loss")]);
        // The score is the loss of the hit flows, not diluted by the others.
        assert!((r.faults[0].score - 0.3).abs() < 0.05, "{:?}", r.faults[0]);
    }

    #[test]
    fn two_simultaneous_faults_of_different_symptoms() {
        let f = small();
        let host = f.components(Kind::Host)[5].clone();
        let node = f.components(Kind::Node)[40].clone();
        let r = run(
            &f,
            &["host=5:latency:15e-6", "node=40:unreachable"],
            3,
            1,
            2,
        );
        let mut got = names(&r);
        got.sort();
        let mut want = vec![format!("{host}:latency"), format!("{node}:unreachable")];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn indistinguishable_components_are_listed_as_equivalent() {
        // One container per NIC: node and nic cross the same pairs.
        let f = Fabric::new(FabricSpec {
            hosts: 16,
            rails: 2,
            nodes_per_nic: 1,
            hosts_per_tor: 4,
            ..Default::default()
        });
        let node = f.nodes[7].clone();
        let idx = f
            .components(Kind::Node)
            .iter()
            .position(|c| c.id == node.node)
            .unwrap();
        let r = run(&f, &[&format!("node={idx}:loss:0.2")], 4, 0, 0);
        assert_eq!(r.faults.len(), 1, "{:?}", names(&r));
        let fault = &r.faults[0];
        assert_eq!(
            fault.component(),
            Component::new(Kind::Nic, node.nic.clone())
        );
        assert_eq!(
            fault.equivalent,
            vec![Component::new(Kind::Node, node.node)]
        );
    }

    #[test]
    fn node_fault_is_not_blamed_on_its_shared_nic() {
        let f = small();
        let r = run(&f, &["node=10:unreachable:0.9"], 5, 3, 0);
        let node = f.components(Kind::Node)[10].clone();
        assert_eq!(names(&r), vec![format!("{node}:unreachable")]);
    }
}
