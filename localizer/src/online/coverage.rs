//! Which pairs — and so which components — a cycle has fresh data for.
//!
//! A store that is paused, restarted or scraping late answers with fewer
//! pairs than the fabric has: a pair whose series have fewer than two
//! samples in the window has no `increase()` at all. Without a notion of
//! coverage such a cycle looks *clean* for every component whose pairs are
//! missing, and a firing alert resolves falsely (then fires again on the
//! next full cycle: two pages and a false all-clear).
//!
//! The localizer therefore remembers every pair it has seen (for the
//! topology window, bounded in number) as *expected*, and each cycle a pair
//! is *covered* when the cycle assembled data for it. A component is covered
//! when at least `min_ratio` of the expected pairs crossing it are; one that
//! is not is *unknown* this cycle: its alert keeps its state (see
//! `confirm.rs`). A cycle whose queries failed covers nothing.
//!
//! A pair neither of whose ends reports its identity any more (both left
//! `skeletonhunter_node_info`: a training job ended, its pods deleted, a
//! node drained) is no longer expected once a cycle goes without it: no
//! exporter is left to probe it, so no cycle could ever cover it, and
//! waiting for it would only leave its components unknown, and the
//! localizer blind, for the whole topology window. A pair with one end
//! still reporting stays expected: that end's probes are the evidence of
//! a dead container or exporter.
//!
//! Pure bookkeeping, tested without servers.

use crate::engine::model::PairStats;
use skeletonhunter_common::topology::{path_ids, Component, Identity, Kind};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Most pairs remembered as expected; beyond it the oldest are forgotten.
pub const MAX_EXPECTED_PAIRS: usize = 2_000_000;

/// A pair the localizer has seen, and where it runs.
#[derive(Debug, Clone)]
struct Expected {
    src: Arc<Identity>,
    dst: Arc<Identity>,
    hops: Vec<String>,
    /// Addresses on the pair's ECMP paths: each a `link` component.
    links: Vec<String>,
    /// When the pair last came with per-path rows: a cycle without them
    /// (path queries failing) covers the pair's components but not its
    /// links, and keeps the links it expects.
    links_seen: SystemTime,
    last_seen: SystemTime,
}

/// The memory of expected pairs across cycles.
#[derive(Debug)]
pub struct Coverage {
    min_ratio: f64,
    memory: Duration,
    /// Source node -> destination node -> pair: two levels, so a cycle
    /// looks its pairs up by borrowed names (at 100,000 pairs an owned key
    /// per lookup was 200,000 string copies a cycle).
    expected: HashMap<String, HashMap<String, Expected>>,
    /// Each node's identity as last seen, shared by the expected pairs it
    /// is an end of: a copy per pair end was ~80 MB at 100,000 pairs.
    identities: HashMap<String, Arc<Identity>>,
    /// The nodes reporting their identity now, as last read; `None` before
    /// a read found any (then no pair is forgotten for its ends).
    reporting: Option<HashSet<String>>,
}

/// One cycle's coverage: per component, (covered, expected) pairs.
#[derive(Debug, Clone, Default)]
pub struct CycleCoverage {
    min_ratio: f64,
    per_component: HashMap<Component, (u32, u32)>,
    /// Expected pairs with fresh data this cycle.
    pub pairs_covered: usize,
    /// Pairs expected this cycle (seen within the memory).
    pub pairs_expected: usize,
}

impl CycleCoverage {
    /// Whether `c` has enough fresh pairs for its state to change. A
    /// component no expected pair crosses (never seen, or forgotten after
    /// the memory) is covered: there is nothing left to wait for.
    pub fn is_covered(&self, c: &Component) -> bool {
        match self.per_component.get(c) {
            None | Some((_, 0)) => true,
            Some(&(covered, expected)) => {
                covered > 0 && f64::from(covered) >= self.min_ratio * f64::from(expected)
            }
        }
    }

    /// Components expected but not covered this cycle.
    pub fn unknown(&self) -> usize {
        self.per_component
            .keys()
            .filter(|c| !self.is_covered(c))
            .count()
    }
}

impl Coverage {
    /// A component is covered with at least `min_ratio` (clamped to
    /// [0.01, 1]) of its expected pairs fresh; pairs not seen for `memory`
    /// are no longer expected.
    pub fn new(min_ratio: f64, memory: Duration) -> Coverage {
        let min_ratio = if min_ratio.is_finite() {
            min_ratio.clamp(0.01, 1.0)
        } else {
            0.5
        };
        Coverage {
            min_ratio,
            memory,
            expected: HashMap::new(),
            identities: HashMap::new(),
            reporting: None,
        }
    }

