//! The tests that turn one Lasso candidate into blame or clear: a one-sided
//! likelihood-ratio test on its pairs, then a coverage test.
//!
//! Every candidate needs a significant one-sided LR (Bonferroni level) and
//! at least `min_pairs` pairs showing the symptom (for a count symptom, one
//! such pair will do when more than `min_pairs` of its pairs outside
//! accepted ECMP faults fail at all). Then:
//! - spine (ECMP): the share of its pairs showing the symptom must exceed,
//!   significantly (`alpha` over the spine columns), the share elsewhere
//!   in the fabric ([`Chance`]; the rule is in `ecmp.rs`), and
//!   reach `ecmp_min_fraction`, also on its pairs outside each smaller
//!   spine crossing its hit flows (unless that one passes no count and
//!   holds only some of the hits); a smaller column crossing all its
//!   hit flows takes them only if it is a fault of its own (a partial
//!   fault shows on no other flow); the score is fitted on the hit flows
//!   only (this is what separates a partial spine fault from noisy single
//!   pairs);
//! - other kinds: the evidence must survive dropping its `min_pairs`
//!   strongest pairs (a few noisy pairs are not a component fault; unless
//!   those are all the informative pairs it has, each hit, they agree
//!   on one effect size, and pairs as far off are rare elsewhere), enough
//!   pairs must show the symptom for the fitted size (coverage: a fault on a
//!   node/nic/host/ToR hits all its pairs), and the same must hold for its
//!   pairs outside its most-hit sub-component (so a NIC is not blamed for
//!   one container's fault, nor a ToR for a host's).

use super::family::{Family, Model};
use crate::engine::model::Config;
use crate::engine::stats::{chi_square_upper_tail, one_sided_lr_p_value};
use crate::engine::topology::PathMatrix;
use skeletonhunter_common::topology::Kind;
use std::collections::HashMap;

/// Verdict on one candidate under the current model.
#[derive(Debug, Clone)]
pub(super) struct Verdict {
    /// The candidate's column in the path matrix.
    pub(super) col: usize,
    /// LR statistic (ranks passing candidates).
    pub(super) stat: f64,
    pub(super) p_value: f64,
    pub(super) score: f64,
    /// Size of the effect to add to the model (log survival for binomial,
    /// seconds for latency); for ECMP faults the hit pairs are explained
    /// instead.
    pub(super) effect: f64,
    /// Pairs showing the symptom (sorted).
    pub(super) hit: Vec<u32>,
    pub(super) ecmp: bool,
    pub(super) passes: bool,
    /// Other ECMP columns hitting exactly the same pairs: the hit flows
    /// cannot tell them apart (reported as equivalent).
    pub(super) also: Vec<usize>,
}

/// A pair elsewhere is as far off as a candidate's hit pairs when its own
/// effect reaches this share of theirs (their median for the ECMP count,
/// their smallest for a candidate's few pairs): a fault hits its pairs
/// with one size, noise is smaller.
pub(super) const SIZE_SHARE: f64 = 0.5;

/// Fabric-wide: the unexplained pairs, and how large an effect each one
/// showing the symptom has on its own.
///
/// Why sizes and not a count: the ECMP rule asks whether a spine's pairs
/// show its fault more often than pairs elsewhere show one *of that size*.
/// A few pairs a microsecond or a lost probe above the lenient per-pair
/// level are everyday noise; they say nothing about the odds of pairs
/// +170 µs slow or dropping a fifth of their probes.
#[derive(Debug, Clone, Default)]
pub(super) struct Chance {
    pub(super) total: f64,
    /// The own fitted effect of every unexplained pair showing the symptom,
    /// ascending.
    pub(super) sizes: Vec<f64>,
    /// The same, of those pairs that did not lose their probes in a burst
    /// ([`Family::burst`]): what a candidate's few pairs, which may not
    /// have, are compared with. A blip's pairs elsewhere made a gray
    /// container's two pairs look common.
    pub(super) steady: Vec<f64>,
}

impl Chance {
    /// Share of pairs showing an effect of at least `size` outside a
    /// candidate (its own `hit` such pairs of `n` removed), floored at the
    /// per-pair test level.
    pub(super) fn outside(&self, hit: f64, n: f64, size: f64, floor: f64) -> f64 {
        self.share(&self.sizes, (hit, n), size, floor)
    }

    /// [`Self::outside`] among the pairs that did not lose in a burst.
    pub(super) fn steady_outside(&self, hit: f64, n: f64, size: f64, floor: f64) -> f64 {
        self.share(&self.steady, (hit, n), size, floor)
    }

