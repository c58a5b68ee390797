//! The statistical families of the symptoms: how one candidate's extra
//! effect is fitted and tested on its pairs, given the faults accepted so
//! far ([`Model`]).
//!
//! Binomial (loss, unreachable: log survival is the sum of the components'
//! log survivals along the path) and Gaussian (latency: delays add up)
//! implement [`Family`]; the decision logic that uses them lives once in
//! [`super::hypothesis`]. A new symptom (e.g. a gray-failure rate) gets a
//! new `Family` here. The Gaussian one is in [`latency`].

pub(super) mod latency;

use crate::engine::detect::BinomialObs;
use crate::engine::model::Config;
use crate::engine::stats::{
    binomial_loglik, binomial_upper_tail, bisect_root, chi_square_upper_tail, clustered_tail,
    poisson_lower_tail, poisson_upper_tail,
};

/// The model of faults accepted so far, per pair.
#[derive(Clone)]
pub(super) struct Model {
    /// Binomial: Σ log(1 - q) of accepted faults on the path; latency: Σ
    /// accepted delays (seconds).
    pub(super) effect: Vec<f64>,
    /// Pairs fully explained by an accepted ECMP fault.
    pub(super) explained: Vec<bool>,
    /// Pairs crossing an accepted ECMP fault, hit or not.
    pub(super) under_ecmp: Vec<bool>,
}

impl Model {
    /// No fault accepted yet.
    pub(super) fn empty(npairs: usize) -> Model {
        Model {
            effect: vec![0.0; npairs],
            explained: vec![false; npairs],
            under_ecmp: vec![false; npairs],
        }
    }
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
    bisect_root(grad, 0.0, 1.0 - 1e-12, 60)
}

fn loglik_q(rows: &[(f64, f64, f64)], q: f64) -> f64 {
    rows.iter()
        .map(|&(n, k, s)| binomial_loglik(k, n, 1.0 - s * (1.0 - q)))
        .sum()
}

