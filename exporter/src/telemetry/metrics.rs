//! The exporter's metrics handle: renders `/metrics` and owns the
//! lifecycle of per-peer series. Names and labels are a contract with the
//! localizer and the shipped rules (docs/exporter.md). Probers never touch families directly: they ask for
//! a peer's [`Series`] (cached per target by the scheduler), so this module
//! can remember which series belong to which peer address and drop all of
//! them when the peer leaves the peer set ([`Metrics::forget_peer`]).

#[cfg(test)]
use super::families::rtt_buckets;
use super::families::{Families, PathFamilies};
use super::host::{KernelCounter, SocketDrops};
use super::series::{DialSeries, FlowSeries, RdmaSeries, Series};
use crate::model::{
    DiscoveryEvent, DiscoveryInfoLabels, HistogramMode, HostStackLabels, IdentitySource,
    IdentitySourceLabels, OwnSocket, PairLabels, PeerSource, ProbeLabels, Protocol, ProtocolLabels,
    ProtocolReasonLabels, RdmaInfoLabels, ReasonLabels, SocketLabels, SourceEventLabels,
    SourceLabels, StackStage,
};
use crate::sys::cgroup::cpu_throttled_ns;
use crate::sys::snmp::udp_rcvbuf_errors;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use skeletonhunter_common::exposition;
use skeletonhunter_common::http::Reply;
use skeletonhunter_common::ranks::{RankInfo, Ranks};
use skeletonhunter_common::sync::lock;
use skeletonhunter_common::{Identity, Kind};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

/// Every family of the exporter, the registry that renders them, and the
/// one owner of per-peer series: created through [`Metrics::series`] & co.,
/// removed through [`Metrics::forget_peer`] / [`Metrics::forget_name`].
pub struct Metrics {
    registry: Registry,
    f: Families,
    /// The exporter's own node name (the `src_node` of its series).
    src_node: Mutex<String>,
    /// The identity published as `skeletonhunter_node_info`, removed when
    /// it is replaced or retired (views share the family).
    info: Mutex<Option<Identity>>,
    /// The series published as `skeletonhunter_rank_info`, likewise.
    ranks: Mutex<Option<RankInfo>>,
    /// Which probe series each peer address owns, for [`Metrics::forget_peer`].
    owned: Mutex<HashMap<IpAddr, HashSet<String>>>,
    /// The last reading of UDP `RcvbufErrors`.
    rcvbuf_errors: KernelCounter,
    /// The last reading of the HTTP server's idle connections closed.
    http_idle_closed: KernelCounter,
    /// The last reading of the cgroup's CPU-throttled time (ns).
    throttled: KernelCounter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Register every family (classic histograms) and publish `identity`.
    pub fn new(identity: &Identity) -> Metrics {
        Metrics::with_histograms(identity, HistogramMode::Classic)
    }

    /// [`Metrics::new`] with histograms as `metrics.histograms` says.
    pub fn with_histograms(identity: &Identity, mode: HistogramMode) -> Metrics {
        let mut registry = Registry::default();
        let f = Families::register(&mut registry, mode);
        let m = Metrics::over(registry, f);
        // Host-side loss is present at 0 from the start.
        for socket in [OwnSocket::UdpProber, OwnSocket::UdpResponder] {
            drop(m.socket_drops(socket));
        }
        m.read_host_counters();
        m.set_identity(identity);
        m
    }

    /// The handle of another prober of this process — a container probed
    /// from ([`crate::containers`]): its series go into the same families
    /// under `identity`'s node, and its `skeletonhunter_node_info` sits
    /// beside this one's. A view renders nothing itself; call
    /// [`Metrics::retire`] when its prober stops.
    pub fn view(&self, identity: &Identity) -> Metrics {
        let m = Metrics::over(Registry::default(), self.f.clone());
        m.set_identity(identity);
        m
    }

    /// A handle over `f` (rendered through `registry`) with no identity and
    /// no series of its own yet.
    fn over(registry: Registry, f: Families) -> Metrics {
        Metrics {
            registry,
            f,
            src_node: Mutex::new(String::new()),
            info: Mutex::new(None),
            ranks: Mutex::new(None),
            owned: Mutex::new(HashMap::new()),
            rcvbuf_errors: KernelCounter::default(),
            http_idle_closed: KernelCounter::default(),
            throttled: KernelCounter::default(),
        }
    }

