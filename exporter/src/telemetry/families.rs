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
use skeletonhunter_common::ranks::RankInfo;
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

skeletonhunter_common::metric_families! {
    /// The families path tracing publishes into, handed to it explicitly.
    #[derive(Clone, Debug, Default)]
    pub struct PathFamilies() {
        /// Hops of each distinct path the probe flows of a pair take, by Paris traceroute (1 per
        /// hop; hop is the TTL, address empty for a silent hop)
        pub hops: Family<HopLabels, Gauge> => "skeletonhunter_path_hop_info";
        /// Loss ratio over the flow window of the probe flows that take this path
        pub loss: Family<PathLabels, FloatGauge> => "skeletonhunter_path_loss_ratio";
        /// Probes the path's loss ratio is over (finished in the flow window)
        pub probes: Family<PathLabels, Gauge> => "skeletonhunter_path_probes";
    }
}

skeletonhunter_common::metric_families! {
    /// Handles to every family (clones share the series).
    #[derive(Clone)]
    pub struct Families(mode: HistogramMode) {
        /// Probe round-trip time, responder processing delay subtracted where known
        pub rtt: HistFamily<ProbeLabels> = hist(mode) => "skeletonhunter_probe_rtt_seconds";
        /// Probes sent; loss is rate(lost) / rate(sent)
        pub sent: Family<ProbeLabels, Counter> => "skeletonhunter_probe_sent";
        /// Probes without a reply within the timeout
        pub lost: Family<ProbeLabels, Counter> => "skeletonhunter_probe_lost";
        /// Probes lost in a row since the last answer (0 once one is answered)
        pub consecutive_lost: Family<ProbeLabels, Gauge> => "skeletonhunter_probe_consecutive_lost";
        /// 1 if the last TCP dial to the peer connected, else 0
        pub dial_success: Family<ProbeLabels, Gauge> => "skeletonhunter_probe_dial_success";
        /// TCP dials that failed (refused, timed out, unreachable)
        pub dial_failures: Family<ProbeLabels, Counter> => "skeletonhunter_probe_dial_failures";
        /// This exporter's topology identity (always 1)
        pub node_info: Family<Identity, Gauge> => "skeletonhunter_node_info";
        /// A training container's ranks in its job, from its launcher's variables (always 1; one
        /// per container whose workers say)
        pub rank_info: Family<RankInfo, Gauge> => "skeletonhunter_rank_info";
        /// Where each identity field came from: config_file, flag_or_env, topology_file, default,
        /// missing (this host has no entry in the topology file) or unset (always 1)
        pub identity_source: Family<IdentitySourceLabels, Gauge>
            => "skeletonhunter_identity_source";
        /// Peers currently known, by discovery source
        pub skeleton_peers: Family<SourceLabels, Gauge> => "skeletonhunter_skeleton_peers";
        /// RDMA probe processing delay on the responder host
        pub rdma_responder_delay: HistFamily<PairLabels> = hist(mode)
            => "skeletonhunter_rdma_responder_delay_seconds";
        /// RDMA probe processing delay on the prober host
        pub rdma_prober_delay: HistFamily<PairLabels> = hist(mode)
            => "skeletonhunter_rdma_prober_delay_seconds";
        /// Loss ratio of the pair's worst probe flow (source port) over the flow window
        pub worst_flow_loss: Family<ProbeLabels, FloatGauge>
            => "skeletonhunter_probe_worst_flow_loss_ratio";
        /// Probe flows (UDP source ports) the pair is probed over
        pub flows: Family<ProbeLabels, Gauge> => "skeletonhunter_probe_flows";
        /// Deprecated, removed in the next release: use skeletonhunter_build_info
        pub build_info: Family<BuildLabels, Gauge> => "skeletonhunter_exporter_build_info";
        /// Traffic discovery: the source running (mode: ebpf, poll, off) and the one configured
        /// (always 1)
        pub discovery_info: Family<DiscoveryInfoLabels, Gauge> => "skeletonhunter_discovery_info";
        /// RDMA probing: status enabled, disabled (with the reason) or off (always 1)
        pub rdma_info: Family<RdmaInfoLabels, Gauge> => "skeletonhunter_rdma_info";
        /// Probe problems that are not loss, by protocol and reason
        pub probe_errors: Family<ProtocolReasonLabels, Counter> => "skeletonhunter_probe_errors";
        /// Peer discovery events, by source and event
        pub discovery_events: Family<SourceEventLabels, Counter>
            => "skeletonhunter_discovery_events";
        /// Discovery events dropped before processing, by source
        pub dropped_events: Family<SourceLabels, Counter>
            => "skeletonhunter_discovery_dropped_events";
        /// Datagrams the UDP responder dropped without replying, by reason
        pub responder_dropped: Family<ReasonLabels, Counter> => "skeletonhunter_responder_dropped";
        /// Probes answered by this exporter's responder, by protocol
        pub responder_replies: Family<ProtocolLabels, Counter>
            => "skeletonhunter_responder_replies";
        /// Replies whose node name differs from the peer's pinned identity (ignored, never
        /// relabelled)
        pub identity_conflicts: Counter => "skeletonhunter_peer_identity_conflicts";
        /// Peers whose reply said their exporter was stopping: their series were removed and
        /// their probes not counted until they answered again
        pub departures: Counter => "skeletonhunter_peer_departures";
        /// Time the previous /metrics response took to encode
        pub render_seconds: Gauge<f64, AtomicU64> => "skeletonhunter_exporter_render_seconds";
        /// The paths of a pair's probe flows, registered after the rest.
        pub paths: PathFamilies = PathFamilies::default();
        /// 1 if the last configuration reload succeeded (Prometheus' convention)
        pub reload_ok: Gauge => "skeletonhunter_config_last_reload_successful";
        /// Unix time of the last successful configuration load
        pub reload_time: Gauge<f64, AtomicU64>
            => "skeletonhunter_config_last_reload_success_timestamp_seconds";
        /// Datagrams the kernel dropped on the exporter's own sockets because their receive buffer
        /// was full (SO_RXQ_OVFL), by socket
        pub socket_drops: Family<SocketLabels, Counter> => "skeletonhunter_socket_receive_drops";
        /// UDP datagrams dropped for a full receive buffer on any socket of this host's network
        /// namespace (/proc/net/snmp RcvbufErrors)
        pub host_udp_rcvbuf_errors: Counter => "skeletonhunter_host_udp_receive_buffer_errors";
        /// Delay this host's own stack added to probing, by protocol and stage: send (a probe left
        /// late against its schedule), receive (an answer waited in the prober's socket), responder
        /// (a request waited in the responder)
        pub host_stack: HistFamily<HostStackLabels> = hist(mode)
            => "skeletonhunter_host_stack_delay_seconds";
        /// Time the exporter's cgroup was held back because it had used up its CPU quota (cpu.stat
        /// throttled time; 0 without a quota)
        pub cpu_throttled: Counter<f64, AtomicU64> => "skeletonhunter_host_cpu_throttled_seconds";
        /// Idle HTTP connections closed to admit new ones at the connection limit
        pub http_idle_closed: Counter => "skeletonhunter_http_idle_connections_closed";
    }
}

fn hist<L: Clone + std::hash::Hash + Eq>(mode: HistogramMode) -> HistFamily<L> {
    Family::new_with_constructor(RttHistograms(mode))
}

impl Families {
    /// Create every family, with histograms as `mode` says, and register
    /// it in `r`.
    pub fn register(r: &mut Registry, mode: HistogramMode) -> Families {
        let f = Families::unregistered(mode);
        f.register_families(r);
        f.paths.register_families(r);
        skeletonhunter_common::build::register(r);
        r.register_collector(Box::new(skeletonhunter_common::process::ProcessCollector));
        f.build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        f
    }
}
