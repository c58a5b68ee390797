//! The counts of a layout when the skeleton is seen between containers
//! (blocks of consecutive ranks), not between ranks.
//!
//! Online, a connection is known by the two containers it joins, not by
//! the workers inside them that hold it: a container of 8 workers is one
//! end for all of them. A layout then predicts a *container pair* when any
//! of its groups joins a rank of one to a rank of the other, and two kinds
//! of group may predict the same pair, so the per-kind counts of
//! [`super::Tally`] do not add up. Here each predicted pair carries a mask
//! of the (kind, shape) choices that predict it, and [`BlockTally::counts`]
//! counts a shape combination by those masks, each pair once (given to the
//! first kind, TP, DP, PP, that predicts it).

use super::{Grid, GroupKind, Shape, SHAPES};
use std::collections::HashMap;

/// The bit of shape `s` of kind `k` in a mask.
fn bit(k: usize, s: usize) -> Mask {
    let offset: usize = SHAPES[..k].iter().map(|shapes| shapes.len()).sum();
    1 << (offset + s)
}

/// One bit per (kind, shape): every kind's shapes fit in it.
type Mask = u32;
const _: () = assert!(SHAPES[0].len() + SHAPES[1].len() + SHAPES[2].len() <= Mask::BITS as usize);

/// Predicted and observed container pairs of one grid, grouped by which
/// (kind, shape) choices predict them.
#[derive(Debug, Clone, Default)]
pub struct BlockTally {
    /// (mask, predicted pairs with that mask).
    predicted: Vec<(Mask, u64)>,
    /// (mask, observed pairs with that mask; 0: predicted by nothing).
    observed: Vec<(Mask, u64)>,
}

/// Counts of one shape combination: per kind (TP, DP, PP), the pairs it
/// predicts and the observed ones among them, each pair counted once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockCounts {
    /// Observed and predicted.
    pub hits: [u64; 3],
    /// Predicted.
    pub expected: [u64; 3],
}

impl BlockTally {
    /// The counts when the kinds talk in shapes `combo` (indices into
    /// [`SHAPES`]).
    pub fn counts(&self, combo: [usize; 3]) -> BlockCounts {
        let first = |mask: Mask| (0..3).find(|&k| mask & bit(k, combo[k]) != 0);
        let mut c = BlockCounts::default();
        for &(mask, n) in &self.predicted {
            if let Some(k) = first(mask) {
                c.expected[k] += n;
            }
        }
        for &(mask, n) in &self.observed {
            if let Some(k) = first(mask) {
                c.hits[k] += n;
            }
        }
        c
    }
}

/// Histogram of masks.
fn histogram(masks: impl Iterator<Item = Mask>) -> Vec<(Mask, u64)> {
    let mut h: HashMap<Mask, u64> = HashMap::new();
    masks.for_each(|m| *h.entry(m).or_default() += 1);
    let mut out: Vec<(Mask, u64)> = h.into_iter().collect();
    out.sort_unstable();
    out
}

impl Grid {
    /// The container pairs this grid's groups join, with the (kind,
    /// shape) mask of each, when each container holds `per` consecutive
    /// ranks; `pairs` (container indices, lower first, distinct) are the
    /// observed ones. Pairs inside one container are not on the network.
    pub fn block_tally(&self, per: u32, pairs: &[(u32, u32)]) -> BlockTally {
        let per = per.max(1);
        let mut masks: HashMap<(u32, u32), Mask> = HashMap::new();
        self.each_candidate(|r, o, k, i, j, d| {
            let (x, y) = (r / per, o / per);
            if x == y {
                return;
            }
            let m = Shape::all_links(SHAPES[k], i, j, d) << bit(k, 0).trailing_zeros();
            if m != 0 {
                *masks.entry((x.min(y), x.max(y))).or_default() |= m;
            }
        });
        let observed = histogram(pairs.iter().map(|p| masks.get(p).copied().unwrap_or(0)));
        BlockTally {
            predicted: histogram(masks.into_values()),
            observed,
        }
    }