    /// Remove every series this handle created and its node info: its
    /// prober stopped (the container ended).
    pub fn retire(&self) {
        let peers: Vec<IpAddr> = lock(&self.owned).keys().copied().collect();
        for p in peers {
            self.forget_peer(p);
        }
        if let Some(old) = lock(&self.info).take() {
            self.f.node_info.remove(&old);
        }
        self.set_ranks(None);
    }

    /// Publish this node's ranks as `skeletonhunter_rank_info` (replacing
    /// any earlier; `None` removes it).
    pub fn set_ranks(&self, ranks: Option<Ranks>) {
        let mut slot = lock(&self.ranks);
        if let Some(old) = slot.take() {
            self.f.rank_info.remove(&old);
        }
        if let Some(ranks) = ranks {
            let info = RankInfo {
                node: lock(&self.src_node).clone(),
                ranks,
            };
            self.f.rank_info.get_or_create(&info).set(1);
            *slot = Some(info);
        }
    }

    /// The path families (`skeletonhunter_path_*`), for path tracing.
    pub fn path_families(&self) -> PathFamilies {
        self.f.paths.clone()
    }

    /// The cumulative (sent, lost) UDP probe counts towards `dst_node`, if
    /// its series exist: what path tracing watches for anomalies.
    pub fn udp_counts(&self, dst_node: &str) -> Option<(u64, u64)> {
        let labels = self.labels(dst_node, Protocol::Udp);
        let sent = self.f.sent.get(&labels).map(|c| c.get())?;
        let lost = self.f.lost.get(&labels).map(|c| c.get())?;
        Some((sent, lost))
    }

    /// Publish `identity` as `skeletonhunter_node_info` (replacing any
    /// earlier one) and use its node as `src_node`.
    pub fn set_identity(&self, id: &Identity) {
        let mut info = lock(&self.info);
        if let Some(old) = info.replace(id.clone()) {
            self.f.node_info.remove(&old);
        }
        self.f.node_info.get_or_create(id).set(1);
        drop(info);
        *lock(&self.src_node) = id.node.clone();
    }

    /// Publish where each identity field came from as
    /// `skeletonhunter_identity_source{field, source}` (replacing the last).
    pub fn set_identity_sources(&self, sources: &[(Kind, IdentitySource)]) {
        self.f.identity_source.clear();
        for (kind, source) in sources {
            self.f
                .identity_source
                .get_or_create(&IdentitySourceLabels {
                    field: kind.as_str(),
                    source: *source,
                })
                .set(1);
        }
    }

    /// This exporter's node name.
    pub fn src_node(&self) -> String {
        lock(&self.src_node).clone()
    }

    fn own(&self, peer: IpAddr, dst_node: &str) {
        let mut owned = lock(&self.owned);
        let set = owned.entry(peer).or_default();
        if !set.contains(dst_node) {
            set.insert(dst_node.to_string());
        }
    }

    fn labels(&self, dst_node: &str, protocol: Protocol) -> ProbeLabels {
        ProbeLabels {
            src_node: self.src_node(),
            dst_node: dst_node.to_string(),
            protocol,
        }
    }

    /// The labels of a series of `peer` handed out now, recorded as owned
    /// so the peer's removal finds it.
    fn owned_labels(&self, peer: IpAddr, dst_node: &str, protocol: Protocol) -> ProbeLabels {
        self.own(peer, dst_node);
        self.labels(dst_node, protocol)
    }

    /// The probe series of `peer` (labelled `dst_node`) for `protocol`.
    pub fn series(&self, peer: IpAddr, dst_node: &str, protocol: Protocol) -> Series {
        let labels = self.owned_labels(peer, dst_node, protocol);
        Series {
            sent: self.f.sent.get_or_create_owned(&labels),
            lost: self.f.lost.get_or_create_owned(&labels),
            rtt: self.f.rtt.get_or_create_owned(&labels),
            consecutive_lost: self.f.consecutive_lost.get_or_create_owned(&labels),
            labels: std::sync::Arc::new(labels),
        }
    }

    /// The TCP dial series of `peer`.
    pub fn dial_series(&self, peer: IpAddr, dst_node: &str) -> DialSeries {
        let labels = self.owned_labels(peer, dst_node, Protocol::Tcp);
        DialSeries {
            success: self.f.dial_success.get_or_create_owned(&labels),
            failures: self.f.dial_failures.get_or_create_owned(&labels),
        }
    }

