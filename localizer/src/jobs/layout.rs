//! Candidate layouts of a job's ranks on a TP × DP × PP grid, and how well
//! each explains the observed skeleton.
//!
//! A [`Grid`] places the ranks (the degrees, the rank order, the GPUs per
//! host); connections between GPUs of one host go over NVLink and never show
//! on the network. Each kind of group talks in one of a few shapes (NCCL
//! rings and trees, pipeline chains); [`Grid::hits`] (a pass over the
//! observed edges) and [`Grid::expected`] (a pass over the ranks) count the
//! observed-and-predicted and the predicted connections of every shape of
//! every kind, so that every combination of shapes is scored without
//! another pass.

use serde::Serialize;

pub mod blocks;

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

/// The three kinds of communication group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Tensor parallel.
    Tp,
    /// Data parallel.
    Dp,
    /// Pipeline parallel.
    Pp,
}

/// How the members of one group talk, by their index in the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Not at all on the network.
    Silent,
    /// Neighbours, and the last with the first.
    Ring,
    /// A binary tree (member k's parent is (k-1)/2).
    Tree,
    /// Ring and tree (NCCL uses both).
    RingTree,
    /// Neighbours only (a pipeline).
    Chain,
    /// Every pair (kept to groups within a host's size).
    Clique,
}

/// The shapes each kind (TP, DP, PP) is tried with.
pub const SHAPES: [&[Shape]; 3] = [
    &[Shape::Silent, Shape::Ring, Shape::Clique],
    &[Shape::Ring, Shape::Tree, Shape::RingTree],
    &[Shape::Chain, Shape::Ring],
];

/// Largest group talked to as a clique.
pub const MAX_CLIQUE: u32 = 8;

impl Shape {
    /// Whether members `i` and `j` (`i < j`) of a group of `n` talk.
    fn links(self, i: u32, j: u32, n: u32) -> bool {
        let ring = j - i == 1 || (n > 2 && i == 0 && j == n - 1);
        let tree = i == (j - 1) / 2;
        match self {
            Shape::Silent => false,
            Shape::Ring => ring,
            Shape::Tree => tree,
            Shape::RingTree => ring || tree,
            Shape::Chain => j - i == 1,
            Shape::Clique => n <= MAX_CLIQUE,
        }
    }
}

/// The members below `j` that member `j` of a group of `n` may talk to in
/// any shape but a clique: its neighbour, its parent, and the first.
fn partners(j: u32, n: u32) -> impl Iterator<Item = u32> {
    let first = (n > 2 && j == n - 1 && j > 1).then_some(0);
    let parent = (j >= 2).then_some((j - 1) / 2).filter(|&p| p != j - 1);
    let first = first.filter(|&f| Some(f) != parent);
    [Some(j - 1), parent, first].into_iter().flatten()
}

/// A placement of the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Grid {
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// How global ranks map onto the grid.
    pub order: Order,
    /// GPUs per host, filled in rank order; connections inside a host are
    /// not seen. `None`: a GPU per container, every connection seen.
    pub gpus_per_host: Option<u32>,
}

/// Per kind and shape (indexed as [`SHAPES`]): connections predicted, and
/// observed connections predicted.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Predicted and visible.
    pub expected: [[u64; 3]; 3],
    /// Observed and predicted.
    pub hits: [[u64; 3]; 3],
}

/// A rank's place: (tp, dp, pp) coordinates.
type Coord = [u32; 3];

impl Grid {
    /// A grid of TP × DP × PP ranks in `order`, `gpus_per_host` to a host.
    pub fn new(tp: u32, dp: u32, pp: u32, order: Order, gpus_per_host: Option<u32>) -> Grid {
        Grid {
            tp,
            dp,
            pp,
            order,
            gpus_per_host,
        }
    }

    /// The rank's coordinates.
    pub fn coord(&self, r: u32) -> Coord {
        let t = r % self.tp;
        let rest = r / self.tp;
        match self.order {
            Order::TpDpPp => [t, rest % self.dp, rest / self.dp],
            Order::TpPpDp => [t, rest / self.pp, rest % self.pp],
        }
    }

    fn rank(&self, [t, d, p]: Coord) -> u32 {
        match self.order {
            Order::TpDpPp => t + self.tp * (d + self.dp * p),
            Order::TpPpDp => t + self.tp * (p + self.pp * d),
        }
    }

    fn degree(&self, kind: usize) -> u32 {
        [self.tp, self.dp, self.pp][kind]
    }

