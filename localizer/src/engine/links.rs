//! Link-level localization from per-path evidence (multi-flow probing: a
//! pair's flows spread over its ECMP paths, and each traced path carries
//! the loss of the flows taking it).
//!
//! A link is a traced hop address: the directed link into the router that
//! answered from it (routers answer from their ingress interface on the
//! test fabric and by default on Linux). The stage runs before the
//! component tomography and only on pairs with path data:
//!
//! 1. every link crossed by some but not all of a pair's paths is a
//!    candidate; its evidence is the within-pair contrast of
//!    [`super::contrast`] (flows via the link against the same pair's other
//!    flows), which cancels every effect shared by a pair's flows —
//!    endpoint, ToR, and the reverse-path loss a dead link causes on pairs
//!    whose forward paths avoid it;
//! 2. a candidate passes with a significant pooled test (Bonferroni over
//!    the candidates), at least `min_pairs` pairs leaning its way, and
//!    evidence that survives dropping its `min_pairs` strongest pairs;
//! 3. the router rule: if at least half of the other links *into the same
//!    router* (links sharing a next hop with it) or *out of the same
//!    router* (sharing a previous hop) show the symptom too (at the
//!    uncorrected level, with the pairs the candidate explains set aside:
//!    its reverse pairs would lend them its own evidence), the router is at fault, not
//!    this link, and the stage blames nothing there (the component
//!    tomography then blames the spine from the pairs' labels);
//! 4. greedy: the strongest passing link is accepted and the pairs it
//!    explains (below) are taken out of the other candidates' evidence (so
//!    the links after it on its paths, and the links of the reverse pairs
//!    whose replies it hit, lose their evidence), then again, at most once
//!    per candidate.
//!
//! The pairs an accepted link explains — those whose forward flows can
//! cross it, and their reverse pairs, whose replies can — are left out of
//! the component tomography, so a link fault is never also blamed on the
//! ToR or the spine above it.

use super::contrast::{contrast_test, extra_loss, without_strongest, Contrast, Counts};
use super::model::{Blame, Config, Fault, PairStats, Symptom};
use super::stats::one_sided_lr_p_value;
use skeletonhunter_common::topology::{Component, Kind};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One forward path of one pair, its links interned.
#[derive(Debug, Clone)]
struct Row {
    pair: usize,
    links: Vec<u32>,
    counts: Counts,
}

/// Every path row, with the link graph the traces reveal.
#[derive(Debug, Default)]
struct Paths {
    names: Vec<String>,
    rows: Vec<Row>,
    /// Rows of each pair (consecutive).
    by_pair: HashMap<usize, Vec<usize>>,
    /// Rows crossing each link.
    rows_of: Vec<Vec<usize>>,
    /// Links seen right after / right before each link on some path.
    succ: Vec<BTreeSet<u32>>,
    pred: Vec<BTreeSet<u32>>,
}

impl Paths {
    fn build(pairs: &[&PairStats]) -> Paths {
        let mut p = Paths::default();
        let mut ids: HashMap<String, u32> = HashMap::new();
        for (i, pair) in pairs.iter().enumerate() {
            for path in &pair.paths {
                if !(path.probes.is_finite() && path.probes > 0.0) {
                    continue;
                }
                let mut links = Vec::with_capacity(path.hops.len());
                let mut prev: Option<u32> = None;
                for hop in &path.hops {
                    if hop.is_empty() {
                        prev = None;
                        continue;
                    }
                    let id = p.intern(&mut ids, hop);
                    if let Some(a) = prev.filter(|&a| a != id) {
                        p.succ[a as usize].insert(id);
                        p.pred[id as usize].insert(a);
                    }
                    prev = Some(id);
                    links.push(id);
                }
                links.sort_unstable();
                links.dedup();
                let lost = if path.lost.is_finite() {
                    path.lost.max(0.0)
                } else {
                    0.0
                };
                let mut counts = Counts::default();
                counts.add(path.probes, lost);
                let r = p.rows.len();
                for &l in &links {
                    p.rows_of[l as usize].push(r);
                }
                p.by_pair.entry(i).or_default().push(r);
                p.rows.push(Row {
                    pair: i,
                    links,
                    counts,
                });
            }
        }
        p
    }

