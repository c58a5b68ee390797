//! The within-pair contrast test of one ECMP link: do a pair's flows whose
//! forward path crosses the link fail more than the same pair's other flows?
//!
//! Why within a pair: everything that is not the link hits all of a pair's
//! flows alike — a dead container, a lossy NIC or ToR, and, crucially, the
//! reply side. Loss is round trip but a trace shows only the forward path;
//! a flow's reply hashes onto a reverse path independently of the forward
//! one, so a dead link also kills some flows of the *reverse* pairs whatever
//! their forward path. That extra loss is the same on every forward path of
//! such a pair, so it cancels in the contrast.
//!
//! The test conditions on each pair's total failures `K = k_via + k_other`:
//! with equal rates, each failure lands on the via-link side with
//! probability `π = n_via / (n_via + n_other)` (binomial for rare failures;
//! for frequent ones the exact law is hypergeometric, narrower, so the
//! binomial errs on the safe side). A link fault multiplies the via-side
//! odds by `θ >= 1`: `π(θ) = πθ / (πθ + 1 - π)`. `θ` is fitted over all
//! pairs at once (1-D, monotone score) and the likelihood ratio against
//! `θ = 1` is one-sided (half a χ²₁, like the component tests).

use crate::engine::stats::{binomial_loglik, binomial_upper_tail, bisect_root};

/// Probes and lost probes on one side of a contrast.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Probes.
    pub n: f64,
    /// Lost.
    pub k: f64,
}

impl Counts {
    /// Add one path's counts.
    pub fn add(&mut self, n: f64, k: f64) {
        self.n += n;
        self.k += k.min(n);
    }
}

/// One pair's flows split by whether their forward path crosses the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contrast {
    /// Index of the pair (into the link stage's input).
    pub pair: usize,
    /// Flows crossing the link.
    pub via: Counts,
    /// The pair's other flows.
    pub other: Counts,
}

impl Contrast {
    /// (failures K, via-side share π under equal rates).
    fn split(&self) -> (f64, f64) {
        let total = self.via.n + self.other.n;
        let pi = if total > 0.0 { self.via.n / total } else { 0.0 };
        (self.via.k + self.other.k, pi)
    }

    /// More failures on the via side than equal rates would put there.
    pub fn leans(&self) -> bool {
        let (k, pi) = self.split();
        k > 0.0 && self.via.k > k * pi
    }

    /// This pair alone shows the link's symptom at `level`.
    pub fn significant(&self, level: f64) -> bool {
        let (k, pi) = self.split();
        self.leans() && binomial_upper_tail(self.via.k, k, pi) < level
    }
}

/// Via-side failure probability when the via side's odds are multiplied by
/// `theta`.
fn tilt(pi: f64, theta: f64) -> f64 {
    let a = pi * theta;
    a / (a + 1.0 - pi)
}

fn loglik(rows: &[Contrast], theta: f64) -> f64 {
    rows.iter()
        .map(|r| {
            let (k, pi) = r.split();
            binomial_loglik(r.via.k.min(k), k, tilt(pi, theta))
        })
        .sum()
}

/// The conditional rate-ratio test over `rows`: (fitted odds ratio θ ≥ 1,
/// one-sided likelihood-ratio statistic). Pairs without failures or
/// without flows on one side carry no information and are skipped.
pub fn contrast_test(rows: &[Contrast]) -> (f64, f64) {
    let useful: Vec<Contrast> = rows
        .iter()
        .copied()
        .filter(|r| r.via.n > 0.0 && r.other.n > 0.0 && r.via.k + r.other.k > 0.0)
        .collect();
    // Score in t = ln θ: Σ (k_via - K π(θ)), decreasing in t.
    let score = |t: f64| -> f64 {
        let theta = t.exp();
        useful
            .iter()
            .map(|r| {
                let (k, pi) = r.split();
                r.via.k - k * tilt(pi, theta)
            })
            .sum()
    };
    if useful.is_empty() || score(0.0) <= 0.0 {
        return (1.0, 0.0);
    }
    let theta = bisect_root(score, 0.0, 40.0, 60).exp();
    let stat = 2.0 * (loglik(&useful, theta) - loglik(&useful, 1.0));
    (theta, stat.max(0.0))
}

/// Extra loss the link adds, from the pooled rates: `1 - (1 - r_via) /
/// (1 - r_other)`, in [0, 1].
pub fn extra_loss(rows: &[Contrast]) -> f64 {
    let (mut via, mut other) = (Counts::default(), Counts::default());
    for r in rows {
        via.add(r.via.n, r.via.k);
        other.add(r.other.n, r.other.k);
    }
    if via.n <= 0.0 {
        return 0.0;
    }
    let rv = via.k / via.n;
    let ro = if other.n > 0.0 {
        other.k / other.n
    } else {
        0.0
    };
    if ro >= 1.0 {
        return 0.0;
    }
    (1.0 - (1.0 - rv) / (1.0 - ro)).clamp(0.0, 1.0)
}

