//! One candidate layout of a job's ranks on a TP × DP × PP grid, and which
//! connections it predicts: the model `infer` scores against the skeleton.
//!
//! Pure arithmetic on rank numbers, so a candidate is tested on an edge
//! without building its edge set: scoring a 4,096-rank job against every
//! candidate stays within milliseconds.

use serde::Serialize;

/// How global ranks map onto the grid: TP always varies fastest (its group
/// shares a host), then either DP or PP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// TP, then DP, then PP (Megatron-LM's default).
    TpDpPp,
    /// TP, then PP, then DP.
    TpPpDp,
}

/// How a TP group talks across the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TpShape {
    /// Not at all: inside one host over NVLink, invisible to the network.
    Hidden,
    /// A ring in rank order.
    Ring,
    /// Every pair.
    Clique,
}

/// How a DP group talks: NCCL's rings, trees, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DpShape {
    /// A ring in group order.
    Ring,
    /// A binary tree in group order (member k's parent is (k-1)/2).
    Tree,
    /// Both.
    RingTree,
}

/// The three kinds of communication group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Tensor parallel.
    Tp,
    /// Data parallel.
    Dp,
    /// Pipeline parallel (consecutive stages talk).
    Pp,
}

/// One candidate: the grid, the rank order and the groups' shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// How global ranks map onto the grid.
    pub order: Order,
    /// How a TP group talks.
    pub tp_shape: TpShape,
    /// How a DP group talks.
    pub dp_shape: DpShape,
}

/// A rank's place: (tp, dp, pp) coordinates.
type Coord = (u32, u32, u32);

impl Layout {
    /// The rank's coordinates.
    pub fn coord(&self, r: u32) -> Coord {
        let t = r % self.tp;
        let rest = r / self.tp;
        match self.order {
            Order::TpDpPp => (t, rest % self.dp, rest / self.dp),
            Order::TpPpDp => (t, rest / self.pp, rest % self.pp),
        }
    }

    /// The partition this layout stands for: layouts with the same key
    /// give the same groups (the order does not matter when DP or PP is 1).
    pub fn partition_key(&self) -> (u32, u32, u32, Order) {
        let order = if self.dp == 1 || self.pp == 1 {
            Order::TpDpPp
        } else {
            self.order
        };
        (self.tp, self.dp, self.pp, order)
    }

    /// Which group's connection the edge (a, b) is under this layout, if
    /// the layout predicts it.
    pub fn predicts(&self, a: u32, b: u32) -> Option<GroupKind> {
        let ((ta, da, pa), (tb, db, pb)) = (self.coord(a), self.coord(b));
        if da == db && pa == pb && ta != tb {
            let ok = match self.tp_shape {
                TpShape::Hidden => false,
                TpShape::Ring => ring(ta, tb, self.tp),
                TpShape::Clique => true,
            };
            return ok.then_some(GroupKind::Tp);
        }
        if ta == tb && pa == pb && da != db {
            let ok = match self.dp_shape {
                DpShape::Ring => ring(da, db, self.dp),
                DpShape::Tree => tree(da, db),
                DpShape::RingTree => ring(da, db, self.dp) || tree(da, db),
            };
            return ok.then_some(GroupKind::Dp);
        }
        (ta == tb && da == db && pa.abs_diff(pb) == 1).then_some(GroupKind::Pp)
    }

    /// How many distinct connections the layout predicts in all.
    pub fn expected(&self) -> u64 {
        let tp_each = match self.tp_shape {
            TpShape::Hidden => 0,
            TpShape::Ring => count(self.tp, |i, j| ring(i, j, self.tp)),
            TpShape::Clique => u64::from(self.tp) * u64::from(self.tp - 1) / 2,
        };
        let dp_each = match self.dp_shape {
            DpShape::Ring => count(self.dp, |i, j| ring(i, j, self.dp)),
            DpShape::Tree => u64::from(self.dp - 1),
            DpShape::RingTree => count(self.dp, |i, j| ring(i, j, self.dp) || tree(i, j)),
        };
        let (tp, dp, pp) = (u64::from(self.tp), u64::from(self.dp), u64::from(self.pp));
        dp * pp * tp_each + tp * pp * dp_each + tp * dp * (pp - 1)
    }

