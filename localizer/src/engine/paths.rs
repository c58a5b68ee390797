//! The per-path rows of the link stage ([`super::links`]): every traced
//! path of every pair with its links interned, the link graph the traces
//! reveal (which link follows which, and so which links enter or leave
//! one router), and which pairs a faulty link or router explains.

use super::contrast::{Contrast, Counts};
use super::evenness::complete;
use super::model::PairStats;
use skeletonhunter_common::topology::{path_class, PathClass};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One forward path of one pair, its links interned.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) pair: usize,
    pub(crate) links: Vec<u32>,
    pub(crate) counts: Counts,
}

/// Every path row, with the link graph the traces reveal.
#[derive(Debug, Default)]
pub(crate) struct Paths {
    pub(crate) names: Vec<String>,
    pub(crate) rows: Vec<Row>,
    /// Rows of each pair (consecutive).
    pub(crate) by_pair: HashMap<usize, Vec<usize>>,
    /// Rows crossing each link.
    pub(crate) rows_of: Vec<Vec<usize>>,
    /// Consecutive links seen on some path (`a` then `b`).
    pub(crate) adjacent: BTreeSet<(u32, u32)>,
}

impl Paths {
    pub(crate) fn build(pairs: &[&PairStats]) -> Paths {
        let mut p = Paths::default();
        let mut ids: HashMap<String, u32> = HashMap::new();
        for (i, pair) in pairs.iter().enumerate() {
            for (path, complete) in pair.paths.iter().zip(complete(&pair.paths)) {
                // A trace cut short by silence: where its flows go past
                // the silence is unknown, and they were traced because
                // they lost probes (selected loss).
                if !(path.probes.is_finite() && path.probes > 0.0 && complete) {
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
                        p.adjacent.insert((a, id));
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
        id
    }

    /// Per pair crossing link `l`, its unexplained flows via `l` and not.
    pub(crate) fn contrasts(&self, l: u32, explained: &[bool]) -> Vec<Contrast> {
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

    /// Router groups, by alias resolution on the traces: when `a` is
    /// followed by `b` on some path, the router `a` enters is the router
    /// `b` leaves. Node `2l` stands for the router link `l` enters, `2l+1`
    /// for the one it leaves; the result maps each node to its group.
    pub(crate) fn routers(&self) -> Vec<u32> {
        let mut parent: Vec<u32> = (0..2 * self.names.len() as u32).collect();
        fn find(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                parent[x as usize] = parent[parent[x as usize] as usize];
                x = parent[x as usize];
            }
            x
        }
        for &(a, b) in &self.adjacent {
            let (ra, rb) = (find(&mut parent, 2 * a), find(&mut parent, 2 * b + 1));
            parent[ra.max(rb) as usize] = ra.min(rb);
        }
        (0..parent.len() as u32)
            .map(|x| find(&mut parent, x))
            .collect()
    }

    /// Links into the same router as `l` and links out of the same router
    /// as `l` (see [`Paths::routers`]).
    pub(crate) fn siblings(&self, routers: &[u32], l: u32) -> [Vec<u32>; 2] {
        let group = |side: u32| -> Vec<u32> {
            let mine = routers[(2 * l + side) as usize];
            (0..self.names.len() as u32)
                .filter(|&m| m != l && routers[(2 * m + side) as usize] == mine)
                .collect()
        };
        [group(0), group(1)]
    }
}

/// Explain away the cross-ToR pairs among the endpoints of the paths
/// through the faulty routers: their loss, replies included, is no
/// evidence about the links around those routers.
pub(crate) fn explain_routers(
    pairs: &[&PairStats],
    paths: &Paths,
    routers: &[u32],
    faulty: &HashSet<u32>,
    explained: &mut [bool],
) {
    let mut ends: HashSet<&str> = HashSet::new();
    for row in &paths.rows {
        if row
            .links
            .iter()
            .any(|&l| faulty.contains(&routers[2 * l as usize]))
        {
            let p = pairs[row.pair];
            ends.insert(p.src.node.as_str());
            ends.insert(p.dst.node.as_str());
        }
    }
    for (r, row) in paths.rows.iter().enumerate() {
        let p = pairs[row.pair];
        explained[r] |= ends.contains(p.src.node.as_str())
            && ends.contains(p.dst.node.as_str())
            && path_class(&p.src, &p.dst) == PathClass::CrossTor;
    }
}

/// Pairs link `l` can touch: from a node whose flows cross it to a node
/// they reach through it (forward), and the other way round (the replies);
/// and when all the nodes sending through it (or all reached through it)
/// sit under one ToR, every cross-ToR pair of that ToR — the replies of
/// pairs whose forward flows never cross the link still can (an uplink of
/// the ToR carries any reply leaving it, a downlink any reply entering it).
pub(crate) fn mark_explained(pairs: &[&PairStats], paths: &Paths, l: u32, explained: &mut [bool]) {
    let mut from: HashSet<&str> = HashSet::new();
    let mut to: HashSet<&str> = HashSet::new();
    let (mut from_tor, mut to_tor): (Option<&str>, Option<&str>) = (None, None);
    let (mut from_mixed, mut to_mixed) = (false, false);
    for &r in &paths.rows_of[l as usize] {
        let p = pairs[paths.rows[r].pair];
        from.insert(p.src.node.as_str());
        to.insert(p.dst.node.as_str());
        same_tor(&mut from_tor, &mut from_mixed, p.src.tor.as_str());
        same_tor(&mut to_tor, &mut to_mixed, p.dst.tor.as_str());
    }
    let tors: Vec<&str> = [(from_tor, from_mixed), (to_tor, to_mixed)]
        .into_iter()
        .filter_map(|(t, mixed)| t.filter(|_| !mixed))
        .collect();
    for (i, p) in pairs.iter().enumerate() {
        let (s, d) = (p.src.node.as_str(), p.dst.node.as_str());
        let cross = path_class(&p.src, &p.dst) == PathClass::CrossTor;
        explained[i] |= (from.contains(s) && to.contains(d))
            || (to.contains(s) && from.contains(d))
            || (cross && tors.iter().any(|t| *t == p.src.tor || *t == p.dst.tor));
    }
}

/// Track whether every ToR seen is the same known one.
fn same_tor<'a>(tor: &mut Option<&'a str>, mixed: &mut bool, t: &'a str) {
    match *tor {
        _ if t.is_empty() => *mixed = true,
        None => *tor = Some(t),
        Some(x) if x != t => *mixed = true,
        Some(_) => {}
    }
}