    fn intern(&mut self, ids: &mut HashMap<String, u32>, hop: &str) -> u32 {
        if let Some(&id) = ids.get(hop) {
            return id;
        }
        let id = self.names.len() as u32;
        ids.insert(hop.to_string(), id);
        self.names.push(hop.to_string());
        self.rows_of.push(Vec::new());
        self.succ.push(BTreeSet::new());
        self.pred.push(BTreeSet::new());
        id
    }

    /// Per pair crossing link `l`, its unexplained flows via `l` and not.
    fn contrasts(&self, l: u32, explained: &[bool]) -> Vec<Contrast> {
        let pairs: BTreeSet<usize> = self.rows_of[l as usize]
            .iter()
            .filter(|&&r| !explained[r])
            .map(|&r| self.rows[r].pair)
            .collect();
        pairs
            .into_iter()
            .filter_map(|pair| {
                let mut c = Contrast {
                    pair,
                    via: Counts::default(),
                    other: Counts::default(),
                };
                for &r in &self.by_pair[&pair] {
                    if explained[r] {
                        continue;
                    }
                    let row = &self.rows[r];
                    let side = if row.links.binary_search(&l).is_ok() {
                        &mut c.via
                    } else {
                        &mut c.other
                    };
                    side.add(row.counts.n, row.counts.k);
                }
                (c.via.n > 0.0 && c.other.n > 0.0).then_some(c)
            })
            .collect()
    }

    /// Links into the same router as `l` (sharing a next hop) and out of
    /// the same router (sharing a previous hop).
    fn siblings(&self, l: u32) -> [Vec<u32>; 2] {
        let share = |sets: &[BTreeSet<u32>]| -> Vec<u32> {
            let mine = &sets[l as usize];
            (0..self.names.len() as u32)
                .filter(|&m| m != l && !sets[m as usize].is_disjoint(mine))
                .collect()
        };
        [share(&self.succ), share(&self.pred)]
    }
}

/// One candidate link's test under the current explanation.
#[derive(Debug, Clone)]
struct Verdict {
    link: u32,
    stat: f64,
    p_value: f64,
    score: f64,
    /// Pairs leaning the link's way.
    leaning: Vec<usize>,
    /// Passes the pooled, count and robustness tests (router rule aside).
    passes: bool,
}

fn evaluate(
    paths: &Paths,
    l: u32,
    explained: &[bool],
    level: f64,
    config: &Config,
) -> Option<Verdict> {
    let rows = paths.contrasts(l, explained);
    if rows.len() < config.min_pairs.max(1) {
        return None;
    }
    let (_, stat) = contrast_test(&rows);
    let p_value = one_sided_lr_p_value(stat);
    let leaning: Vec<usize> = rows.iter().filter(|r| r.leans()).map(|r| r.pair).collect();
    let passes = p_value < level && leaning.len() >= config.min_pairs.max(1) && {
        let (_, rest) = contrast_test(&without_strongest(&rows, config.min_pairs));
        one_sided_lr_p_value(rest) < config.alpha
    };
    Some(Verdict {
        link: l,
        stat,
        p_value,
        score: extra_loss(&rows),
        leaning,
        passes,
    })
}