    /// The nodes whose identity is current (`skeletonhunter_node_info`
    /// now) as just read. None at all is no news about the nodes (a store
    /// that lost every series, not a fabric whose every job ended): the
    /// set read before stays.
    pub fn set_reporting(&mut self, nodes: HashSet<String>) {
        if !nodes.is_empty() {
            self.reporting = Some(nodes);
        }
    }

    /// A cycle that assembled `pairs` at `now`: they become (or stay)
    /// expected and are the covered ones.
    pub fn observe(&mut self, pairs: &[PairStats], now: SystemTime) -> CycleCoverage {
        let Coverage {
            expected,
            identities,
            ..
        } = self;
        for p in pairs {
            let src = p.src.node.as_str();
            if !expected.contains_key(src) {
                expected.insert(src.to_string(), HashMap::new());
            }
            let Some(by_dst) = expected.get_mut(src) else {
                continue;
            };
            if !by_dst.contains_key(p.dst.node.as_str()) {
                let e = Expected {
                    src: shared(identities, &p.src),
                    dst: shared(identities, &p.dst),
                    hops: p.hops.clone(),
                    links: Vec::new(),
                    links_seen: now,
                    last_seen: now,
                };
                by_dst.insert(p.dst.node.clone(), e);
            }
            // Updated in place: at 100,000 pairs a fresh copy of both
            // identities every cycle is over a million allocations.
            let Some(e) = by_dst.get_mut(p.dst.node.as_str()) else {
                continue;
            };
            if *e.src != p.src {
                e.src = shared(identities, &p.src);
            }
            if *e.dst != p.dst {
                e.dst = shared(identities, &p.dst);
            }
            if e.hops != p.hops {
                e.hops = p.hops.clone();
            }
            e.last_seen = now;
            if !p.paths.is_empty() {
                let mut links: Vec<String> = p
                    .paths
                    .iter()
                    .flat_map(|x| x.hops.iter().filter(|h| !h.is_empty()).cloned())
                    .collect();
                links.sort_unstable();
                links.dedup();
                e.links = links;
                e.links_seen = now;
            }
        }
        self.forget(now);
        if let Some(reporting) = self.reporting.take() {
            let reports = |e: &Expected| {
                reporting.contains(e.src.node.as_str()) || reporting.contains(e.dst.node.as_str())
            };
            self.retain(|e| e.last_seen == now || reports(e));
            self.reporting = Some(reporting);
        }
        self.tally(|e| e.last_seen == now)
    }

    /// A cycle with no usable data at `now`: nothing is covered.
    pub fn blind(&mut self, now: SystemTime) -> CycleCoverage {
        self.forget(now);
        self.tally(|_| false)
    }

    /// Drop pairs older than the memory, then the oldest beyond the bound.
    fn forget(&mut self, now: SystemTime) {
        let memory = self.memory;
        self.retain(|e| {
            now.duration_since(e.last_seen)
                .map_or(true, |age| age <= memory)
        });
        let len = self.len();
        if len > MAX_EXPECTED_PAIRS {
            let mut ages: Vec<SystemTime> = self.pairs().map(|e| e.last_seen).collect();
            ages.sort_unstable();
            let cut = ages[len - MAX_EXPECTED_PAIRS];
            self.retain(|e| e.last_seen >= cut);
        }
    }

    /// Keep the expected pairs for which `keep` holds, and the identities
    /// they share.
    fn retain(&mut self, keep: impl Fn(&Expected) -> bool) {
        for by_dst in self.expected.values_mut() {
            by_dst.retain(|_, e| keep(e));
        }
        self.expected.retain(|_, by_dst| !by_dst.is_empty());
        self.identities.retain(|_, id| Arc::strong_count(id) > 1);
    }

    /// Every expected pair.
    fn pairs(&self) -> impl Iterator<Item = &Expected> {
        self.expected.values().flat_map(HashMap::values)
    }

    /// How many pairs are expected.
    fn len(&self) -> usize {
        self.expected.values().map(HashMap::len).sum()
    }

    fn tally(&self, fresh: impl Fn(&Expected) -> bool) -> CycleCoverage {
        let mut out = CycleCoverage {
            min_ratio: self.min_ratio,
            pairs_expected: self.len(),
            ..CycleCoverage::default()
        };
        // Counted under borrowed names, owned once per component at the end.
        let mut counts: HashMap<(Kind, &str), (u32, u32)> = HashMap::new();
        let mut count = |key, fresh: bool| {
            let n = counts.entry(key).or_insert((0, 0));
            n.0 += u32::from(fresh);
            n.1 += 1;
        };
        for e in self.pairs() {
            let f = fresh(e);
            out.pairs_covered += usize::from(f);
            for c in path_ids(&e.src, &e.dst) {
                count(c, f);
            }
            for h in &e.hops {
                count((Kind::Hop, h.as_str()), f);
            }
            let links_fresh = f && e.links_seen == e.last_seen;
            for l in &e.links {
                count((Kind::Link, l.as_str()), links_fresh);
            }
        }
        out.per_component = counts
            .into_iter()
            .map(|((kind, id), n)| (Component::new(kind, id), n))
            .collect();
        out
    }
}

