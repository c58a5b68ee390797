//! Every metric family the exporter serves, registered once, with its
//! name and help text.

use crate::model::{
    BuildLabels, DiscoveryInfoLabels, HistogramMode, HopLabels, HostStackLabels,
    IdentitySourceLabels, PairLabels, PathLabels, ProbeLabels, ProtocolLabels,
    ProtocolReasonLabels, RdmaInfoLabels, ReasonLabels, SocketLabels, SourceEventLabels,
    SourceLabels,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{
    exponential_buckets, Histogram, NativeHistogramConfig,
};
use prometheus_client::registry::Registry;
use skeletonhunter_common::Identity;
use std::sync::atomic::AtomicU64;

/// Upper bounds of the RTT / delay histograms: 1 µs doubling to ~8.4 s, so a
/// +10 µs shift on a 10-20 µs RDMA path moves a whole bucket while a
/// multi-second stall is still resolved (24 buckets keep 1,000 peers'
/// `/metrics` small).
pub fn rtt_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(1e-6, 2.0, 24)
}

/// Schema of the native RTT histograms: bucket bounds grow by
/// 2^(2^-3) ≈ 1.09, so a quantile is off by at most ~4.4 % (half a bucket
/// width) at any RTT, where the classic doubling buckets are off by up to
/// a third. Schema 4 would halve that again for twice the buckets a peer
/// fills; 4 % is finer than the jitter of any path we measure.
pub const NATIVE_SCHEMA: i8 = 3;

/// Observations at or below 2^-24 s (~60 ns) go to the zero bucket: no
/// round trip is that short, but a delay with the responder's processing
/// subtracted can be 0.
pub const NATIVE_ZERO_THRESHOLD: f64 = 5.960_464_477_539_063e-8;

/// Most native buckets one histogram keeps (~20 octaves at schema 3); past
/// it the client halves the resolution, so memory stays bounded whatever
/// the RTTs do.
pub const NATIVE_MAX_BUCKETS: usize = 160;

/// A histogram of the RTT kind in the representation `mode` asks for. In
/// native mode the classic part is the `+Inf` bucket alone, so text
/// formats still show `_count` and `_sum`.
pub fn rtt_histogram(mode: HistogramMode) -> Histogram {
    let native = || {
        NativeHistogramConfig::with_schema(NATIVE_SCHEMA)
            .zero_threshold(NATIVE_ZERO_THRESHOLD)
            .max_buckets(NATIVE_MAX_BUCKETS)
    };
    match mode {
        HistogramMode::Classic => Histogram::new(rtt_buckets()),
        HistogramMode::Native => Histogram::new_classic_and_native(std::iter::empty(), native()),
        HistogramMode::Both => Histogram::new_classic_and_native(rtt_buckets(), native()),
    }
}

/// Builds each new series of a histogram family in the configured mode.
#[derive(Clone, Copy, Debug)]
pub struct RttHistograms(HistogramMode);

impl MetricConstructor<Histogram> for RttHistograms {
    fn new_metric(&self) -> Histogram {
        rtt_histogram(self.0)
    }
}

/// A histogram family with the RTT buckets.
pub type HistFamily<L> = Family<L, Histogram, RttHistograms>;

/// A gauge holding a ratio or other fraction.
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// The families path tracing publishes into, handed to it explicitly.
#[derive(Clone, Debug, Default)]
pub struct PathFamilies {
    /// `skeletonhunter_path_hop_info`.
    pub hops: Family<HopLabels, Gauge>,
    /// `skeletonhunter_path_loss_ratio`.
    pub loss: Family<PathLabels, FloatGauge>,
    /// `skeletonhunter_path_probes`.
    pub probes: Family<PathLabels, Gauge>,
}

