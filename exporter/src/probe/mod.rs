//! The probing engine: one [`Prober`] per protocol, one [`Scheduler`].
//!
//! Contract (all protocols, RDMA included):
//! - A prober owns a few sockets (one per address family at most) and its
//!   own receive task(s). It never creates a task or socket per peer; the
//!   TCP dial prober is the exception the protocol forces (a connection is
//!   a socket), and its dials are short-lived.
//! - [`Prober::probe`] is called by the scheduler and must not block: it
//!   sends one probe, counts it as sent, and registers it in its
//!   [`InFlight`] table with the target's cached [`Series`].
//! - The prober's receive task completes in-flight entries (RTT observed
//!   once); [`Prober::expire`], called by the scheduler every few ms, counts
//!   entries past the timeout as lost. Late and duplicate replies are
//!   counted as probe errors, never as RTT or loss, so `sent = answered +
//!   lost + in flight` always holds.
//! - The one [`Scheduler`] task spreads the probes of all targets and
//!   protocols evenly over the interval (slot k of M fires at k/M of the
//!   round), so thousands of peers cost a steady trickle, not bursts.

pub mod icmp;
pub mod inflight;
pub mod rdma;
pub mod tcp;
pub mod udp;
pub mod wire;

pub use inflight::{Completion, InFlight};

use crate::metrics::{DialSeries, Metrics, RdmaSeries, Series};
use crate::peers::{Peer, PeerSet};
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A probe protocol; its `as_str` is the `protocol` label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Udp,
    Tcp,
    Icmp,
    Rdma,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [Protocol::Udp, Protocol::Tcp, Protocol::Icmp, Protocol::Rdma];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Tcp => "tcp",
            Protocol::Icmp => "icmp",
            Protocol::Rdma => "rdma",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown protocol {s:?} (expected udp, tcp, icmp or rdma)"))
    }
}

/// Default ports used when a peer does not name its own.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub udp: u16,
    pub tcp: u16,
}

/// One peer as the probers see it: addresses, the `dst_node` label (learned
/// from UDP replies when possible), and its cached metric handles.
pub struct Target {
    pub peer: Peer,
    pub udp_addr: SocketAddr,
    pub tcp_addr: SocketAddr,
    metrics: Arc<Metrics>,
    state: Mutex<TargetState>,
    retired: AtomicBool,
}

struct TargetState {
    dst_node: String,
    learned: bool,
    series: [Option<Series>; 4],
    dial: Option<DialSeries>,
    rdma: Option<RdmaSeries>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("peer", &self.peer)
            .field("dst_node", &self.dst_node())
            .finish()
    }
}

impl Target {
    pub fn new(peer: Peer, ports: Ports, metrics: Arc<Metrics>) -> Target {
        let dst_node = peer.name.clone().unwrap_or_else(|| peer.addr.to_string());
        Target {
            udp_addr: peer.udp_addr(ports.udp),
            tcp_addr: peer.tcp_addr(ports.tcp),
            peer,
            metrics,
            state: Mutex::new(TargetState {
                dst_node,
                learned: false,
                series: [None, None, None, None],
                dial: None,
                rdma: None,
            }),
            retired: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TargetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn addr(&self) -> IpAddr {
        self.peer.addr
    }

    /// The current `dst_node` label value.
    pub fn dst_node(&self) -> String {
        self.lock().dst_node.clone()
    }

    /// Whether the peer left the peer set; results for it are discarded.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// The probe series for `protocol` (created on first use).
    pub fn series(&self, protocol: Protocol) -> Option<Series> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.series[protocol.index()]
                .get_or_insert_with(|| self.metrics.series(self.peer.addr, &dst, protocol))
                .clone(),
        )
    }

    /// The TCP dial series.
    pub fn dial_series(&self) -> Option<DialSeries> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.dial
                .get_or_insert_with(|| self.metrics.dial_series(self.peer.addr, &dst))
                .clone(),
        )
    }

    /// The RDMA delay histograms.
    pub fn rdma_series(&self) -> Option<RdmaSeries> {
        if self.is_retired() {
            return None;
        }
        let mut st = self.lock();
        let dst = st.dst_node.clone();
        Some(
            st.rdma
                .get_or_insert_with(|| self.metrics.rdma_series(self.peer.addr, &dst))
                .clone(),
        )
    }

    /// A reply told us who answered. If the node name differs from the
    /// label in use, move to the new name: the old series are removed (a
    /// peer is one series per protocol, never two).
    pub fn learn_node(&self, node: &str) {
        if node.is_empty() || self.is_retired() {
            return;
        }
        let mut st = self.lock();
        if st.dst_node == node {
            st.learned = true;
            return;
        }
        let old = std::mem::replace(&mut st.dst_node, node.to_string());
        st.learned = true;
        st.series = [None, None, None, None];
        st.dial = None;
        st.rdma = None;
        drop(st);
        tracing::info!(peer = %self.peer.addr, old = %old, new = %node, "peer identified by its reply");
        self.metrics.forget_name(self.peer.addr, &old);
    }

    /// Whether `dst_node` came from the peer itself.
    pub fn identity_learned(&self) -> bool {
        self.lock().learned
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        let mut st = self.lock();
        st.series = [None, None, None, None];
        st.dial = None;
        st.rdma = None;
    }
}

