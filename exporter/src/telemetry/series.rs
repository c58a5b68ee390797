//! Handles to one peer's series, handed to the probers by [`super::Metrics`]:
//! clones share the underlying atomics, so a prober caches them per target
//! and never looks a series up by its labels on the probe path.

use super::families::FloatGauge;
use crate::model::ProbeLabels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// Handles to one (peer, protocol) probe series. Clones share the
/// underlying atomics, so the scheduler caches them per target.
#[derive(Clone, Debug)]
pub struct Series {
    /// Shared, so caching and cloning a series never copies strings.
    pub labels: std::sync::Arc<ProbeLabels>,
    /// Probes sent.
    pub sent: Counter,
    /// Probes lost.
    pub lost: Counter,
    /// Round-trip times.
    pub rtt: Histogram,
    /// Probes lost since the last answer: at the scrape it tells a pair
    /// cut off now from one that only lost some, long before the counters'
    /// rate over a window can.
    pub consecutive_lost: Gauge,
}

impl Series {
    /// Handles in no registry, labelled `labels`: what a probe to a peer
    /// that said it is leaving counts in, so it counts nowhere (the UDP
    /// prober still asks such a peer whether it is back).
    pub fn detached(labels: ProbeLabels) -> Series {
        Series {
            labels: std::sync::Arc::new(labels),
            sent: Counter::default(),
            lost: Counter::default(),
            rtt: Histogram::new(std::iter::empty()),
            consecutive_lost: Gauge::default(),
        }
    }

    /// A probe answered after `rtt_seconds`: observed, and a run of losses ends.
    pub fn answered(&self, rtt_seconds: f64) {
        self.rtt.observe(rtt_seconds);
        self.consecutive_lost.set(0);
    }

    /// A probe (or dial) lost: counted, and the run of losses grows.
    pub fn lost_one(&self) {
        self.lost.inc();
        self.consecutive_lost.inc();
    }
}

/// Handles to one peer's multi-flow UDP series.
#[derive(Clone, Debug)]
pub struct FlowSeries {
    /// Loss ratio of the worst flow over the flow window.
    pub worst_loss: FloatGauge,
    /// Flows in use.
    pub flows: Gauge,
}

/// Handles to one peer's TCP dial series.
#[derive(Clone, Debug)]
pub struct DialSeries {
    /// 1 if the last dial connected.
    pub success: Gauge,
    /// Failed dials.
    pub failures: Counter,
}

/// Handles to one peer's RDMA delay histograms.
#[derive(Clone, Debug)]
pub struct RdmaSeries {
    /// Time the peer held the probe.
    pub responder_delay: Histogram,
    /// Time this host held the probe.
    pub prober_delay: Histogram,
}
