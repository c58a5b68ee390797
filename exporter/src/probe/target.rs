//! One peer as the probers see it: its addresses, the `dst_node` label in
//! use, and its cached metric handles.

use super::pins::Owner;
use super::PeerInfo;
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
    /// Another name than the pinned one: ignored (and counted).
    Conflict {
        /// The label kept.
        pinned: String,
    },
    /// A name another live peer holds: ignored (and counted); the peer
    /// keeps its address label.
    Taken,
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
    /// The name book and conflict counter.
    info: Arc<PeerInfo>,
    /// This target's claim on names.
    owner: Owner,
    state: Mutex<TargetState>,
    retired: AtomicBool,
    /// The peer said it is leaving ([`Target::leave`]) and has not
    /// answered without saying so since.
    away: AtomicBool,
}

struct TargetState {
    dst_node: String,
    /// A reply confirmed the name.
    learned: bool,
    /// The name is fixed and held in the name book: from configuration or
    /// discovery, or the first name the peer gave (see
    /// [`Target::learn_node`]).
    pinned: bool,
    /// Shared (`Arc`): a probe in flight holds its series through one
    /// reference count, not the five of the handles inside.
    series: [Option<Arc<Series>>; Protocol::ALL.len()],
    dial: Option<DialSeries>,
    rdma: Option<RdmaSeries>,
    flow: Option<FlowSeries>,
}

