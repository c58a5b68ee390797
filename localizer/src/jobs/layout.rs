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
use std::collections::BTreeMap;

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
    /// NCCL across hosts with a channel per GPU: the group's members on
    /// one host form a block, the blocks talk in `form` (ring, tree or
    /// both, over the blocks in order), each channel joining the members
    /// of two blocks at the same place in them (the same rail), on the
    /// first `channels` places only (`None`: every place).
    Rails {
        /// How the blocks talk.
        form: Form,
        /// How many places (rails) carry the traffic; `None`: all.
        channels: Option<u32>,
    },
}

/// How the blocks of a [`Shape::Rails`] group talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// Neighbouring blocks, and the last with the first.
    Ring,
    /// A binary tree of blocks.
    Tree,
    /// Both.
    RingTree,
}

/// A [`Shape::Rails`].
pub const fn rails(form: Form, channels: Option<u32>) -> Shape {
    Shape::Rails { form, channels }
}

/// The shapes each kind (TP, DP, PP) is tried with. DP adds NCCL's
/// rail-aligned channels: one per GPU, or one or two channels only.
pub const SHAPES: [&[Shape]; 3] = [
    &[Shape::Silent, Shape::Ring, Shape::Clique],
    &[
        Shape::Ring,
        Shape::Tree,
        Shape::RingTree,
        rails(Form::Ring, None),
        rails(Form::Tree, None),
        rails(Form::RingTree, None),
        rails(Form::Ring, Some(1)),
        rails(Form::Tree, Some(1)),
        rails(Form::RingTree, Some(1)),
        rails(Form::Ring, Some(2)),
        rails(Form::Tree, Some(2)),
        rails(Form::RingTree, Some(2)),
    ],
    &[Shape::Chain, Shape::Ring],
];

/// Most shapes a kind is tried with.
pub const MAX_SHAPES: usize = 12;

/// Per kind and shape (indexed as [`SHAPES`]): a count.
pub type PerShape = [[u64; MAX_SHAPES]; 3];

/// Largest group talked to as a clique.
pub const MAX_CLIQUE: u32 = 8;

/// A group's size and how many of its members share a host (1 when the
/// group's members are on different hosts, or no host is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// Members.
    pub n: u32,
    /// Consecutive members on one host.
    pub m: u32,
}

/// What decides every shape for one pair of members, worked out once:
/// each shape is then a few comparisons ([`Shape::holds`]).
#[derive(Debug, Clone, Copy)]
struct Pair {
    ring: bool,
    tree: bool,
    next: bool,
    small: bool,
    /// The place both hold in their blocks, if the same and the blocks
    /// differ, with whether the blocks are ring and tree neighbours.
    rails: Option<(u32, bool, bool)>,
}

/// Ring and tree neighbours among `n` in order (`i < j`).
fn ring(i: u32, j: u32, n: u32) -> bool {
    j - i == 1 || (n > 2 && i == 0 && j == n - 1)
}

fn tree(i: u32, j: u32) -> bool {
    i == (j - 1) / 2
}

impl Pair {
    fn new(i: u32, j: u32, d: Dims) -> Pair {
        let m = d.m.max(1);
        let (bi, bj, place) = (i / m, j / m, i % m);
        let rails = (place == j % m && bi != bj)
            .then(|| (place, ring(bi, bj, d.n.div_ceil(m)), tree(bi, bj)));
        Pair {
            ring: ring(i, j, d.n),
            tree: tree(i, j),
            next: j - i == 1,
            small: d.n <= MAX_CLIQUE,
            rails,
        }
    }
}

impl Shape {
    /// Whether members `i` and `j` (`i < j`) of a group of `d` talk.
    fn links(self, i: u32, j: u32, d: Dims) -> bool {
        self.holds(&Pair::new(i, j, d))
    }

    fn holds(self, p: &Pair) -> bool {
        match self {
            Shape::Silent => false,
            Shape::Ring => p.ring,
            Shape::Tree => p.tree,
            Shape::RingTree => p.ring || p.tree,
            Shape::Chain => p.next,
            Shape::Clique => p.small,
            Shape::Rails { form, channels } => p.rails.is_some_and(|(place, ring, tree)| {
                channels.is_none_or(|c| place < c)
                    && match form {
                        Form::Ring => ring,
                        Form::Tree => tree,
                        Form::RingTree => ring || tree,
                    }
            }),
        }
    }

    /// Which of `shapes` link members `i < j` of a group of `d`: bit `s`
    /// for `shapes[s]`.
    fn all_links(shapes: &[Shape], i: u32, j: u32, d: Dims) -> u32 {
        let p = Pair::new(i, j, d);
        shapes
            .iter()
            .enumerate()
            .fold(0, |bits, (s, shape)| bits | u32::from(shape.holds(&p)) << s)
    }
}

/// Adds one to `counts[s]` for every bit `s` of `bits`.
fn add_bits(counts: &mut [u64; MAX_SHAPES], mut bits: u32) {
    while bits != 0 {
        counts[bits.trailing_zeros() as usize] += 1;
        bits &= bits - 1;
    }
}