    /// The multi-flow UDP series of `peer`.
    pub fn flow_series(&self, peer: IpAddr, dst_node: &str) -> FlowSeries {
        let labels = self.owned_labels(peer, dst_node, Protocol::Udp);
        FlowSeries {
            worst_loss: self.f.worst_flow_loss.get_or_create_owned(&labels),
            flows: self.f.flows.get_or_create_owned(&labels),
        }
    }

    /// The RDMA delay histograms of `peer`.
    pub fn rdma_series(&self, peer: IpAddr, dst_node: &str) -> RdmaSeries {
        self.own(peer, dst_node);
        let labels = PairLabels {
            src_node: self.src_node(),
            dst_node: dst_node.to_string(),
        };
        RdmaSeries {
            responder_delay: self.f.rdma_responder_delay.get_or_create_owned(&labels),
            prober_delay: self.f.rdma_prober_delay.get_or_create_owned(&labels),
        }
    }

    fn remove_dst(&self, dst_node: &str) {
        let src_node = self.src_node();
        for protocol in Protocol::ALL {
            let l = ProbeLabels {
                src_node: src_node.clone(),
                dst_node: dst_node.to_string(),
                protocol,
            };
            self.f.rtt.remove(&l);
            self.f.sent.remove(&l);
            self.f.lost.remove(&l);
            self.f.consecutive_lost.remove(&l);
            self.f.dial_success.remove(&l);
            self.f.dial_failures.remove(&l);
            self.f.worst_flow_loss.remove(&l);
            self.f.flows.remove(&l);
        }
        let l = PairLabels {
            src_node,
            dst_node: dst_node.to_string(),
        };
        self.f.rdma_responder_delay.remove(&l);
        self.f.rdma_prober_delay.remove(&l);
    }

    /// Remove every series of `peer` (it left the peer set).
    pub fn forget_peer(&self, peer: IpAddr) {
        let names = lock(&self.owned).remove(&peer);
        for dst in names.into_iter().flatten() {
            self.remove_dst(&dst);
        }
    }

    /// Remove the series `peer` had under the name `old_dst_node` (its
    /// learned identity changed).
    pub fn forget_name(&self, peer: IpAddr, old_dst_node: &str) {
        let mut owned = lock(&self.owned);
        if let Some(set) = owned.get_mut(&peer) {
            set.remove(old_dst_node);
        }
        drop(owned);
        self.remove_dst(old_dst_node);
    }

    /// `skeletonhunter_skeleton_peers{source}`.
    pub fn set_skeleton_peers(&self, source: PeerSource, n: usize) {
        self.f
            .skeleton_peers
            .get_or_create(&SourceLabels { source })
            .set(n as i64);
    }

    /// Count a probe problem that is not loss.
    pub fn probe_error(&self, protocol: Protocol, reason: &'static str) {
        self.f
            .probe_errors
            .get_or_create(&ProtocolReasonLabels { protocol, reason })
            .inc();
    }