impl TargetState {
    /// Forget the cached metric handles (the series stay in the registry
    /// until the caller removes them).
    fn drop_handles(&mut self) {
        self.series = Default::default();
        self.dial = None;
        self.rdma = None;
        self.flow = None;
    }
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
    /// A fresh target labelled with the peer's known name, or its address
    /// while it has none or another live peer holds that name (a conflict,
    /// counted).
    pub fn new(peer: Peer, ports: Ports, metrics: Arc<Metrics>, info: Arc<PeerInfo>) -> Target {
        let owner = Owner {
            addr: peer.addr,
            token: info.token(),
        };
        let claimed = peer.name.as_deref().filter(|n| match info.claim(n, owner) {
            Ok(()) => true,
            Err(r) => {
                info.name_refused(peer.addr, n, &r);
                false
            }
        });
        let pinned = claimed.is_some();
        let dst_node = claimed.map_or_else(|| peer.addr.to_string(), str::to_string);
        Target {
            udp_addr: peer.udp_addr(ports.udp),
            tcp_addr: peer.tcp_addr(ports.tcp),
            peer,
            metrics,
            info,
            owner,
            state: Mutex::new(TargetState {
                pinned,
                dst_node,
                learned: false,
                series: Default::default(),
                dial: None,
                rdma: None,
                flow: None,
            }),
            retired: AtomicBool::new(false),
            away: AtomicBool::new(false),
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

    /// Whether the peer said it is leaving and has not answered since
    /// ([`Target::leave`]): it has no series, only the UDP prober still
    /// asks it, uncounted, whether it is back.
    pub fn is_away(&self) -> bool {
        self.away.load(Ordering::Relaxed)
    }

    /// The peer's reply said it is leaving (a job ended, a pod was deleted
    /// or moved, a rollout): its cached series are dropped and no more are
    /// made until [`Target::come_back`], so its silence to come is not
    /// loss. The name stays pinned: the peer may return under it. `true`
    /// if it was not away yet (the caller removes its series from the
    /// registry).
    pub fn leave(&self) -> bool {
        let mut st = self.lock();
        if self.is_retired() || self.away.swap(true, Ordering::Relaxed) {
            return false;
        }
        st.drop_handles();
        true
    }

    /// [`Target::leave`], and the peer's series removed from the registry
    /// and its departure counted: what every prober does when it learns a
    /// peer left, by its reply's word or by its silence after closing its
    /// connections. `true` if it was not away yet.
    pub fn depart(&self) -> bool {
        if !self.leave() {
            return false;
        }
        self.metrics.forget_peer(self.addr());
        self.metrics.peer_left();
        true
    }

    /// The peer answered without saying it is leaving: it is probed and
    /// counted again, under fresh series. `true` if it was away.
    pub fn come_back(&self) -> bool {
        let _st = self.lock();
        self.away.swap(false, Ordering::Relaxed)
    }

    /// The probe series for `protocol` (created on first use).
    pub fn series(&self, protocol: Protocol) -> Option<Arc<Series>> {
        self.cached(
            |st| &mut st.series[protocol.index()],
            |m, addr, dst| Arc::new(m.series(addr, dst, protocol)),
        )
    }

    /// The TCP dial series.
    pub fn dial_series(&self) -> Option<DialSeries> {
        self.cached(|st| &mut st.dial, Metrics::dial_series)
    }

    /// The RDMA delay histograms.
    pub fn rdma_series(&self) -> Option<RdmaSeries> {
        self.cached(|st| &mut st.rdma, Metrics::rdma_series)
    }

    /// The multi-flow UDP series (worst flow, flow count).
    pub fn flow_series(&self) -> Option<FlowSeries> {
        self.cached(|st| &mut st.flow, Metrics::flow_series)
    }

    /// The handles in `slot`, made by `make` (from the peer's address and
    /// current name) the first time; `None` once retired or while away, so
    /// neither brings its series back.
    fn cached<S: Clone>(
        &self,
        slot: impl Fn(&mut TargetState) -> &mut Option<S>,
        make: impl FnOnce(&Metrics, IpAddr, &str) -> S,
    ) -> Option<S> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        // Read under the lock: `leave` sets it under the lock too.
        if self.is_away() {
            return None;
        }
        // The label is copied only to make the handles: this runs for
        // every probe, and an allocation per probe adds up at 10,000 peers.
        if let Some(s) = slot(&mut st) {
            return Some(s.clone());
        }
        let made = make(&self.metrics, self.peer.addr, &st.dst_node);
        Some(slot(&mut st).insert(made).clone())
    }

    /// A reply told us who answered. A peer's identity is pinned: by its
    /// configured or discovered name, else by the first name it gives —
    /// then the label moves from the address to that name once (the old
    /// series are removed: a peer is one series per protocol, never two).
    /// A later, different claim changes nothing and is returned as a
    /// [`NodeClaim::Conflict`], so a peer cannot churn series; a name
    /// another live peer holds is refused ([`NodeClaim::Taken`]), so a peer
    /// cannot take another node's name. Both are counted and logged.
    pub fn learn_node(&self, node: &str) -> NodeClaim {
        if node.is_empty() {
            return NodeClaim::Same;
        }
        let mut st = self.lock();
        // Under the lock: `retire` releases the name under it too.
        if self.is_retired() {
            return NodeClaim::Same;
        }
        if st.dst_node == node {
            st.learned = true;
            st.pinned = true;
            return NodeClaim::Same;
        }
        // The configured name (when another peer holds it) is the only one
        // this peer may still take.
        let want = self.peer.name.as_deref().filter(|_| !st.pinned);
        if st.pinned || want.is_some_and(|w| w != node) {
            let pinned = want.map_or_else(|| st.dst_node.clone(), str::to_string);
            drop(st);
            self.info.identity_conflict(self.peer.addr, &pinned, node);
            return NodeClaim::Conflict { pinned };
        }
        if let Err(r) = self.info.claim(node, self.owner) {
            drop(st);
            self.info.name_refused(self.peer.addr, node, &r);
            return NodeClaim::Taken;
        }
        let old = std::mem::replace(&mut st.dst_node, node.to_string());
        st.learned = true;
        st.pinned = true;
        st.drop_handles();
        drop(st);
        tracing::info!(peer = %self.peer.addr, old = %old, new = %node, "peer identified by its reply; name pinned");
        self.metrics.forget_name(self.peer.addr, &old);
        NodeClaim::Pinned
    }

    /// Whether `dst_node` came from the peer itself.
    pub fn identity_learned(&self) -> bool {
        self.lock().learned
    }

    /// The peer left the peer set: its results are discarded and its name
    /// is free for another peer.
    pub(super) fn retire(&self) {
        let mut st = self.lock();
        self.retired.store(true, Ordering::Relaxed);
        st.drop_handles();
        if st.pinned {
            self.info.release(&st.dst_node, self.owner);
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let st = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.pinned {
            self.info.release(&st.dst_node, self.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PeerSource;
    use skeletonhunter_common::Identity;

    fn book() -> (Arc<Metrics>, Arc<PeerInfo>) {
        let metrics = Arc::new(Metrics::new(&Identity::default()));
        let info = PeerInfo::new(metrics.clone(), None);
        (metrics, info)
    }

    fn at(addr: &str, name: Option<&str>, book: &(Arc<Metrics>, Arc<PeerInfo>)) -> Target {
        let mut peer = Peer::new(addr.parse().unwrap(), PeerSource::Ebpf);
        if let Some(n) = name {
            peer = peer.with_name(n);
        }
        let ports = Ports { udp: 1, tcp: 2 };
        Target::new(peer, ports, book.0.clone(), book.1.clone())
    }

    #[test]
    fn the_first_name_is_pinned_and_later_claims_are_conflicts() {
        let b = book();
        let t = at("10.0.0.2", None, &b);
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
        assert_eq!(b.0.identity_conflicts(), 3);
    }

    #[test]
    fn a_leaving_peer_has_no_series_until_it_answers_again() {
        let b = book();
        let t = at("10.0.0.2", Some("b"), &b);
        assert!(t.series(Protocol::Udp).is_some());
        assert!(t.dial_series().is_some());
        assert!(t.leave(), "first notice");
        assert!(!t.leave(), "said once already");
        assert!(t.is_away());
        for p in Protocol::ALL {
            assert!(t.series(p).is_none(), "{p:?} while away");
        }
        assert!(t.dial_series().is_none() && t.flow_series().is_none());
        assert_eq!(t.dst_node(), "b", "the name stays");
        assert!(t.come_back());
        assert!(!t.come_back(), "back once");
        assert!(t.series(Protocol::Udp).is_some());
        // A retired target does not leave (its series are gone for good).
        t.retire();
        assert!(!t.leave());
    }

    #[test]
    fn a_configured_name_is_pinned_from_the_start() {
        let b = book();
        let t = at("10.0.0.2", Some("b"), &b);
        assert_eq!(
            t.learn_node("evil"),
            NodeClaim::Conflict { pinned: "b".into() }
        );
        assert_eq!(t.dst_node(), "b");
        assert!(!t.identity_learned());
        assert_eq!(t.learn_node("b"), NodeClaim::Same);
        assert!(t.identity_learned());
        assert_eq!(b.0.identity_conflicts(), 1);
    }

    #[test]
    fn a_second_address_cannot_take_a_live_peers_name() {
        let b = book();
        let real = at("10.0.0.2", None, &b);
        let impostor = at("10.0.0.3", None, &b);
        assert_eq!(real.learn_node("b"), NodeClaim::Pinned);
        assert_eq!(impostor.learn_node("b"), NodeClaim::Taken);
        assert_eq!(impostor.dst_node(), "10.0.0.3");
        assert_eq!(b.0.identity_conflicts(), 1);
        // Nor as its configured name, nor as the other's address.
        let configured = at("10.0.0.4", Some("b"), &b);
        assert_eq!(configured.dst_node(), "10.0.0.4");
        assert_eq!(impostor.learn_node("10.0.0.4"), NodeClaim::Taken);
        assert_eq!(b.0.identity_conflicts(), 3);
        // Once the owner leaves, the name is free.
        real.retire();
        assert_eq!(impostor.learn_node("b"), NodeClaim::Pinned);
        assert_eq!(impostor.dst_node(), "b");
        assert_eq!(b.1.name("10.0.0.3".parse().unwrap()).as_deref(), Some("b"));
    }
}
