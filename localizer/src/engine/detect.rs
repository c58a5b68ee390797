//! Per-pair anomaly detection against the fabric's own baseline.
//!
//! - loss: lost packets of a pair against Binomial(sent, p0), where p0 is the
//!   fabric's background loss rate (pooled over the pairs that are not
//!   themselves significant, iterated);
//! - unreachable: failed dials against Binomial(rounds, d0), d0 estimated the
//!   same way;
//! - latency: a pair's typical RTT against the healthy baseline of its
//!   route level (same host, same ToR, cross-ToR over one spine, over two
//!   spines: each switch tier costs a little), read robustly from the lower
//!   quantiles because faults only add delay. A large component can slow
//!   most pairs of a level, so the baseline is also read from its peers
//!   (same-ToR pairs per ToR, cross-ToR pairs per set of spines crossed;
//!   [`peer_reference`]), and a cross-ToR level is capped at the level
//!   below plus what a healthy switch tier can cost (`level_baselines`):
//!   when one spine slows every route, the same-ToR class says how slow
//!   they may be. A pair's own jitter widens its scale where the source
//!   gives it ([`PairStats::rtt_spread_seconds`]): its median is only as
//!   sure as its samples are steady.
//!
//! Pair-level calls use a Bonferroni-corrected level (`pair_alpha / pairs`),
//! so on a healthy fabric of any size the expected number of anomalous pairs
//! stays below `pair_alpha`.

use crate::engine::model::{Config, PairStats, Symptom};
use crate::engine::stats::{
    binomial_upper_tail, lower_robust_location_scale, median, normal_upper_quantile,
    quantile_sorted,
};
use crate::engine::topology::PathMatrix;
use skeletonhunter_common::topology::PathClass;
use std::collections::HashMap;

/// Counts for a binomial symptom (loss: packets; unreachable: dials).
#[derive(Debug, Clone, Default)]
pub struct BinomialObs {
    /// Trials per pair (0 when the pair has no data for this symptom).
    pub n: Vec<f64>,
    /// Failures per pair.
    pub k: Vec<f64>,
    /// Estimated background failure rate of the fabric.
    pub background: f64,
    /// Significant at the Bonferroni-corrected pair level.
    pub anomalous: Vec<bool>,
    /// Loss only, and only when every pair's source tells them
    /// ([`PairStats::lossy_rounds`]): per pair its connected rounds and
    /// those that lost a packet. Empty otherwise.
    pub rounds: Vec<(f64, f64)>,
    /// Per pair, a failure rate something else already explains (dial
    /// failures: the loss rate of a pair losing packets); empty: none.
    pub explained_rate: Vec<f64>,
}

impl BinomialObs {
    /// Pair `i`'s chance of a trial succeeding with no fault on its path:
    /// the background, and what else explains its failures.
    pub fn healthy_survival(&self, i: usize) -> f64 {
        let explained = self.explained_rate.get(i).copied().unwrap_or(0.0);
        (1.0 - self.background) * (1.0 - explained.clamp(0.0, 1.0))
    }
}

/// RTT evidence per pair.
#[derive(Debug, Clone, Default)]
pub struct LatencyObs {
    /// Whether the pair has an RTT.
    pub present: Vec<bool>,
    /// RTT minus the healthy baseline of the pair's path class (seconds).
    pub excess: Vec<f64>,
    /// Noise scale of the pair's class (seconds).
    pub sigma: Vec<f64>,
    /// Healthy baseline RTT of the pair's class (seconds).
    pub baseline: Vec<f64>,
    /// Smallest excess that counts for the pair (seconds): the larger of
    /// the absolute and the baseline-relative minimum effect size.
    pub min_excess: Vec<f64>,
    /// Significant at the Bonferroni-corrected pair level.
    pub anomalous: Vec<bool>,
    /// Route level of the pair (0 same host, 1 same ToR, 2 cross-ToR over
    /// one spine, 3 over two): the pairs sharing one baseline.
    pub level: Vec<u8>,
}

