//! Everything the exporter's tracing needs to know, passed explicitly:
//! the tracer, the peer set, the names peers gave in their replies, the
//! pairs' UDP loss counters, the flows' recent counts, and how the probe
//! flows look. Also the watch that starts traces by itself: anomaly
//! traces of a pair's worst flow, and the mapping of every flow to its
//! path ([`super::mapper`]).

use super::anomaly::AnomalyDetector;
use super::mapper::{Mapper, Why};
use super::tracer::{Request, Start, TraceReason, Tracer};
use super::Flow;
use crate::discovery::PeerSet;
use crate::model::Peer;
use crate::probe::{FlowCount, PeerInfo};
use crate::sys::time::wall_ns;
use crate::wire::probe::{self as wire, TRACE_SESSION};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Cumulative (sent, lost) UDP probe counts towards a `dst_node`, when
/// its series exist.
pub type LossCounts = Arc<dyn Fn(&str) -> Option<(u64, u64)> + Send + Sync>;

/// Each UDP probe flow's (finished, lost) probes towards a peer over the
/// flow window, in flow order, when the peer is probed.
pub type FlowCounts = Arc<dyn Fn(IpAddr) -> Option<Vec<FlowCount>> + Send + Sync>;

/// Source port when the probe flow's is unknown.
pub const FALLBACK_SPORT: u16 = 33434;

/// The tracing context of one exporter.
pub struct Context {
    /// Runs and keeps the traces.
    pub tracer: Arc<Tracer>,
    /// Which peers may be traced.
    pub peers: PeerSet,
    /// Node names learned from replies (the `dst_node` label in use).
    pub peer_info: Arc<PeerInfo>,
    /// The pairs' loss counters.
    pub loss: LossCounts,
    /// The flows' recent counts.
    pub flows: FlowCounts,
    /// This exporter's node.
    pub src_node: String,
    /// Default UDP echo port of peers.
    pub udp_port: u16,
    /// Source ports of the UDP probe flows, in flow order (the UDP
    /// prober's sockets), so flow `i`'s trace follows flow `i`'s ECMP
    /// path; empty: one flow from [`FALLBACK_SPORT`].
    pub src_ports: Vec<u16>,
    /// Which flows to map when, within the mapping budget.
    pub mapper: Mutex<Mapper>,
}

/// The flow with the highest loss ratio in the window (the lowest index
/// among equals; 0 without counts): the one an anomaly trace follows.
pub fn worst_flow(counts: &[FlowCount]) -> usize {
    let mut best = (0, 0.0);
    for (i, c) in counts.iter().enumerate() {
        if c.ratio() > best.1 {
            best = (i, c.ratio());
        }
    }
    best.0
}

impl Context {
    /// A context with private path families, no loss or flow counts, the
    /// given source ports and no mapping: for tests of what sits on top.
    pub fn detached(peers: PeerSet, peer_info: Arc<PeerInfo>, src_ports: Vec<u16>) -> Context {
        Context {
            tracer: Tracer::new(super::TraceConfig::default(), Default::default()),
            peers,
            peer_info,
            loss: Arc::new(|_: &str| None),
            flows: Arc::new(|_: IpAddr| None),
            src_node: "a".into(),
            udp_port: 7477,
            src_ports,
            mapper: Mutex::new(Mapper::new(0, super::mapper::REFRESH, 1, Instant::now())),
        }
    }

    /// The `dst_node` label of `peer`, as the probes have it: the
    /// configured or discovered name, else the first name it gave, else
    /// its address.
    pub fn dst_node(&self, peer: &Peer) -> String {
        peer.name
            .clone()
            .or_else(|| self.peer_info.name(peer.addr))
            .unwrap_or_else(|| peer.addr.to_string())
    }

    /// Probe flows per peer.
    pub fn flow_count(&self) -> usize {
        self.src_ports.len().max(1)
    }

