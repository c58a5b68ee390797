//! Small statistical helpers: binomial, Poisson and normal tails, likelihoods,
//! robust location/scale. Pure functions so each is unit-tested.

use statrs::function::beta::beta_reg;
use statrs::function::erf::erfc;

/// P(X >= k) for X ~ Binomial(n, p), with real-valued `n` and `k` (counts
/// from PromQL `increase()` are not integers). Uses the regularized
/// incomplete beta function: P(X >= k) = I_p(k, n - k + 1).
pub fn binomial_upper_tail(k: f64, n: f64, p: f64) -> f64 {
    if k <= 0.0 {
        return 1.0;
    }
    if n <= 0.0 || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let k = k.min(n);
    let v = beta_reg(k, n - k + 1.0, p);
    v.clamp(0.0, 1.0)
}

/// P(X <= k) for X ~ Poisson(mu), the pmf summed term by term (`k`
/// rounded down; coverage tests ask it of a few hit pairs).
pub fn poisson_lower_tail(k: f64, mu: f64) -> f64 {
    if mu <= 0.0 {
        return 1.0;
    }
    let (mut term, mut sum) = ((-mu).exp(), 0.0);
    for x in 0..=(k.max(0.0).floor() as u64) {
        if x > 0 {
            term *= mu / x as f64;
        }
        sum += term;
    }
    sum.min(1.0)
}

/// P(X <= k) for X the number of successes of independent trials with
/// success chances `probs` (Poisson-binomial), `k` rounded down, by the
/// pmf's recurrence truncated at `k` (cost: trials times `k`). Where the
/// chances are near 1 it is far tighter than the Poisson tail of the same
/// mean: five pairs each sure to show a delay, two showing it, is no
/// chance shortfall.
pub fn poisson_binomial_lower_tail(probs: impl IntoIterator<Item = f64>, k: f64) -> f64 {
    if k < 0.0 {
        return 0.0;
    }
    let k = k.floor() as usize;
    // pmf[x] = P(x successes so far), for x <= k.
    let mut pmf = vec![0.0f64; k + 1];
    pmf[0] = 1.0;
    for p in probs {
        let p = p.clamp(0.0, 1.0);
        for x in (0..=k).rev() {
            let from_below = if x > 0 { pmf[x - 1] * p } else { 0.0 };
            pmf[x] = pmf[x] * (1.0 - p) + from_below;
        }
    }
    pmf.iter().sum::<f64>().min(1.0)
}

/// P(X >= k) for X ~ Poisson(mu), with real-valued `k`: the regularized
/// lower incomplete gamma function P(k, mu).
pub fn poisson_upper_tail(k: f64, mu: f64) -> f64 {
    if k <= 0.0 {
        return 1.0;
    }
    if mu <= 0.0 {
        return 0.0;
    }
    statrs::function::gamma::gamma_lr(k, mu).clamp(0.0, 1.0)
}

/// An upper bound on the chance that `k` failures among `n` probes, sent
/// in `rounds` rounds of `n / rounds` each and failing independently, fall
/// into no more than `lossy` of the rounds: C(rounds, lossy) ways to pick
/// the rounds, times the share of failure sets that fit in them (exact for
/// one round). Small: the failures came together (a burst).
pub fn clustered_tail(k: f64, n: f64, rounds: f64, lossy: f64) -> f64 {
    let (k, n, rounds, lossy) = (k.round(), n.round(), rounds.round(), lossy.round());
    if k < 2.0 || lossy >= rounds || rounds < 1.0 || n < k {
        return 1.0;
    }
    let room = (lossy * n / rounds).floor();
    if room < k {
        // The counts disagree (more failures than the lossy rounds hold).
        return 1.0;
    }
    let ln = ln_binomial(rounds, lossy) + ln_binomial(room, k) - ln_binomial(n, k);
    ln.exp().min(1.0)
}

/// ln C(n, k) for real-valued `n >= k >= 0`.
fn ln_binomial(n: f64, k: f64) -> f64 {
    use statrs::function::gamma::ln_gamma;
    ln_gamma(n + 1.0) - ln_gamma(k + 1.0) - ln_gamma(n - k + 1.0)
}