/// The one interface every protocol implements.
pub trait Prober: Send + Sync + 'static {
    fn protocol(&self) -> Protocol;

    /// Whether this prober probes `target` at all (RDMA: only peers whose
    /// endpoint is known). Called when the target list changes.
    fn applies_to(&self, _target: &Target) -> bool {
        true
    }

    /// Send one probe to `target` now. Never blocks; errors are counted in
    /// `skeletonhunter_probe_errors_total`, not returned.
    fn probe(&self, target: &Arc<Target>);

    /// Count in-flight probes older than the timeout as lost.
    fn expire(&self, now: Instant);
}

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// Each (peer, protocol) is probed once per interval.
    pub interval: Duration,
    /// Shortest sleep between scheduler wake-ups; probes that fall due in
    /// the meantime go out together (a handful, never a burst of a round).
    pub min_tick: Duration,
    /// How often in-flight tables are checked for timeouts.
    pub expire_every: Duration,
    pub ports: Ports,
}

/// Where slot `k` of `m` falls within a round of length `interval`.
pub fn slot_offset(k: usize, m: usize, interval: Duration) -> Duration {
    if m == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos((interval.as_nanos() * k as u128 / m as u128) as u64)
}

/// The order of a round. Every protocol's probes are spread over the whole
/// round (not one protocol per third), and one peer's protocols are a
/// fraction 1/P of the round apart instead of back to back: protocol `p`
/// probes target `t` at position `((t + p*n/P) mod n) * P + p`.
pub fn build_slots(targets: &[Arc<Target>], probers: &[Arc<dyn Prober>]) -> Vec<(usize, usize)> {
    let n = targets.len();
    let np = probers.len().max(1);
    let mut slots: Vec<(usize, (usize, usize))> = Vec::new();
    for (pi, p) in probers.iter().enumerate() {
        for (ti, t) in targets.iter().enumerate() {
            if p.applies_to(t) {
                let pos = ((ti + pi * n / np) % n.max(1)) * np + pi;
                slots.push((pos, (ti, pi)));
            }
        }
    }
    slots.sort_unstable_by_key(|s| s.0);
    slots.into_iter().map(|s| s.1).collect()
}

/// Drives all probers over all targets.
pub struct Scheduler {
    pub config: ScheduleConfig,
    pub probers: Vec<Arc<dyn Prober>>,
    pub peers: PeerSet,
    pub metrics: Arc<Metrics>,
}

impl Scheduler {
    /// Bring `targets` in line with the peer set: keep the state of peers
    /// that stay (their learned identity and series), retire the rest.
    fn sync_targets(&self, targets: &mut Vec<Arc<Target>>) {
        let snapshot = self.peers.snapshot();
        let mut old: HashMap<IpAddr, Arc<Target>> =
            targets.drain(..).map(|t| (t.addr(), t)).collect();
        for peer in snapshot {
            match old.remove(&peer.addr) {
                Some(t) if t.peer == peer => targets.push(t),
                Some(t) => {
                    // Ports, name or source changed: a fresh target keeps
                    // the learned name so series do not flap.
                    let fresh = Target::new(peer, self.config.ports, self.metrics.clone());
                    if t.identity_learned() {
                        fresh.learn_node(&t.dst_node());
                    } else if fresh.dst_node() != t.dst_node() {
                        self.metrics.forget_name(t.addr(), &t.dst_node());
                    }
                    t.retire();
                    targets.push(Arc::new(fresh));
                }
                None => targets.push(Arc::new(Target::new(
                    peer,
                    self.config.ports,
                    self.metrics.clone(),
                ))),
            }
        }
        for (addr, t) in old {
            t.retire();
            self.metrics.forget_peer(addr);
        }
    }

