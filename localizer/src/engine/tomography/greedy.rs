//! The greedy confirmation shared by all symptoms: evaluate every remaining
//! candidate against the model of faults accepted so far, accept the
//! strongest one that passes, explain it away, repeat; then re-test each
//! accepted fault given all the others and drop those that no longer pass;
//! after a drop, go forward again from the faults kept. The dropped fault
//! may have hidden another: a ToR over a gray container, lifted by it above
//! a lossy spine, is accepted first and takes the container's loss at its
//! own rate; given the spine nothing is left of the ToR, and the container
//! must be asked again. (Likewise a spine above every other ToR of a small
//! fabric, crossed by all the pairs of a lossy spine beside it.)
//!
//! A spine whose every pair also crosses an accepted non-spine fault (two
//! ToRs under one spine: each cross-ToR pair crosses both ToRs) is never
//! accepted beside it: whatever it would explain, that fault explains too,
//! and a fault that grows or shrinks during the window (loss escalating to
//! an outage, probes of some sources read later than others) leaves more
//! loss on some of its pairs than on others — the very shape of a second,
//! partial (ECMP) fault on the subset. One component is the explanation,
//! unless the spine's flows agree on one rate and the fault's other pairs
//! on another: then both are faults ([`refit`]).
//! This holds whichever rule the spine passed (the ECMP count, or the
//! component rule of a gray spine dropping on every flow), for the count
//! symptoms ([`Family::nested_may_add`]): delays add up, and a slow spine
//! above a slow ToR doubles the ToR's delay on exactly its pairs.

mod order;
mod refit;

use super::equivalence::ecmp_siblings;
use super::family::{Family, Model};
use super::hypothesis::{is_subset, nested_parts, Chance, Tester, Verdict};
use crate::engine::stats::one_sided_lr_p_value;
use skeletonhunter_common::topology::Kind;
use std::collections::HashMap;

/// Forward and backward passes at the most (see [`confirm`]).
const MAX_PASSES: usize = 3;

/// An ECMP fault hitting at least this share of its flows is one effect on
/// all of them, whose outliers are other faults ([`Greedy::ecmp_outliers`]);
/// one hitting fewer shares its hit pairs with whatever else hits them.
const WHOLE_SHARE: f64 = 0.9;

/// Largest spread of an ECMP fault's hit pairs about one effect (their
/// heterogeneity over its degrees of freedom) that is still one effect: a
/// fault on every flow alike leaves about the spread of chance (1, a
/// little more with noisy pairs); a member switch carrying a different
/// share of each pair's flows leaves four times that and more.
const UNIFORM_DISPERSION: f64 = 2.5;

/// Accepted and cleared verdicts of one symptom, from the Lasso's
/// candidates (`lasso`: columns with a negative coefficient).
pub(super) fn confirm<F: Family>(
    tester: &Tester<'_, F>,
    lasso: &[usize],
    present: &[bool],
) -> (Vec<Verdict>, Vec<Verdict>) {
    let g = Greedy { tester, present };
    let mut remaining = g.candidates(lasso);
    let mut last: HashMap<usize, Verdict> = HashMap::new();
    let mut accepted = Vec::new();
    let mut dropped = Vec::new();
    // A dropped fault may have held evidence another candidate needs: go
    // forward again from what is kept. An accepted column has left
    // `remaining` for good, so a dropped one never comes back.
    for _ in 0..MAX_PASSES {
        accepted = g.forward(accepted, &mut remaining, &mut last);
        let (kept, gone) = g.backward(accepted);
        accepted = kept;
        if gone.is_empty() {
            break;
        }
        dropped.extend(gone);
    }
    let cleared = remaining
        .iter()
        .filter_map(|j| last.remove(j))
        .chain(dropped)
        .collect();
    (accepted, cleared)
}

struct Greedy<'a, F> {
    tester: &'a Tester<'a, F>,
    /// Pairs with data for this symptom.
    present: &'a [bool],
}

