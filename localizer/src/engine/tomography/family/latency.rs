//! Latency: a Gaussian excess RTT per pair; delays add up along the path.

use super::{Family, Model};
use crate::engine::detect::{LatencyObs, LEVELS};
use crate::engine::model::Config;
use crate::engine::stats::{
    median, normal_upper_quantile, normal_upper_tail, poisson_binomial_lower_tail,
};

/// Pairs a route level needs for an accepted delay to be read on it
/// ([`LatencyFamily::applied_effect`]).
const LEVEL_EFFECT_PAIRS: usize = 3;

/// Parts of an accepted delay set aside at the most on one route level
/// ([`LatencyFamily::without_slower_parts`]).
const MAX_PARTS_SET_ASIDE: usize = 4;

/// Latency: a Gaussian excess RTT per pair.
pub(in crate::engine::tomography) struct LatencyFamily<'a> {
    pub(in crate::engine::tomography) obs: &'a LatencyObs,
    pub(in crate::engine::tomography) config: &'a Config,
    /// Per-pair z threshold of the coverage test.
    pub(in crate::engine::tomography) z_cov: f64,
}

impl LatencyFamily<'_> {
    /// Noise scale of pair `i` given the model: the healthy scale of its
    /// route level, widened by the spread of the delays already accepted
    /// on its path (what is left of a slowed pair's RTT after the fitted
    /// delay is that fault's own variation, not a second fault, until it
    /// exceeds it; [`Config::latency_fault_spread`]).
    fn sd(&self, model: &Model, i: usize) -> f64 {
        let spread = self.config.latency_fault_spread.max(0.0);
        let (s, e) = (self.obs.sigma[i], spread * model.effect[i].max(0.0));
        (s * s + e * e).sqrt()
    }

    /// Σ 1/σ² and Σ e/σ² over `rows`, `e` each pair's excess left by the
    /// model: the weighted mean excess is their ratio.
    fn weighted(&self, model: &Model, rows: &[u32]) -> (f64, f64) {
        rows.iter().fold((0.0, 0.0), |(sw, swe), &i| {
            let i = i as usize;
            let s2 = self.sd(model, i).powi(2);
            (sw + 1.0 / s2, swe + self.left(model, i) / s2)
        })
    }

    /// The excess of pair `i` left by the model.
    fn left(&self, model: &Model, i: usize) -> f64 {
        self.obs.excess[i] - model.effect[i]
    }

    /// `pairs` (one route level of an accepted delay) without those of
    /// its parts slower than the others beyond chance (`alpha`), slowest
    /// first. A host slowed by 32 µs over a NIC slowed by 40 more: the
    /// NIC's four same-host pairs outnumbered the host's other two, their
    /// median took both delays as the host's, and the NIC was never paged.
    fn without_slower_parts(
        &self,
        model: &Model,
        pairs: &[u32],
        parts: &dyn Fn(&[u32]) -> Vec<Vec<usize>>,
    ) -> Vec<u32> {
        let z_apart = normal_upper_quantile(self.config.alpha);
        let mut kept = pairs.to_vec();
        for _ in 0..MAX_PARTS_SET_ASIDE {
            if kept.len() < LEVEL_EFFECT_PAIRS {
                break;
            }
            // Each part's weighted mean against the rest's, the rest's
            // sums being the level's less the part's: linear in the pairs.
            let (sw_all, swe_all) = self.weighted(model, &kept);
            let slowest = parts(&kept)
                .into_iter()
                .filter_map(|at| {
                    let inside: Vec<u32> = at.iter().map(|&k| kept[k]).collect();
                    let (sw_in, swe_in) = self.weighted(model, &inside);
                    let (sw_out, swe_out) = (sw_all - sw_in, swe_all - swe_in);
                    let apart = swe_in / sw_in - swe_out / sw_out;
                    let z = apart / (1.0 / sw_in + 1.0 / sw_out).sqrt();
                    (sw_in > 0.0 && sw_out > 0.0 && z > z_apart).then_some((z, at))
                })
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let Some((_, at)) = slowest else { break };
            let mut aside = vec![false; kept.len()];
            for k in at {
                aside[k] = true;
            }
            kept = kept
                .iter()
                .zip(aside)
                .filter_map(|(&i, aside)| (!aside).then_some(i))
                .collect();
        }
        kept
    }

    /// Route level of pair `i` (see [`LatencyObs::level`]).
    fn level(&self, i: usize) -> usize {
        self.obs
            .level
            .get(i)
            .map_or(0, |&l| (l as usize).min(LEVELS - 1))
    }
}