/// Per-pair evidence of all three symptoms, indexed like the path matrix rows.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Lost packets of connected rounds.
    pub loss: BinomialObs,
    /// Failed dials (probe rounds).
    pub unreachable: BinomialObs,
    /// Typical RTT against the path-class baseline.
    pub latency: LatencyObs,
    /// Some pair carries traced per-path evidence: links are named, and
    /// the link stage may have left some of a faulty link's flows.
    pub paths_traced: bool,
}

impl Evidence {
    /// Pairs anomalous for at least one symptom.
    pub fn anomalous_pairs(&self) -> usize {
        (0..self.loss.n.len())
            .filter(|&i| {
                self.loss.anomalous[i] || self.unreachable.anomalous[i] || self.latency.anomalous[i]
            })
            .count()
    }

    /// Whether pair `i` is anomalous for `symptom`.
    pub fn is_anomalous(&self, symptom: Symptom, i: usize) -> bool {
        match symptom {
            Symptom::Loss => self.loss.anomalous[i],
            Symptom::Unreachable => self.unreachable.anomalous[i],
            Symptom::Latency => self.latency.anomalous[i],
            // Online only: no pair shows it.
            Symptom::Flapping | Symptom::HostStack => false,
        }
    }
}

/// Background rate of a binomial symptom: the pooled rate over pairs that
/// are not significantly above it, iterated to a fixed point (faulty pairs
/// would otherwise inflate it and hide themselves).
pub fn background_rate(n: &[f64], k: &[f64], floor: f64, level: f64) -> f64 {
    let (sn, sk) = n
        .iter()
        .zip(k)
        .fold((0.0, 0.0), |(a, b), (&n, &k)| (a + n, b + k));
    if sn <= 0.0 {
        return floor;
    }
    let mut p = (sk / sn).max(floor);
    for _ in 0..8 {
        let (mut tn, mut tk) = (0.0, 0.0);
        for (&ni, &ki) in n.iter().zip(k) {
            if ni > 0.0 && (ki <= 0.0 || binomial_upper_tail(ki, ni, p) >= level) {
                tn += ni;
                tk += ki;
            }
        }
        let next = if tn > 0.0 {
            (tk / tn).max(floor)
        } else {
            floor
        };
        if (next - p).abs() <= 1e-3 * p {
            return next;
        }
        p = next;
    }
    p
}

/// [`binomial_obs`] of the (trials, failures) that `counts` reads from
/// each pair: negative counts as none, failures at most the trials.
fn pair_binomial(
    pairs: &[&PairStats],
    counts: impl Fn(&PairStats) -> (f64, f64),
    floor: f64,
    ceiling: f64,
    level: f64,
) -> BinomialObs {
    let (n, k) = pairs
        .iter()
        .map(|p| {
            let (n, k) = counts(p);
            let n = n.max(0.0);
            (n, k.clamp(0.0, n))
        })
        .unzip();
    binomial_obs(n, k, floor, ceiling, level)
}

fn binomial_obs(n: Vec<f64>, k: Vec<f64>, floor: f64, ceiling: f64, level: f64) -> BinomialObs {
    let background = background_rate(&n, &k, floor, level).min(ceiling.max(floor));
    let anomalous = n
        .iter()
        .zip(&k)
        .map(|(&n, &k)| n > 0.0 && k > 0.0 && binomial_upper_tail(k, n, background) < level)
        .collect();
    BinomialObs {
        n,
        k,
        background,
        anomalous,
        rounds: Vec::new(),
        explained_rate: Vec::new(),
    }
}

/// Each pair's (connected rounds, rounds that lost a packet), when every
/// pair knows the latter; empty otherwise.
fn loss_rounds(pairs: &[&PairStats]) -> Vec<(f64, f64)> {
    pairs
        .iter()
        .map(|p| {
            let lossy = p.lossy_rounds?;
            let connected = (p.rounds - p.failed_dials).max(0.0);
            Some((connected, lossy.clamp(0.0, connected)))
        })
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default()
}

