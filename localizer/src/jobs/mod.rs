//! Jobs: a training job's communication groups from its skeleton.
//!
//! A job of N ranks runs on a TP × DP × PP grid; its ranks hold the
//! long-lived connections of their groups: NCCL rings and trees inside a DP
//! group, links between consecutive pipeline stages, TP traffic that is
//! often inside a host (NVLink) and then never on the network. Given which
//! ranks talk ([`JobGraph`], from the discovered skeleton), [`infer`] tries
//! every grid N factors into, both rank orders in use, the common host
//! sizes and each group shape ([`layout`]), and keeps the layout whose
//! predicted connections match the observed ones best (F1). Noise
//! connections and missed ones lower every candidate alike.
//!
//! The skeleton cannot tell every layout apart (a DP ring and a pipeline
//! with its wrap-around link look alike): of the near-ties, those far less
//! likely than the most likely are out (a ring missing its wrap-around
//! link in every group is a pipeline), and the rest go to what real jobs
//! use most, and [`Inference::determined`] is false unless the choice beats
//! every layout with other groups by a margin: the groups are then a guess,
//! and said to be.
//!
//! Online the skeleton is seen between containers, not ranks:
//! [`infer_blocks`] scores layouts by the container pairs their groups
//! join, and compares rivals by their groups as sets of containers, the
//! finest it can see ([`groups`] keeps each job's answer between cycles).
//!
//! Pure: no I/O, tested on constructed skeletons; the command reading and
//! writing JSON is `commands/jobs.rs`.

pub mod groups;
pub mod impact;
pub mod layout;
pub mod roster;

use layout::{Grid, GroupKind, Order, PerShape, Shape, Tally, SHAPES};
use serde::Serialize;
use std::collections::HashSet;

/// Most ranks a job may have: 16 times the largest benchmarked (4,096
/// ranks in under a second), so the grids tried stay within seconds.
pub const MAX_RANKS: u32 = 1 << 16;

/// GPUs of one host: TP groups are rarely larger, since TP traffic wants
/// the host's own links.
const HOST_GPUS: u32 = 8;

/// GPUs per host tried, the most common first (`None`: a GPU per
/// container, nothing hidden).
const HOSTS: [Option<u32>; 5] = [Some(8), None, Some(4), Some(16), Some(2)];

/// The best match below which a layout is not trusted.
const MIN_F1: f64 = 0.6;
/// Layouts this close to the best are told apart by what real jobs use
/// most (see [`choose`]); the chosen one must beat every layout with other
/// groups by as much to be trusted.
const MARGIN: f64 = 0.02;
/// Of the layouts within [`MARGIN`], those less likely than the most
/// likely one by this much (log-likelihood, nats: a factor of about 20)
/// are not candidates.
const EVIDENCE: f64 = 3.0;
/// Grids whose F1 cannot come within [`MARGIN`] of the best so far are
/// not scored in full.
const PRUNE: f64 = MARGIN;

/// One job's skeleton: its size and which ranks talk.
#[derive(Debug, Clone)]
pub struct JobGraph {
    /// Ranks 0..ranks.
    pub ranks: u32,
    /// Undirected connections between distinct ranks below `ranks`.
    pub edges: Vec<(u32, u32)>,
}

/// A grid with the shape each kind of group talks in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Layout {
    /// The placement.
    #[serde(flatten)]
    pub grid: Grid,
    /// How TP, DP and PP groups talk.
    pub shapes: [Shape; 3],
}

/// What [`infer`] found for one job.
#[derive(Debug, Clone, Serialize)]
pub struct Inference {
    /// Whether the grid is trusted (see the module docs).
    pub determined: bool,
    /// Whether the names of the groups are: false when a layout with the
    /// same groups under other names (a DP ring and a pipeline with its
    /// wrap-around link) fits as well and is as likely, so which kind each
    /// group is was the convention's pick, although the groups are not.
    pub names_determined: bool,
    /// The chosen layout (a guess when not determined; `None` for a job
    /// without ranks).
    pub grid: Option<Layout>,
    /// How well it matched (F1 of predicted against observed connections).
    pub score: f64,
    /// The best match of a layout with other groups.
    pub runner_up: f64,
    /// Its groups.
    pub groups: Groups,
    /// When not determined: the layouts with other groups that fit
    /// within the margin, best first (at most [`MAX_ALTERNATIVES`]), each
    /// with its groups: what the job may be instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
    /// Further groupings that fit as well, beyond those listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_alternatives: usize,
}