    /// Its groups of each kind (TP, DP, PP) as the sets of containers of
    /// `per` consecutive ranks their members are in, sorted, leaving out
    /// those inside one container: what a skeleton between containers can
    /// tell of them.
    pub fn block_groups(&self, per: u32) -> [Vec<Vec<u32>>; 3] {
        let per = per.max(1);
        let n = self.tp * self.dp * self.pp;
        [GroupKind::Tp, GroupKind::Dp, GroupKind::Pp].map(|kind| {
            let mut sets: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
            for r in 0..n {
                let set = &mut sets[self.group_of(r, kind) as usize];
                if set.last() != Some(&(r / per)) {
                    set.push(r / per);
                }
            }
            let mut sets: Vec<Vec<u32>> = sets
                .into_iter()
                .map(|mut s| {
                    s.sort_unstable();
                    s.dedup();
                    s
                })
                .filter(|s| s.len() > 1)
                .collect();
            sets.sort_unstable();
            sets.dedup();
            sets
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Order, Shape};
    use super::*;

    /// Every container pair counted the slow way (does any rank of one
    /// share a group with a rank of the other, in the combination's
    /// shapes) against the tally.
    #[test]
    fn the_block_counts_are_what_the_shapes_predict() {
        for (tp, dp, pp, per) in [(2, 4, 3, 2), (8, 4, 2, 8), (1, 12, 2, 4), (4, 3, 1, 8)] {
            for order in [Order::TpDpPp, Order::TpPpDp] {
                let g = Grid::new(tp, dp, pp, order, Some(per));
                let n = tp * dp * pp;
                let blocks = n.div_ceil(per);
                // Observe every other container pair.
                let observed: Vec<(u32, u32)> = (0..blocks)
                    .flat_map(|a| (a + 1..blocks).map(move |b| (a, b)))
                    .step_by(2)
                    .collect();
                let t = g.block_tally(per, &observed);
                let len = |k: usize| 0..SHAPES[k].len();
                let combos =
                    len(0).flat_map(|a| len(1).flat_map(move |b| len(2).map(move |c| [a, b, c])));
                for combo in combos {
                    let shapes: [Shape; 3] = [0, 1, 2].map(|k| SHAPES[k][combo[k]]);
                    let joined = |x: u32, y: u32| {
                        (x * per..(x + 1) * per).any(|p| {
                            (y * per..(y + 1) * per)
                                .any(|q| p < n && q < n && links(&g, shapes, p, q))
                        })
                    };
                    let want: u64 = (0..blocks)
                        .flat_map(|x| (x + 1..blocks).map(move |y| (x, y)))
                        .filter(|&(x, y)| joined(x, y))
                        .count() as u64;
                    let hit = observed.iter().filter(|&&(x, y)| joined(x, y)).count();
                    let got = t.counts(combo);
                    let label = format!("{g:?} {shapes:?}");
                    assert_eq!(got.expected.iter().sum::<u64>(), want, "{label}");
                    assert_eq!(got.hits.iter().sum::<u64>(), hit as u64, "{label}");
                }
            }
        }
    }

    #[test]
    fn block_groups_are_the_containers_of_each_group() {
        // TP 2 × DP 4 × PP 2, containers of 4: a DP group (ranks t, t+2,
        // t+4, t+6 of a stage) spans containers 0 and 1, a pipeline joins
        // containers c and c+2, TP stays inside one.
        let g = Grid::new(2, 4, 2, Order::TpDpPp, Some(4));
        let [tp, dp, pp] = g.block_groups(4);
        assert!(tp.is_empty());
        assert_eq!(dp, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(pp, vec![vec![0, 2], vec![1, 3]]);
    }

    /// Whether ranks `p` and `q` share a group that links them in
    /// `shapes`, ignoring hosts (the tally's containers stand for them).
    fn links(g: &Grid, shapes: [Shape; 3], p: u32, q: u32) -> bool {
        g.shared(p.min(q), p.max(q))
            .is_some_and(|(k, i, j)| shapes[k].links(i, j, g.dims(k)))
    }
}
