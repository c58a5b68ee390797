//! Every metric family the exporter serves, registered once.
//!
//! Names and labels follow `DESIGN.md` exactly; the localizer and the shipped
//! rules depend on them. Probers never touch families directly: they ask for
//! a peer's [`Series`] (cached per target by the scheduler), so this module
//! can remember which series belong to which peer address and drop all of
//! them when the peer leaves the peer set ([`Metrics::forget_peer`]).

use crate::probe::Protocol;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use skeletonhunter_common::exposition;
use skeletonhunter_common::http::Reply;
use skeletonhunter_common::Identity;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::peers::PeerSource;

/// Upper bounds of the RTT / delay histograms: 1 µs doubling to ~8.4 s, so a
/// +10 µs shift on a 10-20 µs RDMA path moves a whole bucket while a
/// multi-second stall is still resolved (24 buckets keep 1,000 peers'
/// `/metrics` small).
pub fn rtt_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(1e-6, 2.0, 24)
}

fn rtt_histogram() -> Histogram {
    Histogram::new(rtt_buckets())
}

impl EncodeLabelValue for Protocol {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

impl EncodeLabelValue for PeerSource {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Labels of the per-pair probe series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    pub src_node: String,
    pub dst_node: String,
    pub protocol: Protocol,
}

/// Labels of per-pair series that are not split by protocol (RDMA delays).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PairLabels {
    pub src_node: String,
    pub dst_node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: PeerSource,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceEventLabels {
    pub source: PeerSource,
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolReasonLabels {
    pub protocol: Protocol,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabels {
    pub protocol: Protocol,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
}

type HistFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Handles to one (peer, protocol) probe series. Clones share the
/// underlying atomics, so the scheduler caches them per target.
#[derive(Clone, Debug)]
pub struct Series {
    /// Shared, so caching and cloning a series never copies strings.
    pub labels: std::sync::Arc<ProbeLabels>,
    pub sent: Counter,
    pub lost: Counter,
    pub rtt: Histogram,
}

/// Handles to one peer's TCP dial series.
#[derive(Clone, Debug)]
pub struct DialSeries {
    pub success: Gauge,
    pub failures: Counter,
}

/// Handles to one peer's RDMA delay histograms.
#[derive(Clone, Debug)]
pub struct RdmaSeries {
    pub responder_delay: Histogram,
    pub prober_delay: Histogram,
}

/// Every family of the exporter, and the registry that renders them.
pub struct Metrics {
    registry: Registry,
    pub rtt: HistFamily<ProbeLabels>,
    pub sent: Family<ProbeLabels, Counter>,
    pub lost: Family<ProbeLabels, Counter>,
    pub dial_success: Family<ProbeLabels, Gauge>,
    pub dial_failures: Family<ProbeLabels, Counter>,
    pub node_info: Family<Identity, Gauge>,
    pub skeleton_peers: Family<SourceLabels, Gauge>,
    pub rdma_responder_delay: HistFamily<PairLabels>,
    pub rdma_prober_delay: HistFamily<PairLabels>,
    /// Probe errors that are not loss: send failures, late or duplicate
    /// replies, replies from unexpected addresses.
    pub probe_errors: Family<ProtocolReasonLabels, Counter>,
    /// Discovery events by source (`added`, `removed`, `resolve_failed`, ...).
    pub discovery_events: Family<SourceEventLabels, Counter>,
    /// Events a discovery source had to drop (ring buffer overrun, ...).
    pub dropped_events: Family<SourceLabels, Counter>,
    /// Datagrams the UDP responder refused, by reason.
    pub responder_dropped: Family<ReasonLabels, Counter>,
    /// Probes the responder answered (UDP echoes, TCP accepts).
    pub responder_replies: Family<ProtocolLabels, Counter>,
    /// How long the previous `/metrics` encoding took.
    pub render_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// The exporter's own node name (the `src_node` of its series).
    src_node: Mutex<String>,
    /// Which probe series each peer address owns, for [`Metrics::forget_peer`].
    owned: Mutex<HashMap<IpAddr, HashSet<String>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub fn new(identity: &Identity) -> Metrics {
        let mut r = Registry::default();
        let rtt: HistFamily<ProbeLabels> = Family::new_with_constructor(rtt_histogram);
        let sent = Family::<ProbeLabels, Counter>::default();
        let lost = Family::<ProbeLabels, Counter>::default();
        let dial_success = Family::<ProbeLabels, Gauge>::default();
        let dial_failures = Family::<ProbeLabels, Counter>::default();
        let node_info = Family::<Identity, Gauge>::default();
        let skeleton_peers = Family::<SourceLabels, Gauge>::default();
        let rdma_responder_delay: HistFamily<PairLabels> =
            Family::new_with_constructor(rtt_histogram);
        let rdma_prober_delay: HistFamily<PairLabels> = Family::new_with_constructor(rtt_histogram);
        let build_info = Family::<BuildLabels, Gauge>::default();
        let probe_errors = Family::<ProtocolReasonLabels, Counter>::default();
        let discovery_events = Family::<SourceEventLabels, Counter>::default();
        let dropped_events = Family::<SourceLabels, Counter>::default();
        let responder_dropped = Family::<ReasonLabels, Counter>::default();
        let responder_replies = Family::<ProtocolLabels, Counter>::default();
        let render_seconds = Gauge::<f64, std::sync::atomic::AtomicU64>::default();

        r.register(
            "skeletonhunter_probe_rtt_seconds",
            "Probe round-trip time, responder processing delay subtracted where known",
            rtt.clone(),
        );
        r.register(
            "skeletonhunter_probe_sent",
            "Probes sent; loss is rate(lost) / rate(sent)",
            sent.clone(),
        );
        r.register(
            "skeletonhunter_probe_lost",
            "Probes without a reply within the timeout",
            lost.clone(),
        );
        r.register(
            "skeletonhunter_probe_dial_success",
            "1 if the last TCP dial to the peer connected, else 0",
            dial_success.clone(),
        );
        r.register(
            "skeletonhunter_probe_dial_failures",
            "TCP dials that failed (refused, timed out, unreachable)",
            dial_failures.clone(),
        );
        r.register(
            "skeletonhunter_node_info",
            "This exporter's topology identity (always 1)",
            node_info.clone(),
        );
        r.register(
            "skeletonhunter_skeleton_peers",
            "Peers currently known, by discovery source",
            skeleton_peers.clone(),
        );
        r.register(
            "skeletonhunter_rdma_responder_delay_seconds",
            "RDMA probe processing delay on the responder host",
            rdma_responder_delay.clone(),
        );
        r.register(
            "skeletonhunter_rdma_prober_delay_seconds",
            "RDMA probe processing delay on the prober host",
            rdma_prober_delay.clone(),
        );
        r.register(
            "skeletonhunter_exporter_build_info",
            "Build of the running exporter (always 1)",
            build_info.clone(),
        );
        r.register(
            "skeletonhunter_probe_errors",
            "Probe problems that are not loss, by protocol and reason",
            probe_errors.clone(),
        );
        r.register(
            "skeletonhunter_discovery_events",
            "Peer discovery events, by source and event",
            discovery_events.clone(),
        );
        r.register(
            "skeletonhunter_discovery_dropped_events",
            "Discovery events dropped before processing, by source",
            dropped_events.clone(),
        );
        r.register(
            "skeletonhunter_responder_dropped",
            "Datagrams the UDP responder dropped without replying, by reason",
            responder_dropped.clone(),
        );
        r.register(
            "skeletonhunter_responder_replies",
            "Probes answered by this exporter's responder, by protocol",
            responder_replies.clone(),
        );
        r.register(
            "skeletonhunter_exporter_render_seconds",
            "Time the previous /metrics response took to encode",
            render_seconds.clone(),
        );
        crate::trace::register_metrics(&mut r);

        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        let m = Metrics {
            registry: r,
            rtt,
            sent,
            lost,
            dial_success,
            dial_failures,
            node_info,
            skeleton_peers,
            rdma_responder_delay,
            rdma_prober_delay,
            probe_errors,
            discovery_events,
            dropped_events,
            responder_dropped,
            responder_replies,
            render_seconds,
            src_node: Mutex::new(String::new()),
            owned: Mutex::new(HashMap::new()),
        };
        m.set_identity(identity);
        m
    }

    /// Publish `identity` as `skeletonhunter_node_info` (replacing any
    /// earlier one) and use its node as `src_node`.
    pub fn set_identity(&self, id: &Identity) {
        self.node_info.clear();
        self.node_info.get_or_create(id).set(1);
        *self.src_node.lock().unwrap_or_else(|e| e.into_inner()) = id.node.clone();
    }

    pub fn src_node(&self) -> String {
        self.src_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn own(&self, peer: IpAddr, dst_node: &str) {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
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

    /// The probe series of `peer` (labelled `dst_node`) for `protocol`.
    pub fn series(&self, peer: IpAddr, dst_node: &str, protocol: Protocol) -> Series {
        self.own(peer, dst_node);
        let labels = self.labels(dst_node, protocol);
        Series {
            sent: self.sent.get_or_create_owned(&labels),
            lost: self.lost.get_or_create_owned(&labels),
            rtt: self.rtt.get_or_create_owned(&labels),
            labels: std::sync::Arc::new(labels),
        }
    }

    /// The TCP dial series of `peer`.
    pub fn dial_series(&self, peer: IpAddr, dst_node: &str) -> DialSeries {
        self.own(peer, dst_node);
        let labels = self.labels(dst_node, Protocol::Tcp);
        DialSeries {
            success: self.dial_success.get_or_create_owned(&labels),
            failures: self.dial_failures.get_or_create_owned(&labels),
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
            responder_delay: self.rdma_responder_delay.get_or_create_owned(&labels),
            prober_delay: self.rdma_prober_delay.get_or_create_owned(&labels),
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
            self.rtt.remove(&l);
            self.sent.remove(&l);
            self.lost.remove(&l);
            self.dial_success.remove(&l);
            self.dial_failures.remove(&l);
        }
        let l = PairLabels {
            src_node,
            dst_node: dst_node.to_string(),
        };
        self.rdma_responder_delay.remove(&l);
        self.rdma_prober_delay.remove(&l);
    }

    /// Remove every series of `peer` (it left the peer set).
    pub fn forget_peer(&self, peer: IpAddr) {
        let names = self
            .owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&peer);
        for dst in names.into_iter().flatten() {
            self.remove_dst(&dst);
        }
    }

    /// Remove the series `peer` had under the name `old_dst_node` (its
    /// learned identity changed).
    pub fn forget_name(&self, peer: IpAddr, old_dst_node: &str) {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = owned.get_mut(&peer) {
            set.remove(old_dst_node);
        }
        drop(owned);
        self.remove_dst(old_dst_node);
    }

    pub fn set_skeleton_peers(&self, source: PeerSource, n: usize) {
        self.skeleton_peers
            .get_or_create(&SourceLabels { source })
            .set(n as i64);
    }

    pub fn probe_error(&self, protocol: Protocol, reason: &'static str) {
        self.probe_errors
            .get_or_create(&ProtocolReasonLabels { protocol, reason })
            .inc();
    }

    pub fn discovery_event(&self, source: PeerSource, event: &'static str) {
        self.discovery_events
            .get_or_create(&SourceEventLabels { source, event })
            .inc();
    }

    pub fn dropped_event(&self, source: PeerSource, n: u64) {
        self.dropped_events
            .get_or_create(&SourceLabels { source })
            .inc_by(n);
    }

    pub fn responder_drop(&self, reason: &'static str) {
        self.responder_dropped
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub fn responder_reply(&self, protocol: Protocol) {
        self.responder_replies
            .get_or_create(&ProtocolLabels { protocol })
            .inc();
    }

    /// Render `/metrics`: OpenMetrics when the scraper asks for it (as
    /// Prometheus does), the classic text format otherwise, which is what
    /// `promtool check metrics` and curl users expect. The classic form is
    /// converted line by line while encoding, so only one copy of a large
    /// exposition is ever in memory.
    pub fn render(&self, accept: Option<&str>) -> Reply {
        let start = std::time::Instant::now();
        let reply = exposition::render(&self.registry, accept, self.size_hint());
        self.render_seconds.set(start.elapsed().as_secs_f64());
        reply
    }

    /// A guess of the exposition size, so the buffer rarely reallocates.
    fn size_hint(&self) -> usize {
        let peers = self.owned.lock().map(|o| o.len()).unwrap_or(0);
        16 * 1024 + peers * 3300
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident() -> Identity {
        Identity {
            node: "a".into(),
            tor: "t1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn classic_output_names_counters_with_total_and_has_no_eof() {
        let m = Metrics::new(&ident());
        let s = m.series("10.0.0.2".parse().unwrap(), "b", Protocol::Udp);
        s.sent.inc();
        s.rtt.observe(0.000_05);
        let r = m.render(None);
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        assert!(text.contains("# TYPE skeletonhunter_probe_sent_total counter"));
        assert!(text.contains("# HELP skeletonhunter_probe_sent_total Probes sent"));
        assert!(text.contains(
            "skeletonhunter_probe_sent_total{src_node=\"a\",dst_node=\"b\",protocol=\"udp\"} 1"
        ));
        assert!(text.contains("skeletonhunter_probe_rtt_seconds_bucket{"));
        assert!(text.contains("skeletonhunter_node_info{node=\"a\",nic=\"\",host=\"\",tor=\"t1\""));
        assert!(!text.contains("# EOF"));
        let om = m.render(Some("application/openmetrics-text;version=1.0.0"));
        let om = String::from_utf8(om.body.to_vec()).unwrap();
        assert!(om.ends_with("# EOF\n"));
        // Converting the OpenMetrics text in one go gives the same result
        // as the streaming conversion.
        // (apart from the encode-time gauge, which differs per render).
        let strip = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("skeletonhunter_exporter_render_seconds "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            strip(&exposition::openmetrics_to_classic(&om)),
            strip(&text)
        );
    }

    #[test]
    fn forgetting_a_peer_removes_all_its_series() {
        let m = Metrics::new(&ident());
        let peer: IpAddr = "10.0.0.2".parse().unwrap();
        m.series(peer, "10.0.0.2", Protocol::Icmp).sent.inc();
        m.series(peer, "b", Protocol::Udp).lost.inc();
        m.dial_series(peer, "b").success.set(1);
        m.series("10.0.0.3".parse().unwrap(), "c", Protocol::Udp)
            .sent
            .inc();
        m.forget_peer(peer);
        let text = String::from_utf8(m.render(None).body.to_vec()).unwrap();
        assert!(!text.contains("dst_node=\"b\""), "{text}");
        assert!(!text.contains("dst_node=\"10.0.0.2\""));
        assert!(text.contains("dst_node=\"c\""));
    }

    #[test]
    fn buckets_resolve_microseconds_and_seconds() {
        let b: Vec<f64> = rtt_buckets().collect();
        assert!((b[0] - 1e-6).abs() < 1e-12);
        assert!(b.iter().filter(|x| **x < 1e-4).count() >= 6);
        assert!(*b.last().unwrap() > 5.0);
    }
}