/// The loss evidence with its background re-read without the pairs that
/// cross `faulty` columns (accepted loss faults), when that is at most
/// half the first reading; `None` otherwise. A gray fault on a large
/// component (2% on a spine's third of the pairs, a probe or two lost per
/// pair, none significant alone) is pooled into the first reading and
/// lifts it several-fold, hiding a gray container beside it.
pub fn rebased_loss(
    loss: &BinomialObs,
    m: &PathMatrix,
    faulty: &[usize],
    config: &Config,
) -> Option<BinomialObs> {
    let mut crosses = vec![false; loss.n.len()];
    for &j in faulty {
        for &i in m.col(j) {
            if let Some(c) = crosses.get_mut(i as usize) {
                *c = true;
            }
        }
    }
    let (n, k): (Vec<f64>, Vec<f64>) = loss
        .n
        .iter()
        .zip(&loss.k)
        .zip(&crosses)
        .filter(|(_, &c)| !c)
        .map(|((&n, &k), _)| (n, k))
        .unzip();
    let level = config.pair_alpha / loss.n.len().max(1) as f64;
    let rest = background_rate(&n, &k, config.min_background_loss, level);
    if n.iter().sum::<f64>() <= 0.0 || rest > 0.5 * loss.background {
        return None;
    }
    let rebased = binomial_obs(loss.n.clone(), loss.k.clone(), rest, rest, level);
    Some(BinomialObs {
        rounds: loss.rounds.clone(),
        ..rebased
    })
}

/// Run the per-pair tests. `pairs` and `matrix` must come from the same
/// slice (the matrix supplies the path classes).
pub fn detect(pairs: &[&PairStats], matrix: &PathMatrix, config: &Config) -> Evidence {
    let np = pairs.len().max(1) as f64;
    let level = config.pair_alpha / np;

    // Loss and dial failures are judged at the same level and ceiling.
    let binomial = |counts: fn(&PairStats) -> (f64, f64), floor: f64| {
        pair_binomial(pairs, counts, floor, config.max_background_rate, level)
    };
    let loss = BinomialObs {
        rounds: loss_rounds(pairs),
        ..binomial(|p| (p.sent, p.lost), config.min_background_loss)
    };
    let unreachable = binomial(
        |p| (p.rounds, p.failed_dials),
        config.min_background_dial_failure,
    );
    let latency = latency_obs(pairs, &matrix.class, config, level);
    Evidence {
        loss,
        unreachable,
        latency,
        paths_traced: pairs.iter().any(|p| !p.paths.is_empty()),
    }
}

/// Route levels, by the switch tiers a pair's path climbs: same host,
/// same ToR, cross-ToR over one spine (or spines unknown), cross-ToR over
/// two spines.
pub(crate) const LEVELS: usize = 4;

/// The route level of a pair and its peer key within that level (none for
/// same-host pairs: they have no peers): the ToR for same-ToR pairs, the
/// set of spines crossed for cross-ToR pairs.
fn route(p: &PairStats, c: PathClass) -> (usize, Option<(&str, &str)>) {
    match c {
        PathClass::SameHost => (0, None),
        PathClass::SameTor => (1, Some((p.src.tor.as_str(), ""))),
        PathClass::CrossTor => {
            let (a, b) = (p.src.spine.as_str(), p.dst.spine.as_str());
            match (a.is_empty(), b.is_empty()) {
                (true, true) => (2, None),
                (false, true) => (2, Some((a, ""))),
                (true, false) => (2, Some((b, ""))),
                _ if a == b => (2, Some((a, ""))),
                _ => (3, Some((a.min(b), a.max(b)))),
            }
        }
    }
}

/// The practical effect size for a path class with baseline RTT `baseline`:
/// significant but smaller shifts are not reported (see
/// [`Config::min_latency_excess_seconds`]).
pub fn min_excess(baseline: f64, config: &Config) -> f64 {
    config
        .min_latency_excess_seconds
        .max(0.0)
        .max(config.min_latency_excess_ratio.max(0.0) * baseline.max(0.0))
}

/// Peers need at least this many pairs with an RTT to count.
const MIN_PEER_PAIRS: usize = 5;

