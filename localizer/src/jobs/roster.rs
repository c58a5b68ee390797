//! Every job the last cycle saw and what hurts it: the status page's Jobs
//! section and `/jobs`. The question of whoever is paged, "which jobs are
//! hurt, and how badly", answered for the whole fabric and not one alert
//! at a time.
//!
//! A job and its ranks are as in [`super::impact`]: the probed pairs with
//! both ends in one `tenant`, ranks counted by the containers' published
//! ranks where known. Pure: pairs, ranks and the verdicts' impacts in, the
//! roster out.

use super::groups::GroupState;
use super::impact::{job_of, job_size, JobImpact};
use serde::Serialize;
use skeletonhunter_common::ranks::Ranks;
use skeletonhunter_common::topology::{Component, Identity};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// At most this many jobs are listed (those hurt first); the rest are
/// counted in [`Roster::omitted`].
pub const MAX_JOBS: usize = 1000;

/// One job as the last cycle saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    /// The job (its nodes' `tenant`).
    pub job: String,
    /// Its ranks: the launcher's world size where known, else the ranks
    /// its probed containers hold.
    pub ranks: usize,
    /// Its containers (nodes) among the probed pairs.
    pub containers: usize,
    /// Its skeleton pairs probed.
    pub pairs: usize,
    /// The components blamed this cycle that touch it, most ranks hit
    /// first.
    pub hurt_by: Vec<Hurt>,
    /// Its parallel groups as its skeleton shows them ([`super::groups`]),
    /// when they were looked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<GroupState>,
}

/// One blamed component's reach into a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hurt {
    /// The blamed component.
    #[serde(flatten)]
    pub component: Component,
    /// How it touches the job.
    #[serde(flatten)]
    pub impact: JobImpact,
}

/// Every job of a cycle, hurt ones first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Roster {
    /// The jobs, those hurt first (most ranks hit), then by name; at most
    /// [`MAX_JOBS`].
    pub jobs: Vec<JobView>,
    /// Jobs left out beyond [`MAX_JOBS`] (none of them hurt more than
    /// the last one listed).
    pub omitted: usize,
}

/// The roster of the jobs among `pairs` (prober, responder), counted with
/// `ranks`, hurt as `verdicts` say (each blamed component with the jobs it
/// touches, as [`super::impact::impact`] found them), with their `groups`.
pub fn roster<'a, I>(
    pairs: I,
    ranks: &HashMap<String, Ranks>,
    verdicts: impl IntoIterator<Item = (&'a Component, &'a [JobImpact])>,
    groups: &HashMap<String, GroupState>,
) -> Roster
where
    I: IntoIterator<Item = (&'a Identity, &'a Identity)>,
{
    let mut seen: BTreeMap<&str, (BTreeSet<&str>, usize)> = BTreeMap::new();
    for (a, b) in pairs {
        let Some(job) = job_of(a, b) else {
            continue;
        };
        let e = seen.entry(job).or_default();
        e.0.insert(&a.node);
        e.0.insert(&b.node);
        e.1 += 1;
    }
    let mut hurts: HashMap<&str, Vec<Hurt>> = HashMap::new();
    for (c, impacts) in verdicts {
        for i in impacts {
            hurts.entry(i.job.as_str()).or_default().push(Hurt {
                component: c.clone(),
                impact: i.clone(),
            });
        }
    }
    let mut jobs: Vec<JobView> = seen
        .into_iter()
        .map(|(job, (nodes, pairs))| JobView {
            job: job.to_string(),
            ranks: job_size(nodes.iter().copied(), ranks),
            containers: nodes.len(),
            pairs,
            hurt_by: hurts.remove(job).unwrap_or_default(),
            groups: groups.get(job).cloned(),
        })
        .collect();
    let worst = |j: &JobView| j.hurt_by.iter().map(|h| h.impact.ranks_hit).max();
    for j in &mut jobs {
        j.hurt_by.sort_by(|x, y| {
            y.impact
                .ranks_hit
                .cmp(&x.impact.ranks_hit)
                .then_with(|| x.component.cmp(&y.component))
        });
    }
    jobs.sort_by(|x, y| worst(y).cmp(&worst(x)).then_with(|| x.job.cmp(&y.job)));
    let omitted = jobs.len().saturating_sub(MAX_JOBS);
    jobs.truncate(MAX_JOBS);
    Roster { jobs, omitted }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::impact::impact;
    use crate::jobs::impact::tests::rank;
    use skeletonhunter_common::topology::Kind;

    #[test]
    fn the_jobs_a_blamed_tor_touches_come_first_with_their_ranks() {
        // Job a: 4 containers of 8 ranks over two ToRs, a ring. Job b:
        // 2 containers under tor1, ranks unknown. Job c: under tor1 only.
        let a: Vec<Identity> = (0..4).map(|c| rank("a", c, c / 2, c % 2)).collect();
        let b = [rank("b", 0, 1, 0), rank("b", 1, 1, 1)];
        let c = [rank("c", 0, 1, 0), rank("c", 1, 1, 1)];
        let mut pairs: Vec<(&Identity, &Identity)> =
            (0..4).map(|i| (&a[i], &a[(i + 1) % 4])).collect();
        pairs.extend([(&b[0], &b[1]), (&b[1], &b[0]), (&c[0], &c[1])]);
        let ranks: HashMap<String, Ranks> = (0..4)
            .map(|i| {
                (
                    format!("a-{i}"),
                    Ranks::new(8 * i as u32, 8, Some(32)).unwrap(),
                )
            })
            .collect();
        let tor0 = Component::new(Kind::Tor, "tor0");
        let hit = impact(pairs.iter().copied(), &ranks, tor0.kind, &tor0.id);
        let r = roster(
            pairs.iter().copied(),
            &ranks,
            [(&tor0, hit.as_slice())],
            &HashMap::new(),
        );
        let names: Vec<&str> = r.jobs.iter().map(|j| j.job.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"], "hurt first, then by name");
        let ja = &r.jobs[0];
        assert_eq!((ja.ranks, ja.containers, ja.pairs), (32, 4, 4));
        assert_eq!(ja.hurt_by.len(), 1);
        assert_eq!(ja.hurt_by[0].component, tor0);
        assert_eq!(
            (
                ja.hurt_by[0].impact.ranks_under,
                ja.hurt_by[0].impact.spans_under.as_str()
            ),
            (16, "0-15")
        );
        let jb = &r.jobs[1];
        assert_eq!(
            (jb.ranks, jb.containers, jb.pairs, jb.hurt_by.len()),
            (2, 2, 2, 0)
        );
        assert_eq!(r.omitted, 0);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["jobs"][0]["hurt_by"][0]["kind"], "tor");
        assert_eq!(json["jobs"][0]["hurt_by"][0]["ranks_hit"], 32);
    }

    #[test]
    fn the_roster_is_bounded() {
        let nodes: Vec<[Identity; 2]> = (0..MAX_JOBS + 3)
            .map(|j| {
                [
                    rank(&format!("j{j:04}"), 0, 0, 0),
                    rank(&format!("j{j:04}"), 1, 0, 1),
                ]
            })
            .collect();
        let r = roster(
            nodes.iter().map(|[a, b]| (a, b)),
            &HashMap::new(),
            [],
            &HashMap::new(),
        );
        assert_eq!((r.jobs.len(), r.omitted), (MAX_JOBS, 3));
    }
}