    /// Create `skeletonhunter_probe_errors{protocol, reason}` at 0 for
    /// each of `reasons`.
    pub fn zero_probe_errors(&self, protocol: Protocol, reasons: &[&'static str]) {
        for &reason in reasons {
            drop(
                self.f
                    .probe_errors
                    .get_or_create(&ProtocolReasonLabels { protocol, reason }),
            );
        }
    }

    /// Create `skeletonhunter_responder_dropped{reason}` at 0 for each of
    /// `reasons`.
    pub fn zero_responder_drops(&self, reasons: &[&'static str]) {
        for &reason in reasons {
            drop(
                self.f
                    .responder_dropped
                    .get_or_create(&ReasonLabels { reason }),
            );
        }
    }

    /// Publish `skeletonhunter_rdma_info{status, reason}` (replacing the
    /// earlier value).
    pub fn set_rdma_info(&self, status: &'static str, reason: &'static str) {
        replace_info(&self.f.rdma_info, &RdmaInfoLabels { status, reason });
    }

    /// Publish `skeletonhunter_discovery_info{mode, configured}`; with
    /// eBPF running, its dropped-events counter starts at 0 too.
    pub fn set_discovery_info(&self, mode: &'static str, configured: &'static str) {
        replace_info(
            &self.f.discovery_info,
            &DiscoveryInfoLabels { mode, configured },
        );
        if mode == PeerSource::Ebpf.as_str() {
            drop(self.f.dropped_events.get_or_create(&SourceLabels {
                source: PeerSource::Ebpf,
            }));
        }
    }

    /// Count a discovery event.
    pub fn discovery_event(&self, source: PeerSource, event: DiscoveryEvent) {
        let event = event.as_str();
        self.f
            .discovery_events
            .get_or_create(&SourceEventLabels { source, event })
            .inc();
    }

    /// Count events a source dropped.
    pub fn dropped_event(&self, source: PeerSource, n: u64) {
        self.f
            .dropped_events
            .get_or_create(&SourceLabels { source })
            .inc_by(n);
    }

    /// Count a datagram the responder refused.
    pub fn responder_drop(&self, reason: &'static str) {
        self.f
            .responder_dropped
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Count a reply that claimed another name than its peer's pinned one.
    pub fn identity_conflict(&self) {
        self.f.identity_conflicts.inc();
    }

    /// Count a peer that left: its reply said so, or it closed its
    /// connections and went silent.
    pub fn peer_left(&self) {
        self.f.departures.inc();
    }

    /// The identity conflicts counted so far.
    pub fn identity_conflicts(&self) -> u64 {
        self.f.identity_conflicts.get()
    }

    /// Count a probe the responder answered.
    pub fn responder_reply(&self, protocol: Protocol) {
        self.f
            .responder_replies
            .get_or_create(&ProtocolLabels { protocol })
            .inc();
    }

    /// The drop counter of one of the exporter's sockets (its series
    /// appears at 0); each socket's receive loop owns one.
    pub fn socket_drops(&self, socket: OwnSocket) -> SocketDrops {
        let labels = SocketLabels {
            socket: socket.as_str(),
        };
        SocketDrops::new(self.f.socket_drops.get_or_create(&labels).clone())
    }

    /// The `skeletonhunter_host_stack_delay_seconds` histogram of one
    /// protocol and stage (its series appears with no observation): the
    /// delays this host's own scheduling and sockets add, so the localizer
    /// can tell a busy host from a faulty network.
    pub fn host_stack(&self, protocol: Protocol, stage: StackStage) -> Histogram {
        let labels = HostStackLabels {
            protocol,
            stage: stage.as_str(),
        };
        self.f.host_stack.get_or_create_owned(&labels)
    }

    /// Read the host's kernel counters (UDP `RcvbufErrors`, the cgroup's
    /// CPU-throttled time) and the HTTP
    /// server's idle connections closed; at start and at every scrape.
    fn read_host_counters(&self) {
        if let Some(total) = udp_rcvbuf_errors() {
            self.rcvbuf_errors
                .update(&self.f.host_udp_rcvbuf_errors, total);
        }
        if let Some(ns) = cpu_throttled_ns() {
            self.throttled.update_ns(&self.f.cpu_throttled, ns);
        }
        self.http_idle_closed.update(
            &self.f.http_idle_closed,
            skeletonhunter_common::conns::evicted_total(),
        );
    }

    /// Record the outcome of a configuration load or reload (the start-up
    /// load counts as a success, as in Prometheus).
    pub fn config_loaded(&self, ok: bool) {
        self.f.reload_ok.set(i64::from(ok));
        if ok {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.f.reload_time.set(now);
        }
    }

    /// Render `/metrics`: OpenMetrics when the scraper asks for it (as
    /// Prometheus does), the classic text format otherwise, which is what
    /// `promtool check metrics` and curl users expect. The classic form is
    /// converted line by line while encoding, so only one copy of a large
    /// exposition is ever in memory.
    pub fn render(&self, accept: Option<&str>) -> Reply {
        let start = std::time::Instant::now();
        self.read_host_counters();
        let reply = exposition::render(&self.registry, accept, self.size_hint());
        self.f.render_seconds.set(start.elapsed().as_secs_f64());
        reply
    }

    /// A guess of the exposition size, so the buffer rarely reallocates.
    fn size_hint(&self) -> usize {
        let peers = self.owned.lock().map(|o| o.len()).unwrap_or(0);
        16 * 1024 + peers * 3300
    }
}

/// Make `labels` the one series of the info family `f`, at 1 (Prometheus'
/// `_info` convention: the labels carry the value).
fn replace_info<L: Clone + std::hash::Hash + Eq>(f: &Family<L, Gauge>, labels: &L) {
    f.clear();
    f.get_or_create(labels).set(1);
}

#[cfg(test)]
mod tests;
