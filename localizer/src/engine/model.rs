//! The engine's vocabulary: what goes in (per-pair aggregates, tuning) and
//! what comes out (faults, blame, the `analyze` report).
//!
//! Every other layer speaks these types; they hold data only, so adding a
//! field (e.g. a probe count per pair) never pulls logic along with it.

use serde::{Deserialize, Serialize};
use skeletonhunter_common::topology::{Component, Identity, Kind};

/// Aggregated probe results of one (src, dst) pair over the analysis window.
///
/// Counts are `f64` so that PromQL `increase()` results (which extrapolate)
/// can be used as they come; the CSV path fills whole numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairStats {
    /// Prober side (its `node` id must be non-empty).
    pub src: Identity,
    /// Responder side.
    pub dst: Identity,
    /// Probe rounds attempted (CSV rows; online: dial attempts in the window).
    pub rounds: f64,
    /// Rounds whose dial / connection failed (CSV `dial` != `success`;
    /// online: increase of `skeletonhunter_probe_dial_failures_total`).
    pub failed_dials: f64,
    /// Packets sent in connected rounds (online: increase of
    /// `skeletonhunter_probe_sent_total`).
    pub sent: f64,
    /// Packets of those lost (online: increase of
    /// `skeletonhunter_probe_lost_total`).
    pub lost: f64,
    /// Typical RTT in seconds (CSV: median of the rounds' `latency`; online:
    /// `histogram_quantile(0.5, ...)` of the RTT histogram); `None` when no
    /// reply came back.
    pub rtt_seconds: Option<f64>,
    /// How many RTT samples `rtt_seconds` summarizes (0 when none).
    pub rtt_samples: f64,
    /// Robust spread of those samples in seconds (interquartile range /
    /// 1.349); `None` where the source does not give it (online) or has
    /// too few samples. A pair whose own RTTs jitter by tens of µs has an
    /// uncertain typical RTT: its excess is judged against that
    /// uncertainty too, not only against its route level's spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_spread_seconds: Option<f64>,
    /// Connected rounds that lost at least one packet (CSV: rows with a
    /// `loss_rate` above 0); `None` where the source cannot tell (online:
    /// counters over a window). A burst takes several probes of a round at
    /// once and fills few rounds; a gray fault drops probes one by one,
    /// over many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lossy_rounds: Option<f64>,
    /// Those rounds one by one, with when they ran (CSV: the rows with a
    /// `loss_rate` above 0); empty where the source cannot tell (online)
    /// or none lost a packet. A blip takes probes of several pairs in one
    /// moment; a gray fault, round after round
    /// ([`crate::engine::persistence`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lossy_rows: Vec<LossyRow>,
    /// Typical time between the pair's rounds in seconds (CSV: the span of
    /// its rows over their count less one); `None` where the source does
    /// not tell or the pair has one row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_seconds: Option<f64>,
    /// Router addresses traced on this pair's path (online: from
    /// `skeletonhunter_path_hop_info`); each joins the pair's path as a `hop`
    /// component. Empty when the pair was not traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<String>,
    /// Per ECMP path of the pair (online: the `path` label of
    /// `skeletonhunter_path_hop_info` with `skeletonhunter_path_loss_ratio`
    /// and `_probes`): its traced hops and the probes of the pair's flows
    /// that take it. Empty without multi-flow data (CSV logs, old
    /// exporters); the link stage ([`crate::engine::links`]) reads it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathObs>,
}

/// One connected round of a pair that lost packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LossyRow {
    /// When it ran, in seconds from any origin the pairs of one window
    /// share (CSV: before the log's last `ping_time`, so negative).
    pub at_seconds: f64,
    /// Packets it sent.
    pub sent: f64,
    /// Of those, lost.
    pub lost: f64,
}

/// One forward ECMP path of a pair and what its flows saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathObs {
    /// The path's id (a stable hash of its hop list).
    pub id: String,
    /// Router addresses in TTL order ("" for a silent hop). A hop address
    /// names the directed link into the router that answered.
    pub hops: Vec<String>,
    /// Probes of the pair's flows that took this path (forward).
    pub probes: f64,
    /// Of those, lost (round trip: the reply may take any reverse path).
    pub lost: f64,
}

