//! How to run the stack: binaries, fabric size, and either the short
//! intervals that keep the end-to-end tests within minutes or the shipped
//! timing (`StackOpts::shipped`, in `shipped.rs`).

use super::topology::{DataPlane, FabricSpec};
use std::path::PathBuf;
use std::time::Duration;

/// Which timing the stack runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Short intervals, every one set on the command lines and configs.
    Test,
    /// The shipped files' and binaries' defaults: the exporters set only
    /// their probe interval, the localizer gets the Deployment's flags.
    Shipped,
}

/// How to run the stack.
#[derive(Debug, Clone)]
pub struct StackOpts {
    /// Which timing the intervals below come from.
    pub timing: Timing,
    /// Fabric size.
    pub spec: FabricSpec,
    /// How containers reach each other (routed, or a VXLAN overlay).
    pub data_plane: DataPlane,
    /// The exporter binary to run in every container.
    pub exporter_bin: PathBuf,
    /// `None`: no localizer (the demo's fallback, or a test of the rules alone).
    pub localizer_bin: Option<PathBuf>,
    /// Probe interval per peer.
    pub probe_interval: Duration,
    /// Prometheus scrape interval.
    pub scrape_interval: Duration,
    /// Prometheus rule evaluation interval.
    pub evaluation_interval: Duration,
    /// Localizer cycle.
    pub localizer_interval: Duration,
    /// Localizer analysis window (PromQL `increase()` range): short, so a
    /// fault shows and clears within seconds.
    pub localizer_window: Duration,
    /// The localizer's `--min-latency-excess`. Veth RTTs of 25–60 µs on a
    /// shared machine wander by tens of µs when the CPUs are busy (the
    /// default, 2 µs, is for RoCE NIC timestamps), so only a delay of this
    /// size is a latency fault on this fabric.
    pub min_latency_excess: String,
    /// Extra localizer flags (after ours; with [`Timing::Shipped`], the
    /// Deployment's behaviour flags).
    pub localizer_args: Vec<String>,
    /// The exporters' `probe.flows`; `None`: from the ECMP width, which
    /// is the spine count.
    pub flows: Option<u32>,
    /// Start the exporters with only their namespace's network
    /// (`nsenter --net`) instead of `ip netns exec`, which remounts `/sys`
    /// and so hides the cgroup hierarchy: an exporter then sees its own
    /// CPU throttling, as it does in a container.
    pub exporters_see_cgroups: bool,
    /// One exporter per host (the overlay fabric only), probing from inside
    /// each of its containers as the shipped DaemonSet does, instead of one
    /// exporter in every container: the containers are processes in
    /// cgroups ([`super::Containers`]) holding their training connections.
    pub from_containers: bool,
}

impl StackOpts {
    /// Short intervals so a fault shows within seconds and tests stay short.
    pub fn new(exporter_bin: PathBuf, localizer_bin: Option<PathBuf>) -> StackOpts {
        StackOpts {
            timing: Timing::Test,
            spec: FabricSpec::default(),
            data_plane: DataPlane::Routed,
            exporter_bin,
            localizer_bin,
            probe_interval: Duration::from_millis(200),
            scrape_interval: Duration::from_secs(1),
            evaluation_interval: Duration::from_secs(1),
            localizer_interval: Duration::from_secs(2),
            localizer_window: Duration::from_secs(10),
            min_latency_excess: "250us".into(),
            localizer_args: Vec::new(),
            flows: None,
            exporters_see_cgroups: false,
            from_containers: false,
        }
    }

    /// How long after an alert resolved the localizer may still hold back
    /// a new finding on the same pairs as possible leftovers (window +
    /// scrape interval, see `run --scrape-interval`), plus a cycle. Tests
    /// wait this long between independent faults.
    pub fn settle_time(&self) -> Duration {
        self.localizer_window + self.scrape_interval + self.localizer_interval
    }
}
