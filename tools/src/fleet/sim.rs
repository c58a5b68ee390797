//! The simulated fleet: one exporter [`Metrics`] per node of the localizer
//! simulator's fabric, and the driver step that advances every pair's UDP
//! probe counters and RTT histogram as that node's prober would.

use super::fault::{pair_effect, FleetFault};
use skeletonhunter_common::topology::Identity;
use skeletonhunter_exporter::model::{HistogramMode, Protocol};
use skeletonhunter_exporter::telemetry::{Metrics, Series};
use skeletonhunter_localizer::sim::{Fabric, FabricSpec, Rng};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Healthy base RTT of a pair under one ToR (mostly the hosts' stacks); a
/// pair across ToRs of one spine block adds [`HOP_RTT`], across spine
/// blocks twice that: RTT follows the path, as in a real fabric, and
/// varies little within a path class (the localizer's latency baseline is
/// per class, so a wide unstructured spread would read as faults). Every base stays inside one classic bucket
/// (64-128 µs of the exporter's doubling buckets): a spread across a
/// bucket bound moves interpolated medians by up to 2x.
pub const BASE_RTT: f64 = 72e-6;
/// RTT a pair's path adds per switch tier crossed: two more switch
/// traversals each way, under a microsecond each in a RoCE fabric.
pub const HOP_RTT: f64 = 1.5e-6;
/// Each pair's healthy base is off its class's by up to this either way
/// (cable lengths, NIC and switch port differences).
pub const BASE_RTT_SPREAD: f64 = 2e-6;
/// Standard deviation of the per-probe jitter around a pair's base RTT.
pub const RTT_JITTER: f64 = 3e-6;
/// A driver step never catches up more than this many ticks of probes
/// (after a stall the counters fall behind, as a stalled exporter's do),
/// so the work of one step is bounded.
const MAX_CATCH_UP_TICKS: f64 = 5.0;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    /// Shape of the fabric (only the topology fields are used).
    pub fabric: FabricSpec,
    /// How the nodes' RTT histograms are kept (and so exposed).
    pub histograms: HistogramMode,
    /// UDP probes per second on every pair.
    pub probe_rate: f64,
    /// Seed of every random draw.
    pub seed: u64,
}

/// One directed pair's series and what the faults do to it.
struct PairState {
    series: Series,
    base_rtt: f64,
    loss: f64,
    extra_rtt: f64,
}

/// What one driver step changes; behind a lock, so [`Fleet::set_faults`]
/// and the driver can run on different threads.
struct Probing {
    pairs: Vec<PairState>,
    rng: Rng,
    last: Instant,
}

/// The fleet: the fabric, each node's exporter metrics and the probing state.
pub struct Fleet {
    spec: FleetSpec,
    fabric: Fabric,
    nodes: Vec<Metrics>,
    probing: Mutex<Probing>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("nodes", &self.nodes.len())
            .field("pairs", &self.fabric.pairs.len())
            .finish_non_exhaustive()
    }
}

/// The address a node's series are owned under (never on the wire: the
/// probe series are labelled by node names only).
fn peer_addr(node: u32) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from((0xfd00_u128 << 112) | u128::from(node)))
}

impl Fleet {
    /// Build the fabric of `spec` with one exporter per node and every
    /// skeleton pair's UDP series at zero; healthy until [`Fleet::set_faults`].
    pub fn new(spec: FleetSpec) -> Fleet {
        let fabric = Fabric::new(spec.fabric.clone());
        let nodes: Vec<Metrics> = fabric
            .nodes
            .iter()
            .map(|id| Metrics::with_histograms(id, spec.histograms))
            .collect();
        let mut rng = Rng::new(spec.seed);
        let pairs = fabric
            .pairs
            .iter()
            .map(|&(a, b)| PairState {
                series: nodes[a as usize].series(
                    peer_addr(b),
                    &fabric.nodes[b as usize].node,
                    Protocol::Udp,
                ),
                base_rtt: base_rtt(&fabric.nodes[a as usize], &fabric.nodes[b as usize])
                    + rng.range(-BASE_RTT_SPREAD, BASE_RTT_SPREAD),
                loss: 0.0,
                extra_rtt: 0.0,
            })
            .collect();
        Fleet {
            spec,
            fabric,
            nodes,
            probing: Mutex::new(Probing {
                pairs,
                rng,
                last: Instant::now(),
            }),
        }
    }

    /// The fabric (identities and pairs).
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// What is simulated.
    pub fn spec(&self) -> &FleetSpec {
        &self.spec
    }

    /// Number of nodes (scrape targets).
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Node `i`'s exporter metrics, if there is such a node.
    pub fn node(&self, i: usize) -> Option<&Metrics> {
        self.nodes.get(i)
    }

    /// Apply `faults` from now on (replacing any before; empty heals).
    pub fn set_faults(&self, faults: &[FleetFault]) {
        let mut p = self
            .probing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (state, &(a, b)) in p.pairs.iter_mut().zip(&self.fabric.pairs) {
            let (src, dst) = (
                &self.fabric.nodes[a as usize],
                &self.fabric.nodes[b as usize],
            );
            (state.loss, state.extra_rtt) = pair_effect(src, dst, faults);
        }
    }

