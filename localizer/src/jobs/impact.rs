//! Which training jobs a blamed component hurts, and how badly: the first
//! question of whoever is paged.
//!
//! A job is a `tenant` (the identity label the exporters carry), its ranks
//! the probed nodes of that tenant and its skeleton the probed pairs whose
//! two ends both belong to it (a pair between two jobs is neither's
//! traffic). For a component, a job's ranks *under* it are those placed
//! beneath it (the component is part of the rank's own identity: its host,
//! its ToR, …); its ranks *hit* are the ends of the job's pairs whose path
//! crosses it ([`crosses`]), which for a ToR includes the peers under
//! other ToRs whose traffic goes through it.
//!
//! Ranks are counted as the job numbers them where the exporters publish
//! each container's ranks (`skeletonhunter_rank_info`, from the launcher's
//! variables): a container of 8 workers counts 8, and a job's size is the
//! launcher's world size. A node without them counts as one rank.
//!
//! Pure: identities in, counts out; the online loop and `analyze` feed it
//! the pairs they analyzed.

use serde::Serialize;
use skeletonhunter_common::ranks::Ranks;
use skeletonhunter_common::topology::{crosses, Identity, Kind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// At most this many rank spans are listed in [`JobImpact::spans_under`].
const MAX_SPANS: usize = 8;

/// How one component touches one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobImpact {
    /// The job (the ranks' `tenant`).
    pub job: String,
    /// Ranks of the job placed beneath the component (0 for components
    /// that are no one's placement: links, traced hops).
    pub ranks_under: usize,
    /// Those ranks by number, e.g. `8-23, 40-47` (at most a few spans,
    /// then `+N more`); empty where the containers' ranks are not known.
    pub spans_under: String,
    /// Ranks of the job with a skeleton pair crossing the component.
    pub ranks_hit: usize,
    /// The job's ranks: its launcher's world size where known, else its
    /// ranks among the probed pairs.
    pub ranks: usize,
    /// The job's skeleton pairs crossing the component.
    pub pairs_hit: usize,
    /// The job's skeleton pairs.
    pub pairs: usize,
    /// Its TP, DP and PP groups with a rank under the component, of all
    /// its groups of each kind, where its groups are known (online,
    /// [`super::groups::touch`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_under: Option<GroupsUnder>,
    /// The ranks under the component, for that count; not shown.
    #[serde(skip)]
    pub under: Vec<Ranks>,
}

/// A job's groups with a rank under a component, per kind (TP, DP, PP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GroupsUnder {
    /// Groups with a rank under it.
    pub touched: [usize; 3],
    /// All the job's groups (of more than one rank).
    pub of: [usize; 3],
}

impl JobImpact {
    /// `" (8-15)"` after a count of ranks under the component, or nothing
    /// where their numbers are not known.
    pub fn spans_note(&self) -> String {
        match self.spans_under.as_str() {
            "" => String::new(),
            s => format!(" ({s})"),
        }
    }

    /// `", groups under it: DP 2 of 8, PP 1 of 4"`, the kinds the job has
    /// groups of; nothing where its groups are not known.
    pub fn groups_note(&self) -> String {
        let Some(g) = self.groups_under else {
            return String::new();
        };
        let kinds: Vec<String> = ["TP", "DP", "PP"]
            .iter()
            .zip(g.touched.iter().zip(g.of))
            .filter(|(_, (_, of))| *of > 0)
            .map(|(name, (t, of))| format!("{name} {t} of {of}"))
            .collect();
        if kinds.is_empty() {
            String::new()
        } else {
            format!(", groups under it: {}", kinds.join(", "))
        }
    }
}

/// Whether `(kind, id)` is part of `node`'s own placement.
fn placed_under(node: &Identity, kind: Kind, id: &str) -> bool {
    match kind {
        Kind::Hop | Kind::Link | Kind::Tenant => false,
        k => node.get(k) == id,
    }
}

#[derive(Default)]
struct Tally<'a> {
    ranks: BTreeSet<&'a str>,
    under: BTreeSet<&'a str>,
    hit: BTreeSet<&'a str>,
    pairs: usize,
    pairs_hit: usize,
}