/// Handles to every family (clones share the series).
#[derive(Clone)]
pub struct Families {
    /// `skeletonhunter_probe_rtt_seconds`: Probe round-trip time, responder processing delay subtracted where known.
    pub rtt: HistFamily<ProbeLabels>,
    /// `skeletonhunter_probe_sent`: Probes sent; loss is rate(lost) / rate(sent).
    pub sent: Family<ProbeLabels, Counter>,
    /// `skeletonhunter_probe_lost`: Probes without a reply within the timeout.
    pub lost: Family<ProbeLabels, Counter>,
    /// `skeletonhunter_probe_consecutive_lost`: Probes lost in a row since the last answer.
    pub consecutive_lost: Family<ProbeLabels, Gauge>,
    /// `skeletonhunter_probe_dial_success`: 1 if the last TCP dial to the peer connected, else 0.
    pub dial_success: Family<ProbeLabels, Gauge>,
    /// `skeletonhunter_probe_dial_failures`: TCP dials that failed (refused, timed out, unreachable).
    pub dial_failures: Family<ProbeLabels, Counter>,
    /// `skeletonhunter_node_info`: This exporter's topology identity (always 1).
    pub node_info: Family<Identity, Gauge>,
    /// `skeletonhunter_identity_source`: Where each identity field came from (always 1).
    pub identity_source: Family<IdentitySourceLabels, Gauge>,
    /// `skeletonhunter_skeleton_peers`: Peers currently known, by discovery source.
    pub skeleton_peers: Family<SourceLabels, Gauge>,
    /// `skeletonhunter_rdma_responder_delay_seconds`: RDMA probe processing delay on the responder host.
    pub rdma_responder_delay: HistFamily<PairLabels>,
    /// `skeletonhunter_rdma_prober_delay_seconds`: RDMA probe processing delay on the prober host.
    pub rdma_prober_delay: HistFamily<PairLabels>,
    /// `skeletonhunter_exporter_build_info`: deprecated for `skeletonhunter_build_info`; one more release.
    pub build_info: Family<BuildLabels, Gauge>,
    /// `skeletonhunter_discovery_info`: the traffic-discovery source running.
    pub discovery_info: Family<DiscoveryInfoLabels, Gauge>,
    /// `skeletonhunter_rdma_info`: whether RDMA probing runs, and why not.
    pub rdma_info: Family<RdmaInfoLabels, Gauge>,
    /// `skeletonhunter_probe_errors`: Probe problems that are not loss, by protocol and reason.
    pub probe_errors: Family<ProtocolReasonLabels, Counter>,
    /// `skeletonhunter_discovery_events`: Peer discovery events, by source and event.
    pub discovery_events: Family<SourceEventLabels, Counter>,
    /// `skeletonhunter_discovery_dropped_events`: Discovery events dropped before processing, by source.
    pub dropped_events: Family<SourceLabels, Counter>,
    /// `skeletonhunter_responder_dropped`: Datagrams the UDP responder dropped without replying, by reason.
    pub responder_dropped: Family<ReasonLabels, Counter>,
    /// `skeletonhunter_responder_replies`: Probes answered by this exporter's responder, by protocol.
    pub responder_replies: Family<ProtocolLabels, Counter>,
    /// `skeletonhunter_peer_identity_conflicts`: Replies whose node name differs from the peer's pinned identity (ignored, never relabelled).
    pub identity_conflicts: Counter,
    /// `skeletonhunter_exporter_render_seconds`: Time the previous /metrics response took to encode.
    pub render_seconds: Gauge<f64, AtomicU64>,
    /// `skeletonhunter_path_hop_info`, `skeletonhunter_path_loss_ratio`, `skeletonhunter_path_probes`: the paths of a pair's probe flows.
    pub paths: PathFamilies,
    /// `skeletonhunter_probe_worst_flow_loss_ratio`: Loss ratio of the pair's worst probe flow over the flow window.
    pub worst_flow_loss: Family<ProbeLabels, FloatGauge>,
    /// `skeletonhunter_probe_flows`: Probe flows (source ports) the pair is probed over.
    pub flows: Family<ProbeLabels, Gauge>,
    /// `skeletonhunter_config_last_reload_successful`: 1 if the last configuration reload succeeded (Prometheus' convention).
    pub reload_ok: Gauge,
    /// `skeletonhunter_config_last_reload_success_timestamp_seconds`: Unix time of the last successful configuration load.
    pub reload_time: Gauge<f64, AtomicU64>,
    /// `skeletonhunter_socket_receive_drops`: Datagrams the kernel dropped on the exporter's own sockets because their receive buffer was full (SO_RXQ_OVFL), by socket.
    pub socket_drops: Family<SocketLabels, Counter>,
    /// `skeletonhunter_host_udp_receive_buffer_errors`: UDP datagrams dropped for a full receive buffer on any socket of this host's network namespace (/proc/net/snmp RcvbufErrors).
    pub host_udp_rcvbuf_errors: Counter,
    /// `skeletonhunter_host_stack_delay_seconds`: Delays this host's own stack adds to probing, by protocol and stage.
    pub host_stack: HistFamily<HostStackLabels>,
    /// `skeletonhunter_host_cpu_throttled_seconds`: Time the exporter's cgroup was held back by its CPU quota.
    pub cpu_throttled: Counter<f64, AtomicU64>,
    /// `skeletonhunter_http_idle_connections_closed`: Idle HTTP connections closed to admit new ones at the connection limit.
    pub http_idle_closed: Counter,
}

