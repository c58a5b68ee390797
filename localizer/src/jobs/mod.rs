//! Jobs: a training job's communication groups from its skeleton.
//!
//! A job of N ranks runs on a TP × DP × PP grid; its ranks hold the
//! long-lived connections of their groups: NCCL rings and trees inside a DP
//! group, a chain between consecutive pipeline stages, TP traffic that is
//! often inside a host (NVLink) and then never on the network. Given which
//! ranks talk ([`JobGraph`], from the discovered skeleton), [`infer`] tries
//! every grid N factors into, both rank orders in use and each group shape
//! ([`layout::Layout`]), and keeps the one whose predicted connections
//! match the observed ones best (F1 of predicted against observed). Noise
//! edges (checkpoints, stray connections) and missed ones lower every
//! candidate alike; the true layout stays ahead.
//!
//! [`Inference::determined`] is false when the best match is weak or a
//! layout with other groups matches almost as well: the groups are then a
//! guess, and said to be.
//!
//! Pure: no I/O, tested on constructed skeletons; the command reading and
//! writing JSON is `commands/jobs.rs`.

pub mod layout;

use layout::{DpShape, GroupKind, Layout, Order, TpShape};
use serde::Serialize;
use std::collections::HashSet;

/// Most ranks a job may have: beyond any cluster in sight, and small enough
/// that the candidates stay few.
pub const MAX_RANKS: u32 = 1 << 20;

/// GPUs of one host: TP groups are rarely larger, since TP traffic wants
/// the host's own links.
const HOST_GPUS: u32 = 8;

/// The best match below which a layout is not trusted.
const MIN_F1: f64 = 0.6;
/// How far ahead of any layout with other groups the best must be.
const MIN_MARGIN: f64 = 0.02;

/// One job's skeleton: its size and which ranks talk.
#[derive(Debug, Clone)]
pub struct JobGraph {
    /// Ranks 0..ranks.
    pub ranks: u32,
    /// Undirected connections between distinct ranks below `ranks`, each
    /// pair once.
    pub edges: Vec<(u32, u32)>,
}

/// What [`infer`] found for one job.
#[derive(Debug, Clone, Serialize)]
pub struct Inference {
    /// Whether the grid is trusted (see the module docs).
    pub determined: bool,
    /// The best layout (a guess when not determined; `None` for a job
    /// without ranks).
    pub grid: Option<Layout>,
    /// How well it matched (F1 of predicted against observed connections).
    pub score: f64,
    /// The next best layout with other groups.
    pub runner_up: f64,
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

/// Every candidate layout of `n` ranks.
pub fn candidates(n: u32) -> Vec<Layout> {
    let mut out = Vec::new();
    let divisors: Vec<u32> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
    for &tp in &divisors {
        for &dp in divisors.iter().filter(|&&d| (n / tp).is_multiple_of(d)) {
            let pp = n / tp / dp;
            if tp * dp * pp != n {
                continue;
            }
            for order in [Order::TpDpPp, Order::TpPpDp] {
                if order == Order::TpPpDp && (dp == 1 || pp == 1) {
                    continue;
                }
                for tp_shape in [TpShape::Hidden, TpShape::Ring, TpShape::Clique] {
                    // TP beyond a host's GPUs runs over a larger NVLink
                    // domain if at all: never on the network.
                    if (tp == 1 || tp > HOST_GPUS) && tp_shape != TpShape::Hidden {
                        continue;
                    }
                    for dp_shape in [DpShape::Ring, DpShape::Tree, DpShape::RingTree] {
                        out.push(Layout {
                            tp,
                            dp,
                            pp,
                            order,
                            tp_shape,
                            dp_shape,
                        });
                    }
                }
            }
        }
    }
    out
}

/// F1 of `l`'s predicted connections against the observed `edges`.
fn score(l: &Layout, edges: &[(u32, u32)]) -> f64 {
    let hits = edges
        .iter()
        .filter(|&&(a, b)| l.predicts(a, b).is_some())
        .count() as f64;
    let total = edges.len() as f64 + l.expected() as f64;
    if total == 0.0 {
        0.0
    } else {
        2.0 * hits / total
    }
}

/// The groups and grid of one job (see the module docs).
pub fn infer(job: &JobGraph) -> Inference {
    let n = job.ranks.min(MAX_RANKS);
    let mut edges: Vec<(u32, u32)> = job
        .edges
        .iter()
        .filter(|&&(a, b)| a != b && a < n && b < n)
        .map(|&(a, b)| (a.min(b), a.max(b)))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    edges.sort_unstable();
    let scored: Vec<(f64, Layout)> = candidates(n)
        .into_iter()
        .map(|l| (score(&l, &edges), l))
        .collect();
    let Some(best) = scored.iter().map(|(s, _)| *s).max_by(f64::total_cmp) else {
        return Inference {
            determined: false,
            grid: None,
            score: 0.0,
            runner_up: 0.0,
            groups: Groups::default(),
        };
    };
    // Within the margin the skeleton cannot tell (a DP ring from a
    // pipeline chain differs by one connection per group): the layout real
    // jobs use more often wins, fewer pipeline stages first, then the
    // larger TP up to a host's GPUs (a group of consecutive ranks that all
    // talk is TP by convention), then the better score.
    let host_tp = |l: &Layout| if l.tp <= HOST_GPUS { l.tp } else { 0 };
    let near = || scored.iter().filter(|(s, _)| *s >= best - MIN_MARGIN);
    let &(score, l) = near()
        .min_by(|a, b| {
            (a.1.pp.cmp(&b.1.pp))
                .then(host_tp(&b.1).cmp(&host_tp(&a.1)))
                .then(b.0.total_cmp(&a.0))
        })
        .unwrap_or(&scored[0]);
    let runner_up = scored
        .iter()
        .filter(|(_, o)| o.partition_key() != l.partition_key())
        .map(|(s, _)| *s)
        .max_by(f64::total_cmp)
        .unwrap_or(0.0);
    Inference {
        determined: score >= MIN_F1 && score - runner_up >= MIN_MARGIN,
        grid: Some(l),
        score,
        runner_up,
        groups: Groups {
            tp: groups(&l, n, GroupKind::Tp),
            dp: groups(&l, n, GroupKind::Dp),
            pp: groups(&l, n, GroupKind::Pp),
        },
    }
}

/// `l`'s groups of `kind` with more than one rank.
fn groups(l: &Layout, n: u32, kind: GroupKind) -> Vec<Vec<u32>> {
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
