//! One peer as the probers see it: its addresses, the `dst_node` label in
//! use, and its cached metric handles.

use crate::model::{Peer, Protocol};
use crate::telemetry::{DialSeries, FlowSeries, Metrics, RdmaSeries, Series};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Default ports used when a peer does not name its own.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// UDP echo port.
    pub udp: u16,
    /// TCP dial port.
    pub tcp: u16,
}

/// What a reply's node name did to its peer's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeClaim {
    /// The label in use (or no name at all).
    Same,
    /// The peer's first name: the label moved to it and is now pinned.
    Pinned,
    /// Another name than the pinned one: ignored.
    Conflict {
        /// The label kept.
        pinned: String,
    },
}

/// One peer as the probers see it: addresses, the `dst_node` label (learned
/// from UDP replies when possible), and its cached metric handles.
pub struct Target {
    /// The peer as the peer set has it.
    pub peer: Peer,
    /// Where UDP echoes go.
    pub udp_addr: SocketAddr,
    /// Where TCP dials go.
    pub tcp_addr: SocketAddr,
    metrics: Arc<Metrics>,
    state: Mutex<TargetState>,
    retired: AtomicBool,
}

struct TargetState {
    dst_node: String,
    /// A reply confirmed the name.
    learned: bool,
    /// The name is fixed: from configuration or discovery, or the first
    /// name the peer gave (see [`Target::learn_node`]).
    pinned: bool,
    series: [Option<Series>; 4],
    dial: Option<DialSeries>,
    rdma: Option<RdmaSeries>,
    flow: Option<FlowSeries>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("peer", &self.peer)
            .field("dst_node", &self.dst_node())
            .finish()
    }
}

impl Target {
    /// A fresh target labelled with the peer's known name or address.
    pub fn new(peer: Peer, ports: Ports, metrics: Arc<Metrics>) -> Target {
        let dst_node = peer.name.clone().unwrap_or_else(|| peer.addr.to_string());
        let pinned = peer.name.is_some();
        Target {
            udp_addr: peer.udp_addr(ports.udp),
            tcp_addr: peer.tcp_addr(ports.tcp),
            peer,
            metrics,
            state: Mutex::new(TargetState {
                pinned,
                dst_node,
                learned: false,
                series: [None, None, None, None],
                dial: None,
                rdma: None,
                flow: None,
            }),
            retired: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TargetState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The peer's address.
    pub fn addr(&self) -> IpAddr {
        self.peer.addr
    }

    /// The current `dst_node` label value.
    pub fn dst_node(&self) -> String {
        self.lock().dst_node.clone()
    }

    /// Whether the peer left the peer set; results for it are discarded.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// The probe series for `protocol` (created on first use).
    pub fn series(&self, protocol: Protocol) -> Option<Series> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.series[protocol.index()]
                .get_or_insert_with(|| self.metrics.series(self.peer.addr, &dst, protocol))
                .clone(),
        )
    }

    /// The TCP dial series.
    pub fn dial_series(&self) -> Option<DialSeries> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.dial
                .get_or_insert_with(|| self.metrics.dial_series(self.peer.addr, &dst))
                .clone(),
        )
    }

    /// The RDMA delay histograms.
    pub fn rdma_series(&self) -> Option<RdmaSeries> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.rdma
                .get_or_insert_with(|| self.metrics.rdma_series(self.peer.addr, &dst))
                .clone(),
        )
    }

    /// The multi-flow UDP series (worst flow, flow count).
    pub fn flow_series(&self) -> Option<FlowSeries> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.flow
                .get_or_insert_with(|| self.metrics.flow_series(self.peer.addr, &dst))
                .clone(),
        )
    }

    /// A reply told us who answered. A peer's identity is pinned: by its
    /// configured or discovered name, else by the first name it gives —
    /// then the label moves from the address to that name once (the old
    /// series are removed: a peer is one series per protocol, never two).
    /// A later, different claim changes nothing and is returned as a
    /// [`NodeClaim::Conflict`], so a peer cannot churn series or take
    /// another node's name.
    pub fn learn_node(&self, node: &str) -> NodeClaim {
        if node.is_empty() || self.is_retired() {
            return NodeClaim::Same;
        }
        let mut st = self.lock();
        if st.dst_node == node {
            st.learned = true;
            st.pinned = true;
            return NodeClaim::Same;
        }
        if st.pinned {
            return NodeClaim::Conflict {
                pinned: st.dst_node.clone(),
            };
        }
        let old = std::mem::replace(&mut st.dst_node, node.to_string());
        st.learned = true;
        st.pinned = true;
        st.series = [None, None, None, None];
        st.dial = None;
        st.rdma = None;
        st.flow = None;
        drop(st);
        tracing::info!(peer = %self.peer.addr, old = %old, new = %node, "peer identified by its reply; name pinned");
        self.metrics.forget_name(self.peer.addr, &old);
        NodeClaim::Pinned
    }

    /// Whether `dst_node` came from the peer itself.
    pub fn identity_learned(&self) -> bool {
        self.lock().learned
    }

    pub(super) fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        let mut st = self.lock();
        st.series = [None, None, None, None];
        st.dial = None;
        st.rdma = None;
        st.flow = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PeerSource;
    use skeletonhunter_common::Identity;

    fn target(name: Option<&str>) -> (Target, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new(&Identity::default()));
        let mut peer = Peer::new("10.0.0.2".parse().unwrap(), PeerSource::Ebpf);
        if let Some(n) = name {
            peer = peer.with_name(n);
        }
        let ports = Ports { udp: 1, tcp: 2 };
        (Target::new(peer, ports, metrics.clone()), metrics)
    }

    #[test]
    fn the_first_name_is_pinned_and_later_claims_are_conflicts() {
        let (t, _) = target(None);
        assert_eq!(t.dst_node(), "10.0.0.2");
        assert_eq!(t.learn_node(""), NodeClaim::Same);
        assert_eq!(t.learn_node("b"), NodeClaim::Pinned);
        assert_eq!(t.learn_node("b"), NodeClaim::Same);
        for claim in ["c", "a", "b2"] {
            assert_eq!(
                t.learn_node(claim),
                NodeClaim::Conflict { pinned: "b".into() }
            );
        }
        assert_eq!(t.dst_node(), "b");
        assert!(t.identity_learned());
    }

    #[test]
    fn a_configured_name_is_pinned_from_the_start() {
        let (t, _) = target(Some("b"));
        assert_eq!(
            t.learn_node("evil"),
            NodeClaim::Conflict { pinned: "b".into() }
        );
        assert_eq!(t.dst_node(), "b");
        assert!(!t.identity_learned());
        assert_eq!(t.learn_node("b"), NodeClaim::Same);
        assert!(t.identity_learned());
    }
}