    /// The group of each kind a rank belongs to (an id per kind).
    pub fn group_of(&self, r: u32, kind: GroupKind) -> u32 {
        let (t, d, p) = self.coord(r);
        match kind {
            GroupKind::Tp => d + p * self.dp,
            GroupKind::Dp => t + p * self.tp,
            GroupKind::Pp => t + d * self.tp,
        }
    }
}

/// Neighbours on a ring of `n` in index order.
fn ring(i: u32, j: u32, n: u32) -> bool {
    let (lo, hi) = (i.min(j), i.max(j));
    hi - lo == 1 || (n > 2 && lo == 0 && hi == n - 1)
}

/// Parent and child in a binary tree laid out in index order.
fn tree(i: u32, j: u32) -> bool {
    let (lo, hi) = (i.min(j), i.max(j));
    hi >= 1 && lo == (hi - 1) / 2
}

/// Pairs among `n` members that `rel` relates: O(n) for the shapes above
/// (only neighbours and parents can relate), checked over those.
fn count(n: u32, rel: impl Fn(u32, u32) -> bool) -> u64 {
    let mut c = 0;
    for hi in 1..n {
        let mut cands = vec![hi - 1, (hi - 1) / 2];
        if hi == n - 1 {
            cands.push(0);
        }
        cands.sort_unstable();
        cands.dedup();
        c += cands.iter().filter(|&&lo| lo < hi && rel(lo, hi)).count() as u64;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(tp: u32, dp: u32, pp: u32, order: Order) -> Layout {
        Layout {
            tp,
            dp,
            pp,
            order,
            tp_shape: TpShape::Ring,
            dp_shape: DpShape::Ring,
        }
    }

    #[test]
    fn coordinates_follow_the_order() {
        let l = layout(2, 3, 4, Order::TpDpPp);
        assert_eq!(l.coord(0), (0, 0, 0));
        assert_eq!(l.coord(3), (1, 1, 0));
        assert_eq!(l.coord(6), (0, 0, 1));
        let l = layout(2, 3, 4, Order::TpPpDp);
        assert_eq!(l.coord(3), (1, 0, 1));
        assert_eq!(l.coord(8), (0, 1, 0));
    }

    #[test]
    fn expected_counts_match_the_predictions() {
        for (tp, dp, pp) in [
            (1, 8, 1),
            (2, 3, 4),
            (4, 2, 2),
            (8, 16, 4),
            (1, 1, 5),
            (3, 1, 1),
        ] {
            for order in [Order::TpDpPp, Order::TpPpDp] {
                for tp_shape in [TpShape::Hidden, TpShape::Ring, TpShape::Clique] {
                    for dp_shape in [DpShape::Ring, DpShape::Tree, DpShape::RingTree] {
                        let l = Layout {
                            tp,
                            dp,
                            pp,
                            order,
                            tp_shape,
                            dp_shape,
                        };
                        let n = tp * dp * pp;
                        let mut seen = 0;
                        for a in 0..n {
                            for b in a + 1..n {
                                seen += u64::from(l.predicts(a, b).is_some());
                            }
                        }
                        assert_eq!(seen, l.expected(), "{l:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn groups_partition_the_ranks_by_the_other_coordinates() {
        let l = layout(2, 2, 2, Order::TpDpPp);
        // Ranks 0,1 share DP and PP coordinates: one TP group.
        assert_eq!(l.group_of(0, GroupKind::Tp), l.group_of(1, GroupKind::Tp));
        assert_ne!(l.group_of(0, GroupKind::Tp), l.group_of(2, GroupKind::Tp));
        // 0 and 2 differ in DP only: one DP group; 0 and 4 in PP only.
        assert_eq!(l.group_of(0, GroupKind::Dp), l.group_of(2, GroupKind::Dp));
        assert_eq!(l.group_of(0, GroupKind::Pp), l.group_of(4, GroupKind::Pp));
        assert_eq!(l.predicts(0, 4), Some(GroupKind::Pp));
        assert_eq!(l.predicts(0, 3), None);
    }
}