type PeerGroups<'p> = HashMap<(&'p str, &'p str), Vec<f64>>;

/// RTTs per route level, and per peer group within each level.
fn level_rtts<'p>(
    pairs: &[&'p PairStats],
    class: &[PathClass],
    rtt: &[Option<f64>],
) -> (Vec<usize>, [Vec<f64>; LEVELS], [PeerGroups<'p>; LEVELS]) {
    let mut level = Vec::with_capacity(pairs.len());
    let mut all: [Vec<f64>; LEVELS] = Default::default();
    let mut groups: [PeerGroups<'p>; LEVELS] = Default::default();
    for ((p, c), r) in pairs.iter().zip(class).zip(rtt) {
        let (l, key) = route(p, *c);
        level.push(l);
        let Some(r) = *r else { continue };
        all[l].push(r);
        if let Some(key) = key {
            groups[l].entry(key).or_default().push(r);
        }
    }
    (level, all, groups)
}

/// The RTTs of the peers whose median is at or below the lower quartile
/// of the peers' medians; `None` with fewer than two peers of
/// [`MIN_PEER_PAIRS`] pairs.
fn peer_reference(groups: PeerGroups<'_>) -> Option<Vec<f64>> {
    let peers: Vec<(f64, Vec<f64>)> = groups
        .into_values()
        .filter(|v| v.len() >= MIN_PEER_PAIRS)
        .map(|mut v| (median(&mut v), v))
        .collect();
    if peers.len() < 2 {
        return None;
    }
    let mut medians: Vec<f64> = peers.iter().map(|p| p.0).collect();
    medians.sort_by(f64::total_cmp);
    let cut = quantile_sorted(&medians, 0.25);
    Some(
        peers
            .into_iter()
            .filter(|p| p.0 <= cut)
            .flat_map(|p| p.1)
            .collect(),
    )
}

/// Healthy (location, scale) of each route level; `None` for a level with
/// no RTT. Per level, the lower of its own robust location and its
/// peers' ([`peer_reference`]); then the physics: a cross-ToR level costs
/// at most [`Config::max_hop_latency_seconds`] (or the ratio of the
/// same-ToR baseline) more than the level below it, so when most of a
/// level is slowed by one spine, the same-ToR class says how slow it
/// may be, and the level takes that cap and the scale of the level
/// below.
fn level_baselines(
    mut all: [Vec<f64>; LEVELS],
    groups: [PeerGroups<'_>; LEVELS],
    config: &Config,
) -> [Option<(f64, f64)>; LEVELS] {
    let mut base: [Option<(f64, f64)>; LEVELS] = [None; LEVELS];
    for (l, (v, peer)) in all.iter_mut().zip(groups).enumerate() {
        if v.is_empty() {
            continue;
        }
        let (mut loc, mut sd) = lower_robust_location_scale(v);
        if let Some(mut reference) = peer_reference(peer) {
            // Only a practical difference says the level is slowed: a
            // small group's noise must not shift a healthy level.
            let (ploc, psd) = lower_robust_location_scale(&mut reference);
            if ploc + min_excess(ploc, config) < loc {
                (loc, sd) = (ploc, psd);
            }
        }
        base[l] = Some((loc, sd.max(config.min_latency_scale_seconds)));
    }
    let Some((same_tor, _)) = base[1] else {
        return base;
    };
    let hop = config
        .max_hop_latency_seconds
        .max(config.max_hop_latency_ratio * same_tor)
        .max(0.0);
    // The level below: its baseline, and by how much it was capped.
    let mut below = base[1].map(|b| (b, 0.0));
    for b in base.iter_mut().skip(2) {
        if let (Some((loc, _)), Some(((lower, lower_sd), lowered))) = (*b, below) {
            // A capped level below is slowed as a whole; the one slow
            // spine slows this level too, by as much, so what this level
            // costs over the one below is their own difference.
            let tier = hop.min((loc - lower - lowered).max(0.0));
            let cap = lower + if lowered > 0.0 { tier } else { hop };
            if loc > cap {
                *b = Some((cap, lower_sd));
                below = Some(((cap, lower_sd), loc - cap));
                continue;
            }
        }
        if let Some(own) = *b {
            below = Some((own, 0.0));
        }
    }
    base
}

/// Standard error of pair `p`'s median RTT, from its own samples' spread
/// (about 1.25 σ / √n); 0 without one. Two pairs of a container jittering
/// by 15 µs, medians a few µs up by chance, paged it as slow.
fn median_error(p: &PairStats) -> f64 {
    match p.rtt_spread_seconds {
        Some(s) if s.is_finite() && s > 0.0 && p.rtt_samples >= 1.0 => {
            1.2533 * s / p.rtt_samples.sqrt()
        }
        _ => 0.0,
    }
}

fn latency_obs(
    pairs: &[&PairStats],
    class: &[PathClass],
    config: &Config,
    level: f64,
) -> LatencyObs {
    let rtt: Vec<Option<f64>> = pairs
        .iter()
        .map(|p| {
            p.rtt_seconds.filter(|r| {
                r.is_finite() && *r >= 0.0 && p.rtt_samples >= config.min_latency_samples
            })
        })
        .collect();
    let (route_level, all, groups) = level_rtts(pairs, class, &rtt);
    let base = level_baselines(all, groups, config);
    let z = normal_upper_quantile(level);
    let n = pairs.len();
    let mut out = LatencyObs {
        present: vec![false; n],
        excess: vec![0.0; n],
        sigma: vec![config.min_latency_scale_seconds; n],
        baseline: vec![0.0; n],
        min_excess: vec![config.min_latency_excess_seconds; n],
        anomalous: vec![false; n],
        level: route_level.iter().map(|&l| l as u8).collect(),
    };
    for i in 0..n {
        let (loc, sd) = base[route_level[i]].unwrap_or((0.0, config.min_latency_scale_seconds));
        out.sigma[i] = sd.hypot(median_error(pairs[i]));
        out.baseline[i] = loc;
        out.min_excess[i] = min_excess(loc, config);
        if let Some(r) = rtt[i] {
            out.present[i] = true;
            out.excess[i] = r - loc;
            out.anomalous[i] =
                out.excess[i] > z * out.sigma[i] && out.excess[i] >= out.min_excess[i];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_ignores_faulty_pairs() {
        // 1000 healthy pairs at ~0.1% loss, 20 pairs at 30%.
        let n = vec![1000.0; 1020];
        let mut k = vec![1.0; 1020];
        k[..20].fill(300.0);
        let p = background_rate(&n, &k, 1e-5, 1e-5);
        assert!((p - 0.001).abs() < 1e-4, "background {p}");
    }

    /// 40 cross-ToR pairs around 40 µs with ~1 µs jitter, one 20 µs
    /// slower: significant, and reported unless the minimum effect size
    /// (absolute or relative to the 40 µs baseline) is above 20 µs.
    #[test]
    fn latency_needs_the_minimum_effect_size() {
        let pairs: Vec<PairStats> = (0..40)
            .map(|i| PairStats {
                rounds: 10.0,
                sent: 100.0,
                rtt_seconds: Some(
                    40e-6 + (i % 5) as f64 * 0.5e-6 + if i == 7 { 20e-6 } else { 0.0 },
                ),
                rtt_samples: 50.0,
                ..Default::default()
            })
            .collect();
        let refs: Vec<&PairStats> = pairs.iter().collect();
        let class = vec![PathClass::CrossTor; 40];
        let flagged = |config: &Config| -> Vec<usize> {
            let obs = latency_obs(&refs, &class, config, 1e-2 / 40.0);
            (0..40).filter(|&i| obs.anomalous[i]).collect()
        };
        assert_eq!(flagged(&Config::default()), vec![7]);
        let absolute = Config {
            min_latency_excess_seconds: 25e-6,
            ..Config::default()
        };
        assert!(flagged(&absolute).is_empty());
        let relative = Config {
            min_latency_excess_ratio: 0.6,
            ..Config::default()
        };
        assert!(flagged(&relative).is_empty());
        assert!((min_excess(40e-6, &relative) - 24e-6).abs() < 1e-12);
        assert_eq!(min_excess(1e-6, &relative), 2e-6);
    }

    /// Pair 7's median 6 µs above 39 steady same-ToR pairs, from 20 rows:
    /// a delay when its rows are steady, not when they jitter by 10 µs.
    #[test]
    fn a_jittery_pairs_median_is_judged_against_its_own_spread() {
        let flagged = |spread: f64| -> Vec<usize> {
            let pairs: Vec<PairStats> = (0..40)
                .map(|i| PairStats {
                    sent: 200.0,
                    rtt_seconds: Some(
                        15e-6 + (i % 5) as f64 * 0.3e-6 + if i == 7 { 6e-6 } else { 0.0 },
                    ),
                    rtt_samples: 20.0,
                    rtt_spread_seconds: Some(if i == 7 { spread } else { 0.8e-6 }),
                    ..Default::default()
                })
                .collect();
            let refs: Vec<&PairStats> = pairs.iter().collect();
            let obs = latency_obs(&refs, &[PathClass::SameTor; 40], &Config::default(), 1e-4);
            (0..40).filter(|&i| obs.anomalous[i]).collect()
        };
        assert_eq!(flagged(1e-6), [7]);
        assert!(flagged(10e-6).is_empty(), "{:?}", flagged(10e-6));
    }

    /// One slow spine under every cross-ToR pair: same-ToR pairs at
    /// 15–17 µs, the one-spine level at 52 µs, the two-spine level at
    /// 52–56 µs. The one-spine level is capped at the same-ToR baseline
    /// plus a tier; the two-spine level costs no more than the one below
    /// it, so it is not granted a second tier on top of the cap.
    #[test]
    fn a_level_above_a_slowed_level_costs_only_their_own_difference() {
        let same_tor: Vec<f64> = (0..20).map(|i| 15e-6 + (i % 5) as f64 * 0.5e-6).collect();
        let one_spine = vec![51.6e-6, 51.8e-6];
        let two_spines: Vec<f64> = (0..20).map(|i| 52e-6 + (i % 5) as f64 * 1e-6).collect();
        let config = Config::default();
        let base = |upper: Vec<f64>| {
            let all = [Vec::new(), same_tor.clone(), one_spine.clone(), upper];
            level_baselines(all, Default::default(), &config)
        };
        let [_, tor, one, two] = base(two_spines.clone());
        let (tor, one, two) = (tor.unwrap().0, one.unwrap().0, two.unwrap().0);
        let hop = config.max_hop_latency_ratio * tor;
        assert!((one - (tor + hop)).abs() < 1e-9, "one spine {one}");
        assert!(two < one + 5e-6, "two spines {two}, one spine {one}");
        assert!(52e-6 - two > min_excess(two, &config), "{two}");
        // A healthy one-spine level leaves the next a whole tier.
        let one_healthy = vec![18e-6, 18.5e-6];
        let all = [Vec::new(), same_tor.clone(), one_healthy, two_spines];
        let [_, _, one, two] = level_baselines(all, Default::default(), &config);
        let (one, two) = (one.unwrap().0, two.unwrap().0);
        assert!((two - (one + hop.max(config.max_hop_latency_seconds))).abs() < 1e-9);
    }

    #[test]
    fn background_has_a_floor() {
        let p = background_rate(&[100.0, 100.0], &[0.0, 0.0], 1e-5, 1e-3);
        assert_eq!(p, 1e-5);
    }

    #[test]
    fn binomial_detection_flags_only_significant_pairs() {
        let obs = binomial_obs(
            vec![600.0; 100],
            (0..100)
                .map(|i| {
                    if i == 7 {
                        30.0
                    } else if i == 8 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect(),
            1e-4,
            0.01,
            1e-4,
        );
        let flagged: Vec<usize> = (0..100).filter(|&i| obs.anomalous[i]).collect();
        assert_eq!(flagged, vec![7]);
    }
}