impl<F: Family> Greedy<'_, F> {
    fn npairs(&self) -> usize {
        self.tester.m.pairs()
    }

    /// The Lasso proposes the sparsest explanation, but with correlated
    /// columns (a NIC and its containers, a ToR under another fault) it can
    /// pick a sibling of the culprit. Every column that several pairs
    /// showing the symptom cross is a candidate too; the tests decide.
    fn candidates(&self, lasso: &[usize]) -> Vec<usize> {
        let m = self.tester.m;
        let model = Model::empty(self.npairs());
        let mut remaining: Vec<usize> = lasso.to_vec();
        let mut is_candidate = vec![false; m.columns.len()];
        for &j in lasso {
            is_candidate[j] = true;
        }
        let mut count = vec![0usize; m.columns.len()];
        for (i, &p) in self.present.iter().enumerate() {
            if p && self.tester.family.anomalous(&model, i) {
                for &j in m.row(i) {
                    count[j as usize] += 1;
                }
            }
        }
        for (j, &c) in count.iter().enumerate() {
            if c >= self.tester.config.min_pairs.max(1) && !is_candidate[j] {
                remaining.push(j);
            }
        }
        remaining
    }

    fn chance(&self, model: &Model) -> Chance {
        let f = self.tester.family;
        let mut chance = Chance::default();
        for (i, &p) in self.present.iter().enumerate() {
            if p && !model.explained[i] {
                chance.total += 1.0;
                if f.anomalous(model, i) {
                    let size = f.fit(model, &[i as u32]).0;
                    chance.sizes.push(size);
                    if !f.burst(model, &[i as u32]) {
                        chance.steady.push(size);
                    }
                }
            }
        }
        chance.sizes.sort_by(f64::total_cmp);
        chance.steady.sort_by(f64::total_cmp);
        chance
    }

    /// Add an accepted fault to the model: its effect on every pair it
    /// crosses, or (ECMP) its hit pairs as explained, but for the outliers
    /// of a fault on all its flows alike, which get its effect
    /// ([`Self::ecmp_outliers`]).
    fn apply(&self, model: &mut Model, v: &Verdict) {
        if v.ecmp {
            let (outliers, effect) = self.ecmp_outliers(model, v);
            for &i in &v.hit {
                if outliers.binary_search(&i).is_ok() {
                    let add = self
                        .tester
                        .family
                        .applied_effect(model, &[i], effect, &|_| Vec::new());
                    model.effect[i as usize] += add;
                } else {
                    model.explained[i as usize] = true;
                }
            }
            for &i in self.tester.m.col(v.col) {
                model.under_ecmp[i as usize] = true;
            }
        } else {
            self.add_effect(model, v.col, v.effect);
        }
    }

    /// Component `col`'s `effect` (model units) on every pair it crosses.
    fn add_effect(&self, model: &mut Model, col: usize, effect: f64) {
        let rows = self.tester.m.col(col);
        let m = self.tester.m;
        let parts = |pairs: &[u32]| {
            nested_parts(m, col, pairs)
                .into_iter()
                .map(|(_, at)| at)
                .collect()
        };
        let add = self
            .tester
            .family
            .applied_effect(model, rows, effect, &parts);
        for &i in rows {
            model.effect[i as usize] += add;
        }
    }

    /// The hit pairs of an ECMP fault showing far more than its effect
    /// (sorted), and that effect (model units), when the fault is one
    /// effect on every other hit flow: a whole spine losing 11 % on every
    /// flow and a container behind it losing 30 % more on its own two.
    /// Explained whole, the spine would take the container's pairs with
    /// it. A fault whose effect varies from flow to flow (a member switch
    /// carrying a different share of each pair's flows) has no such
    /// outliers: its hit pairs stay explained whole.
    fn ecmp_outliers(&self, model: &Model, v: &Verdict) -> (Vec<u32>, f64) {
        let t = self.tester;
        let f = t.family;
        let hit = &v.hit;
        if !f.ecmp_outliers_are_faults() {
            return (Vec::new(), 0.0);
        }
        let usable = t.rows(model, v.col).len();
        if (hit.len() as f64) < WHOLE_SHARE * usable as f64 {
            return (Vec::new(), 0.0);
        }
        let (param, _) = f.fit(model, hit);
        let outliers: Vec<u32> = hit
            .iter()
            .copied()
            .filter(|&i| {
                f.fit(model, &[i]).0 > param
                    && one_sided_lr_p_value(f.gap(model, &[i], param)) < t.config.alpha
            })
            .collect();
        let inliers: Vec<u32> = hit
            .iter()
            .copied()
            .filter(|i| outliers.binary_search(i).is_err())
            .collect();
        let (inner, _) = f.fit(model, &inliers);
        let spread = f.heterogeneity(model, &inliers, inner);
        let df = inliers.len() as f64 - 1.0;
        if outliers.is_empty() || df < 1.0 || spread > UNIFORM_DISPERSION * df {
            return (Vec::new(), 0.0);
        }
        (outliers, f.effect(inner))
    }

    /// Whether spine verdict `v`'s pairs all cross one of the non-spine
    /// faults `accepted` (see the module docs), whichever rule it passed.
    fn nested<'v>(&self, v: &Verdict, mut accepted: impl Iterator<Item = &'v Verdict>) -> bool {
        let m = self.tester.m;
        let spine = |c: usize| m.columns[c].kind == Kind::Spine;
        !self.tester.family.nested_may_add()
            && spine(v.col)
            && accepted.any(|a| !spine(a.col) && is_subset(m.col(v.col), m.col(a.col)))
    }

    fn evaluate(&self, model: &Model, j: usize) -> Verdict {
        self.tester.evaluate(model, j, &self.chance(model))
    }

    /// Forward: accept the strongest passing candidate, explain it away,
    /// repeat. `last` keeps every candidate's latest verdict.
    fn forward(
        &self,
        mut accepted: Vec<Verdict>,
        remaining: &mut Vec<usize>,
        last: &mut HashMap<usize, Verdict>,
    ) -> Vec<Verdict> {
        let mut model = Model::empty(self.npairs());
        for a in &accepted {
            self.apply(&mut model, a);
        }
        loop {
            let chance = self.chance(&model);
            let mut best: Option<Verdict> = None;
            for &j in remaining.iter() {
                let mut v = self.tester.evaluate(&model, j, &chance);
                if v.passes && self.nested(&v, accepted.iter()) {
                    v.passes = false;
                }
                let v = self.or_refitted(v, accepted.iter());
                if v.passes && best.as_ref().is_none_or(|b| v.stat > b.stat) {
                    best = Some(v.clone());
                }
                last.insert(j, v);
            }
            let Some(b) = best else { break };
            let b = self.spine_without_faults_beneath(&model, b, remaining, last);
            let b = self.sub_component_first(&model, b, remaining, last);
            let mut b = self.rivals_first(&model, b, remaining, last);
            if b.ecmp {
                b.also = ecmp_siblings(&b, remaining, last);
            }
            remaining.retain(|&j| j != b.col && !b.also.contains(&j));
            self.apply(&mut model, &b);
            accepted.push(b);
        }
        accepted
    }

    /// Backward: a fault accepted early may have absorbed the evidence of
    /// faults accepted later (a spine over a faulty ToR, hit flows shared
    /// by two faults). Re-test each one given all the others; drop those
    /// that no longer pass, until every remaining one does. The final
    /// verdicts are these "given all others" ones. Returns (kept, dropped).
    fn backward(&self, mut accepted: Vec<Verdict>) -> (Vec<Verdict>, Vec<Verdict>) {
        let mut dropped: Vec<Verdict> = Vec::new();
        loop {
            let mut rechecked = Vec::with_capacity(accepted.len());
            let mut drop = None;
            for idx in (0..accepted.len()).rev() {
                let mut model = Model::empty(self.npairs());
                for (k, a) in accepted.iter().enumerate() {
                    if k != idx {
                        let v = self.evaluate(&model, a.col);
                        self.apply(&mut model, &v);
                    }
                }
                let mut v = self.evaluate(&model, accepted[idx].col);
                let others = || {
                    accepted
                        .iter()
                        .enumerate()
                        .filter(move |&(k, _)| k != idx)
                        .map(|(_, a)| a)
                };
                if v.passes && self.nested(&v, others()) {
                    v.passes = false;
                }
                let mut v = self.or_refitted(v, others());
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
                    return (rechecked.into_iter().map(|(_, v)| v).collect(), dropped);
                }
            }
        }
    }
}

/// The distinct pairs of `pairs`, sorted (for `binary_search`).
fn sorted_set(pairs: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut out: Vec<u32> = pairs.collect();
    out.sort_unstable();
    out.dedup();
    out
}
