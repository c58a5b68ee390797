//! The runtime peer set: the union of every discovery source's peer list.
//!
//! Each source (static config, DNS, ToR mesh, eBPF) owns one slot and
//! atomically replaces its whole list with [`PeerSet::replace`]; sources
//! never see or edit each other's peers. The scheduler waits on
//! [`PeerSet::subscribe`] and re-reads [`PeerSet::snapshot`]; it retires the
//! targets of peers that disappeared from every source and has their
//! series removed (telemetry owns series, the scheduler decides).

use crate::model::{Peer, PeerSource};
use crate::telemetry::Metrics;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

#[derive(Default)]
struct Inner {
    by_source: BTreeMap<PeerSource, Vec<Peer>>,
}

impl Inner {
    /// The merged view: one peer per address, highest-priority source first.
    fn merged(&self) -> Vec<Peer> {
        let mut out: HashMap<IpAddr, Peer> = HashMap::new();
        // BTreeMap iterates in priority order, so the first insert wins.
        for peers in self.by_source.values() {
            for p in peers {
                out.entry(p.addr).or_insert_with(|| p.clone());
            }
        }
        let mut v: Vec<Peer> = out.into_values().collect();
        v.sort_by_key(|p| p.addr);
        v
    }
}

/// The shared, source-partitioned peer set. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct PeerSet {
    inner: Arc<Mutex<Inner>>,
    version: Arc<watch::Sender<u64>>,
    metrics: Option<Arc<Metrics>>,
}

impl PeerSet {
    /// A set that keeps `skeletonhunter_skeleton_peers` in `metrics`
    /// (pass `None` in unit tests).
    pub fn new(metrics: Option<Arc<Metrics>>) -> PeerSet {
        let (tx, _rx) = watch::channel(0u64);
        let set = PeerSet {
            inner: Arc::new(Mutex::new(Inner::default())),
            version: Arc::new(tx),
            metrics,
        };
        if let Some(m) = &set.metrics {
            for s in PeerSource::ALL {
                m.set_skeleton_peers(s, 0);
            }
        }
        set
    }

    /// Replace everything `source` knows with `peers` (deduplicated by
    /// address; entries whose `source` differs are re-tagged). Returns
    /// whether the merged set changed.
    pub fn replace(&self, source: PeerSource, peers: Vec<Peer>) -> bool {
        let mut seen = std::collections::HashSet::new();
        let mut clean: Vec<Peer> = Vec::with_capacity(peers.len());
        for mut p in peers {
            if seen.insert(p.addr) {
                p.source = source;
                clean.push(p);
            }
        }
        clean.sort_by_key(|p| p.addr);
        let count = clean.len();
        let changed = {
            let mut inner = self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if inner
                .by_source
                .get(&source)
                .map_or(clean.is_empty(), |v| v == &clean)
            {
                false
            } else {
                let before = inner.merged();
                inner.by_source.insert(source, clean);
                before != inner.merged()
            }
        };
        if let Some(m) = &self.metrics {
            m.set_skeleton_peers(source, count);
        }
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
        changed
    }

    /// The merged peers, one per address, sorted by address.
    pub fn snapshot(&self) -> Vec<Peer> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .merged()
    }

    /// How many peers `source` currently contributes.
    pub fn count(&self, source: PeerSource) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .by_source
            .get(&source)
            .map(Vec::len)
            .unwrap_or(0)
    }

    /// A receiver that is notified whenever the merged set changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &str, s: PeerSource) -> Peer {
        Peer::new(a.parse().unwrap(), s)
    }

    #[test]
    fn sources_merge_by_address_with_priority() {
        let set = PeerSet::new(None);
        assert!(set.replace(PeerSource::Ebpf, vec![p("10.0.0.1", PeerSource::Ebpf)]));
        assert!(set.replace(
            PeerSource::Static,
            vec![
                p("10.0.0.1", PeerSource::Static).with_name("a"),
                p("10.0.0.2", PeerSource::Static)
            ]
        ));
        let snap = set.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(snap[0].source, PeerSource::Static);
        assert_eq!(snap[0].name.as_deref(), Some("a"));
        assert_eq!(set.count(PeerSource::Ebpf), 1);
        assert_eq!(set.count(PeerSource::Static), 2);
    }

    #[test]
    fn replace_reports_changes_and_notifies() {
        let set = PeerSet::new(None);
        let mut rx = set.subscribe();
        assert!(!set.replace(PeerSource::Dns, vec![]));
        assert!(set.replace(PeerSource::Dns, vec![p("10.0.0.3", PeerSource::Dns)]));
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        // Same list again: no change, no notification.
        assert!(!set.replace(PeerSource::Dns, vec![p("10.0.0.3", PeerSource::Dns)]));
        assert!(!rx.has_changed().unwrap());
        // A peer also known to another source stays in the merged set.
        set.replace(PeerSource::Static, vec![p("10.0.0.3", PeerSource::Static)]);
        rx.borrow_and_update();
        assert!(!set.replace(PeerSource::Dns, vec![]));
        assert_eq!(set.snapshot().len(), 1);
    }

    #[test]
    fn duplicates_within_a_source_are_dropped() {
        let set = PeerSet::new(None);
        set.replace(
            PeerSource::TorMesh,
            vec![
                p("10.0.0.4", PeerSource::Static),
                p("10.0.0.4", PeerSource::Static),
            ],
        );
        let snap = set.snapshot();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[0].source, PeerSource::TorMesh);
    }
}