    fn share(&self, sizes: &[f64], (hit, n): (f64, f64), size: f64, floor: f64) -> f64 {
        let t = self.total - n;
        let at_least = (sizes.len() - sizes.partition_point(|&s| s < size)) as f64;
        let a = (at_least - hit).max(0.0);
        if t > 0.0 {
            (a / t).max(floor)
        } else {
            floor
        }
    }
}

/// Level of the coverage shortfall test: fewer hit pairs than a fault of
/// the fitted size makes is evidence against the candidate only when this
/// unlikely.
const COVERAGE_TAIL: f64 = 0.05;

/// Level of what is left of a spread-out candidate after the robustness
/// drop, when the rounds that lost probes are known too. A burst (a
/// microburst taking two or three probes of a few pairs in one round)
/// fills one round per pair and fails the count in rounds; a gray
/// container dropping 2 % of its probes one by one passes both counts,
/// and at `coverage_alpha` its four pairs of 140 probes were too few to
/// be told from noise. What is left must also lose at a rate that
/// matters ([`Family::big_enough`]): two noisy pairs of a host above
/// a few single drops elsewhere are not a gray host.
const SPREAD_TAIL: f64 = 0.05;

/// Components whose faults may hit only some of their flows (ECMP).
fn is_ecmp(kind: Kind) -> bool {
    kind == Kind::Spine
}

/// Everything one symptom's candidates are tested against.
pub(super) struct Tester<'a, F> {
    pub(super) family: &'a F,
    pub(super) m: &'a PathMatrix,
    pub(super) config: &'a Config,
    /// Bonferroni-corrected significance level.
    pub(super) level: f64,
    /// Level of the ECMP rule's count: `alpha` over the spine columns. Only
    /// a candidate whose evidence already passed `level` is counted, and
    /// the count is a question asked of spines alone; over all columns,
    /// three flows of eleven +90 µs slow, and no pair that slow elsewhere,
    /// could never pass it.
    pub(super) ecmp_level: f64,
}