/// The members below `j` that member `j` of a group may talk to in any
/// shape but a clique: its neighbour, its parent, the first; and over
/// blocks of `m`, the same place in the previous block, in the parent
/// block and in the first.
fn partners(j: u32, d: Dims) -> impl Iterator<Item = u32> {
    let (n, m) = (d.n, d.m.max(1));
    let first = (n > 2 && j == n - 1 && j > 1).then_some(0);
    let parent = (j >= 2).then_some((j - 1) / 2);
    let (b, place) = (j / m, j % m);
    let count = n.div_ceil(m);
    let rails = m > 1 && b >= 1;
    let prev_block = rails.then(|| j - m);
    let parent_block = (rails && b >= 1).then(|| (b - 1) / 2 * m + place);
    let first_block = (rails && count > 2 && b == count - 1).then_some(place);
    let mut all = [
        Some(j - 1),
        parent,
        first,
        prev_block,
        parent_block,
        first_block,
    ];
    // Each partner once.
    for x in 1..all.len() {
        if all[..x].contains(&all[x]) {
            all[x] = None;
        }
    }
    all.into_iter().flatten()
}

/// An observed connection between members `i < j` of a group of kind
/// `k` (ranks `a` and `b`).
#[derive(Debug, Clone, Copy)]
pub struct Share {
    a: u32,
    b: u32,
    k: usize,
    i: u32,
    j: u32,
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
    pub expected: PerShape,
    /// Observed and predicted.
    pub hits: PerShape,
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

    /// The size of a group of `kind` and how many of its consecutive
    /// members share a host: the host's GPUs over the ranks between two
    /// members, when one divides the other.
    pub fn dims(&self, kind: usize) -> Dims {
        let n = self.degree(kind);
        let mut c = [0; 3];
        c[kind] = 1;
        let stride = self.rank(c).max(1);
        let m = match self.gpus_per_host {
            Some(g) if stride < g && g.is_multiple_of(stride) => (g / stride).min(n),
            _ => 1,
        };
        Dims { n, m }
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
                .is_some_and(|(k, i, j)| shapes[k].links(i, j, self.dims(k)))
    }

    /// Observed connections each shape of each kind predicts.
    pub fn hits(&self, edges: &[(u32, u32)]) -> PerShape {
        self.hits_of(&self.shares(edges))
    }

    /// The observed connections within one group, with the group: the
    /// same whatever the hosts, so that [`Grid::hits_of`] can count the
    /// grid on every host size from one pass.
    pub fn shares(&self, edges: &[(u32, u32)]) -> Vec<Share> {
        edges
            .iter()
            .filter_map(|&(a, b)| {
                let (k, i, j) = self.shared(a, b)?;
                Some(Share { a, b, k, i, j })
            })
            .collect()
    }

    /// [`Grid::hits`] of the connections `shares` gave.
    pub fn hits_of(&self, shares: &[Share]) -> PerShape {
        let mut hits = [[0; MAX_SHAPES]; 3];
        let dims = [0, 1, 2].map(|k| self.dims(k));
        for s in shares.iter().filter(|s| self.visible(s.a, s.b)) {
            add_bits(
                &mut hits[s.k],
                Shape::all_links(SHAPES[s.k], s.i, s.j, dims[s.k]),
            );
        }
        hits
    }

    /// Every connection some shape may predict, once: `f(r, o, k, i, j,
    /// d)` for rank `r`, member `j` of its group of kind `k` (of
    /// dimensions `d`), and rank `o`, member `i < j` of it: every member
    /// below in a group small enough to be a clique, else the partners a
    /// ring or tree can give it.
    fn each_candidate(&self, mut f: impl FnMut(u32, u32, usize, u32, u32, Dims)) {
        let dims = [0, 1, 2].map(|k| self.dims(k));
        for r in 0..self.tp * self.dp * self.pp {
            let c = self.coord(r);
            for (k, &d) in dims.iter().enumerate() {
                let j = c[k];
                if j == 0 {
                    continue;
                }
                let mut visit = |i: u32| {
                    let mut o = c;
                    o[k] = i;
                    f(r, self.rank(o), k, i, j, d);
                };
                if d.n <= MAX_CLIQUE {
                    (0..j).for_each(&mut visit);
                } else {
                    partners(j, d).for_each(&mut visit);
                }
            }
        }
    }

    /// Visible connections each shape of each kind predicts. A group's
    /// members are its first rank plus multiples of a stride, so which of
    /// its pairs cross hosts depends only on where in its host that first
    /// rank sits: one group of each such offset is walked (its members,
    /// each with the partners a shape can give it), counted for all.
    pub fn expected(&self) -> PerShape {
        let mut expected = [[0; MAX_SHAPES]; 3];
        let total = self.tp * self.dp * self.pp;
        for k in 0..3 {
            let d = self.dims(k);
            if d.n < 2 {
                continue;
            }
            let mut unit = [0; 3];
            unit[k] = 1;
            let stride = self.rank(unit);
            // Offset in the host -> (a first rank there, groups there).
            let mut offsets: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
            for r in (0..total).filter(|&r| self.coord(r)[k] == 0) {
                let offset = self.gpus_per_host.map_or(0, |g| r % g);
                offsets.entry(offset).or_insert((r, 0)).1 += 1;
            }
            for &(first, groups) in offsets.values() {
                let mut one = [0; MAX_SHAPES];
                for j in 1..d.n {
                    let mut visit = |i: u32| {
                        if self.visible(first + i * stride, first + j * stride) {
                            add_bits(&mut one, Shape::all_links(SHAPES[k], i, j, d));
                        }
                    };
                    if d.n <= MAX_CLIQUE {
                        (0..j).for_each(&mut visit);
                    } else {
                        partners(j, d).for_each(&mut visit);
                    }
                }
                for (e, o) in expected[k].iter_mut().zip(one) {
                    *e += o * groups;
                }
            }
        }
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