/// The router rule: at least half of the links into (or out of) the same
/// router that have evidence show the symptom as well, once the pairs `v`'s link
/// explains are set aside (they would lend its siblings its own evidence:
/// their replies cross it).
fn router_fault(
    pairs: &[&PairStats],
    paths: &Paths,
    v: &Verdict,
    explained: &[bool],
    level: f64,
    config: &Config,
) -> bool {
    let mut own = vec![false; pairs.len()];
    mark_explained(pairs, paths, v.link, &mut own);
    let aside: Vec<bool> = paths
        .rows
        .iter()
        .enumerate()
        .map(|(r, row)| explained[r] || own[row.pair])
        .collect();
    paths.siblings(v.link).iter().any(|side| {
        let tested: Vec<Verdict> = side
            .iter()
            .filter_map(|&m| evaluate(paths, m, &aside, level, config))
            .collect();
        // A sibling shows the symptom at the per-candidate level, without
        // the multiple-testing correction: missing a router is the costly
        // error here.
        let showing = tested
            .iter()
            .filter(|s| s.p_value < config.alpha && s.leaning.len() >= config.min_pairs.max(1))
            .count();
        !tested.is_empty() && 2 * showing >= tested.len()
    })
}

/// What the link stage concluded.
#[derive(Debug, Clone, Default)]
pub struct LinkReport {
    /// Blamed links (kind `link`), `hit_pairs` indexing the input.
    pub faults: Vec<Fault>,
    /// Tested links worth exporting: the blamed ones and those whose test
    /// passed but which the router rule cleared.
    pub blame: Vec<Blame>,
    /// Per input pair: explained by a blamed link (forward or reply).
    pub explained: Vec<bool>,
}

/// Localize faulty ECMP links over `pairs` (see the module docs).
pub fn localize(pairs: &[&PairStats], config: &Config) -> LinkReport {
    let mut out = LinkReport {
        explained: vec![false; pairs.len()],
        ..LinkReport::default()
    };
    if pairs.iter().all(|p| p.paths.is_empty()) {
        return out;
    }
    let paths = Paths::build(pairs);
    let candidates: Vec<u32> = (0..paths.names.len() as u32)
        .filter(|&l| {
            !paths
                .contrasts(l, &vec![false; paths.rows.len()])
                .is_empty()
        })
        .collect();
    let level = config.alpha / candidates.len().max(1) as f64;
    let mut explained = vec![false; paths.rows.len()];
    let mut accepted: Vec<Verdict> = Vec::new();
    let mut cleared: HashMap<u32, Verdict> = HashMap::new();
    for _ in 0..candidates.len() {
        let verdicts: HashMap<u32, Verdict> = candidates
            .iter()
            .filter(|l| !accepted.iter().any(|a| a.link == **l))
            .filter_map(|&l| evaluate(&paths, l, &explained, level, config))
            .map(|v| (v.link, v))
            .collect();
        let mut passing: Vec<&Verdict> = verdicts.values().filter(|v| v.passes).collect();
        passing.sort_by(|a, b| b.stat.total_cmp(&a.stat).then(a.link.cmp(&b.link)));
        let Some(best) = passing
            .iter()
            .find(|v| {
                let router = router_fault(pairs, &paths, v, &explained, level, config);
                if router {
                    cleared.insert(v.link, (**v).clone());
                }
                !router
            })
            .map(|v| (**v).clone())
        else {
            break;
        };
        cleared.remove(&best.link);
        // Explain every flow of the pairs the link touches, replies
        // included: a reply-side loss is the same on all forward paths of
        // a pair only on average over its flows, and a pair of few flows
        // would otherwise lend a spurious contrast to its other links.
        mark_explained(pairs, &paths, best.link, &mut out.explained);
        for (r, row) in paths.rows.iter().enumerate() {
            explained[r] |= out.explained[row.pair];
        }
        accepted.push(best);
    }
    for v in &accepted {
        out.faults.push(fault_of(&paths, v, config));
    }
    out.blame = blame_of(&paths, &accepted, cleared.values(), config);
    out
}

fn symptom_of(score: f64, config: &Config) -> Symptom {
    if score >= config.unreachable_min_loss {
        Symptom::Unreachable
    } else {
        Symptom::Loss
    }
}