impl<F: Family> Tester<'_, F> {
    /// Test candidate column `j` under the current model (see the module
    /// docs for the rules).
    pub(super) fn evaluate(&self, model: &Model, j: usize, chance: &Chance) -> Verdict {
        let (f, config) = (self.family, self.config);
        let (rows, hit) = self.rows_and_hits(model, j);
        let (param, stat) = f.fit(model, &rows);
        let p_lr = one_sided_lr_p_value(stat);
        let mut v = Verdict {
            col: j,
            stat,
            p_value: p_lr,
            score: f.score(&rows, param),
            effect: f.effect(param),
            hit: Vec::new(),
            ecmp: is_ecmp(self.m.columns[j].kind),
            passes: false,
            also: Vec::new(),
        };
        if rows.is_empty() || !self.enough_pairs_show(model, &rows, &hit) || p_lr >= self.level {
            v.hit = hit;
            return v;
        }
        if v.ecmp {
            let whole = v.clone();
            // The count needs its `min_pairs` hit flows.
            if hit.len() >= config.min_pairs {
                self.ecmp_test(model, chance, (&rows, param), &hit, &mut v);
            }
            if !v.passes && self.component_test(model, chance, j, (&rows, &hit), param) {
                // A gray spine dropping on every flow shows on too few
                // pairs for the count, and passes as any component does.
                v = Verdict {
                    ecmp: false,
                    passes: true,
                    ..whole
                };
            }
        } else {
            v.passes = self.component_test(model, chance, j, (&rows, &hit), param);
        }
        if v.passes && needs_spread(self.m.columns[j].kind) {
            // A partial fault shows on no other flow: a smaller column that
            // is no fault of its own cannot take its hit flows.
            v.passes = match smaller_column_crossing_all(self.m, j, &hit) {
                Some(c) => {
                    self.holds_without(model, &rows, c)
                        || (v.ecmp && !self.evaluate(model, c, chance).passes)
                }
                None => true,
            };
        }
        v.hit = hit;
        v
    }

    /// At least `min_pairs` pairs showing the symptom at the lenient
    /// per-pair level; or, for a count symptom, one such pair and more than
    /// `min_pairs` pairs failing at all. A container losing 2% of 100
    /// probes a pair loses one or two on each: one lost probe is no sign on
    /// its own, and a gray container whose pairs lost 5, 1, 1 and 1 had a
    /// single pair counted. Whether a few noisy pairs explain such evidence
    /// is [`Self::robust`]'s question, asked next. Pairs of an accepted
    /// ECMP fault do not count: its rate is in the model only where it
    /// hit, and a gray spine's single lost probes on the rest of its flows
    /// would otherwise page the NICs above it.
    fn enough_pairs_show(&self, model: &Model, rows: &[u32], hit: &[u32]) -> bool {
        let min = self.config.min_pairs.max(1);
        hit.len() >= min
            || (!hit.is_empty()
                && rows
                    .iter()
                    .map(|&i| i as usize)
                    .filter(|&i| !model.under_ecmp[i] && self.family.shows_any(model, i))
                    .take(min + 1)
                    .count()
                    > min)
    }

    /// Whether pair `i` shows the symptom on its own at the candidates'
    /// (Bonferroni) level, under the model.
    pub(super) fn stands_alone(&self, model: &Model, i: u32) -> bool {
        one_sided_lr_p_value(self.family.fit(model, &[i]).1) < self.level
    }

    /// Column `j`'s pairs usable under the model.
    pub(super) fn rows(&self, model: &Model, j: usize) -> Vec<u32> {
        let f = self.family;
        self.m
            .col(j)
            .iter()
            .copied()
            .filter(|&i| f.usable(model, i as usize))
            .collect()
    }

    /// Column `j`'s pairs usable under the model, and those of them
    /// showing the symptom.
    pub(super) fn rows_and_hits(&self, model: &Model, j: usize) -> (Vec<u32>, Vec<u32>) {
        let rows = self.rows(model, j);
        let hit = self.hits(model, &rows);
        (rows, hit)
    }

    /// Those of `rows` showing the symptom under the model.
    pub(super) fn hits(&self, model: &Model, rows: &[u32]) -> Vec<u32> {
        rows.iter()
            .copied()
            .filter(|&i| self.family.anomalous(model, i as usize))
            .collect()
    }

    /// Non-ECMP rule: robustness, effect size, coverage overall and outside
    /// the most-hit sub-component.
    fn component_test(
        &self,
        model: &Model,
        chance: &Chance,
        j: usize,
        (rows, hit): (&[u32], &[u32]),
        param: f64,
    ) -> bool {
        let ok = self.robust(model, rows, hit)
            && (!self.too_few_to_drop(model, rows, hit)
                || self.rarer_than_chance(model, chance, hit))
            && self.family.big_enough(rows, param)
            && self.coverage_ok(model, rows, hit.len() as f64, param);
        if !ok {
            return false;
        }
        match outside_most_hit_sub_component(self.m, j, rows, hit) {
            Some((outside, outside_hits)) => {
                self.coverage_ok(model, &outside, outside_hits as f64, param)
            }
            None => true,
        }
    }

    /// Whether `j`'s evidence on its `rows` that do not cross the smaller
    /// column `c` is still significant (uncorrected `alpha`, as for
    /// [`Self::robust`]). The hit pairs of a gray ToR are few, and two may
    /// share a host by chance: the ToR's loss on all its other pairs says
    /// it is the ToR. A dead container's spine has nothing left.
    fn holds_without(&self, model: &Model, rows: &[u32], c: usize) -> bool {
        let crossed = self.m.col(c);
        let rest: Vec<u32> = rows
            .iter()
            .copied()
            .filter(|i| crossed.binary_search(i).is_err())
            .collect();
        !rest.is_empty()
            && one_sided_lr_p_value(self.family.fit(model, &rest).1) < self.config.alpha
    }

    /// The evidence survives dropping the strongest `min_pairs` pairs (a
    /// few noisy pairs are not a component fault). A candidate with no
    /// more than `min_pairs` informative pairs (its others missing from
    /// the window or cut by another fault), every one of them showing the
    /// symptom, cannot be tested so; it passes if they agree: two pairs of
    /// one container both noisy on their own is far less likely than the
    /// container, unless such pairs are common in the window (asked next,
    /// [`Self::rarer_than_chance`]).
    pub(super) fn robust(&self, model: &Model, rows: &[u32], hit: &[u32]) -> bool {
        let f = self.family;
        if self.too_few_to_drop(model, rows, hit) {
            return self.agree(model, hit);
        }
        if self.each_in_a_burst(model, hit) {
            return false;
        }
        let mut ranked: Vec<(f64, u32)> = rows
            .iter()
            .map(|&i| (f.pair_evidence(model, i as usize), i))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rest: Vec<u32> = ranked
            .iter()
            .skip(self.config.min_pairs)
            .map(|&(_, i)| i)
            .collect();
        let (q_rest, stat_rest) = f.fit(model, &rest);
        let p_rest = one_sided_lr_p_value(stat_rest);
        if p_rest < self.config.alpha {
            return f.big_enough(&rest, q_rest);
        }
        // A gray fault on a small component (a container's 4 pairs losing
        // 4, 3, 1 and 0 of 70 probes): dropping two of its pairs leaves too
        // little for `alpha`. Noisy pairs explain the evidence only if it
        // sits on no more than `min_pairs` pairs; spread over more, what is
        // left after the drop must still lean its way: at `coverage_alpha`,
        // or at [`SPREAD_TAIL`] when it also does counted in lossy rounds,
        // by an effect that matters (a gray fault hits all its pairs alike).
        let spread = rows
            .iter()
            .filter(|&&i| f.shows_any(model, i as usize))
            .count();
        if spread <= self.config.min_pairs {
            return false;
        }
        match f.rounds_p_value(model, &rest) {
            Some(p_rounds) => p_rest.max(p_rounds) < SPREAD_TAIL && f.big_enough(&rest, q_rest),
            None => p_rest < self.config.coverage_alpha,
        }
    }

    /// Whether every one of a candidate's hit pairs (at least two) lost
    /// its probes in a burst of its own ([`Family::burst`] on that pair):
    /// a blip (one round in which a few pairs each lose some probes) that
    /// fell on three pairs of one container, each losing 3 of 110 probes
    /// in that round, was paged as the container. A gray fault drops
    /// probes one by one, round after round; all of its hit pairs bursty
    /// at once is rarer than the blip.
    fn each_in_a_burst(&self, model: &Model, hit: &[u32]) -> bool {
        hit.len() >= 2 && hit.iter().all(|&i| self.family.burst(model, &[i]))
    }

    /// A candidate with no more than `min_pairs` informative pairs, every
    /// one of them hit ([`Self::robust`] cannot drop any).
    fn too_few_to_drop(&self, model: &Model, rows: &[u32], hit: &[u32]) -> bool {
        // Hit pairs are informative, so this needs at most `min_pairs` hits.
        hit.len() <= self.config.min_pairs
            && rows
                .iter()
                .filter(|&&i| self.family.informative(model, i as usize))
                .take(hit.len() + 1)
                .count()
                <= hit.len()
    }

    /// Whether the few pairs a candidate has (too few to drop any) agree on
    /// one effect ([`Family::heterogeneity`] at `coverage_alpha`): one
    /// noisy pair and one slightly slow pair of a container are not the
    /// container. Nor is one whose pairs lost their probes in bursts
    /// ([`Family::burst`]): a gray component drops them one by one. Pairs
    /// each beyond the candidate's level on their own agree that it is hit
    /// ([`Family::pairs_have_offsets`]).
    fn agree(&self, model: &Model, hit: &[u32]) -> bool {
        let f = self.family;
        if f.burst(model, hit) {
            return false;
        }
        if !f.pairs_have_offsets() && hit.iter().all(|&i| self.stands_alone(model, i)) {
            return true;
        }
        let (param, _) = f.fit(model, hit);
        let q = f.heterogeneity(model, hit, param);
        chi_square_upper_tail(q, hit.len() as f64 - 1.0) >= self.config.coverage_alpha
    }

    /// Whether a candidate's few pairs (too few to drop any), all showing
    /// the symptom, are more than the window's noise makes: the share of
    /// pairs elsewhere as far off ([`Chance`], [`SIZE_SHARE`] of the
    /// smallest of theirs, not lost in a burst) is the chance of each,
    /// and all of them at once must be rarer than `alpha`. A container's
    /// jittery pair and slightly slow pair, its only two, in a window
    /// where one pair in twenty was as far off, were paged as the
    /// container.
    fn rarer_than_chance(&self, model: &Model, chance: &Chance, hit: &[u32]) -> bool {
        let smallest = hit
            .iter()
            .map(|&i| self.family.fit(model, &[i]).0)
            .fold(f64::INFINITY, f64::min);
        let n = hit.len() as f64;
        let each = chance.steady_outside(n, n, SIZE_SHARE * smallest, self.config.coverage_alpha);
        n < 2.0 || each.powf(n) < self.config.alpha
    }

    /// Coverage: at least `min_coverage_ratio` of the pairs a fault of
    /// size `param` would make show the symptom do show it, or, when that
    /// expectation is only a few pairs (a gray fault: each pair loses a
    /// probe or two), the shortfall is not significant at
    /// [`COVERAGE_TAIL`] ([`Family::shortfall_p_value`]).
    fn coverage_ok(&self, model: &Model, rows: &[u32], hits: f64, param: f64) -> bool {
        let p_hit = rows
            .iter()
            .map(|&i| self.family.p_hit(model, i as usize, param));
        let expected: f64 = p_hit.clone().sum();
        hits >= self.config.min_coverage_ratio * expected
            || self.family.shortfall_p_value(p_hit, hits) >= COVERAGE_TAIL
    }
}