/// P(Z >= z) for a standard normal Z.
pub fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The z with `normal_upper_tail(z) == p`, by bisection (only used for a
/// handful of critical values per run).
pub fn normal_upper_quantile(p: f64) -> f64 {
    let p = p.clamp(1e-300, 0.5);
    bisect_root(|z| normal_upper_tail(z) - p, 0.0, 40.0, 200)
}

/// One-sided p-value of a likelihood-ratio statistic for one parameter on
/// the boundary (H0: q = 0, H1: q > 0): half a chi-square with one degree of
/// freedom (Chernoff).
pub fn one_sided_lr_p_value(stat: f64) -> f64 {
    if stat <= 0.0 {
        return 1.0;
    }
    normal_upper_tail(stat.sqrt())
}

/// P(X >= x) for X chi-square with `df` degrees of freedom (1 when `df`
/// is 0 or less).
pub fn chi_square_upper_tail(x: f64, df: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return if x.is_finite() { 1.0 } else { 0.0 };
    }
    statrs::function::gamma::gamma_ur(df.max(1.0) / 2.0, x / 2.0).clamp(0.0, 1.0)
}

/// Binomial log-likelihood of `k` of `n` at rate `p`, without the constant
/// binomial coefficient (it cancels in likelihood ratios).
pub fn binomial_loglik(k: f64, n: f64, p: f64) -> f64 {
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let mut l = 0.0;
    if k > 0.0 {
        l += k * p.ln();
    }
    if n - k > 0.0 {
        l += (n - k) * (1.0 - p).ln();
    }
    l
}

/// The root in `[lo, hi]` of `f`, positive below it and not above, after
/// `steps` halvings of the bracket.
pub fn bisect_root(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64, steps: u32) -> f64 {
    for _ in 0..steps {
        let mid = 0.5 * (lo + hi);
        if f(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Quantile (linear interpolation) of an already sorted slice.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] * (1.0 - frac) + sorted[hi] * frac
}

/// Median of a slice (sorted in place).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    quantile_sorted(values, 0.5)
}