    /// The trace request for probe flow `flow` towards `peer`; `None` for
    /// IPv6 peers (tracing is IPv4 only for now) and unknown flows.
    pub fn request(&self, peer: &Peer, flow: usize, reason: TraceReason) -> Option<Request> {
        let IpAddr::V4(dst) = peer.addr else {
            return None;
        };
        let sport = match self.src_ports.get(flow) {
            Some(p) => *p,
            None if flow == 0 => FALLBACK_SPORT,
            None => return None,
        };
        let dport = peer.udp_port.unwrap_or(self.udp_port);
        let mut payload = Vec::new();
        wire::encode_request(
            &mut payload,
            TRACE_SESSION,
            0,
            wall_ns(),
            &[],
            wire::HEADER_LEN,
        );
        Some(Request {
            flow: Flow {
                src: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, sport),
                dst: SocketAddrV4::new(dst, dport),
            },
            flow_index: flow,
            src_node: self.src_node.clone(),
            dst_node: self.dst_node(peer),
            reason,
            payload,
        })
    }

    /// Every `every`, until `shutdown`: watch every pair's UDP loss and
    /// trace a pair's worst flow when the pair turns anomalous (loss ratio
    /// at or above `threshold` over `window` probes); publish the flows'
    /// counts as path loss; and map the flows that are due.
    pub async fn watch(
        self: Arc<Self>,
        every: Duration,
        window: u64,
        threshold: f64,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut det = AnomalyDetector::new(window, threshold);
        let mut known: HashSet<IpAddr> = HashSet::new();
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(every) => {}
            }
            let now = Instant::now();
            self.tracer.flush_logs(now);
            let peers = self.peers.snapshot();
            let mut due = Vec::new();
            for (i, p) in peers.iter().enumerate() {
                let counts = (self.flows)(p.addr);
                self.check(&mut det, p, counts.as_deref());
                if let Some(c) = counts {
                    self.due(i, p, &c, now, &mut due);
                    self.tracer.paths().counts(p.addr, &self.dst_node(p), c);
                }
            }
            self.map(&peers, due, now);
            // Peers that left: drop their traces and path series. A set,
            // not a scan per address: 10,000 peers would make it 10^8.
            let current: HashSet<IpAddr> = peers.iter().map(|p| p.addr).collect();
            for addr in known.difference(&current) {
                det.forget(*addr);
                self.tracer.forget(*addr);
                self.lock_mapper().forget(*addr);
            }
            known = current;
        }
    }

    fn lock_mapper(&self) -> std::sync::MutexGuard<'_, Mapper> {
        self.mapper
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Feed `p`'s counters to the detector; trace its worst flow while
    /// anomalous.
    fn check(&self, det: &mut AnomalyDetector, p: &Peer, counts: Option<&[FlowCount]>) {
        let dst_node = self.dst_node(p);
        let Some((sent, lost)) = (self.loss)(&dst_node) else {
            return;
        };
        const MSG: &str = "pair turned anomalous";
        if det.update(p.addr, sent, lost) && self.tracer.should_log(MSG, Instant::now()) {
            tracing::info!(peer = %p.addr, dst_node = %dst_node, "{MSG}");
        }
        if det.is_anomalous(p.addr) {
            let flow = counts.map_or(0, worst_flow);
            if let Some(r) = self.request(p, flow, TraceReason::Anomaly) {
                self.tracer.on_anomaly(r);
            }
        } else {
            self.tracer.recovered(p.addr);
        }
    }

    /// Add `p`'s flows that are due for a mapping trace to `due`, as
    /// (why, flow, index of `p` in the snapshot).
    fn due(&self, i: usize, p: &Peer, counts: &[FlowCount], now: Instant, due: &mut Vec<Due>) {
        if !p.addr.is_ipv4() || self.tracer.denied() {
            return;
        }
        let mut m = self.lock_mapper();
        if !m.enabled() {
            return;
        }
        for flow in 0..self.flow_count() {
            let lossy = counts.get(flow).is_some_and(|c| c.lost > 0);
            if !lossy {
                m.clean(p.addr, flow);
            }
            if let Some(why) = m.due(p.addr, flow, lossy, now) {
                due.push((why, flow, i));
            }
        }
    }

    /// Start the due mapping traces, most urgent first (and flow by flow
    /// across peers, so every peer gets its first flows mapped early),
    /// while the budget and the tracer allow.
    fn map(&self, peers: &[Peer], mut due: Vec<Due>, now: Instant) {
        due.sort_unstable();
        let mut m = self.lock_mapper();
        for (why, flow, i) in due {
            if !m.available(now) {
                return;
            }
            let Some(peer) = peers.get(i) else {
                continue;
            };
            let reason = match why {
                Why::Lossy => TraceReason::LossyFlow,
                Why::Unmapped | Why::Refresh => TraceReason::Mapping,
            };
            let Some(req) = self.request(peer, flow, reason) else {
                continue;
            };
            match self.tracer.start(req) {
                Start::Started => m.started(peer.addr, flow, why, now),
                Start::AlreadyRunning => {}
                Start::Busy => return,
            }
        }
    }
}

/// A flow due for mapping: why, its index, its peer's index.
type Due = (Why, usize, usize);