    /// Run until `shutdown` resolves.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut rx = self.peers.subscribe();
        let mut targets: Vec<Arc<Target>> = Vec::new();
        self.sync_targets(&mut targets);
        let mut slots = build_slots(&targets, &self.probers);
        let interval = self.config.interval;
        let mut round_start = Instant::now();
        let mut cursor = 0usize;
        let mut last_expire = Instant::now();
        let protocols: Vec<&str> = self.probers.iter().map(|p| p.protocol().as_str()).collect();
        tracing::info!(
            peers = targets.len(),
            probes_per_round = slots.len(),
            interval_ms = interval.as_millis() as u64,
            protocols = ?protocols,
            "scheduler started"
        );
        loop {
            let now = Instant::now();
            let next_due = if slots.is_empty() {
                now + self.config.expire_every
            } else {
                round_start + slot_offset(cursor, slots.len(), interval)
            };
            let next_expire = last_expire + self.config.expire_every;
            let wake = next_due.min(next_expire).max(now + self.config.min_tick);
            tokio::select! {
                _ = &mut shutdown => break,
                changed = rx.changed() => {
                    if changed.is_err() {
                        // The peer set is gone: nothing more to probe.
                        break;
                    }
                    rx.borrow_and_update();
                    let frac = if slots.is_empty() { 0.0 } else { cursor as f64 / slots.len() as f64 };
                    self.sync_targets(&mut targets);
                    slots = build_slots(&targets, &self.probers);
                    cursor = ((frac * slots.len() as f64) as usize).min(slots.len());
                    tracing::info!(peers = targets.len(), probes_per_round = slots.len(), "peer set changed");
                    continue;
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
            let now = Instant::now();
            while !slots.is_empty() {
                if cursor >= slots.len() {
                    cursor = 0;
                    round_start += interval;
                    // After a long stall (suspend, overload) skip ahead
                    // instead of firing a whole backlog at once.
                    if now.saturating_duration_since(round_start) > interval {
                        round_start = now;
                    }
                }
                if round_start + slot_offset(cursor, slots.len(), interval) > now {
                    break;
                }
                let (ti, pi) = slots[cursor];
                self.probers[pi].probe(&targets[ti]);
                cursor += 1;
            }
            if now >= next_expire {
                for p in &self.probers {
                    p.expire(now);
                }
                last_expire = now;
            }
        }
        tracing::info!("scheduler stopped");
    }
}

/// Wall-clock time in nanoseconds since the epoch; the same clock as the
/// kernel's software timestamps, so the two can be subtracted.
pub fn wall_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the provided timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_evenly_spread() {
        let i = Duration::from_secs(1);
        assert_eq!(slot_offset(0, 4, i), Duration::ZERO);
        assert_eq!(slot_offset(1, 4, i), Duration::from_millis(250));
        assert_eq!(slot_offset(3, 4, i), Duration::from_millis(750));
        assert_eq!(slot_offset(0, 0, i), Duration::ZERO);
    }

    struct Fake(Protocol);
    impl Prober for Fake {
        fn protocol(&self) -> Protocol {
            self.0
        }
        fn probe(&self, _target: &Arc<Target>) {}
        fn expire(&self, _now: Instant) {}
    }

    #[test]
    fn rounds_interleave_protocols_and_cover_every_pair_once() {
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let ports = Ports { udp: 1, tcp: 2 };
        let targets: Vec<Arc<Target>> = (0..10u8)
            .map(|i| {
                let peer = Peer::new(
                    IpAddr::from([10, 0, 0, i]),
                    crate::peers::PeerSource::Static,
                );
                Arc::new(Target::new(peer, ports, metrics.clone()))
            })
            .collect();
        let probers: Vec<Arc<dyn Prober>> = vec![
            Arc::new(Fake(Protocol::Udp)),
            Arc::new(Fake(Protocol::Tcp)),
            Arc::new(Fake(Protocol::Icmp)),
        ];
        let slots = build_slots(&targets, &probers);
        assert_eq!(slots.len(), 30);
        let mut seen = std::collections::HashSet::new();
        for s in &slots {
            assert!(seen.insert(*s), "{s:?} twice");
        }
        // Every window of 3 consecutive slots holds 3 different protocols
        // (no protocol bunches up) ...
        for w in slots.windows(3) {
            let ps: std::collections::HashSet<usize> = w.iter().map(|s| s.1).collect();
            assert_eq!(ps.len(), 3, "{w:?}");
        }
        // ... and one target's probes are spread over the round, at least
        // a third of a round (n*P/P slots minus one) apart.
        for t in 0..10 {
            let pos: Vec<usize> = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.0 == t)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(pos.len(), 3);
            for w in pos.windows(2) {
                assert!(w[1] - w[0] >= 8, "target {t} at {pos:?}");
            }
        }
    }

    #[test]
    fn protocol_names_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(p.as_str().parse::<Protocol>().unwrap(), p);
        }
        assert!("sctp".parse::<Protocol>().unwrap_err().contains("sctp"));
    }
}
