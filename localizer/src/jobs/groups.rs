//! A job's parallel groups online: its skeleton between containers, from
//! the probed pairs and the ranks the containers publish, solved by
//! [`super::infer_blocks`] when it changes.
//!
//! A job's skeleton is stable for its life (its groups talk as long as it
//! trains), so a job is solved again only when its pairs or ranks change,
//! and at most [`SOLVES_PER_CYCLE`] jobs a cycle: a 4,096-rank job takes
//! up to a second, and a cluster-wide rollout must not stall the loop.
//! The answer is a layout only where the skeleton can be read as one: the
//! containers must publish their ranks, each the same number, starting at
//! a multiple of it (torchrun's placement); otherwise the state says why.

use super::impact::{job_of, GroupsUnder, JobImpact};
use super::layout::{Grid, GroupKind};
use super::{infer_blocks, BlockGraph, Layout, MAX_RANKS};
use serde::Serialize;
use skeletonhunter_common::ranks::Ranks;
use skeletonhunter_common::topology::Identity;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

/// Jobs solved anew in one cycle at most; the others keep their last
/// answer (or are `pending`) until a later cycle.
pub const SOLVES_PER_CYCLE: usize = 4;

/// What is known of a job's groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum GroupState {
    /// Solved: the layout that explains its skeleton best.
    Inferred(JobLayout),
    /// Not yet solved (more jobs changed than a cycle solves).
    Pending,
    /// Some of its containers publish no ranks, so its skeleton cannot be
    /// placed on a grid.
    Unranked,
    /// Its containers hold different numbers of ranks (but for the last,
    /// which may be partly used), or ranks that do not start at a multiple
    /// of that number: not a placement in rank order.
    Uneven,
    /// Larger than the ranks a job may have.
    TooLarge,
}

/// Why a job's skeleton cannot be placed on a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsolvable {
    /// See [`GroupState::Unranked`].
    Unranked,
    /// See [`GroupState::Uneven`].
    Uneven,
    /// See [`GroupState::TooLarge`].
    TooLarge,
}

impl From<Unsolvable> for GroupState {
    fn from(why: Unsolvable) -> GroupState {
        match why {
            Unsolvable::Unranked => GroupState::Unranked,
            Unsolvable::Uneven => GroupState::Uneven,
            Unsolvable::TooLarge => GroupState::TooLarge,
        }
    }
}

/// A job's inferred layout, with how far to trust it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobLayout {
    /// The grid and each kind's shape.
    #[serde(flatten)]
    pub layout: Layout,
    /// Whether its groups, as sets of containers, beat every other
    /// layout's by a margin (how ranks inside one container split is the
    /// convention's pick either way).
    pub determined: bool,
    /// Whether which kind each group is was told apart (a DP ring and a
    /// pipeline with its wrap-around link look alike).
    pub names_determined: bool,
    /// How well it matches (F1 of predicted against observed pairs).
    pub score: f64,
    /// Its TP, DP and PP groups with more than one rank.
    pub groups: [usize; 3],
    /// When not determined, the layouts with other groups that fit as
    /// well (at most [`super::MAX_ALTERNATIVES`], best first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Layout>,
    /// Further groupings that fit as well, beyond those listed.
    #[serde(skip_serializing_if = "super::is_zero")]
    pub more_alternatives: usize,
}

/// A job's skeleton between its containers, or why it has none.
pub fn block_graph(
    containers: &BTreeMap<&str, Option<Ranks>>,
    pairs: &[(&str, &str)],
) -> Result<BlockGraph, Unsolvable> {
    let ranked: Vec<Ranks> = containers
        .values()
        .map(|r| r.ok_or(Unsolvable::Unranked))
        .collect::<Result<_, _>>()?;
    let per = ranked.iter().map(|r| r.count).max().unwrap_or(1);
    let end = ranked.iter().map(|r| r.first + r.count).max().unwrap_or(0);
    let world = ranked.iter().filter_map(|r| r.world).max().unwrap_or(end);
    // Every container full, but the last one of the job may be partly
    // used (torchrun fills hosts in rank order).
    let placed =
        |r: &Ranks| r.first.is_multiple_of(per) && (r.count == per || r.first + r.count == world);
    if !ranked.iter().all(placed) {
        return Err(Unsolvable::Uneven);
    }
    if world > MAX_RANKS {
        return Err(Unsolvable::TooLarge);
    }
    let index = |n: &str| containers.get(n).copied().flatten().map(|r| r.first / per);
    let pairs = pairs
        .iter()
        .filter_map(|&(a, b)| Some((index(a)?, index(b)?)))
        .collect();
    Ok(BlockGraph {
        ranks: world,
        per,
        pairs,
    })
}