/// One symptom's statistical family: how a candidate's effect is fitted and
/// tested on its pairs. Binomial (loss, unreachable) and Gaussian (latency)
/// implement it; [`super::hypothesis::evaluate`] holds the decision logic once.
pub(super) trait Family {
    /// Is pair `i` usable (has data, not explained by an ECMP fault)?
    fn usable(&self, model: &Model, i: usize) -> bool;
    /// Does pair `i` show the symptom beyond the current model (lenient
    /// per-pair level)?
    fn anomalous(&self, model: &Model, i: usize) -> bool;
    /// Could pair `i` show the symptom at all, however large the fault?
    /// Not when the model already fails (nearly) all its trials: a pair
    /// cut by a dead ToR says nothing about a container behind it.
    fn informative(&self, model: &Model, i: usize) -> bool;
    /// Does pair `i` show any failure that the model makes unusual: more
    /// than it expects half the time (a single lost probe where fewer than
    /// even odds expect one, three where about one is expected)? A gray
    /// host that lifted a tiny window's background to 0.5 % made a pair of
    /// 170 probes expect one loss, and its pairs losing three to five each
    /// counted as showing nothing. Latency has no such count: never.
    fn shows_any(&self, model: &Model, i: usize) -> bool;
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
    /// The effect an accepted fault of model effect `effect` adds to each
    /// of its `rows`, given the faults accepted before it: `effect`, unless
    /// the family knows better.
    ///
    /// `parts(pairs)`: for each component nested in the fault (a NIC of a
    /// host) that some but not all of `pairs` cross, the positions in
    /// `pairs` of those that do.
    fn applied_effect(
        &self,
        _model: &Model,
        _rows: &[u32],
        effect: f64,
        _parts: &dyn Fn(&[u32]) -> Vec<Vec<usize>>,
    ) -> f64 {
        effect
    }
    /// Is an effect of this size worth reporting?
    fn big_enough(&self, rows: &[u32], param: f64) -> bool;
    /// How far `rows` disagree with one shared effect `param` (their joint
    /// fit): a chi-square statistic with `rows.len() - 1` degrees of
    /// freedom. A component adds one effect to each of its flows; two
    /// pairs, one slowed by 10 µs and one by 4, are two stories.
    fn heterogeneity(&self, model: &Model, rows: &[u32], param: f64) -> f64;
    /// Twice the log-likelihood `rows` pooled gain from their own fitted
    /// effect over `param`: how far they are from a fault of size `param`.
    fn gap(&self, model: &Model, rows: &[u32], param: f64) -> f64;
    /// The p-value of `rows`' failures counted in rounds that lost any
    /// rather than one by one, when the family has such counts; `None`
    /// otherwise. Probes that fail together (a burst) count once.
    fn rounds_p_value(&self, _model: &Model, _rows: &[u32]) -> Option<f64> {
        None
    }
    /// The chance of no more than `hits` of the pairs showing the fault,
    /// each with its chance `p_hit` under the fitted fault. Counts: a
    /// Poisson tail of their sum, whose spread also covers the fitted
    /// rate's own noise (a gray spine's rate fitted a little high expects
    /// a hit on its outside pairs that a 3 % loss over 90 probes often
    /// does not make).
    fn shortfall_p_value(&self, p_hit: impl Iterator<Item = f64>, hits: f64) -> f64 {
        poisson_lower_tail(hits, p_hit.sum())
    }
    /// Whether a component nested in an accepted fault (a spine all of
    /// whose pairs cross an accepted ToR) may be accepted beside it
    /// ([`super::greedy`]). Not for counts: loss that grows during the
    /// window, read later on some pairs, leaves more on a subset, the
    /// shape of a second fault. Delays add up: a slow spine above a slow
    /// ToR doubles the ToR's delay on exactly the spine's pairs.
    fn nested_may_add(&self) -> bool {
        false
    }
    /// Whether the hit pairs of an ECMP fault on every flow alike that
    /// show far more than its effect are left to other faults
    /// ([`super::greedy`]). For counts: a rate on every flow. Not for
    /// delays: a spine slowing every flow left outliers whose residual
    /// paged four to nine containers and ToRs on the blind generator's
    /// slow spines.
    fn ecmp_outliers_are_faults(&self) -> bool {
        true
    }
    /// Whether a pair may sit off its route level's baseline for good (a
    /// longer cable, a hop more): true for delays, whose baseline can be
    /// tight enough that such an offset is significant; a lost probe has
    /// no such offset. Where pairs have offsets, a pair's own significance
    /// is no fault's: in [`super::hypothesis`]'s `agree`, two pairs that
    /// disagree on the size of one effect are a noisy pair beside a
    /// slightly slow one. For counts, two pairs each far beyond chance on
    /// their own are both hit, whatever a blip added to one of them (a
    /// container dropping 31 % on its only two pairs, 26 % on one and
    /// 34 % on the other, went unreported).
    fn pairs_have_offsets(&self) -> bool {
        false
    }
    /// Whether a pair beyond chance at the candidates' level on its own is
    /// rarer than the lenient per-pair test's level makes it, so that the
    /// ECMP count may assume so when the window cannot measure it (see
    /// `ecmp.rs`): true for delays, a flow slowed in every sample. By
    /// default not (see [`BinomialFamily`]'s answer).
    fn lone_flows_are_rare(&self) -> bool {
        false
    }
    /// Whether the failures of `rows` came in bursts: so few of a pair's
    /// rounds hold them that independent failures would rarely have (at
    /// `coverage_alpha`), on one pair or on all of them together. `false`
    /// when the family has no round counts.
    fn burst(&self, _model: &Model, _rows: &[u32]) -> bool {
        false
    }
}