/// Whether a count is nothing (left out of the JSON).
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Most alternatives an answer lists.
pub const MAX_ALTERNATIVES: usize = 3;

/// A layout with other groups that fits about as well as the chosen one.
#[derive(Debug, Clone, Serialize)]
pub struct Alternative {
    /// The layout.
    pub grid: Layout,
    /// How well it matched.
    pub score: f64,
    /// Its groups.
    pub groups: Groups,
}

/// A job's groups of each kind with more than one rank, ranks ascending.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Groups {
    /// Tensor-parallel groups.
    pub tp: Vec<Vec<u32>>,
    /// Data-parallel groups.
    pub dp: Vec<Vec<u32>>,
    /// Pipeline-parallel groups (a rank per stage).
    pub pp: Vec<Vec<u32>>,
}

/// Every (TP, DP, PP, order) `n` ranks can be placed in: the degrees
/// multiply to `n`, and the orders differ only when DP and PP both exceed
/// one.
fn factorings(n: u32) -> Vec<(u32, u32, u32, Order)> {
    let mut out = Vec::new();
    let divisors: Vec<u32> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
    for &tp in &divisors {
        for &dp in divisors.iter().filter(|&&d| (n / tp).is_multiple_of(d)) {
            let pp = n / tp / dp;
            for order in [Order::TpDpPp, Order::TpPpDp] {
                if order == Order::TpPpDp && (dp == 1 || pp == 1) {
                    continue;
                }
                out.push((tp, dp, pp, order));
            }
        }
    }
    out
}

/// F1 of `expected` predicted connections, `hits` of them among the
/// `observed` ones.
fn f1(hits: u64, observed: usize, expected: u64) -> f64 {
    let total = observed as f64 + expected as f64;
    if total > 0.0 {
        2.0 * hits as f64 / total
    } else {
        0.0
    }
}

/// Log-likelihood of `x` of `n` trials succeeding at the rate that fits
/// best (smoothed by half a success, so that a rate is never 0 or 1).
fn binomial(x: f64, n: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    let p = (x + 0.5) / (n + 1.0);
    x * p.ln() + (n - x) * (1.0 - p).ln()
}

/// How likely the skeleton is under a layout: each kind's predicted
/// connections are seen at that kind's own rate (`hits` of `expected`),
/// the other `pairs - expected` visible pairs at a noise rate (the
/// `observed` connections not predicted), every rate the best fitting.
/// Unlike F1 it weighs the connections that tell two layouts apart by how
/// surprising they are: a ring's wrap-around link missing in every group
/// (a pipeline, not a ring) counts although it is a small share of the
/// connections, and an observed connection no layout predicts costs far
/// more than a predicted one missed.
fn log_likelihood(hits: [u64; 3], expected: [u64; 3], observed: usize, pairs: u64) -> f64 {
    let kinds: f64 = (0..3)
        .map(|k| binomial(hits[k] as f64, expected[k] as f64))
        .sum();
    let (h, e) = (hits.iter().sum::<u64>(), expected.iter().sum::<u64>());
    let noise = observed as f64 - h as f64;
    kinds + binomial(noise, pairs.saturating_sub(e) as f64)
}

/// A layout with its F1 and log-likelihood.
#[derive(Debug, Clone, Copy)]
struct Scored {
    f1: f64,
    ll: f64,
    layout: Layout,
    /// Which groups it stands for.
    keys: Keys,
}