/// Every job's skeleton among `pairs` (prober, responder), by job.
pub fn block_graphs<'a>(
    pairs: impl IntoIterator<Item = (&'a Identity, &'a Identity)>,
    ranks: &HashMap<String, Ranks>,
) -> BTreeMap<String, Result<BlockGraph, Unsolvable>> {
    type Seen<'a> = (BTreeMap<&'a str, Option<Ranks>>, Vec<(&'a str, &'a str)>);
    let mut jobs: BTreeMap<&str, Seen> = BTreeMap::new();
    for (a, b) in pairs {
        let Some(job) = job_of(a, b) else {
            continue;
        };
        let (containers, edges) = jobs.entry(job).or_default();
        for n in [&a.node, &b.node] {
            containers.insert(n, ranks.get(n.as_str()).copied());
        }
        edges.push((&a.node, &b.node));
    }
    jobs.into_iter()
        .map(|(job, (containers, edges))| (job.to_string(), block_graph(&containers, &edges)))
        .collect()
}

/// What a job's answer was computed from.
fn fingerprint(g: &BlockGraph) -> u64 {
    let mut pairs: Vec<(u32, u32)> = g.pairs.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut h = DefaultHasher::new();
    (g.ranks, g.per, pairs).hash(&mut h);
    h.finish()
}

/// The groups of the jobs of the last cycles, solved again when their
/// skeleton changes (see the module docs). Holds only the jobs of the
/// last cycle, so it is bounded by them.
#[derive(Debug, Default)]
pub struct Solver {
    known: HashMap<String, (u64, GroupState)>,
}

impl Solver {
    /// Each job's state this cycle, solving at most `budget` changed jobs
    /// (the smallest first, so that one huge job does not hold up the
    /// rest).
    pub fn solve(
        &mut self,
        jobs: BTreeMap<String, Result<BlockGraph, Unsolvable>>,
        budget: usize,
    ) -> HashMap<String, GroupState> {
        let mut changed: Vec<(String, u64, BlockGraph)> = Vec::new();
        let mut known = HashMap::with_capacity(jobs.len());
        for (job, graph) in jobs {
            match graph {
                Err(why) => {
                    known.insert(job, (0, why.into()));
                }
                Ok(g) => {
                    let f = fingerprint(&g);
                    match self.known.remove(&job) {
                        Some((old, state)) if old == f => {
                            known.insert(job, (f, state));
                        }
                        stale => {
                            // The old answer stands until solved anew.
                            let state = stale.map_or(GroupState::Pending, |(_, s)| s);
                            known.insert(job.clone(), (0, state));
                            changed.push((job, f, g));
                        }
                    }
                }
            }
        }
        changed.sort_by(|(a, _, x), (b, _, y)| x.ranks.cmp(&y.ranks).then_with(|| a.cmp(b)));
        for (job, f, g) in changed.into_iter().take(budget) {
            let state = solved(&g);
            known.insert(job, (f, state));
        }
        self.known = known;
        self.known
            .iter()
            .map(|(job, (_, s))| (job.clone(), s.clone()))
            .collect()
    }
}

/// One job solved.
fn solved(g: &BlockGraph) -> GroupState {
    let inf = infer_blocks(g);
    let Some(layout) = inf.grid else {
        return GroupState::Pending;
    };
    GroupState::Inferred(JobLayout {
        layout,
        determined: inf.determined,
        names_determined: inf.names_determined,
        score: inf.score,
        groups: [
            inf.groups.tp.len(),
            inf.groups.dp.len(),
            inf.groups.pp.len(),
        ],
        alternatives: inf.alternatives.iter().map(|a| a.grid).collect(),
        more_alternatives: inf.more_alternatives,
    })
}

/// Each impact's groups under its component, from its job's layout where
/// it was inferred.
pub fn touch(impacts: &mut [JobImpact], states: &HashMap<String, GroupState>) {
    for i in impacts {
        if let Some(GroupState::Inferred(l)) = states.get(&i.job) {
            i.groups_under = Some(l.touched(&i.under));
        }
    }
}

impl JobLayout {
    /// The groups of each kind with a rank among `under`, of all of them.
    pub fn touched(&self, under: &[Ranks]) -> GroupsUnder {
        let g = self.layout.grid;
        let n = g.tp * g.dp * g.pp;
        let kinds = [GroupKind::Tp, GroupKind::Dp, GroupKind::Pp];
        let touched = [0, 1, 2].map(|k| {
            if self.groups[k] == 0 {
                return 0;
            }
            let ids: HashSet<u32> = under
                .iter()
                .flat_map(|r| r.first..r.first.saturating_add(r.count).min(n))
                .map(|r| g.group_of(r, kinds[k]))
                .collect();
            ids.len()
        });
        GroupsUnder {
            touched,
            of: self.groups,
        }
    }

    /// `TP 8 × DP 4 × PP 2`, and when it is a guess what else it may be:
    /// how the status page names it.
    pub fn describe(&self) -> String {
        let grid = |l: &Layout| {
            let Grid { tp, dp, pp, .. } = l.grid;
            format!("TP {tp} × DP {dp} × PP {pp}")
        };
        let mut out = grid(&self.layout);
        if !self.determined {
            let or: Vec<String> = self.alternatives.iter().map(grid).collect();
            let more = match self.more_alternatives {
                0 => String::new(),
                n => format!(", or {n} more"),
            };
            out.push_str(&match or.as_slice() {
                [] => " (a guess: another layout fits as well)".to_string(),
                _ => format!(" (a guess: or {}{more})", or.join(", or ")),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests;
