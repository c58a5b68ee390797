//! Everything the exporter's tracing needs to know, passed explicitly:
//! the tracer, the peer set, the names peers gave in their replies, the
//! pairs' UDP loss counters, and how the probe flow looks. Also the
//! anomaly watch that starts traces by itself.

use super::anomaly::AnomalyDetector;
use super::tracer::{Request, TraceReason, Tracer};
use super::Flow;
use crate::discovery::PeerSet;
use crate::model::Peer;
use crate::probe::PeerInfo;
use crate::sys::time::wall_ns;
use crate::wire::probe::{self as wire, TRACE_SESSION};
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

/// Cumulative (sent, lost) UDP probe counts towards a `dst_node`, when
/// its series exist.
pub type LossCounts = Arc<dyn Fn(&str) -> Option<(u64, u64)> + Send + Sync>;

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
    /// This exporter's node.
    pub src_node: String,
    /// Default UDP echo port of peers.
    pub udp_port: u16,
    /// Source port of the UDP probe flow (the UDP prober's socket), so a
    /// trace follows the probes' ECMP path; `None` uses [`FALLBACK_SPORT`].
    pub src_port: Option<u16>,
}

impl Context {
    /// The `dst_node` label of `peer`, as the probes have it: the
    /// configured or discovered name, else the first name it gave, else
    /// its address.
    pub fn dst_node(&self, peer: &Peer) -> String {
        peer.name
            .clone()
            .or_else(|| self.peer_info.name(peer.addr))
            .unwrap_or_else(|| peer.addr.to_string())
    }

    /// The trace request for the probe flow towards `peer`; `None` for
    /// IPv6 peers (tracing is IPv4 only for now).
    pub fn request(&self, peer: &Peer, reason: TraceReason) -> Option<Request> {
        let IpAddr::V4(dst) = peer.addr else {
            return None;
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
                src: SocketAddrV4::new(
                    Ipv4Addr::UNSPECIFIED,
                    self.src_port.unwrap_or(FALLBACK_SPORT),
                ),
                dst: SocketAddrV4::new(dst, dport),
            },
            src_node: self.src_node.clone(),
            dst_node: self.dst_node(peer),
            reason,
            payload,
        })
    }

    /// Watch every pair's UDP loss and trace a pair when it turns
    /// anomalous (loss ratio at or above `threshold` over `window` probes),
    /// until `shutdown`.
    pub async fn watch(
        self: Arc<Self>,
        every: Duration,
        window: u64,
        threshold: f64,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut det = AnomalyDetector::new(window, threshold);
        let mut known: Vec<IpAddr> = Vec::new();
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(every) => {}
            }
            self.tracer.flush_logs(std::time::Instant::now());
            let peers = self.peers.snapshot();
            for p in &peers {
                self.check(&mut det, p);
            }
            // Peers that left: drop their traces and hop series.
            for addr in known.drain(..) {
                if !peers.iter().any(|p| p.addr == addr) {
                    det.forget(addr);
                    self.tracer.forget(addr);
                }
            }
            known = peers.iter().map(|p| p.addr).collect();
        }
    }

    /// Feed `p`'s counters to the detector; trace it while anomalous.
    fn check(&self, det: &mut AnomalyDetector, p: &Peer) {
        let dst_node = self.dst_node(p);
        let Some((sent, lost)) = (self.loss)(&dst_node) else {
            return;
        };
        const MSG: &str = "pair turned anomalous";
        if det.update(p.addr, sent, lost) && self.tracer.should_log(MSG, std::time::Instant::now())
        {
            tracing::info!(peer = %p.addr, dst_node = %dst_node, "{MSG}");
        }
        if det.is_anomalous(p.addr) {
            if let Some(r) = self.request(p, TraceReason::Anomaly) {
                self.tracer.on_anomaly(r);
            }
        } else {
            self.tracer.recovered(p.addr);
        }
    }
}
