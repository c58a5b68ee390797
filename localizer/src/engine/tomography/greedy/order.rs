//! Which passing candidate the greedy forward pass accepts first. The
//! strongest is not always the fault: a component may owe its statistic
//! to a sub-component's fault beneath it, to the faults beside it, or a
//! spine to a fault beneath it that stands on its own. Accepted first, it
//! would absorb their evidence at its own, pooled rate and leave them
//! short. Each rule here hands the turn to the component that explains
//! the evidence; the candidate is asked again once that one is accepted.

use super::{sorted_set, Greedy};
use crate::engine::stats::{chi_square_upper_tail, one_sided_lr_p_value};
use crate::engine::tomography::family::{Family, Model};
use crate::engine::tomography::hypothesis::{is_subset, nested_in, Verdict};
use skeletonhunter_common::topology::Kind;
use std::collections::HashMap;

impl<F: Family> Greedy<'_, F> {
    /// A component whose evidence one of its sub-components explains (a
    /// ToR over a gray container and a few noisy pairs: the container's
    /// losses make the ToR's statistic the larger one) must not be
    /// accepted first: explained away by the container, nothing of it
    /// would be left, yet accepted first it absorbs the container's loss
    /// at its own, lower rate and the container no longer passes. So the
    /// passing candidate `b` yields to its strongest passing
    /// sub-component (a non-spine column all of whose pairs are `b`'s)
    /// that explains it ([`Self::explained_by`]); repeated down the
    /// tree. A real fault of `b` shows on its other pairs too, and `b`
    /// stays first. The pairs a passing spine crosses are left out of
    /// that question ([`Self::explained_elsewhere`]).
    pub(super) fn sub_component_first(
        &self,
        model: &Model,
        mut b: Verdict,
        remaining: &[usize],
        last: &HashMap<usize, Verdict>,
    ) -> Verdict {
        let m = self.tester.m;
        // Each swap moves to a strictly smaller column: bounded by the depth.
        while !b.ecmp {
            let mut children: Vec<&Verdict> = remaining
                .iter()
                .filter_map(|j| last.get(j))
                .filter(|c| {
                    c.passes
                        && !c.ecmp
                        && m.columns[c.col].kind != Kind::Spine
                        && nested_in(m, c.col, b.col)
                })
                .collect();
            if children.is_empty() {
                break;
            }
            children.sort_by(|x, y| y.stat.total_cmp(&x.stat));
            let (rows, _) = self.tester.rows_and_hits(model, b.col);
            let elsewhere = self.explained_elsewhere(&b, remaining, last);
            let rows: Vec<u32> = rows
                .into_iter()
                .filter(|i| elsewhere.binary_search(i).is_err())
                .collect();
            let param = self.tester.family.fit(model, &rows).0;
            let explains = |c: &&Verdict| self.explained_by(model, &rows, param, c.col);
            match children.into_iter().find(explains) {
                Some(c) => b = c.clone(),
                None => break,
            }
        }
        b
    }

    /// [`Self::sub_component_first`] for the faults beside a candidate
    /// rather than beneath it: a ToR under a gray container (whose fourth
    /// pair, to its host's other rail, the ToR does not cross) and over
    /// the flows of a gray spine lost on 7 of its 13 pairs and on nothing
    /// else, and fitted over all of them it beat each of the two. So a
    /// passing whole-component candidate `b` whose hit pairs several
    /// passing candidates hold between them (not its sub-components, which
    /// yield as above, nor what contains it; a spine over it only is one of
    /// them), and which they explain ([`Self::explained_within`] on the
    /// pairs they cross, an ECMP fault's hit flows only), yields to the
    /// strongest of them.
    pub(super) fn rivals_first(
        &self,
        model: &Model,
        b: Verdict,
        remaining: &[usize],
        last: &HashMap<usize, Verdict>,
    ) -> Verdict {
        let m = self.tester.m;
        if b.ecmp || b.hit.is_empty() {
            return b;
        }
        let beside = |v: &Verdict| {
            (m.columns[v.col].kind == Kind::Spine || !nested_in(m, v.col, b.col))
                && !nested_in(m, b.col, v.col)
        };
        let rivals: Vec<&Verdict> = remaining
            .iter()
            .filter_map(|j| last.get(j))
            .filter(|v| v.passes && v.col != b.col && beside(v) && shares_hits(v, &b))
            .collect();
        if rivals.len() < 2 {
            return b;
        }
        let crossed = sorted_set(
            rivals
                .iter()
                .flat_map(|v| if v.ecmp { &v.hit[..] } else { m.col(v.col) })
                .copied(),
        );
        if b.hit.iter().any(|i| crossed.binary_search(i).is_err()) {
            return b;
        }
        let rows = self.tester.rows(model, b.col);
        let param = self.tester.family.fit(model, &rows).0;
        if !self.explained_within(model, &rows, param, &crossed) {
            return b;
        }
        rivals
            .into_iter()
            .max_by(|x, y| x.stat.total_cmp(&y.stat).then(y.col.cmp(&x.col)))
            .map_or(b, Verdict::clone)
    }

    /// Two spines share the cross-segment flows, and the one accepted
    /// first takes them. Its hit flows may owe their weight to a fault
    /// beneath it that stands on its own: a lossy NIC's flows through its
    /// spine lifted that spine above the spine that was the fault, which,
    /// left with a few pairs, no longer passed (a NIC at 27 % beside a
    /// spine at 10 % over two segments paged the NIC's spine). So spine
    /// `b` and each passing spine sharing hit flows with it are compared
    /// on their hit flows away from every passing non-spine candidate
    /// that shares them and holds on its pairs away from these spines
    /// ([`Self::holds`]: a ToR under the faulty spine does not; asked
    /// smallest first, [`Self::claimed_beneath`]); the
    /// stronger is accepted, or a rival nested in `b` that every one of
    /// `b`'s flows so compared crosses (a container's pair under the
    /// large spine gave it the edge over the small spine all of whose
    /// flows dropped). Which component beneath goes first is left as it
    /// was.
    pub(super) fn spine_without_faults_beneath(
        &self,
        model: &Model,
        b: Verdict,
        remaining: &[usize],
        last: &HashMap<usize, Verdict>,
    ) -> Verdict {
        let t = self.tester;
        if t.m.columns[b.col].kind != Kind::Spine {
            return b;
        }
        let shares = |v: &Verdict| shares_hits(v, &b);
        let candidates = || remaining.iter().filter_map(|j| last.get(j));
        let rivals: Vec<&Verdict> = candidates()
            .filter(|v| {
                v.passes && v.col != b.col && t.m.columns[v.col].kind == Kind::Spine && shares(v)
            })
            .collect();
        if rivals.is_empty() {
            return b;
        }
        let spines = sorted_set(
            std::iter::once(&b)
                .chain(rivals.iter().copied())
                .flat_map(|v| t.m.col(v.col).iter().copied()),
        );
        let beneath = self.claimed_beneath(
            model,
            candidates()
                .filter(|c| c.passes && t.m.columns[c.col].kind != Kind::Spine && shares(c))
                .map(|c| {
                    let away: Vec<u32> = t
                        .rows(model, c.col)
                        .into_iter()
                        .filter(|i| spines.binary_search(i).is_err())
                        .collect();
                    (c.col, away)
                }),
        );
        if beneath.is_empty() {
            return b;
        }
        let away = |v: &Verdict| -> Vec<u32> {
            v.hit
                .iter()
                .copied()
                .filter(|i| beneath.binary_search(i).is_err())
                .collect()
        };
        let own_hits = away(&b);
        let own = t.family.fit(model, &own_hits).1;
        // On the same flows, a smaller spine inside `b` that all of them
        // cross explains them with every flow of its own hit, where `b`
        // would be a fault of some of its flows only.
        let nested_over_the_same_flows =
            |v: &Verdict| nested_in(t.m, v.col, b.col) && is_subset(&own_hits, &v.hit);
        rivals
            .into_iter()
            .map(|v| (t.family.fit(model, &away(v)).1, v))
            .filter(|(stat, v)| *stat > own || nested_over_the_same_flows(v))
            .max_by(|x, y| x.0.total_cmp(&y.0).then(y.1.col.cmp(&x.1.col)))
            .map_or(b, |(_, v)| v.clone())
    }

    /// The pairs of the faults beneath a spine, of `cols` (each with its
    /// pairs away from the spines): those that hold on such pairs not
    /// already claimed, asked smallest first (then strongest). A neighbour
    /// of a lossy container, and the container's ToR, hold away from the
    /// spines only on the container's pairs: claimed by the container,
    /// their own cross-ToR flows stay the spine's evidence (a NIC losing
    /// 25 % under one ToR took the flows of a spine losing 11 % with its
    /// ToR, and two spines beside it were paged).
    fn claimed_beneath(
        &self,
        model: &Model,
        cols: impl Iterator<Item = (usize, Vec<u32>)>,
    ) -> Vec<u32> {
        let t = self.tester;
        let mut order: Vec<(usize, Vec<u32>, (f64, f64))> = cols
            .map(|(c, away)| {
                let fit = t.family.fit(model, &away);
                (c, away, fit)
            })
            .collect();
        order.sort_by(|(xc, xa, (_, xs)), (yc, ya, (_, ys))| {
            xa.len()
                .cmp(&ya.len())
                .then(ys.total_cmp(xs))
                .then(xc.cmp(yc))
        });
        let mut beneath: Vec<u32> = Vec::new();
        for (c, away, fit) in order {
            let rest: Vec<u32> = away
                .iter()
                .copied()
                .filter(|i| beneath.binary_search(i).is_err())
                .collect();
            // Nothing of it claimed yet: its fit is the one it was ranked by.
            let fit = if rest.len() == away.len() {
                fit
            } else {
                t.family.fit(model, &rest)
            };
            if self.holds(model, &rest, fit) {
                beneath = sorted_set(beneath.into_iter().chain(t.m.col(c).iter().copied()));
            }
        }
        beneath
    }

    /// The pairs of candidate `b` that a passing spine candidate crosses,
    /// sorted: that spine, tested on its own, explains them as well as
    /// `b` does. A ToR over a lossy container and beside a lossy spine
    /// loses on its cross-ToR pairs through the spine and on its same-ToR
    /// pairs through the container, and is neither; its rate fitted over
    /// all its pairs is the spine's, which the container's pairs do not
    /// exceed. (A spine above a faulty ToR passes too, but then the ToR's
    /// same-ToR pairs still show it.)
    fn explained_elsewhere(
        &self,
        b: &Verdict,
        remaining: &[usize],
        last: &HashMap<usize, Verdict>,
    ) -> Vec<u32> {
        let m = self.tester.m;
        sorted_set(
            remaining
                .iter()
                .filter_map(|j| last.get(j))
                .filter(|v| v.passes && v.col != b.col && m.columns[v.col].kind == Kind::Spine)
                .flat_map(|v| m.col(v.col).iter().copied()),
        )
    }

    /// Whether sub-component `c` explains the evidence of a candidate whose
    /// usable pairs are `rows`, fitted at `param` over all of them: those of
    /// its pairs that do not cross `c` show no fault worth reporting of their
    /// own (at `alpha`, by an effect [`Family::big_enough`], not a few noisy
    /// pairs: see [`Greedy::not_noise`]), and `c`'s pairs do not fit `param`
    /// either: they show more, beyond chance (`coverage_alpha`; alone, or
    /// with the other pairs showing less, two degrees of freedom: three pairs
    /// of a gray container are few, and its host's quiet other NIC says as
    /// much as they do). A gray ToR's rate
    /// fitted over a lossy container's pairs and a few noisy ones fits neither;
    /// a gray NIC's, whose one container happened to lose a little more, fits
    /// both. Pairs away from `c` that lost their probes in a burst of their
    /// own are no evidence of the candidate ([`Family::burst`]): a blip on
    /// two pairs of a host's other container kept a gray container's host
    /// from yielding to it.
    fn explained_by(&self, model: &Model, rows: &[u32], param: f64, c: usize) -> bool {
        self.explained_within(model, rows, param, self.tester.m.col(c))
    }

    /// [`Self::explained_by`] with the pairs `crossed` (sorted) in the
    /// place of one sub-component's.
    fn explained_within(&self, model: &Model, rows: &[u32], param: f64, crossed: &[u32]) -> bool {
        let t = self.tester;
        let f = t.family;
        let (inside, away): (Vec<u32>, Vec<u32>) =
            rows.iter().partition(|i| crossed.binary_search(i).is_ok());
        // A pair that lost its probes in a burst of its own (a blip) is
        // no evidence of the component over it.
        let rest: Vec<u32> = away
            .iter()
            .copied()
            .filter(|&i| !f.burst(model, &[i]))
            .collect();
        if rest.is_empty() {
            return !away.is_empty();
        }
        let fit = f.fit(model, &rest);
        let own = fit.0;
        if self.holds(model, &rest, fit) || f.fit(model, &inside).0 <= param {
            return false;
        }
        let alpha = t.config.coverage_alpha;
        let inside_gap = f.gap(model, &inside, param);
        if one_sided_lr_p_value(inside_gap) < alpha {
            return true;
        }
        // The other pairs losing less than `param` count against it too:
        // both sides of the question, two degrees of freedom.
        let rest_gap = if own < param {
            f.gap(model, &rest, param)
        } else {
            0.0
        };
        chi_square_upper_tail(inside_gap + rest_gap, 2.0) < alpha
    }

    /// Whether `rest` (a candidate's pairs away from some of its own),
    /// fitted as `(own, stat)`, shows a fault of its own: at `alpha`, by
    /// an effect worth reporting ([`Family::big_enough`]), more than a few
    /// noisy pairs ([`Self::not_noise`]).
    fn holds(&self, model: &Model, rest: &[u32], (own, stat): (f64, f64)) -> bool {
        !rest.is_empty()
            && one_sided_lr_p_value(stat) < self.tester.config.alpha
            && self.tester.family.big_enough(rest, own)
            && self.not_noise(model, rest)
    }

    /// Whether the evidence of `rest` (a candidate's pairs away from one
    /// of its sub-components) is more than a few noisy pairs: at least half
    /// of them show the symptom, or it survives dropping the strongest
    /// ([`Tester::robust`]). One noisy pair among a host's other NIC's quiet
    /// ones is not the host. A ToR's few same-rack pairs away from one node,
    /// losing unevenly as they do at a fault's onset or escalation in a
    /// sliding window (each exporter scraped at its own time), are still
    /// the ToR; without the half, its nodes took the verdict in 20–56 % of
    /// such windows and the online loop resolved a standing ToR alert.
    fn not_noise(&self, model: &Model, rest: &[u32]) -> bool {
        let t = self.tester;
        let hits = t.hits(model, rest);
        hits.len() * 2 >= rest.len() || t.robust(model, rest, &hits)
    }
}

/// Whether verdict `v` shares a hit pair with `b` (both sorted).
fn shares_hits(v: &Verdict, b: &Verdict) -> bool {
    v.hit.iter().any(|i| b.hit.binary_search(i).is_ok())
}