fn hist<L: Clone + std::hash::Hash + Eq>(mode: HistogramMode) -> HistFamily<L> {
    Family::new_with_constructor(RttHistograms(mode))
}

impl Families {
    /// Create every family, with histograms as `mode` says, and register
    /// it in `r`.
    pub fn register(r: &mut Registry, mode: HistogramMode) -> Families {
        let f = Families {
            rtt: hist(mode),
            sent: Default::default(),
            lost: Default::default(),
            consecutive_lost: Default::default(),
            dial_success: Default::default(),
            dial_failures: Default::default(),
            node_info: Default::default(),
            identity_source: Default::default(),
            skeleton_peers: Default::default(),
            rdma_responder_delay: hist(mode),
            rdma_prober_delay: hist(mode),
            build_info: Default::default(),
            discovery_info: Default::default(),
            rdma_info: Default::default(),
            probe_errors: Default::default(),
            discovery_events: Default::default(),
            dropped_events: Default::default(),
            responder_dropped: Default::default(),
            responder_replies: Default::default(),
            identity_conflicts: Default::default(),
            render_seconds: Default::default(),
            paths: Default::default(),
            worst_flow_loss: Default::default(),
            flows: Default::default(),
            reload_ok: Default::default(),
            reload_time: Default::default(),
            socket_drops: Default::default(),
            host_udp_rcvbuf_errors: Default::default(),
            host_stack: hist(mode),
            cpu_throttled: Default::default(),
            http_idle_closed: Default::default(),
        };
        f.register_pairs(r);
        f.register_exporter(r);
        f.register_host(r);
        skeletonhunter_common::build::register(r);
        r.register_collector(Box::new(skeletonhunter_common::process::ProcessCollector));
        f.build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        f
    }

    /// Per-pair probe families, this exporter's identity and its peers.
    fn register_pairs(&self, r: &mut Registry) {
        r.register(
            "skeletonhunter_probe_rtt_seconds",
            "Probe round-trip time, responder processing delay subtracted where known",
            self.rtt.clone(),
        );
        r.register(
            "skeletonhunter_probe_sent",
            "Probes sent; loss is rate(lost) / rate(sent)",
            self.sent.clone(),
        );
        r.register(
            "skeletonhunter_probe_lost",
            "Probes without a reply within the timeout",
            self.lost.clone(),
        );
        r.register(
            "skeletonhunter_probe_consecutive_lost",
            "Probes lost in a row since the last answer (0 once one is answered)",
            self.consecutive_lost.clone(),
        );
        r.register(
            "skeletonhunter_probe_dial_success",
            "1 if the last TCP dial to the peer connected, else 0",
            self.dial_success.clone(),
        );
        r.register(
            "skeletonhunter_probe_dial_failures",
            "TCP dials that failed (refused, timed out, unreachable)",
            self.dial_failures.clone(),
        );
        r.register(
            "skeletonhunter_node_info",
            "This exporter's topology identity (always 1)",
            self.node_info.clone(),
        );
        r.register(
            "skeletonhunter_identity_source",
            "Where each identity field came from: config_file, flag_or_env, topology_file, default, missing (this host has no entry in the topology file) or unset (always 1)",
            self.identity_source.clone(),
        );
        r.register(
            "skeletonhunter_skeleton_peers",
            "Peers currently known, by discovery source",
            self.skeleton_peers.clone(),
        );
        r.register(
            "skeletonhunter_rdma_responder_delay_seconds",
            "RDMA probe processing delay on the responder host",
            self.rdma_responder_delay.clone(),
        );
        r.register(
            "skeletonhunter_rdma_prober_delay_seconds",
            "RDMA probe processing delay on the prober host",
            self.rdma_prober_delay.clone(),
        );
        r.register(
            "skeletonhunter_probe_worst_flow_loss_ratio",
            "Loss ratio of the pair's worst probe flow (source port) over the flow window",
            self.worst_flow_loss.clone(),
        );
        r.register(
            "skeletonhunter_probe_flows",
            "Probe flows (UDP source ports) the pair is probed over",
            self.flows.clone(),
        );
    }