impl Family for LatencyFamily<'_> {
    fn nested_may_add(&self) -> bool {
        true
    }
    fn ecmp_outliers_are_faults(&self) -> bool {
        false
    }
    fn pairs_have_offsets(&self) -> bool {
        true
    }
    fn lone_flows_are_rare(&self) -> bool {
        true
    }
    fn usable(&self, model: &Model, i: usize) -> bool {
        self.obs.present[i] && !model.explained[i]
    }
    fn anomalous(&self, model: &Model, i: usize) -> bool {
        if !self.usable(model, i) {
            return false;
        }
        let e = self.left(model, i);
        e > self.z_cov * self.sd(model, i) && e >= self.obs.min_excess[i]
    }
    fn informative(&self, model: &Model, i: usize) -> bool {
        self.usable(model, i)
    }
    fn shows_any(&self, _model: &Model, _i: usize) -> bool {
        false
    }
    fn fit(&self, model: &Model, rows: &[u32]) -> (f64, f64) {
        let (sw, swe) = self.weighted(model, rows);
        if sw <= 0.0 || swe <= 0.0 {
            return (0.0, 0.0);
        }
        // Gaussian LR for a non-negative shift: T² with T the z of the
        // weighted mean.
        (swe / sw, swe * swe / sw)
    }
    fn pair_evidence(&self, model: &Model, i: usize) -> f64 {
        let z = self.left(model, i) / self.sd(model, i);
        if z > 0.0 {
            z * z
        } else {
            0.0
        }
    }
    fn p_hit(&self, model: &Model, i: usize, d: f64) -> f64 {
        normal_upper_tail(self.z_cov - d / self.sd(model, i))
    }
    /// Each pair by its own chance (Poisson-binomial): a delay shows on
    /// each pair it slows almost surely, and two of a container's five
    /// slowed by a few µs (a peer a little slower than the rest) are not a
    /// slow container, where a Poisson tail of the same mean let them pass.
    fn shortfall_p_value(&self, p_hit: impl Iterator<Item = f64>, hits: f64) -> f64 {
        poisson_binomial_lower_tail(p_hit, hits)
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
    /// The median of what is left of the excess on the lowest route level
    /// with [`LEVEL_EFFECT_PAIRS`] pairs (at least 0), else `d`. Baselines
    /// of the upper levels are lifted when a fault slows most of them (see
    /// `detect`), so a slow ToR's cross-ToR pairs show less than its
    /// delay; fitted over all its pairs, the delay left several µs on each
    /// of its same-ToR pairs, and its containers were paged beside it. The
    /// lowest level's baseline is the least lifted; a spine slowing the
    /// ToR's cross-ToR pairs as well still shows on them. A part of the
    /// fault slower than the rest of the level is a second delay on top,
    /// and is read without ([`Self::without_slower_parts`]).
    fn applied_effect(
        &self,
        model: &Model,
        rows: &[u32],
        d: f64,
        parts: &dyn Fn(&[u32]) -> Vec<Vec<usize>>,
    ) -> f64 {
        let mut by_level: [Vec<u32>; LEVELS] = Default::default();
        for &i in rows {
            if self.usable(model, i as usize) {
                by_level[self.level(i as usize)].push(i);
            }
        }
        for pairs in &by_level {
            let kept = self.without_slower_parts(model, pairs, parts);
            if kept.len() >= LEVEL_EFFECT_PAIRS {
                let mut left: Vec<f64> =
                    kept.iter().map(|&i| self.left(model, i as usize)).collect();
                return median(&mut left).max(0.0);
            }
        }
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
    fn gap(&self, model: &Model, rows: &[u32], d: f64) -> f64 {
        let (sw, swe) = self.weighted(model, rows);
        if sw <= 0.0 {
            return 0.0;
        }
        let own = (swe / sw).max(0.0);
        (d - own) * (d - own) * sw
    }
    /// Cochran's Q, each pair's noise widened by the fault's own spread
    /// ([`Config::latency_fault_spread`]) at delay `d`.
    fn heterogeneity(&self, model: &Model, rows: &[u32], d: f64) -> f64 {
        let spread = self.config.latency_fault_spread.max(0.0) * d.max(0.0);
        rows.iter()
            .map(|&i| {
                let i = i as usize;
                let s = self.sd(model, i);
                let e = self.left(model, i) - d;
                e * e / (s * s + spread * spread)
            })
            .sum()
    }
}