impl Scored {
    /// `grid` with the shapes of `combo` (indices into [`SHAPES`]), whose
    /// kinds predict `expected` connections, `hits` of them among the
    /// `observed` of `pairs` visible ones.
    fn new(
        grid: Grid,
        combo: [usize; 3],
        keys: Keys,
        (hits, expected): ([u64; 3], [u64; 3]),
        (observed, pairs): (usize, u64),
    ) -> Scored {
        Scored {
            f1: f1(hits.iter().sum(), observed, expected.iter().sum()),
            ll: log_likelihood(hits, expected, observed, pairs),
            layout: Layout {
                grid,
                shapes: [0, 1, 2].map(|k| SHAPES[k][combo[k]]),
            },
            keys,
        }
    }
}

/// What two layouts are compared by: their groups as the skeleton can
/// see them, without names (`groups`) and with (`named`), hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Keys {
    groups: u64,
    named: u64,
}

impl Keys {
    fn of<T: std::hash::Hash + Ord>(mut named: [T; 3]) -> Keys {
        let hash = |v: &[T; 3]| {
            use std::hash::{BuildHasher, BuildHasherDefault};
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(v)
        };
        let n = hash(&named);
        named.sort_unstable();
        Keys {
            groups: hash(&named),
            named: n,
        }
    }

    /// Groups of ranks (grids with the same keys have the same groups).
    fn ranks(g: &Grid) -> Keys {
        Keys::of(g.named_key())
    }
}

/// Every shape combination of `grid` scored against `observed` edges.
fn scored(grid: Grid, t: &Tally, observed: usize) -> impl Iterator<Item = Scored> + '_ {
    let pairs = grid.visible_pairs();
    let keys = Keys::ranks(&grid);
    combos().map(move |s| {
        let hits = [0, 1, 2].map(|k| t.hits[k][s[k]]);
        let expected = [0, 1, 2].map(|k| t.expected[k][s[k]]);
        Scored::new(grid, s, keys, (hits, expected), (observed, pairs))
    })
}

/// Every layout of `n` ranks scored. A grid whose hits alone cannot bring
/// its F1 within [`PRUNE`] of the best so far is not counted out in full
/// (the expensive part) but kept once, with its bound as its F1 and no
/// likelihood (F1 ≤ 2h / (observed + h), since every hit is also
/// predicted).
fn score_all(n: u32, edges: &[(u32, u32)]) -> Vec<Scored> {
    let observed = edges.len();
    let mut best = 0.0f64;
    let mut all = Vec::new();
    for (tp, dp, pp, order) in factorings(n) {
        // Which group each edge is in does not depend on the hosts.
        let shares = Grid::new(tp, dp, pp, order, None).shares(edges);
        for gpus_per_host in HOSTS {
            let g = Grid::new(tp, dp, pp, order, gpus_per_host);
            score_grid(g, g.hits_of(&shares), observed, &mut best, &mut all);
        }
    }
    all
}

/// `g` scored with its `hits` into `all`, unless its hits alone cannot
/// bring it within [`PRUNE`] of the `best` so far (see [`score_all`]).
fn score_grid(g: Grid, hits: PerShape, observed: usize, best: &mut f64, all: &mut Vec<Scored>) {
    let h: u64 = hits
        .iter()
        .map(|k| k.iter().max().copied().unwrap_or(0))
        .sum();
    let bound = f1(h, observed, h);
    if bound < *best - PRUNE {
        let shapes = [SHAPES[0][0], SHAPES[1][0], SHAPES[2][0]];
        all.push(Scored {
            f1: bound,
            ll: f64::NEG_INFINITY,
            layout: Layout { grid: g, shapes },
            keys: Keys::ranks(&g),
        });
        return;
    }
    let t = Tally {
        hits,
        expected: g.expected(),
    };
    for c in scored(g, &t, observed) {
        *best = best.max(c.f1);
        all.push(c);
    }
}

/// One job's skeleton seen between its containers, each holding `per`
/// consecutive ranks (container `i` holds ranks `i·per ..`): online, a
/// connection is known by the containers it joins, not by the workers in
/// them that hold it.
#[derive(Debug, Clone)]
pub struct BlockGraph {
    /// Ranks 0..ranks.
    pub ranks: u32,
    /// Ranks a container holds (its workers, one per GPU).
    pub per: u32,
    /// Undirected connections between distinct containers, by index.
    pub pairs: Vec<(u32, u32)>,
}