fn fault_of(paths: &Paths, v: &Verdict, config: &Config) -> Fault {
    // Links crossed by exactly the same path rows cannot be told apart.
    let own = &paths.rows_of[v.link as usize];
    let equivalent = (0..paths.names.len())
        .filter(|&m| m != v.link as usize && &paths.rows_of[m] == own)
        .map(|m| Component::new(Kind::Link, paths.names[m].clone()))
        .collect();
    Fault {
        kind: Kind::Link,
        id: paths.names[v.link as usize].clone(),
        score: v.score,
        p_value: v.p_value,
        symptom: symptom_of(v.score, config),
        pairs: v.leaning.len(),
        equivalent,
        hit_pairs: v.leaning.clone(),
    }
}

fn blame_of<'a>(
    paths: &Paths,
    accepted: &[Verdict],
    cleared: impl Iterator<Item = &'a Verdict>,
    config: &Config,
) -> Vec<Blame> {
    let mut cleared: Vec<&Verdict> = cleared.collect();
    cleared.sort_by_key(|v| v.link);
    accepted
        .iter()
        .map(|v| (v, true))
        .chain(cleared.into_iter().map(|v| (v, false)))
        .map(|(v, faulty)| Blame {
            component: Component::new(Kind::Link, paths.names[v.link as usize].clone()),
            symptom: symptom_of(v.score, config),
            score: v.score,
            p_value: v.p_value,
            faulty,
        })
        .collect()
}