/// Loss (packets) and unreachable (dials): a binomial count per pair.
pub(super) struct BinomialFamily<'a> {
    pub(super) obs: &'a BinomialObs,
    pub(super) config: &'a Config,
    /// [`Family::lone_flows_are_rare`], which depends on the symptom and
    /// the window: for lost probes where no pair carries traced paths. Two
    /// of a small fabric's eight spine flows losing a fifth of their
    /// probes, nothing near that elsewhere, were read against 1 % odds
    /// each and missed (three such windows in two blind seeds); at the
    /// family-wise odds they are the spine's partial fault. Where paths
    /// are traced, such a flow is also what a faulty ECMP link leaves on
    /// the flows the link stage did not take (the simulator's link
    /// scenarios paged the spine beside the link). Not failed dials: an
    /// overlay forwarding entry killing a few flows is no spine's, and was
    /// paged as one.
    pub(super) lone_flows_are_rare: bool,
}

impl BinomialFamily<'_> {
    fn survival(&self, model: &Model, i: usize) -> f64 {
        self.obs.healthy_survival(i) * model.effect[i].exp()
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
    fn lone_flows_are_rare(&self) -> bool {
        self.lone_flows_are_rare
    }
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
    fn informative(&self, model: &Model, i: usize) -> bool {
        self.usable(model, i)
            && critical_count(
                self.obs.n[i],
                1.0 - self.survival(model, i),
                self.config.coverage_alpha,
            )
            .is_finite()
    }
    fn shows_any(&self, model: &Model, i: usize) -> bool {
        let (n, k) = (self.obs.n[i], self.obs.k[i]);
        self.usable(model, i)
            && k >= 1.0
            && binomial_upper_tail(k, n, 1.0 - self.survival(model, i)) < 0.5
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
    /// The fitted rate must reach [`Config::min_loss_excess`].
    fn big_enough(&self, _rows: &[u32], q: f64) -> bool {
        q > 0.0 && q >= self.config.min_loss_excess
    }
    /// Twice the log-likelihood each pair gains from a rate of its own.
    fn heterogeneity(&self, model: &Model, rows: &[u32], q: f64) -> f64 {
        self.rows(model, rows)
            .into_iter()
            .map(|r| {
                let own = fit_q(&[r]);
                2.0 * (loglik_q(&[r], own) - loglik_q(&[r], q))
            })
            .sum::<f64>()
            .max(0.0)
    }
    fn gap(&self, model: &Model, rows: &[u32], q: f64) -> f64 {
        let r = self.rows(model, rows);
        (2.0 * (loglik_q(&r, fit_q(&r)) - loglik_q(&r, q))).max(0.0)
    }
    /// Lossy rounds against their expectation under the model (Poisson):
    /// a round of `n / rounds` probes loses one with probability
    /// `1 - s^(n / rounds)`.
    fn rounds_p_value(&self, model: &Model, rows: &[u32]) -> Option<f64> {
        if self.obs.rounds.is_empty() {
            return None;
        }
        let (mut lossy, mut expected) = (0.0, 0.0);
        for &i in rows {
            let i = i as usize;
            let ((rounds, k), n) = (self.obs.rounds[i], self.obs.n[i]);
            if rounds > 0.0 && n > 0.0 {
                lossy += k;
                expected += rounds * (1.0 - self.survival(model, i).powf(n / rounds));
            }
        }
        Some(poisson_upper_tail(lossy, expected))
    }
    /// Each pair's clustering, and all of them combined (Fisher): a
    /// node's two pairs that each lost 3 of 80 probes in one round of 8
    /// (p 0.012 each, 0.0014 together) were a blip, paged as the node.
    fn burst(&self, _model: &Model, rows: &[u32]) -> bool {
        // Round counts come for every pair or for none.
        if self.obs.rounds.is_empty() {
            return false;
        }
        let alpha = self.config.coverage_alpha;
        let (mut fisher, mut df) = (0.0, 0.0);
        for &i in rows {
            let i = i as usize;
            let (rounds, lossy) = self.obs.rounds[i];
            let p = clustered_tail(self.obs.k[i], self.obs.n[i], rounds, lossy);
            if p < alpha {
                return true;
            }
            fisher -= 2.0 * p.max(f64::MIN_POSITIVE).ln();
            df += 2.0;
        }
        df > 2.0 && chi_square_upper_tail(fisher, df) < alpha
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