/// Engine tuning. Defaults are what the benchmark is measured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Family-wise significance level for blaming a component; divided by the
    /// number of candidate columns (Bonferroni) before use.
    pub alpha: f64,
    /// Family-wise significance level for calling a single pair anomalous;
    /// divided by the number of pairs before use.
    pub pair_alpha: f64,
    /// Per-pair level used when counting which of a candidate's pairs show
    /// its symptom (coverage test); lenient on purpose.
    pub coverage_alpha: f64,
    /// Floor for the estimated background packet loss rate.
    pub min_background_loss: f64,
    /// Floor for the estimated background dial failure rate.
    pub min_background_dial_failure: f64,
    /// Ceiling for both background rates: when most of a (small) fabric
    /// fails, that is not background.
    pub max_background_rate: f64,
    /// Floor for the latency noise scale (seconds), so a perfectly quiet
    /// fabric does not flag nanosecond jitter.
    pub min_latency_scale_seconds: f64,
    /// Smallest excess RTT (seconds) worth reporting, absolute: a pair or a
    /// component is slow only when it adds at least this much (and at least
    /// `min_latency_excess_ratio` of its path class's baseline RTT). The
    /// test stays statistical; this is the practical effect size below which
    /// a significant shift does not matter. The default (2 µs) suits RoCE
    /// fabrics, where +10 µs already costs training speed; software paths
    /// (veth, virtual switches) wander by tens of µs and need far more.
    pub min_latency_excess_seconds: f64,
    /// Smallest excess RTT worth reporting, relative to the healthy baseline
    /// RTT of the pair's path class (0.25 = a quarter of the baseline).
    pub min_latency_excess_ratio: f64,
    /// Most RTT a healthy path adds per switch tier it climbs beyond the
    /// tier below (same ToR → cross-ToR over one spine → over two spines),
    /// absolute. Caps a cross-ToR level's baseline at the level below plus
    /// this (or `max_hop_latency_ratio` of the same-ToR baseline, the
    /// larger): one slow spine can slow most of its level, but two more
    /// hops do not cost tens of µs on a healthy fabric. Generous on
    /// purpose (10 µs): software fabrics (veth, namespaces) and RTTs read
    /// back from histogram buckets put a healthy cross-ToR median 8 µs
    /// above the same-ToR one, and a cap below that pages the spine.
    pub max_hop_latency_seconds: f64,
    /// The same cap relative to the same-ToR baseline RTT (1.0: one more
    /// tier crosses two more switches and at most doubles the RTT of a
    /// path through one).
    pub max_hop_latency_ratio: f64,
    /// How much a delay fault's size varies from one flow to the next,
    /// relative to its size (queues differ: the pairs a +80 µs fault slows
    /// sit a few µs apart around its fitted delay). Once a delay is
    /// accepted, what is left of a slowed pair's RTT is tested against the
    /// healthy jitter widened by this share of that delay, so a fault's own
    /// spread is not paged as a second fault on its slowest pairs.
    pub latency_fault_spread: f64,
    /// Smallest extra loss rate (or share of failed dials) worth paging, on
    /// the flows a component hits: next to the p-value, a verdict needs an
    /// effect an operator would act on. On a large window any tiny excess
    /// is significant (0.2% on a ToR's thousands of pairs); a gray NIC at
    /// 1–2% is well above it.
    pub min_loss_excess: f64,
    /// A pair's RTT counts only when summarized from at least this many
    /// samples (a median of fewer is not robust to one delayed reply).
    pub min_latency_samples: f64,
    /// Lasso penalty, relative to the largest useful penalty `lambda_max`.
    pub lambda_ratio: f64,
    /// A component is blamed only when at least this many of its pairs show
    /// the symptom (one bad pair is indistinguishable from pair noise).
    pub min_pairs: usize,
    /// Non-ECMP components: observed coverage must reach this share of the
    /// coverage the fitted fault predicts.
    pub min_coverage_ratio: f64,
    /// Spines (ECMP: a fault may hit only some flows): smallest fraction of
    /// their pairs that must show the symptom.
    pub ecmp_min_fraction: f64,
    /// `unreachable` means (nearly) nothing gets through: a component blamed
    /// for loss is `unreachable` when the packet loss it adds reaches this
    /// share, and `loss` below it even when the dial test blames it too.
    pub unreachable_min_loss: f64,
    /// Coordinate-descent sweeps at most.
    pub max_sweeps: usize,
    /// Smallest host-stack delay (seconds, the exporter's own 99th
    /// percentile) that screens a node out of the network's evidence
    /// ([`crate::engine::hoststack`]): far above what a healthy host's
    /// scheduling costs (a few milliseconds; a loaded machine's passing
    /// spikes reach tens), reached by a paused or badly starved exporter,
    /// below a probe timeout. A mildly starved exporter is caught by its
    /// throttling instead (`min_host_throttled_ratio`).
    pub min_host_stack_seconds: f64,
    /// ... and the factor by which it must exceed the fabric's typical
    /// host-stack delay (the median over nodes): a whole fabric that is
    /// slow is not one busy host.
    pub host_stack_ratio: f64,
    /// Share of the window an exporter's cgroup may be held back by its
    /// CPU quota before its node counts as busy whatever its delays (a
    /// quota is the host's own business, so no fabric baseline).
    pub min_host_throttled_ratio: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            alpha: 1e-3,
            pair_alpha: 1e-2,
            coverage_alpha: 1e-2,
            min_background_loss: 1e-5,
            min_background_dial_failure: 1e-4,
            max_background_rate: 0.01,
            min_latency_scale_seconds: 0.5e-6,
            min_latency_excess_seconds: 2e-6,
            min_latency_excess_ratio: 0.25,
            unreachable_min_loss: 0.9,
            min_latency_samples: 3.0,
            max_hop_latency_seconds: 10e-6,
            max_hop_latency_ratio: 1.0,
            latency_fault_spread: 0.05,
            min_loss_excess: 0.005,
            lambda_ratio: 0.05,
            min_pairs: 2,
            min_coverage_ratio: 0.5,
            ecmp_min_fraction: 0.08,
            max_sweeps: 200,
            min_host_stack_seconds: 0.1,
            host_stack_ratio: 4.0,
            min_host_throttled_ratio: 0.01,
        }
    }
}