/// Pairs link `l` can touch: from a node whose flows cross it to a node
/// they reach through it (forward), and the other way round (the replies).
fn mark_explained(pairs: &[&PairStats], paths: &Paths, l: u32, explained: &mut [bool]) {
    let mut from: HashSet<&str> = HashSet::new();
    let mut to: HashSet<&str> = HashSet::new();
    for &r in &paths.rows_of[l as usize] {
        let p = pairs[paths.rows[r].pair];
        from.insert(p.src.node.as_str());
        to.insert(p.dst.node.as_str());
    }
    for (i, p) in pairs.iter().enumerate() {
        let (s, d) = (p.src.node.as_str(), p.dst.node.as_str());
        if (from.contains(s) && to.contains(d)) || (to.contains(s) && from.contains(d)) {
            explained[i] = true;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::model::PathObs;
    use skeletonhunter_common::topology::Identity;

    /// A 3-ToR, 2-spine fabric, `per_tor` single-host nodes per ToR, every
    /// ordered pair probed over 16 flows of 50 probes. Flow f of a -> b
    /// goes up `u<ta><s>` and down `d<s><tb>` through spine s, its reply
    /// through an independently hashed spine. `faulty` maps a link (or
    /// `node:<name>`) to its loss; the counts are the expected ones.
    pub(crate) fn fabric(per_tor: usize, faulty: &[(&str, f64)]) -> Vec<PairStats> {
        let loss = |name: &str| {
            faulty
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0.0, |(_, q)| *q)
        };
        let nodes: Vec<(String, usize)> = (0..3 * per_tor)
            .map(|i| (format!("n{i}"), i / per_tor))
            .collect();
        let ident = |(n, t): &(String, usize)| Identity {
            node: n.clone(),
            nic: format!("nic-{n}"),
            host: format!("host-{n}"),
            tor: format!("t{t}"),
            spine: "block".into(),
            ..Default::default()
        };
        let hash = |a: usize, b: usize, f: usize, salt: usize| {
            (a * 7919 + b * 104_729 + f * 31 + salt * 1_000_003).wrapping_mul(2_654_435_761) >> 7
        };
        let mut out = Vec::new();
        for (ai, a) in nodes.iter().enumerate() {
            for (bi, b) in nodes.iter().enumerate() {
                if ai == bi {
                    continue;
                }
                let pair_survival =
                    (1.0 - loss(&format!("node:{}", a.0))) * (1.0 - loss(&format!("node:{}", b.0)));
                let mut rows: Vec<PathObs> = Vec::new();
                for f in 0..16 {
                    let hops: Vec<String> = if a.1 == b.1 {
                        vec![format!("h{}", a.0)]
                    } else {
                        let s = hash(ai, bi, f, 1) % 2;
                        vec![
                            format!("h{}", a.0),
                            format!("u{}{s}", a.1),
                            format!("d{s}{}", b.1),
                        ]
                    };
                    let mut surv = pair_survival;
                    for h in &hops {
                        surv *= 1.0 - loss(h);
                    }
                    if a.1 != b.1 {
                        let r = hash(bi, ai, f, 2) % 2;
                        surv *= (1.0 - loss(&format!("u{}{r}", b.1)))
                            * (1.0 - loss(&format!("d{r}{}", a.1)));
                    }
                    let lost = (50.0 * (1.0 - surv)).round();
                    match rows.iter_mut().find(|p| p.hops == hops) {
                        Some(p) => {
                            p.probes += 50.0;
                            p.lost += lost;
                        }
                        None => rows.push(PathObs {
                            id: hops.join(">"),
                            hops,
                            probes: 50.0,
                            lost,
                        }),
                    }
                }
                let (sent, lost) = rows
                    .iter()
                    .fold((0.0, 0.0), |(s, l), p| (s + p.probes, l + p.lost));
                out.push(PairStats {
                    src: ident(a),
                    dst: ident(b),
                    rounds: 10.0,
                    sent,
                    lost,
                    paths: rows,
                    ..Default::default()
                });
            }
        }
        out
    }

    fn run(pairs: &[PairStats]) -> LinkReport {
        localize(&pairs.iter().collect::<Vec<_>>(), &Config::default())
    }

    fn names(r: &LinkReport) -> Vec<String> {
        r.faults
            .iter()
            .map(|f| format!("{}:{}", f.id, f.symptom))
            .collect()
    }

    #[test]
    fn a_dead_uplink_is_blamed_and_explains_both_directions() {
        let pairs = fabric(3, &[("u10", 1.0)]);
        let r = run(&pairs);
        assert_eq!(names(&r), ["u10:unreachable"]);
        assert!(r.faults[0].score > 0.99);
        for (p, &e) in pairs.iter().zip(&r.explained) {
            let touches = (p.src.tor == "t1") != (p.dst.tor == "t1");
            assert_eq!(e, touches, "{} -> {}", p.src.node, p.dst.node);
        }
    }

    #[test]
    fn a_lossy_downlink_and_a_gray_uplink_are_blamed() {
        let r = run(&fabric(3, &[("d02", 0.3)]));
        assert_eq!(names(&r), ["d02:loss"]);
        assert!(
            (r.faults[0].score - 0.3).abs() < 0.05,
            "{}",
            r.faults[0].score
        );
        let r = run(&fabric(4, &[("u21", 0.04)]));
        assert_eq!(names(&r), ["u21:loss"]);
    }

    #[test]
    fn a_faulty_spine_is_not_blamed_on_its_links() {
        let spine: Vec<(String, f64)> = (0..3)
            .flat_map(|t| [(format!("u{t}1"), 0.3), (format!("d1{t}"), 0.3)])
            .collect();
        let refs: Vec<(&str, f64)> = spine.iter().map(|(n, q)| (n.as_str(), *q)).collect();
        let r = run(&fabric(3, &refs));
        assert!(r.faults.is_empty(), "{:?}", names(&r));
        assert!(r.explained.iter().all(|e| !e));
        assert!(r.blame.iter().any(|b| !b.faulty));
    }

    #[test]
    fn endpoint_faults_and_health_blame_no_link() {
        assert!(run(&fabric(3, &[])).faults.is_empty());
        let r = run(&fabric(3, &[("node:n1", 0.4), ("hn4", 1.0)]));
        assert!(r.faults.is_empty(), "{:?}", names(&r));
        // No path data: nothing to do.
        let mut pairs = fabric(2, &[("u10", 1.0)]);
        for p in &mut pairs {
            p.paths.clear();
        }
        let r = run(&pairs);
        assert!(r.faults.is_empty() && r.explained.iter().all(|e| !e));
    }
}