/// `edges` without self-loops, out-of-range ends or repeats, lower end
/// first, sorted.
fn normalized(edges: &[(u32, u32)], n: u32) -> Vec<(u32, u32)> {
    let mut edges: Vec<(u32, u32)> = edges
        .iter()
        .filter(|&&(a, b)| a != b && a < n && b < n)
        .map(|&(a, b)| (a.min(b), a.max(b)))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    edges.sort_unstable();
    edges
}

/// The groups and grid of one job (see the module docs).
pub fn infer(job: &JobGraph) -> Inference {
    let n = job.ranks.min(MAX_RANKS);
    let edges = normalized(&job.edges, n);
    decide(n, &score_all(n, &edges))
}

/// The groups and grid of one job seen between containers: as [`infer`],
/// with the containers as the hosts (what stays inside one is not seen)
/// and a layout scored by the container pairs its groups join. A
/// container of one rank is a rank: [`infer`] itself.
pub fn infer_blocks(job: &BlockGraph) -> Inference {
    if job.per <= 1 {
        return infer(&JobGraph {
            ranks: job.ranks,
            edges: job.pairs.clone(),
        });
    }
    let n = job.ranks.min(MAX_RANKS);
    let per = job.per.min(n.max(1));
    let pairs = normalized(&job.pairs, n.div_ceil(per));
    let blocks = u64::from(n.div_ceil(per));
    let visible = blocks * blocks.saturating_sub(1) / 2;
    let mut all = Vec::new();
    for (tp, dp, pp, order) in factorings(n) {
        let grid = Grid::new(tp, dp, pp, order, Some(per));
        let t = grid.block_tally(per, &pairs);
        // Containers are the finest the skeleton sees: layouts whose
        // groups join the same containers are the same answer to it.
        let keys = Keys::of(grid.block_groups(per));
        for combo in combos() {
            let c = t.counts(combo);
            let counts = (c.hits, c.expected);
            all.push(Scored::new(
                grid,
                combo,
                keys,
                counts,
                (pairs.len(), visible),
            ));
        }
    }
    decide(n, &all)
}

/// Every shape combination, as indices into [`SHAPES`].
fn combos() -> impl Iterator<Item = [usize; 3]> {
    let idx = |k: usize| 0..SHAPES[k].len();
    idx(0).flat_map(move |a| idx(1).flat_map(move |b| idx(2).map(move |c| [a, b, c])))
}

/// The chosen layout of `n` ranks among `all` scored ones, and its groups.
fn decide(n: u32, all: &[Scored]) -> Inference {
    let Some(best) = all.iter().map(|c| c.f1).max_by(f64::total_cmp) else {
        return Inference {
            determined: false,
            names_determined: false,
            grid: None,
            score: 0.0,
            runner_up: 0.0,
            groups: Groups::default(),
            alternatives: Vec::new(),
            more_alternatives: 0,
        };
    };
    let (chosen, contenders) = choose(all, best);
    let k = chosen.keys;
    let renamed = contenders
        .iter()
        .any(|c| c.keys.groups == k.groups && c.keys.named != k.named);
    let runner_up = all
        .iter()
        .filter(|c| c.keys.groups != k.groups)
        .map(|c| c.f1)
        .max_by(f64::total_cmp)
        .unwrap_or(0.0);
    let determined = chosen.f1 >= MIN_F1 && chosen.f1 - runner_up >= MARGIN;
    let (alternatives, more_alternatives) = if determined {
        (Vec::new(), 0)
    } else {
        alternatives(all, chosen, n)
    };
    Inference {
        determined,
        names_determined: chosen.f1 >= MIN_F1 && !renamed,
        grid: Some(chosen.layout),
        score: chosen.f1,
        runner_up,
        groups: all_groups(&chosen.layout.grid, n),
        alternatives,
        more_alternatives,
    }
}

