//! A spine asked again given faults whose rates were fitted away from its
//! flows. A ToR losing 23 % beneath a spine losing 21 % on the flows
//! through it, on a small fabric where every flow of that spine crosses
//! the ToR: accepted first, the ToR takes the rate of all its pairs
//! (30 %), the spine's flows (39 %) among them, and those flows are left
//! too little above it to pass; the spine, nested in the ToR, is not even
//! asked (see the module docs of `greedy`). Fitted on its other pairs,
//! the ToR's rate is its own (24 %), and the spine stands out.
//!
//! Only where both sides agree on one rate each. A ToR whose loss grows
//! during the window (some sources read later than others) leaves each
//! source's pairs at its own rate: its flows through the spine may lose
//! more than the rest, but neither group is one rate, and that is one
//! growing fault, not two.

use super::{Greedy, UNIFORM_DISPERSION};
use crate::engine::tomography::family::{Family, Model};
use crate::engine::tomography::hypothesis::Verdict;
use skeletonhunter_common::topology::Kind;

impl<F: Family> Greedy<'_, F> {
    /// `v` if it passes; else, for a spine, its verdict given `others`
    /// refitted away from its pairs ([`Self::spine_refitted`]) when that
    /// one passes.
    pub(super) fn or_refitted<'v>(
        &self,
        v: Verdict,
        others: impl Iterator<Item = &'v Verdict>,
    ) -> Verdict {
        if v.passes {
            return v;
        }
        match self.spine_refitted(others, v.col) {
            Some(r) if r.passes => r,
            _ => v,
        }
    }

    /// Spine candidate `j`'s verdict given the faults `others`, each
    /// whole-component one fitted again on its pairs away from `j`'s when
    /// both those and the pairs it shares with `j` agree on one rate;
    /// `None` when no fault was so refitted (the model would be the one
    /// `j` was already asked under).
    fn spine_refitted<'v>(
        &self,
        others: impl Iterator<Item = &'v Verdict>,
        j: usize,
    ) -> Option<Verdict> {
        let t = self.tester;
        let f = t.family;
        if t.m.columns[j].kind != Kind::Spine {
            return None;
        }
        let mine = t.m.col(j);
        let mut model = Model::empty(self.npairs());
        let mut refitted = false;
        for a in others {
            match self.rate_away(&model, a, mine) {
                Some(own) => {
                    refitted = true;
                    self.add_effect(&mut model, a.col, f.effect(own));
                }
                None => self.apply(&mut model, a),
            }
        }
        refitted.then(|| self.evaluate(&model, j))
    }

    /// Accepted fault `a`'s rate (model parameter) fitted on its usable
    /// pairs away from `mine` (a spine's, sorted), when `a` is a whole
    /// component sharing pairs with the spine and keeping some of its own,
    /// and each side agrees on one rate; else `None`.
    fn rate_away(&self, model: &Model, a: &Verdict, mine: &[u32]) -> Option<f64> {
        let t = self.tester;
        let f = t.family;
        if a.ecmp || t.m.columns[a.col].kind == Kind::Spine {
            return None;
        }
        let (away, shared): (Vec<u32>, Vec<u32>) = t
            .rows(model, a.col)
            .into_iter()
            .partition(|i| mine.binary_search(i).is_err());
        if shared.is_empty() || away.is_empty() {
            return None;
        }
        let uniform = |rows: &[u32], q: f64| {
            let df = (rows.len() as f64 - 1.0).max(1.0);
            f.heterogeneity(model, rows, q) <= UNIFORM_DISPERSION * df
        };
        let own = f.fit(model, &away).0;
        (uniform(&away, own) && uniform(&shared, f.fit(model, &shared).0)).then_some(own)
    }
}