    /// The groups this grid stands for, as sets of ranks: grids with the
    /// same key have the same groups, whatever their names (the skeleton
    /// cannot always tell a DP ring from a pipeline with its wrap-around
    /// link, or from a TP ring of the same ranks).
    pub fn partition_key(&self) -> [(u32, u32); 3] {
        let mut key = self.named_key();
        key.sort_unstable();
        key
    }

    /// The groups with their names: grids with the same key have the
    /// same groups of each kind.
    pub fn named_key(&self) -> [(u32, u32); 3] {
        [0, 1, 2].map(|k| {
            let mut c = [0; 3];
            c[k] = 1;
            match self.degree(k) {
                1 => (1, 0),
                n => (n, self.rank(c)),
            }
        })
    }

    /// Pairs of ranks on different hosts (every pair, a GPU per container).
    pub fn visible_pairs(&self) -> u64 {
        let n = u64::from(self.tp * self.dp * self.pp);
        let pairs = |m: u64| m * m.saturating_sub(1) / 2;
        match self.gpus_per_host.map(u64::from) {
            None => pairs(n),
            Some(g) => pairs(n) - (n / g) * pairs(g) - pairs(n % g),
        }
    }

    /// Whether a connection between `a` and `b` leaves the host.
    fn visible(&self, a: u32, b: u32) -> bool {
        self.gpus_per_host.is_none_or(|g| a / g != b / g)
    }

    /// The kind of group `a` and `b` share, with their indices in it.
    fn shared(&self, a: u32, b: u32) -> Option<(usize, u32, u32)> {
        let (ca, cb) = (self.coord(a), self.coord(b));
        let mut differ = (0..3).filter(|&k| ca[k] != cb[k]);
        match (differ.next(), differ.next()) {
            (Some(k), None) => Some((k, ca[k].min(cb[k]), ca[k].max(cb[k]))),
            _ => None,
        }
    }

    /// Whether `a` and `b` talk on the network when the groups talk in
    /// `shapes` (TP, DP, PP).
    pub fn predicts(&self, shapes: [Shape; 3], a: u32, b: u32) -> bool {
        self.visible(a, b)
            && self
                .shared(a, b)
                .is_some_and(|(k, i, j)| shapes[k].links(i, j, self.degree(k)))
    }

    /// Observed connections each shape of each kind predicts.
    pub fn hits(&self, edges: &[(u32, u32)]) -> [[u64; 3]; 3] {
        let mut hits = [[0; 3]; 3];
        for &(a, b) in edges {
            if !self.visible(a, b) {
                continue;
            }
            if let Some((k, i, j)) = self.shared(a, b) {
                let n = self.degree(k);
                for (s, shape) in SHAPES[k].iter().enumerate() {
                    hits[k][s] += u64::from(shape.links(i, j, n));
                }
            }
        }
        hits
    }

    /// Every connection some shape may predict, once: `f(r, o, k, i, j,
    /// n)` for rank `r`, member `j` of its group of kind `k` (of `n`
    /// members), and rank `o`, member `i < j` of it: every member below
    /// in a group small enough to be a clique, else the partners a ring
    /// or tree can give it.
    fn each_candidate(&self, mut f: impl FnMut(u32, u32, usize, u32, u32, u32)) {
        for r in 0..self.tp * self.dp * self.pp {
            let c = self.coord(r);
            for k in 0..3 {
                let (n, j) = (self.degree(k), c[k]);
                if j == 0 {
                    continue;
                }
                let mut visit = |i: u32| {
                    let mut o = c;
                    o[k] = i;
                    f(r, self.rank(o), k, i, j, n);
                };
                if n <= MAX_CLIQUE {
                    (0..j).for_each(&mut visit);
                } else {
                    partners(j, n).for_each(&mut visit);
                }
            }
        }
    }

    /// Visible connections each shape of each kind predicts: a pass over
    /// the ranks, each with the partners a shape can give it.
    pub fn expected(&self) -> [[u64; 3]; 3] {
        let mut expected = [[0; 3]; 3];
        self.each_candidate(|r, o, k, i, j, n| {
            if self.visible(r, o) {
                for (s, shape) in SHAPES[k].iter().enumerate() {
                    expected[k][s] += u64::from(shape.links(i, j, n));
                }
            }
        });
        expected
    }

    /// The group of `kind` a rank belongs to (an id per kind).
    pub fn group_of(&self, r: u32, kind: GroupKind) -> u32 {
        let [t, d, p] = self.coord(r);
        match kind {
            GroupKind::Tp => d + p * self.dp,
            GroupKind::Dp => t + p * self.tp,
            GroupKind::Pp => t + d * self.tp,
        }
    }
}

#[cfg(test)]
mod tests;