/// `id` as shared in `identities`: the one kept for its node when equal,
/// else a new one kept from now on (pairs holding the old one take the
/// new one when next observed).
fn shared(identities: &mut HashMap<String, Arc<Identity>>, id: &Identity) -> Arc<Identity> {
    match identities.get(id.node.as_str()) {
        Some(kept) if **kept == *id => kept.clone(),
        _ => {
            let new = Arc::new(id.clone());
            identities.insert(id.node.clone(), new.clone());
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::online::fixtures::identity as id;

    fn pair(a: &str, ta: &str, b: &str, tb: &str) -> PairStats {
        PairStats {
            src: id(a, ta),
            dst: id(b, tb),
            rounds: 10.0,
            sent: 10.0,
            ..Default::default()
        }
    }

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    /// a, b under t1; c, d under t2; all directed pairs.
    fn full() -> Vec<PairStats> {
        let nodes = [("a", "t1"), ("b", "t1"), ("c", "t2"), ("d", "t2")];
        let mut out = Vec::new();
        for (x, tx) in nodes {
            for (y, ty) in nodes {
                if x != y {
                    out.push(pair(x, tx, y, ty));
                }
            }
        }
        out
    }

    #[test]
    fn a_full_cycle_covers_everything() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        let c = cov.observe(&full(), at(0));
        assert_eq!((c.pairs_covered, c.pairs_expected), (12, 12));
        assert_eq!(c.unknown(), 0);
        assert!(c.is_covered(&Component::new(Kind::Tor, "t1")));
    }

    #[test]
    fn a_partial_cycle_leaves_the_missing_components_unknown() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        cov.observe(&full(), at(0));
        // Only the pairs inside t2 answered.
        let part: Vec<PairStats> = full()
            .into_iter()
            .filter(|p| p.src.tor == "t2" && p.dst.tor == "t2")
            .collect();
        let c = cov.observe(&part, at(10));
        assert_eq!((c.pairs_covered, c.pairs_expected), (2, 12));
        // t1: 0 of 10 pairs; node a: 0 of 6; t2: 2 of 10 (< half).
        for (k, i) in [(Kind::Tor, "t1"), (Kind::Node, "a"), (Kind::Tor, "t2")] {
            assert!(!c.is_covered(&Component::new(k, i)), "{k} {i}");
        }
        // The spine: every cross-ToR pair is missing.
        assert!(!c.is_covered(&Component::new(Kind::Spine, "s1")));
        // c and d: 2 of their 6 pairs each, below half.
        assert!(!c.is_covered(&Component::new(Kind::Node, "c")));
        // Never seen: nothing to wait for.
        assert!(c.is_covered(&Component::new(Kind::Tor, "t9")));
        assert!(c.unknown() > 0);
    }

    #[test]
    fn half_of_a_components_pairs_is_enough_at_the_default() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        cov.observe(&full(), at(0));
        // Node a's own exporter is gone: only the pairs towards it remain.
        let part: Vec<PairStats> = full().into_iter().filter(|p| p.src.node != "a").collect();
        let c = cov.observe(&part, at(10));
        assert!(c.is_covered(&Component::new(Kind::Node, "a")));
    }

    #[test]
    fn a_failed_cycle_covers_nothing_and_old_pairs_are_forgotten() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(60));
        cov.observe(&full(), at(0));
        let c = cov.blind(at(10));
        assert_eq!((c.pairs_covered, c.pairs_expected), (0, 12));
        assert!(!c.is_covered(&Component::new(Kind::Tor, "t1")));
        let c = cov.blind(at(100));
        assert_eq!(c.pairs_expected, 0);
        assert!(c.is_covered(&Component::new(Kind::Tor, "t1")));
    }

    #[test]
    fn a_node_that_moves_is_expected_where_it_is_now() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(60));
        cov.observe(&full(), at(0));
        assert_eq!(cov.identities.len(), 4, "one identity a node");
        let old_a = Arc::downgrade(&cov.identities["a"]);
        // a moves from t1 to t3: every pair of a follows it.
        let moved: Vec<PairStats> = full()
            .into_iter()
            .map(|mut p| {
                for end in [&mut p.src, &mut p.dst] {
                    if end.node == "a" {
                        end.tor = "t3".into();
                    }
                }
                p
            })
            .collect();
        cov.observe(&moved, at(10));
        // Only pairs without a: a's pairs are missing, under t3 now.
        let rest: Vec<PairStats> = moved
            .iter()
            .filter(|p| p.src.node != "a" && p.dst.node != "a")
            .cloned()
            .collect();
        let c = cov.observe(&rest, at(20));
        assert!(
            !c.is_covered(&Component::new(Kind::Tor, "t3")),
            "a's pairs are t3's"
        );
        assert!(
            c.is_covered(&Component::new(Kind::Tor, "t1")),
            "b's are fresh"
        );
        assert_eq!(cov.identities["a"].tor, "t3");
        assert!(old_a.upgrade().is_none(), "the old identity of a is let go");
        // Once a's pairs are forgotten, so is its identity.
        cov.observe(&rest, at(75));
        assert_eq!(cov.identities.len(), 3);
    }

    fn nodes(names: &[&str]) -> HashSet<String> {
        names.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_jobs_pairs_are_forgotten_once_its_nodes_stop_reporting() {
        // Two jobs across both ToRs: a and c train together, b and d too.
        let job = |x, tx, y, ty| [pair(x, tx, y, ty), pair(y, ty, x, tx)];
        let [ac, ca] = job("a", "t1", "c", "t2");
        let [bd, db] = job("b", "t1", "d", "t2");
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        cov.set_reporting(nodes(&["a", "b", "c", "d"]));
        let all = [ac.clone(), ca.clone(), bd, db];
        assert_eq!(cov.observe(&all, at(0)).pairs_expected, 4);
        // b and d's job ended: their exporters and identities are gone.
        cov.set_reporting(nodes(&["a", "c"]));
        let c = cov.observe(&[ac, ca], at(10));
        assert_eq!((c.pairs_covered, c.pairs_expected), (2, 2));
        assert_eq!(c.unknown(), 0, "nothing left to wait for");
        assert!(c.is_covered(&Component::new(Kind::Node, "b")));
        assert_eq!(cov.identities.len(), 2, "b and d's identities let go");
    }

    #[test]
    fn a_pair_with_one_end_still_reporting_stays_expected() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        cov.set_reporting(nodes(&["a", "b", "c", "d"]));
        cov.observe(&full(), at(0));
        // d's exporter died: the pairs towards d are still probed (their
        // loss is the evidence), the pairs from d are gone but expected.
        cov.set_reporting(nodes(&["a", "b", "c"]));
        let towards: Vec<PairStats> = full().into_iter().filter(|p| p.src.node != "d").collect();
        let c = cov.observe(&towards, at(10));
        assert_eq!((c.pairs_covered, c.pairs_expected), (9, 12));
        assert!(c.is_covered(&Component::new(Kind::Node, "d")));
    }

    #[test]
    fn fresh_pairs_failed_cycles_and_empty_reads_forget_nothing() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        cov.set_reporting(nodes(&["a"]));
        let c = cov.observe(&full(), at(0));
        assert_eq!((c.pairs_covered, c.pairs_expected), (12, 12));
        assert_eq!(cov.blind(at(10)).pairs_expected, 12, "a failed cycle");
        // A read that finds no identity at all is no news: a stays the
        // only node reporting, and the pairs without it go.
        cov.set_reporting(HashSet::new());
        let c = cov.observe(&full()[..1], at(20));
        assert_eq!((c.pairs_covered, c.pairs_expected), (1, 6));
    }

    #[test]
    fn traced_hops_are_components_too() {
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        let mut p = pair("a", "t1", "c", "t2");
        p.hops = vec!["10.0.0.1".into()];
        cov.observe(&[p], at(0));
        let c = cov.blind(at(1));
        assert!(!c.is_covered(&Component::new(Kind::Hop, "10.0.0.1")));
    }

    #[test]
    fn links_need_fresh_path_rows() {
        use crate::engine::model::PathObs;
        let mut cov = Coverage::new(0.5, Duration::from_secs(3600));
        let mut p = pair("a", "t1", "c", "t2");
        p.paths = vec![PathObs {
            id: "p1".into(),
            hops: vec!["198.19.0.2".into(), String::new()],
            probes: 10.0,
            lost: 0.0,
        }];
        let link = Component::new(Kind::Link, "198.19.0.2");
        assert!(cov.observe(&[p.clone()], at(0)).is_covered(&link));
        // The path queries failed: the pair is fresh, its link is not.
        let mut bare = p.clone();
        bare.paths.clear();
        let c = cov.observe(&[bare], at(10));
        assert!(!c.is_covered(&link));
        assert!(c.is_covered(&Component::new(Kind::Tor, "t1")));
        assert!(cov.observe(&[p], at(20)).is_covered(&link));
    }
}