/// Large components that must show the symptom on pairs under several
/// smaller ones: a spine under several ToRs, a ToR under several hosts.
fn needs_spread(kind: Kind) -> bool {
    matches!(kind, Kind::Spine | Kind::Tor)
}

/// The largest column crossing fewer pairs than `j` that crosses every
/// hit pair of `j`, if any: the evidence may then fit that smaller
/// component as well (a dead container's pairs all cross its spine).
fn smaller_column_crossing_all(m: &PathMatrix, j: usize, hit: &[u32]) -> Option<usize> {
    let (&first, rest) = hit.split_first()?;
    let own = m.col(j).len();
    m.row(first as usize)
        .iter()
        .map(|&c| c as usize)
        .filter(|&c| {
            c != j
                && m.col(c).len() < own
                && rest
                    .iter()
                    .all(|&i| m.row(i as usize).contains(&(c as u32)))
        })
        .max_by_key(|&c| (m.col(c).len(), std::cmp::Reverse(c)))
}

/// The pairs of column `j` outside its most-hit sub-component (a column
/// all of whose pairs cross `j` but which crosses only some of `j`'s pairs:
/// a container of a NIC, a host of a ToR), with how many of them are hit;
/// `None` when no such sub-component is hit.
fn outside_most_hit_sub_component(
    m: &PathMatrix,
    j: usize,
    rows: &[u32],
    hit: &[u32],
) -> Option<(Vec<u32>, usize)> {
    let is_hit: Vec<bool> = rows.iter().map(|i| hit.binary_search(i).is_ok()).collect();
    let (hits, _, at) = nested_parts(m, j, rows)
        .into_iter()
        .map(|(c, at)| (at.iter().filter(|&&k| is_hit[k]).count(), c, at))
        .filter(|&(h, _, _)| h > 0)
        .max_by_key(|&(h, c, _)| (h, std::cmp::Reverse(c)))?;
    let mut inside = vec![false; rows.len()];
    for k in at {
        inside[k] = true;
    }
    let outside: Vec<u32> = rows
        .iter()
        .zip(inside)
        .filter_map(|(&i, inside)| (!inside).then_some(i))
        .collect();
    Some((outside, hit.len() - hits))
}