    /// Advance every pair by the whole probes due since the last step
    /// (at most [`MAX_CATCH_UP_TICKS`] × `tick` of them): sent, lost as the
    /// faults draw, one RTT observation per answered probe. Returns the
    /// probes sent per pair.
    pub fn step(&self, tick: Duration) -> u32 {
        self.step_at(Instant::now(), tick)
    }

    /// [`Fleet::step`] as if the time were `now`.
    pub fn step_at(&self, now: Instant, tick: Duration) -> u32 {
        let mut guard = self
            .probing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let p = &mut *guard;
        let rate = self.spec.probe_rate;
        let due = (now.saturating_duration_since(p.last).as_secs_f64() * rate).floor();
        if due < 1.0 {
            return 0;
        }
        p.last += Duration::from_secs_f64(due / rate);
        let n = due.min((MAX_CATCH_UP_TICKS * tick.as_secs_f64() * rate).max(1.0)) as u32;
        if f64::from(n) < due {
            p.last = now;
        }
        for pair in &p.pairs {
            let lost = p.rng.binomial(n, pair.loss);
            pair.series.sent.inc_by(u64::from(n));
            pair.series.lost.inc_by(u64::from(lost));
            for _ in 0..n - lost {
                let rtt = pair.base_rtt + pair.extra_rtt + RTT_JITTER * p.rng.normal();
                pair.series.rtt.observe(rtt.max(1e-6));
            }
        }
        n
    }
}

/// The healthy base RTT of a pair's path class (see [`BASE_RTT`]).
fn base_rtt(src: &Identity, dst: &Identity) -> f64 {
    let tiers = if src.tor == dst.tor {
        0.0
    } else if src.spine == dst.spine {
        1.0
    } else {
        2.0
    };
    BASE_RTT + tiers * HOP_RTT
}

/// `base` with the fewest hosts (whole ToR segments) whose skeleton has at
/// least `pairs` pairs: the fabric's pair count grows with its hosts, so
/// estimate from a small fabric, then add segments (at most 64 times).
pub fn shape_for_pairs(base: &FabricSpec, pairs: usize) -> FabricSpec {
    let seg = base.hosts_per_tor.max(1);
    let probe_hosts = 4 * seg;
    let probe = Fabric::new(FabricSpec {
        hosts: probe_hosts,
        ..base.clone()
    });
    let per_host = (probe.pairs.len() as f64 / probe_hosts as f64).max(1.0);
    let mut hosts = ((pairs as f64 / per_host).ceil() as usize)
        .div_ceil(seg)
        .max(1)
        * seg;
    for _ in 0..64 {
        let spec = FabricSpec {
            hosts,
            ..base.clone()
        };
        if Fabric::new(spec.clone()).pairs.len() >= pairs {
            return spec;
        }
        hosts += seg;
    }
    FabricSpec {
        hosts,
        ..base.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::fault::{Effect, FleetFault};
    use skeletonhunter_common::topology::{Component, Kind};

    fn spec(hosts: usize) -> FleetSpec {
        FleetSpec {
            fabric: FabricSpec {
                hosts,
                rails: 2,
                hosts_per_tor: 2,
                tors_per_spine: 2,
                ..Default::default()
            },
            histograms: HistogramMode::Classic,
            probe_rate: 1000.0,
            seed: 7,
        }
    }

    #[test]
    fn shape_reaches_the_pair_count() {
        let base = spec(2).fabric;
        for want in [1, 100, 1000] {
            let got = Fabric::new(shape_for_pairs(&base, want)).pairs.len();
            assert!(got >= want && got < want + 64, "{want}: {got}");
        }
    }

    #[test]
    fn step_counts_probes_and_faults_lose_them() {
        let fleet = Fleet::new(spec(8));
        let nic = fleet.fabric().nodes[0].nic.clone();
        fleet.set_faults(&[FleetFault {
            component: Component::new(Kind::Nic, nic.clone()),
            effect: Effect::Loss(1.0),
        }]);
        let later = Instant::now() + Duration::from_millis(20);
        let n = fleet.step_at(later, Duration::from_secs(1));
        assert!(n >= 10, "{n}");
        // A stall is not caught up beyond five ticks.
        let much_later = later + Duration::from_secs(60);
        assert_eq!(fleet.step_at(much_later, Duration::from_millis(2)), 10);
        let f = fleet.fabric();
        let mut saw_fault = false;
        for &(a, b) in &f.pairs {
            let (sent, lost) = fleet
                .node(a as usize)
                .and_then(|m| m.udp_counts(&f.nodes[b as usize].node))
                .unwrap();
            assert_eq!(sent, u64::from(n) + 10);
            let crosses = f.nodes[a as usize].nic == nic || f.nodes[b as usize].nic == nic;
            assert_eq!(lost, if crosses { sent } else { 0 });
            saw_fault |= crosses;
        }
        assert!(saw_fault);
        let text = fleet.node(1).unwrap().render(None).body;
        let text = String::from_utf8_lossy(&text);
        assert!(
            text.contains("skeletonhunter_probe_rtt_seconds_bucket{"),
            "{text}"
        );
    }
}
