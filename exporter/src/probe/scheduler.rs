//! The one scheduler task: spreads the probes of all targets and protocols
//! evenly over the interval, keeps the targets in line with the peer set
//! and expires in-flight probes.

use super::{PeerInfo, Ports, Prober, Target};
use crate::discovery::PeerSet;
use crate::model::StackStage;
use crate::telemetry::Metrics;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Default ports of peers.
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
    /// Timing and ports.
    pub config: ScheduleConfig,
    /// One prober per enabled protocol, in slot order.
    pub probers: Vec<Arc<dyn Prober>>,
    /// What to probe.
    pub peers: PeerSet,
    /// Where per-peer series are created and removed.
    pub metrics: Arc<Metrics>,
    /// Who holds which node name (targets claim theirs).
    pub peer_info: Arc<PeerInfo>,
}

impl Scheduler {
    fn target(&self, peer: crate::model::Peer) -> Target {
        Target::new(
            peer,
            self.config.ports,
            self.metrics.clone(),
            self.peer_info.clone(),
        )
    }

    /// Bring `targets` in line with the peer set: keep the state of peers
    /// that stay (their learned identity and series), retire the rest.
    fn sync_targets(&self, targets: &mut Vec<Arc<Target>>) {
        let snapshot = self.peers.snapshot();
        let mut old: HashMap<IpAddr, Arc<Target>> =
            targets.drain(..).map(|t| (t.addr(), t)).collect();
        // Peers that left go first: their names (and series) are gone
        // before a peer arriving in the same change claims the name.
        let staying: HashSet<IpAddr> = snapshot.iter().map(|p| p.addr).collect();
        old.retain(|addr, t| {
            let stays = staying.contains(addr);
            if !stays {
                t.retire();
                self.metrics.forget_peer(*addr);
            }
            stays
        });
        for peer in snapshot {
            match old.remove(&peer.addr) {
                Some(t) if t.peer == peer => targets.push(t),
                Some(t) => {
                    // Ports, name or source changed: a fresh target keeps
                    // the learned name so series do not flap (it takes the
                    // name over from the old one, at the same address).
                    let fresh = self.target(peer);
                    if t.identity_learned() && fresh.peer.name.is_none() {
                        // Kept unless the new entry names the peer itself.
                        fresh.learn_node(&t.dst_node());
                    }
                    if fresh.dst_node() != t.dst_node() {
                        self.metrics.forget_name(t.addr(), &t.dst_node());
                    }
                    t.retire();
                    targets.push(Arc::new(fresh));
                }
                None => targets.push(Arc::new(self.target(peer))),
            }
        }
    }

    /// Per prober, the histogram of how late its probes leave against
    /// their slots: the send stage of the host-stack delays (a starved or
    /// paused exporter fires late).
    fn send_delays(&self) -> Vec<Histogram> {
        self.probers
            .iter()
            .map(|p| self.metrics.host_stack(p.protocol(), StackStage::Send))
            .collect()
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
        let late = self.send_delays();
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
                    let behind = now.saturating_duration_since(round_start);
                    if behind > interval {
                        // The skipped round was late for every protocol.
                        late.iter().for_each(|h| h.observe(behind.as_secs_f64()));
                        round_start = now;
                    }
                }
                let due = round_start + slot_offset(cursor, slots.len(), interval);
                if due > now {
                    break;
                }
                let (ti, pi) = slots[cursor];
                late[pi].observe(now.saturating_duration_since(due).as_secs_f64());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Peer, PeerSource, Protocol};

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
    fn a_name_left_by_one_peer_goes_to_the_peer_arriving_in_the_same_change() {
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let peers = PeerSet::new(None);
        let named =
            |last: u8| Peer::new(IpAddr::from([10, 0, 0, last]), PeerSource::Static).with_name("b");
        peers.replace(PeerSource::Static, vec![named(1)]);
        let s = Scheduler {
            config: ScheduleConfig {
                interval: Duration::from_secs(1),
                min_tick: Duration::from_millis(1),
                expire_every: Duration::from_millis(10),
                ports: Ports { udp: 1, tcp: 2 },
            },
            probers: Vec::new(),
            peers: peers.clone(),
            metrics: metrics.clone(),
            peer_info: PeerInfo::new(metrics.clone(), None),
        };
        let mut targets = Vec::new();
        s.sync_targets(&mut targets);
        assert_eq!(targets[0].dst_node(), "b");
        // b moves to another address in one change: the new peer gets the
        // name, no conflict.
        peers.replace(PeerSource::Static, vec![named(2)]);
        s.sync_targets(&mut targets);
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].addr(), IpAddr::from([10, 0, 0, 2]));
        assert_eq!(targets[0].dst_node(), "b");
        assert_eq!(metrics.identity_conflicts(), 0);
    }

    #[test]
    fn rounds_interleave_protocols_and_cover_every_pair_once() {
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let info = PeerInfo::new(metrics.clone(), None);
        let ports = Ports { udp: 1, tcp: 2 };
        let targets: Vec<Arc<Target>> = (0..10u8)
            .map(|i| {
                let peer = Peer::new(IpAddr::from([10, 0, 0, i]), PeerSource::Static);
                Arc::new(Target::new(peer, ports, metrics.clone(), info.clone()))
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
}