/// For each column nested in `j` (a NIC of a host, a host of a ToR) that
/// some but not all of `pairs` cross: the column, and the positions in
/// `pairs` of those that cross it; sorted by column.
pub(super) fn nested_parts(m: &PathMatrix, j: usize, pairs: &[u32]) -> Vec<(u32, Vec<usize>)> {
    let mut by_column: HashMap<u32, Vec<usize>> = HashMap::new();
    for (k, &i) in pairs.iter().enumerate() {
        for &c in m.row(i as usize) {
            if c as usize != j {
                by_column.entry(c).or_default().push(k);
            }
        }
    }
    let mut parts: Vec<(u32, Vec<usize>)> = by_column
        .into_iter()
        .filter(|(c, at)| at.len() < pairs.len() && nested_in(m, *c as usize, j))
        .collect();
    parts.sort_unstable_by_key(|(c, _)| *c);
    parts
}

/// Whether column `c`'s pairs are a proper subset of column `j`'s: `c` is
/// nested in `j` (a container in its NIC, a spine over one ToR inside the
/// spine over it and others).
pub(super) fn nested_in(m: &PathMatrix, c: usize, j: usize) -> bool {
    m.col(c).len() < m.col(j).len() && is_subset(m.col(c), m.col(j))
}

/// Whether every element of sorted `a` is in sorted `b`.
pub(super) fn is_subset(a: &[u32], b: &[u32]) -> bool {
    if a.len() > b.len() {
        return false;
    }
    let mut rest = b;
    a.iter().all(|x| match rest.binary_search(x) {
        Ok(i) => {
            rest = &rest[i + 1..];
            true
        }
        Err(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use super::is_subset;

    #[test]
    fn subset_of_sorted_rows() {
        assert!(is_subset(&[], &[1]));
        assert!(is_subset(&[1, 4], &[1, 2, 4, 7]));
        assert!(!is_subset(&[1, 5], &[1, 2, 4, 7]));
        assert!(!is_subset(&[1, 2, 3], &[1, 2]));
        assert!(!is_subset(&[8], &[1, 2, 4, 7]));
    }
}