/// The layouts with other groups than `chosen`'s within [`MARGIN`] of
/// it, one per grouping (its best fit, the convention breaking ties),
/// best first, at most [`MAX_ALTERNATIVES`]; and how many groupings more.
fn alternatives(all: &[Scored], chosen: &Scored, n: u32) -> (Vec<Alternative>, usize) {
    let mut near: Vec<&Scored> = all
        .iter()
        .filter(|c| c.keys.groups != chosen.keys.groups && c.f1 >= chosen.f1 - MARGIN)
        // A grid not scored in full (its bound) has no shapes to show.
        .filter(|c| c.ll > f64::NEG_INFINITY)
        .collect();
    near.sort_by(|a, b| {
        b.f1.total_cmp(&a.f1)
            .then_with(|| convention(&a.layout).cmp(&convention(&b.layout)))
    });
    let mut seen = HashSet::new();
    let distinct: Vec<&Scored> = near
        .into_iter()
        .filter(|c| seen.insert(c.keys.groups))
        .collect();
    let more = distinct.len().saturating_sub(MAX_ALTERNATIVES);
    let listed = distinct
        .into_iter()
        .take(MAX_ALTERNATIVES)
        .map(|c| Alternative {
            grid: c.layout,
            score: c.f1,
            groups: all_groups(&c.layout.grid, n),
        })
        .collect();
    (listed, more)
}

/// `g`'s groups of every kind.
fn all_groups(g: &Grid, n: u32) -> Groups {
    Groups {
        tp: groups_of(g, n, GroupKind::Tp),
        dp: groups_of(g, n, GroupKind::Dp),
        pp: groups_of(g, n, GroupKind::Pp),
    }
}

/// How usual a layout is, the most usual least (see [`choose`]).
fn convention(l: &Layout) -> impl Ord {
    let g = &l.grid;
    let host_tp = if g.tp <= HOST_GPUS { g.tp } else { 0 };
    let host = HOSTS.iter().position(|h| *h == g.gpus_per_host);
    (
        g.order != Order::TpDpPp,
        std::cmp::Reverse(host_tp),
        g.pp,
        host,
    )
}

/// Within [`MARGIN`] of the best match the skeleton may not tell: of
/// those, when the best explains the skeleton ([`MIN_F1`]), the layouts
/// far less likely than the most likely one ([`EVIDENCE`]) are out (a ring whose wrap-around link is missing in
/// every group is a pipeline, although the links are a small share of
/// the connections), and what real jobs use most wins among the rest. DP
/// before PP in the rank order (Megatron-LM's default), then the larger
/// TP up to a host's GPUs (consecutive ranks that all talk are TP by
/// convention, beyond a host they are DP), then fewer pipeline stages,
/// then the commoner host size, then the better match. Returns the choice
/// and every contender it was chosen from.
fn choose(all: &[Scored], best: f64) -> (&Scored, Vec<&Scored>) {
    let rank = convention;
    let near = || all.iter().filter(|c| c.f1 >= best - MARGIN);
    // A likelihood weighs evidence only where the model explains the
    // skeleton: below MIN_F1 it is of a wrong model.
    let likely = near().map(|c| c.ll).fold(f64::NEG_INFINITY, f64::max);
    let evidence = if best >= MIN_F1 {
        EVIDENCE
    } else {
        f64::INFINITY
    };
    let contenders: Vec<&Scored> = near().filter(|c| c.ll >= likely - evidence).collect();
    let chosen = contenders
        .iter()
        .copied()
        .min_by(|a, b| {
            rank(&a.layout)
                .cmp(&rank(&b.layout))
                .then(b.f1.total_cmp(&a.f1))
        })
        .unwrap_or(&all[0]);
    (chosen, contenders)
}

/// `l`'s groups of `kind` with more than one rank.
fn groups_of(l: &Grid, n: u32, kind: GroupKind) -> Vec<Vec<u32>> {
    let mut by: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for r in 0..n {
        by.entry(l.group_of(r, kind)).or_default().push(r);
    }
    let mut out: Vec<Vec<u32>> = by.into_values().filter(|g| g.len() > 1).collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests;