/// Location and scale of the healthy part of a one-sided-contaminated
/// sample: faults only ever add delay, so the baseline is read from the
/// lower quantiles (robust to up to ~70% of slowed values). For a normal
/// sample it estimates (mean, sd): q30 + 0.524 sd, with
/// sd = (q30 - q10) / 0.757.
pub fn lower_robust_location_scale(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let q10 = quantile_sorted(values, 0.10);
    let q30 = quantile_sorted(values, 0.30);
    let sd = (q30 - q10) / 0.7572;
    (q30 + 0.5244 * sd, sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_binomial_lower_tail_by_hand() {
        // Two fair coins: P(no head) = 1/4, P(at most one) = 3/4.
        assert!((poisson_binomial_lower_tail([0.5, 0.5], 0.0) - 0.25).abs() < 1e-12);
        assert!((poisson_binomial_lower_tail([0.5, 0.5], 1.0) - 0.75).abs() < 1e-12);
        assert!((poisson_binomial_lower_tail([0.5, 0.5], 2.0) - 1.0).abs() < 1e-12);
        // Five near-sure trials, two successes: 10 * 0.95^2 * 0.05^3 and less.
        let near = poisson_binomial_lower_tail([0.95; 5], 2.0);
        let two = 10.0 * 0.95f64.powi(2) * 0.05f64.powi(3);
        assert!(near > two && near < 1.1 * two, "{near} {two}");
        // Rare trials: close to the Poisson tail of the same mean.
        let rare = poisson_binomial_lower_tail([0.01; 300], 1.0);
        assert!((rare - poisson_lower_tail(1.0, 3.0)).abs() < 0.01, "{rare}");
        assert_eq!(poisson_binomial_lower_tail([0.5], -1.0), 0.0);
    }

    #[test]
    fn clustered_tail_is_the_share_of_failure_sets_in_few_rounds() {
        // 3 of 170 probes (17 rounds of 10) in one round: 17 C(10,3) of
        // the C(170,3) ways, by hand 17 * 120 / 804,440.
        let one = clustered_tail(3.0, 170.0, 17.0, 1.0);
        assert!((one - 17.0 * 120.0 / 804_440.0).abs() < 1e-9, "{one}");
        // Two in one round: 9 of the 169 places the second could go.
        let two = clustered_tail(2.0, 170.0, 17.0, 1.0);
        assert!((two - 9.0 / 169.0).abs() < 1e-9, "{two}");
        // Spread over as many rounds as failures, or a lone failure: no sign.
        assert_eq!(clustered_tail(3.0, 170.0, 17.0, 3.0).min(1.0), 1.0);
        assert_eq!(clustered_tail(1.0, 170.0, 17.0, 1.0), 1.0);
        // Counts that cannot be (4 failures in one round of 3): no sign.
        assert_eq!(clustered_tail(4.0, 51.0, 17.0, 1.0), 1.0);
    }

    fn exact_tail(k: u64, n: u64, p: f64) -> f64 {
        // Sum of the pmf, for small n.
        let mut total = 0.0;
        for x in k..=n {
            let mut c = 1.0f64;
            for i in 0..x {
                c *= (n - i) as f64 / (i + 1) as f64;
            }
            total += c * p.powi(x as i32) * (1.0 - p).powi((n - x) as i32);
        }
        total
    }

    #[test]
    fn chi_square_tail_matches_the_normal_for_one_degree() {
        for z in [0.5, 1.0, 2.0, 3.5] {
            let two_sided = 2.0 * normal_upper_tail(z);
            let t = chi_square_upper_tail(z * z, 1.0);
            assert!((t - two_sided).abs() < 1e-9, "z {z}: {t} vs {two_sided}");
        }
        // Two degrees: exp(-x/2).
        assert!((chi_square_upper_tail(4.0, 2.0) - (-2.0f64).exp()).abs() < 1e-12);
        assert_eq!(chi_square_upper_tail(0.0, 3.0), 1.0);
        assert_eq!(chi_square_upper_tail(f64::INFINITY, 1.0), 0.0);
    }

    #[test]
    fn binomial_tail_matches_pmf_sum() {
        for &(k, n, p) in &[
            (0, 10, 0.1),
            (1, 10, 0.1),
            (3, 10, 0.1),
            (7, 20, 0.3),
            (20, 20, 0.5),
        ] {
            let got = binomial_upper_tail(k as f64, n as f64, p);
            let want = exact_tail(k, n, p);
            assert!(
                (got - want).abs() < 1e-10,
                "k={k} n={n} p={p}: {got} vs {want}"
            );
        }
        assert_eq!(binomial_upper_tail(1.0, 10.0, 0.0), 0.0);
        assert_eq!(binomial_upper_tail(0.0, 10.0, 0.0), 1.0);
    }

    #[test]
    fn poisson_tails_match_the_pmf_and_each_other() {
        for &(k, mu) in &[(1.0, 0.3), (3.0, 0.4), (2.0, 2.0), (10.0, 4.5)] {
            // P(X >= k) = 1 - P(X <= k - 1).
            let got = poisson_upper_tail(k, mu);
            let want = 1.0 - poisson_lower_tail(k - 1.0, mu);
            assert!((got - want).abs() < 1e-10, "k={k} mu={mu}: {got} vs {want}");
        }
        // P(X <= 0) and P(X <= 2) at mu = 1, from the pmf by hand.
        assert!((poisson_lower_tail(0.0, 1.0) - (-1.0f64).exp()).abs() < 1e-15);
        assert!((poisson_lower_tail(2.5, 1.0) - 2.5 * (-1.0f64).exp()).abs() < 1e-15);
        assert_eq!(poisson_lower_tail(3.0, 0.0), 1.0);
        assert_eq!(poisson_upper_tail(0.0, 0.5), 1.0);
        assert_eq!(poisson_upper_tail(1.0, 0.0), 0.0);
    }

    #[test]
    fn normal_tail_and_quantile_are_inverse() {
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-12);
        assert!((normal_upper_tail(1.959964) - 0.025).abs() < 1e-6);
        for p in [0.1, 1e-3, 1e-9] {
            let z = normal_upper_quantile(p);
            assert!((normal_upper_tail(z) / p - 1.0).abs() < 1e-6, "p={p}");
        }
    }

    #[test]
    fn lr_p_value_is_half_chi_square() {
        // chi2_1 upper 5% point is 3.841; the one-sided p-value halves it.
        assert!((one_sided_lr_p_value(3.841459) - 0.025).abs() < 1e-5);
        assert_eq!(one_sided_lr_p_value(0.0), 1.0);
    }

    #[test]
    fn lower_robust_scale_ignores_slow_tail() {
        // 60 values around 10 with unit spread, 40 slowed to around 50.
        let mut v: Vec<f64> = (0..60)
            .map(|i| 10.0 + normal_score(i as f64 / 60.0 + 1.0 / 120.0))
            .chain((0..40).map(|i| 50.0 + i as f64 * 0.1))
            .collect();
        let (loc, sd) = lower_robust_location_scale(&mut v);
        assert!((loc - 10.0).abs() < 1.0, "loc {loc}");
        assert!(sd > 0.4 && sd < 2.0, "sd {sd}");
    }

    fn normal_score(u: f64) -> f64 {
        // Inverse normal via the quantile helper (u in (0,1)).
        if u < 0.5 {
            -normal_upper_quantile(u)
        } else {
            normal_upper_quantile(1.0 - u)
        }
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
