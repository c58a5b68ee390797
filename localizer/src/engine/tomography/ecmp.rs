//! The ECMP rule of a spine candidate: a spine's fault may hit only some of
//! its flows (one bad member link or line card), so coverage cannot ask all
//! its pairs to show it. Instead its hit flows must be more than chance
//! makes elsewhere in the fabric ([`Chance`], floored where the window is
//! too small to measure it), and no smaller spine crossing its hit flows may
//! hold those hits as well.

use super::family::{Family, Model};
use super::hypothesis::{Chance, Tester, Verdict, SIZE_SHARE};
use crate::engine::stats::{binomial_upper_tail, median};
use skeletonhunter_common::topology::Kind;

impl<F: Family> Tester<'_, F> {
    /// ECMP rule: the candidate's share of pairs showing the symptom
    /// against the share elsewhere. Ranks by the evidence on the flows it
    /// hits: two spines share the cross-block pairs, and the culprit is the
    /// one whose hit flows carry more evidence, not the one with fewer
    /// healthy flows.
    pub(super) fn ecmp_test(
        &self,
        model: &Model,
        chance: &Chance,
        (rows, param_all): (&[u32], f64),
        hit: &[u32],
        v: &mut Verdict,
    ) {
        let (f, config) = (self.family, self.config);
        let (n_pairs, m_hit) = (rows.len() as f64, hit.len() as f64);
        let (strong, null, p_count) = self.count(model, chance, rows, hit);
        let (param_hit, stat_hit) = f.fit(model, hit);
        v.stat = stat_hit;
        v.p_value = v.p_value.max(p_count);
        v.score = f.score(hit, param_hit);
        // The share of its flows hit: of the pairs that its rate over all
        // of them, on every flow, would make show it (a gray 2% spine
        // shows on 7% of its pairs of 90 probes, all its flows hit).
        let full: f64 = rows
            .iter()
            .map(|&i| f.p_hit(model, i as usize, param_all))
            .sum();
        v.passes = p_count < self.ecmp_level
            && m_hit >= config.ecmp_min_fraction * full.min(n_pairs)
            && f.big_enough(hit, param_hit)
            && self.no_smaller_spine_holds_the_hits(model, chance, v.col, (rows, &strong), null);
    }

    /// The ECMP count of a spine's `rows` with `hit` showing the symptom:
    /// its strong hit flows (an effect of at least [`SIZE_SHARE`] of the
    /// hits' median, not lost in a burst), the chance of such a flow
    /// elsewhere, and the binomial p-value of the strong count against it.
    /// A bad member loses on its flows all along; three flows of a small
    /// fabric's spine that each lost three probes in the one round of a
    /// blip (a moment when unrelated pairs lose a few together) were paged
    /// as a partial fault ([`Family::burst`] on each flow).
    fn count(
        &self,
        model: &Model,
        chance: &Chance,
        rows: &[u32],
        hit: &[u32],
    ) -> (Vec<u32>, f64, f64) {
        let f = self.family;
        let own: Vec<f64> = hit.iter().map(|&i| f.fit(model, &[i]).0).collect();
        let size = SIZE_SHARE * median(&mut own.clone());
        let strong: Vec<u32> = hit
            .iter()
            .zip(&own)
            .filter(|&(&i, &s)| s >= size && !f.burst(model, &[i]))
            .map(|(&i, _)| i)
            .collect();
        let n = rows.len() as f64;
        let null = chance.outside(strong.len() as f64, n, size, self.floor(model, &strong));
        let p_count = binomial_upper_tail(strong.len() as f64, n, null);
        (strong, null, p_count)
    }

    /// The least odds of a strong flow elsewhere the count assumes: the
    /// per-pair test's level (`coverage_alpha`), or the family-wise one
    /// (`alpha`) when each strong flow is beyond chance at the candidates'
    /// level on its own ([`Tester::stands_alone`]) and the family says
    /// such flows are that rare ([`Family::lone_flows_are_rare`]). Two
    /// flows of a small fabric's spine +140 µs slow, of its eight, with no
    /// pair elsewhere near that, were read against 1 % odds each and
    /// missed.
    fn floor(&self, model: &Model, strong: &[u32]) -> f64 {
        if self.family.lone_flows_are_rare()
            && strong.len() >= self.config.min_pairs
            && strong.iter().all(|&i| self.stands_alone(model, i))
        {
            self.config.alpha
        } else {
            self.config.coverage_alpha
        }
    }

    /// Whether spine column `c`'s own ECMP count passes.
    fn count_passes(&self, model: &Model, chance: &Chance, c: usize) -> bool {
        let (rows, hit) = self.rows_and_hits(model, c);
        hit.len() >= self.config.min_pairs
            && self.count(model, chance, &rows, &hit).2 < self.ecmp_level
    }

    /// A spine crossed by every cross-block pair also crosses each pair of a
    /// smaller spine beside it. When the hit flows sit under the smaller
    /// one, "the large spine, on some of its flows" and "the small spine"
    /// fit the same pairs, and the large one's hit flows carry more
    /// evidence (its few noisy pairs elsewhere add to them). A partial
    /// fault of the large spine hits its flows wherever they go; so it
    /// must show on its pairs outside every smaller spine (fewer flows)
    /// crossing one of its strong hits, significantly (`alpha`) above the
    /// chance `null` of the count. The smaller one need not lie inside it:
    /// flows between the two are a larger share of the smaller one's, and
    /// a bad member link that hit only them is likelier there (a spine
    /// over one ToR dropping on its flows to the large block's ToRs only
    /// was paged as that block).
    /// Unless the smaller spine passes no count of its own and a strong
    /// hit lies outside it: then it holds only some of the hits, and the
    /// large spine, which holds them all, is no longer its rival (three
    /// dead flows of a spine's nine in a small fabric, two of them under
    /// a smaller spine, went unreported). Nor is it when a strong hit
    /// outside it is beyond chance on its own and nothing else on its path
    /// passes ([`Self::unexplained_but_by`]): the smaller spine would
    /// leave it unexplained (four flows of 35
    /// losing 6–13 %, three of them under a smaller spine, paged the
    /// smaller one).
    fn no_smaller_spine_holds_the_hits(
        &self,
        model: &Model,
        chance: &Chance,
        j: usize,
        (rows, strong): (&[u32], &[u32]),
        null: f64,
    ) -> bool {
        let m = self.m;
        let mut spines: Vec<u32> = strong
            .iter()
            .flat_map(|&i| m.row(i as usize).iter().copied())
            .filter(|&c| c as usize != j && m.columns[c as usize].kind == Kind::Spine)
            .collect();
        spines.sort_unstable();
        spines.dedup();
        let mut smaller = spines
            .into_iter()
            .filter(|&c| m.col(c as usize).len() < m.col(j).len());
        smaller.all(|c| {
            let crossed = m.col(c as usize);
            let outside = |i: &&u32| crossed.binary_search(i).is_err();
            let n = rows.iter().filter(outside).count() as f64;
            let k = strong.iter().filter(outside).count() as f64;
            binomial_upper_tail(k, n, null) < self.config.alpha
                || (k >= 1.0 && !self.count_passes(model, chance, c as usize))
                || {
                    // The story with the smaller spine: its strong hits
                    // are its, and what else passes must pass without them.
                    let mut with_c = model.clone();
                    for &i in strong.iter().filter(|i| !outside(i)) {
                        with_c.explained[i as usize] = true;
                    }
                    strong
                        .iter()
                        .filter(outside)
                        .any(|&i| self.unexplained_but_by(&with_c, chance, i, j))
                }
        })
    }

    /// Whether pair `i` shows the symptom at the family-wise level on its
    /// own (no noisy pair does) and no component on its path but spine `j`
    /// passes as a fault of its own: then only `j` explains it, and a
    /// story without `j` needs a fault that shows on one pair, which is
    /// never reported. A gray NIC's pair outside the nested spine is
    /// explained by the NIC; a node whose other hit pairs the nested
    /// spine takes is not (`model` counts them explained).
    fn unexplained_but_by(&self, model: &Model, chance: &Chance, i: u32, j: usize) -> bool {
        self.stands_alone(model, i)
            && self.m.row(i as usize).iter().all(|&c| {
                let c = c as usize;
                c == j
                    || self.m.columns[c].kind == Kind::Spine
                    || !self.evaluate(model, c, chance).passes
            })
    }
}