skeletonhunter_common::labelled_enum! {
    without_all;
    /// What a fault does to the probes crossing it; the `symptom` of every
    /// fault, alert and blame series (see `docs/localizer.md`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Symptom {
        /// Packets are dropped.
        Loss,
        /// (Nearly) nothing gets through: dials fail.
        Unreachable,
        /// Packets are delayed.
        Latency,
        /// Its faults come and go repeatedly (online only: the `run` loop's
        /// flap detector sets it on an incident; the engine never reports it,
        /// and it is not in [`Symptom::ALL`]).
        Flapping,
        /// The host's own stack (a starved or paused exporter) delays probes:
        /// its pairs are not the network's evidence (reported only from
        /// host-stack evidence, see [`crate::engine::hoststack`]; not in
        /// [`Symptom::ALL`]).
        #[serde(rename = "host_stack")]
        HostStack,
    }
}

impl Symptom {
    /// Every symptom the engine reports, in report order.
    pub const ALL: [Symptom; 3] = [Symptom::Loss, Symptom::Unreachable, Symptom::Latency];
}

/// One blamed component, as in the `analyze` JSON (`docs/localizer.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// Kind of the blamed component.
    pub kind: Kind,
    /// Id of the blamed component.
    pub id: String,
    /// Estimated failure probability in [0, 1]: loss rate for `loss`,
    /// share of failed dials for `unreachable`, share of the RTT due to the
    /// component for `latency`.
    pub score: f64,
    /// One-sided p-value of "this component adds nothing" (before the
    /// Bonferroni correction; compare with `alpha / candidates`).
    pub p_value: f64,
    /// What it does to the probes.
    pub symptom: Symptom,
    /// Anomalous pairs crossing the component that it explains.
    pub pairs: usize,
    /// Components no observed pair can tell apart from this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equivalent: Vec<Component>,
    /// Indices (into the `pairs` given to [`crate::analyze`]) of the anomalous
    /// pairs the fault explains; not serialized. The online loop uses them
    /// to tell a new fault from leftovers of one that just cleared.
    #[serde(skip)]
    pub hit_pairs: Vec<usize>,
}

impl Fault {
    /// The blamed component.
    pub fn component(&self) -> Component {
        Component::new(self.kind, self.id.clone())
    }
}

/// Host-stack evidence of one window: per node id, the delay its own
/// host's stack added to probing (seconds: the 99th percentile of the
/// exporter's `skeletonhunter_host_stack_delay_seconds`, worst stage and
/// protocol). Empty when the exporters do not measure it: the engine then
/// behaves exactly as without it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostStack {
    /// Node id -> delay in seconds.
    pub delay_seconds: std::collections::BTreeMap<String, f64>,
    /// Node id -> share of the window its exporter's cgroup was held back
    /// by its CPU quota (`skeletonhunter_host_cpu_throttled_seconds_total`
    /// per second): a starved exporter whose own delays are lost in a
    /// machine's load still shows here.
    pub throttled_ratio: std::collections::BTreeMap<String, f64>,
}

impl HostStack {
    /// No evidence at all: the engine then runs as without it.
    pub fn is_empty(&self) -> bool {
        self.delay_seconds.is_empty() && self.throttled_ratio.is_empty()
    }
}

/// A candidate the Lasso selected, blamed or cleared; the online loop turns
/// these into `skeletonhunter_component_blame` / `_faulty`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blame {
    /// The candidate component.
    pub component: Component,
    /// The symptom it was tested for.
    pub symptom: Symptom,
    /// Estimated failure probability.
    pub score: f64,
    /// p-value of the test.
    pub p_value: f64,
    /// Blamed (true) or considered and cleared (false).
    pub faulty: bool,
}

/// The `analyze` output. Serializes exactly to the documented JSON; `blame` is
/// for the online loop and is not serialized.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Most-blamed first; empty when healthy.
    pub faults: Vec<Fault>,
    /// Pairs analyzed.
    pub pairs_observed: usize,
    /// Pairs anomalous for at least one symptom.
    pub pairs_anomalous: usize,
    /// Every tested candidate, for the blame metrics.
    #[serde(skip)]
    pub blame: Vec<Blame>,
}

/// Wall-clock split of one [`analyze`] call (for the benchmark).
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// The link stage (when pairs carry paths) and building the path matrix.
    pub matrix: std::time::Duration,
    /// Per-pair detection.
    pub detect: std::time::Duration,
    /// Lasso and tests.
    pub localize: std::time::Duration,
}