/// The jobs component `(kind, id)` touches, most ranks hit first (then
/// most pairs hit, then by name); jobs it does not touch are left out.
/// `pairs` are the analyzed (prober, responder) pairs; a node without a
/// tenant belongs to no job; `ranks` are the nodes' ranks where known.
pub fn impact<'a, I>(
    pairs: I,
    ranks: &HashMap<String, Ranks>,
    kind: Kind,
    id: &str,
) -> Vec<JobImpact>
where
    I: IntoIterator<Item = (&'a Identity, &'a Identity)>,
{
    let mut jobs: BTreeMap<&'a str, Tally<'a>> = BTreeMap::new();
    for (a, b) in pairs {
        let Some(job) = job_of(a, b) else {
            continue;
        };
        let t = jobs.entry(job).or_default();
        t.pairs += 1;
        for end in [a, b] {
            t.ranks.insert(&end.node);
            if placed_under(end, kind, id) {
                t.under.insert(&end.node);
            }
        }
        if crosses(a, b, kind, id) {
            t.pairs_hit += 1;
            t.hit.insert(&a.node);
            t.hit.insert(&b.node);
        }
    }
    let count = |nodes: &BTreeSet<&str>| rank_count(nodes.iter().copied(), ranks);
    let mut out: Vec<JobImpact> = jobs
        .into_iter()
        .filter(|(_, t)| t.pairs_hit > 0)
        .map(|(job, t)| JobImpact {
            job: job.to_string(),
            ranks_under: count(&t.under),
            spans_under: spans(t.under.iter().filter_map(|n| ranks.get(*n))),
            ranks_hit: count(&t.hit),
            ranks: job_size(t.ranks.iter().copied(), ranks),
            pairs_hit: t.pairs_hit,
            pairs: t.pairs,
            groups_under: None,
            under: t
                .under
                .iter()
                .filter_map(|n| ranks.get(*n))
                .copied()
                .collect(),
        })
        .collect();
    out.sort_by(|x, y| {
        (y.ranks_hit, y.pairs_hit)
            .cmp(&(x.ranks_hit, x.pairs_hit))
            .then_with(|| x.job.cmp(&y.job))
    });
    out
}

/// The job whose skeleton pair `(a, b)` is: both ends' `tenant`, when
/// they share one (a pair between two jobs is neither's traffic).
pub fn job_of<'a>(a: &'a Identity, b: &Identity) -> Option<&'a str> {
    (!a.tenant.is_empty() && a.tenant == b.tenant).then_some(a.tenant.as_str())
}

/// The ranks `nodes` hold: each its workers' where known, else one.
pub fn rank_count<'a>(
    nodes: impl Iterator<Item = &'a str>,
    ranks: &HashMap<String, Ranks>,
) -> usize {
    nodes
        .map(|n| ranks.get(n).map_or(1, |r| r.count as usize))
        .sum()
}

/// The ranks of the job whose probed nodes are `nodes`: its launcher's
/// world size where one of them says, else the ranks they hold.
pub fn job_size<'a>(
    nodes: impl Iterator<Item = &'a str> + Clone,
    ranks: &HashMap<String, Ranks>,
) -> usize {
    let world = nodes.clone().filter_map(|n| ranks.get(n)?.world).max();
    world.map_or_else(|| rank_count(nodes, ranks), |w| w as usize)
}