    /// Families about this exporter itself, its discovery, responder and
    /// path tracing.
    fn register_exporter(&self, r: &mut Registry) {
        r.register(
            "skeletonhunter_exporter_build_info",
            "Deprecated, removed in the next release: use skeletonhunter_build_info",
            self.build_info.clone(),
        );
        r.register(
            "skeletonhunter_discovery_info",
            "Traffic discovery: the source running (mode: ebpf, poll, off) and the one configured (always 1)",
            self.discovery_info.clone(),
        );
        r.register(
            "skeletonhunter_rdma_info",
            "RDMA probing: status enabled, disabled (with the reason) or off (always 1)",
            self.rdma_info.clone(),
        );
        r.register(
            "skeletonhunter_probe_errors",
            "Probe problems that are not loss, by protocol and reason",
            self.probe_errors.clone(),
        );
        r.register(
            "skeletonhunter_discovery_events",
            "Peer discovery events, by source and event",
            self.discovery_events.clone(),
        );
        r.register(
            "skeletonhunter_discovery_dropped_events",
            "Discovery events dropped before processing, by source",
            self.dropped_events.clone(),
        );
        r.register(
            "skeletonhunter_responder_dropped",
            "Datagrams the UDP responder dropped without replying, by reason",
            self.responder_dropped.clone(),
        );
        r.register(
            "skeletonhunter_responder_replies",
            "Probes answered by this exporter's responder, by protocol",
            self.responder_replies.clone(),
        );
        r.register(
            "skeletonhunter_peer_identity_conflicts",
            "Replies whose node name differs from the peer's pinned identity (ignored, never relabelled)",
            self.identity_conflicts.clone(),
        );
        r.register(
            "skeletonhunter_exporter_render_seconds",
            "Time the previous /metrics response took to encode",
            self.render_seconds.clone(),
        );
        r.register(
            "skeletonhunter_path_hop_info",
            "Hops of each distinct path the probe flows of a pair take, by Paris traceroute (1 per hop; hop is the TTL, address empty for a silent hop)",
            self.paths.hops.clone(),
        );
        r.register(
            "skeletonhunter_path_loss_ratio",
            "Loss ratio over the flow window of the probe flows that take this path",
            self.paths.loss.clone(),
        );
        r.register(
            "skeletonhunter_path_probes",
            "Probes the path's loss ratio is over (finished in the flow window)",
            self.paths.probes.clone(),
        );
        r.register(
            "skeletonhunter_config_last_reload_successful",
            "1 if the last configuration reload succeeded (Prometheus' convention)",
            self.reload_ok.clone(),
        );
        r.register(
            "skeletonhunter_config_last_reload_success_timestamp_seconds",
            "Unix time of the last successful configuration load",
            self.reload_time.clone(),
        );
    }

    /// Host-side loss and delay: drops on the exporter's own sockets, the
    /// host's UDP receive-buffer errors and the delays of its own stack,
    /// so a busy host is not read as a bad network.
    fn register_host(&self, r: &mut Registry) {
        r.register(
            "skeletonhunter_socket_receive_drops",
            "Datagrams the kernel dropped on the exporter's own sockets because their receive buffer was full (SO_RXQ_OVFL), by socket",
            self.socket_drops.clone(),
        );
        r.register(
            "skeletonhunter_host_udp_receive_buffer_errors",
            "UDP datagrams dropped for a full receive buffer on any socket of this host's network namespace (/proc/net/snmp RcvbufErrors)",
            self.host_udp_rcvbuf_errors.clone(),
        );
        r.register(
            "skeletonhunter_host_stack_delay_seconds",
            "Delay this host's own stack added to probing, by protocol and stage: send (a probe left late against its schedule), receive (an answer waited in the prober's socket), responder (a request waited in the responder)",
            self.host_stack.clone(),
        );
        r.register(
            "skeletonhunter_host_cpu_throttled_seconds",
            "Time the exporter's cgroup was held back because it had used up its CPU quota (cpu.stat throttled time; 0 without a quota)",
            self.cpu_throttled.clone(),
        );
        r.register(
            "skeletonhunter_http_idle_connections_closed",
            "Idle HTTP connections closed to admit new ones at the connection limit",
            self.http_idle_closed.clone(),
        );
    }
}