/// `rows` without the `drop` pairs of strongest individual evidence: the
/// pooled test must survive them (one odd pair is not a link fault).
pub fn without_strongest(rows: &[Contrast], drop: usize) -> Vec<Contrast> {
    let mut ranked: Vec<(f64, Contrast)> = rows
        .iter()
        .map(|r| {
            let (k, pi) = r.split();
            let p = if r.leans() {
                binomial_upper_tail(r.via.k, k, pi)
            } else {
                1.0
            };
            (p, *r)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    ranked.into_iter().skip(drop).map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::stats::one_sided_lr_p_value;

    fn row(pair: usize, via: (f64, f64), other: (f64, f64)) -> Contrast {
        Contrast {
            pair,
            via: Counts { n: via.0, k: via.1 },
            other: Counts {
                n: other.0,
                k: other.1,
            },
        }
    }

    #[test]
    fn a_dead_link_is_overwhelming_and_scored_one() {
        let rows: Vec<Contrast> = (0..6)
            .map(|i| row(i, (100.0, 100.0), (100.0, 0.0)))
            .collect();
        let (theta, stat) = contrast_test(&rows);
        assert!(theta > 1e6, "{theta}");
        assert!(one_sided_lr_p_value(stat) < 1e-30, "{stat}");
        assert!((extra_loss(&rows) - 1.0).abs() < 1e-12);
        assert!(rows.iter().all(|r| r.significant(0.01)));
    }

    /// The reverse-path loss a dead link puts on a pair hits all of its
    /// forward paths alike (here 50% everywhere): no contrast, whatever
    /// the level of that loss.
    #[test]
    fn loss_on_every_path_of_a_pair_is_no_evidence() {
        let rows: Vec<Contrast> = (0..20)
            .map(|i| {
                let k = 50.0 + (i % 3) as f64 - 1.0;
                row(i, (100.0, k), (100.0, 100.0 - k))
            })
            .collect();
        let (_, stat) = contrast_test(&rows);
        assert!(one_sided_lr_p_value(stat) > 0.01, "{stat}");
        assert!(extra_loss(&rows) < 0.05);
    }

    #[test]
    fn a_gray_link_is_found_by_pooling() {
        // 3% extra loss over 40 pairs of 150 via / 150 other probes, no
        // background: ~4.5 lost per pair, none alone significant.
        let rows: Vec<Contrast> = (0..40)
            .map(|i| {
                row(
                    i,
                    (150.0, [4.0, 5.0, 4.0, 6.0][i % 4]),
                    (150.0, (i % 7 == 0) as u8 as f64),
                )
            })
            .collect();
        assert!(rows.iter().filter(|r| r.significant(0.01)).count() < 40);
        let (theta, stat) = contrast_test(&rows);
        assert!(
            theta > 5.0 && one_sided_lr_p_value(stat) < 1e-10,
            "{theta} {stat}"
        );
        let q = extra_loss(&rows);
        assert!((q - 0.03).abs() < 0.01, "{q}");
        // Robust to dropping the strongest pairs.
        let (_, rest) = contrast_test(&without_strongest(&rows, 2));
        assert!(one_sided_lr_p_value(rest) < 1e-6);
    }

    #[test]
    fn fewer_failures_via_the_link_is_no_evidence() {
        let rows = [
            row(0, (100.0, 0.0), (100.0, 100.0)),
            row(1, (50.0, 1.0), (50.0, 9.0)),
        ];
        assert_eq!(contrast_test(&rows), (1.0, 0.0));
        assert!(!rows[0].leans());
        assert_eq!(extra_loss(&rows), 0.0);
        // No data at all.
        assert_eq!(contrast_test(&[]), (1.0, 0.0));
    }

    #[test]
    fn one_noisy_pair_does_not_survive_the_robustness_check() {
        let mut rows: Vec<Contrast> = (0..10)
            .map(|i| row(i, (100.0, 0.0), (100.0, 0.0)))
            .collect();
        rows[3] = row(3, (100.0, 60.0), (100.0, 0.0));
        let (_, stat) = contrast_test(&rows);
        assert!(one_sided_lr_p_value(stat) < 1e-10);
        let (_, rest) = contrast_test(&without_strongest(&rows, 2));
        assert_eq!(rest, 0.0);
    }
}