/// `ranks` as spans of consecutive ranks, e.g. `0-15, 32-39`, at most
/// [`MAX_SPANS`] of them.
fn spans<'a>(ranks: impl Iterator<Item = &'a Ranks>) -> String {
    let mut all: Vec<(u32, u32)> = ranks.map(|r| (r.first, r.first + r.count)).collect();
    all.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (a, b) in all {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut parts: Vec<String> = merged
        .iter()
        .take(MAX_SPANS)
        .map(|&(first, end)| {
            let run = Ranks {
                first,
                count: end - first,
                world: None,
            };
            run.span()
        })
        .collect();
    if merged.len() > MAX_SPANS {
        parts.push(format!("+{} more", merged.len() - MAX_SPANS));
    }
    parts.join(", ")
}

/// One line for an alert annotation: at most `most` jobs, e.g. `job-a: 3
/// of 6 ranks under it, 5 hit (7 of 12 pairs), groups under it: DP 1 of
/// 2; +2 more jobs`. Empty when no job is touched.
pub fn summary(impacts: &[JobImpact], most: usize) -> String {
    let mut parts: Vec<String> = impacts
        .iter()
        .take(most)
        .map(|j| {
            let under = if j.ranks_under > 0 {
                format!(
                    "{} of {} ranks under it{}, {} hit",
                    j.ranks_under,
                    j.ranks,
                    j.spans_note(),
                    j.ranks_hit
                )
            } else {
                format!("{} of {} ranks hit", j.ranks_hit, j.ranks)
            };
            format!(
                "{}: {under} ({} of {} pairs){}",
                j.job,
                j.pairs_hit,
                j.pairs,
                j.groups_note()
            )
        })
        .collect();
    if impacts.len() > most {
        parts.push(format!("+{} more jobs", impacts.len() - most));
    }
    parts.join("; ")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Rank `r` of `job` on host `h` under ToR `t` (one spine block).
    pub(in crate::jobs) fn rank(job: &str, r: usize, t: usize, h: usize) -> Identity {
        Identity {
            node: format!("{job}-{r}"),
            nic: format!("nic-t{t}-h{h}"),
            host: format!("host-t{t}-h{h}"),
            tor: format!("tor{t}"),
            spine: "s0".into(),
            pod: "p0".into(),
            tenant: job.into(),
        }
    }

    /// Two jobs of 4 ranks, one per host on 4 hosts (2 per ToR), each a
    /// ring; plus one pair between the jobs and one rank without a job.
    fn fleet() -> Vec<(Identity, Identity)> {
        let mut pairs = Vec::new();
        for job in ["a", "b"] {
            let ranks: Vec<Identity> = (0..4).map(|r| rank(job, r, r / 2, r % 2)).collect();
            for r in 0..4 {
                pairs.push((ranks[r].clone(), ranks[(r + 1) % 4].clone()));
            }
        }
        pairs.push((rank("a", 0, 0, 0), rank("b", 3, 1, 1)));
        let mut stray = rank("", 9, 0, 0);
        stray.tenant.clear();
        pairs.push((stray.clone(), rank("a", 1, 0, 1)));
        pairs
    }

    fn of(pairs: &[(Identity, Identity)], kind: Kind, id: &str) -> Vec<JobImpact> {
        impact(pairs.iter().map(|(a, b)| (a, b)), &HashMap::new(), kind, id)
    }

    #[test]
    fn a_tor_touches_the_ranks_under_it_and_their_peers_across() {
        let pairs = fleet();
        let tor0 = of(&pairs, Kind::Tor, "tor0");
        assert_eq!(tor0.len(), 2, "{tor0:?}");
        for (j, name) in tor0.iter().zip(["a", "b"]) {
            // Ring 0-1-2-3-0: ranks 0, 1 under tor0; pairs 1-2 and 3-0
            // cross it (0-1 stays under it and crosses it too: same ToR).
            assert_eq!(j.job, name);
            assert_eq!((j.ranks_under, j.ranks, j.pairs), (2, 4, 4), "{j:?}");
            assert_eq!((j.ranks_hit, j.pairs_hit), (4, 3), "{j:?}");
        }
        // The cross-job pair and the job-less rank count for no one.
        assert!(tor0.iter().all(|j| j.pairs == 4));
    }

    #[test]
    fn a_node_touches_its_job_only() {
        let pairs = fleet();
        let hit = of(&pairs, Kind::Node, "b-2");
        assert_eq!(
            hit,
            vec![JobImpact {
                job: "b".into(),
                ranks_under: 1,
                spans_under: String::new(),
                ranks_hit: 3,
                ranks: 4,
                pairs_hit: 2,
                pairs: 4,
                groups_under: None,
                under: Vec::new(),
            }]
        );
        assert!(of(&pairs, Kind::Node, "nobody").is_empty());
        assert!(of(&pairs, Kind::Link, "198.19.0.1").is_empty());
    }

    #[test]
    fn known_ranks_count_as_the_job_numbers_them() {
        let pairs = fleet();
        // Job a: 8 workers a container, 32 ranks in all; a-2 says nothing.
        let ranks: HashMap<String, Ranks> = [0, 1, 3]
            .map(|r| (format!("a-{r}"), Ranks::new(8 * r, 8, Some(32)).unwrap()))
            .into();
        let tor0 = impact(pairs.iter().map(|(a, b)| (a, b)), &ranks, Kind::Tor, "tor0");
        let a = tor0.iter().find(|j| j.job == "a").unwrap();
        assert_eq!(
            (a.ranks_under, a.spans_under.as_str()),
            (16, "0-15"),
            "{a:?}"
        );
        assert_eq!((a.ranks_hit, a.ranks), (8 + 8 + 1 + 8, 32), "{a:?}");
        assert_eq!(
            summary(&tor0, 1),
            "a: 16 of 32 ranks under it (0-15), 25 hit (3 of 4 pairs); +1 more jobs"
        );
        // Job b knows none: its containers count one rank each.
        let b = tor0.iter().find(|j| j.job == "b").unwrap();
        assert_eq!((b.ranks_under, b.ranks, b.spans_under.as_str()), (2, 4, ""));
        let many: Vec<Ranks> = (0..10)
            .map(|i| Ranks::new(4 * i, 2, None).unwrap())
            .collect();
        assert_eq!(
            spans(many.iter()),
            "0-1, 4-5, 8-9, 12-13, 16-17, 20-21, 24-25, 28-29, +2 more"
        );
    }

    #[test]
    fn most_hit_first_and_the_summary_is_bounded() {
        let mut pairs = fleet();
        // A third job entirely under host-t1-h1: hit there more than the others.
        for r in 0..3 {
            pairs.push((rank("c", r, 1, 1), rank("c", (r + 1) % 3, 1, 1)));
        }
        let h = of(&pairs, Kind::Host, "host-t1-h1");
        let names: Vec<&str> = h.iter().map(|j| j.job.as_str()).collect();
        assert_eq!(names, ["c", "a", "b"], "{h:?}");
        assert_eq!(
            summary(&h, 1),
            "c: 3 of 3 ranks under it, 3 hit (3 of 3 pairs); +2 more jobs"
        );
        assert_eq!(summary(&[], 3), "");
    }
}
