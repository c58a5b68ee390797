//! From flows to paths (pure): each probe flow's hops as last traced, the
//! rule that keeps a broken path's last complete trace, path ids, and the
//! grouping of a pair's flows by path with the loss of each path.

use super::Trace;
use crate::probe::FlowCount;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// One flow's path: the address answering at each TTL (`None`: silent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowPath {
    /// Hop `i` answered at TTL `i + 1`.
    pub hops: Vec<Option<Ipv4Addr>>,
    /// Whether the destination answered (the path is complete).
    pub reached: bool,
}

impl FlowPath {
    /// The path a finished trace found.
    pub fn of(t: &Trace) -> FlowPath {
        FlowPath {
            hops: t.hops.iter().map(|h| h.address).collect(),
            reached: t.reached,
        }
    }
}

/// Whether `new` says nothing against `old`: every hop that answered in
/// `new` answered with the same address at the same TTL in `old`, and
/// `new` did not go further (nor end somewhere else).
fn consistent(old: &FlowPath, new: &FlowPath) -> bool {
    if new.reached && new.hops.len() != old.hops.len() {
        return false;
    }
    new.hops
        .iter()
        .enumerate()
        .all(|(i, n)| n.is_none() || old.hops.get(i) == Some(n))
}

/// The path to keep for a flow after a new trace. A trace cut short by
/// silence (or with hops that did not answer) where the last complete
/// trace of the flow continued shows the same path, broken or rate
/// limited: the complete one is kept, so the link that died stays named.
/// Any hop that answered differently means the path moved: the new one.
pub fn merge(old: Option<&FlowPath>, new: FlowPath) -> FlowPath {
    match old {
        Some(o) if o.reached && consistent(o, &new) => o.clone(),
        _ => new,
    }
}

/// The path id: FNV-1a (32 bits) of the hop addresses joined by `,`
/// (`*` for a silent hop), as 8 hex digits — stable across restarts
/// and hosts, so the same path has the same id everywhere.
pub fn path_id(hops: &[Option<Ipv4Addr>]) -> String {
    let text = hops
        .iter()
        .map(|h| h.map_or_else(|| "*".to_string(), |a| a.to_string()))
        .collect::<Vec<_>>()
        .join(",");
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// One distinct path of a pair and the flows that take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathView {
    /// [`path_id`] of the hops.
    pub id: String,
    /// The hops.
    pub hops: Vec<Option<Ipv4Addr>>,
    /// Flow indices taking it, ascending.
    pub flows: Vec<usize>,
}

impl PathView {
    /// The (probes, lost) of the path's flows in `counts` (indexed by
    /// flow; flows beyond it count nothing).
    pub fn loss(&self, counts: &[FlowCount]) -> FlowCount {
        let mut c = FlowCount::default();
        for f in &self.flows {
            if let Some(x) = counts.get(*f) {
                c.sent += x.sent;
                c.lost += x.lost;
            }
        }
        c
    }
}

/// Group a pair's flows by their hops; ordered by the lowest flow index
/// of each path, so the order is stable while nothing changes.
pub fn group(flows: &BTreeMap<usize, FlowPath>) -> Vec<PathView> {
    let mut out: Vec<PathView> = Vec::new();
    for (f, p) in flows {
        match out.iter_mut().find(|v| v.hops == p.hops) {
            Some(v) => v.flows.push(*f),
            None => out.push(PathView {
                id: path_id(&p.hops),
                hops: p.hops.clone(),
                flows: vec![*f],
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(hops: &[Option<u8>], reached: bool) -> FlowPath {
        FlowPath {
            hops: hops
                .iter()
                .map(|h| h.map(|x| Ipv4Addr::new(198, 19, 0, x)))
                .collect(),
            reached,
        }
    }

    #[test]
    fn a_broken_path_keeps_its_last_complete_trace() {
        let full = p(&[Some(1), Some(2), Some(3), Some(4)], true);
        // Cut short by silence after hop 2: the link beyond it died.
        let cut = p(&[Some(1), Some(2), None, None, None], false);
        assert_eq!(merge(Some(&full), cut.clone()), full);
        // Silent TTLs beyond where the destination answered say nothing.
        let late = p(&[Some(1), Some(2), Some(3), None, None, None], false);
        assert_eq!(merge(Some(&full), late), full);
        // Silent hops in the middle (rate-limited ICMP), same end.
        let gaps = p(&[Some(1), None, Some(3), Some(4)], true);
        assert_eq!(merge(Some(&full), gaps), full);
        // A hop answered differently, or answered beyond the old end: the
        // path moved.
        let beyond = p(&[Some(1), Some(2), Some(3), Some(4), Some(5)], false);
        assert_eq!(merge(Some(&full), beyond.clone()), beyond);
        let moved = p(&[Some(1), Some(9), None], false);
        assert_eq!(merge(Some(&full), moved.clone()), moved);
        // Longer or shorter complete path: moved too.
        let longer = p(&[Some(1), Some(2), Some(3), Some(4), Some(5)], true);
        assert_eq!(merge(Some(&full), longer.clone()), longer);
        let shorter = p(&[Some(1), Some(4)], true);
        assert_eq!(merge(Some(&full), shorter.clone()), shorter);
        // Nothing complete before: the partial trace is all we know.
        assert_eq!(merge(None, cut.clone()), cut);
        let partial_before = p(&[Some(1), Some(2), Some(3)], false);
        assert_eq!(merge(Some(&partial_before), cut.clone()), cut);
    }

    #[test]
    fn path_ids_are_stable_short_and_distinct() {
        let a = p(&[Some(1), Some(2), Some(3)], true);
        let b = p(&[Some(1), Some(5), Some(3)], true);
        let id = path_id(&a.hops);
        assert_eq!(id.len(), 8);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(id, path_id(&a.hops.clone()));
        assert_ne!(id, path_id(&b.hops));
        // A silent hop is part of the identity.
        assert_ne!(path_id(&[None]), path_id(&[]));
        // The FNV-1a reference value of "" is its offset basis.
        assert_eq!(path_id(&[]), "811c9dc5");
    }

    #[test]
    fn flows_group_by_path_and_paths_sum_their_flows() {
        let a = p(&[Some(1), Some(2)], true);
        let b = p(&[Some(1), Some(3)], true);
        let flows: BTreeMap<usize, FlowPath> =
            [(0, a.clone()), (1, b.clone()), (2, a.clone()), (4, b)].into();
        let g = group(&flows);
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].flows.clone(), g[1].flows.clone()),
            (vec![0, 2], vec![1, 4])
        );
        assert_eq!(g[0].id, path_id(&a.hops));
        let c = |sent, lost| FlowCount { sent, lost };
        let counts = [c(10, 0), c(10, 10), c(5, 1), c(7, 7)];
        assert_eq!(g[0].loss(&counts), c(15, 1));
        assert_eq!(g[1].loss(&counts), c(10, 10), "flow 4 has no counts");
    }
}
