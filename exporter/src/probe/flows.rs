//! Per-flow evidence of the multi-flow UDP prober.
//!
//! Each peer is probed over K flows (the prober's K source ports, shared
//! by every peer), one after the other. Switches hash each flow onto one
//! equal-cost path, so K flows see up to K paths where one flow saw one.
//! The [`FlowBook`] keeps, per peer and flow, how many probes finished
//! (answered or lost) and how many were lost over a recent window, in
//! memory only: the pair's series carry the worst flow's loss ratio and
//! the flow count, and path tracing groups flows by the path they take
//! (per-path series), so nothing on `/metrics` grows with K.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Buckets of a window: the window slides by a quarter.
const BUCKETS: usize = 4;

/// Finished and lost probes of one flow over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCount {
    /// Probes answered or lost in the window.
    pub sent: u64,
    /// Of those, lost.
    pub lost: u64,
}

impl FlowCount {
    /// `lost / sent`, 0 without probes.
    pub fn ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 / self.sent as f64
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    epoch: u64,
    sent: u32,
    lost: u32,
}

/// One flow's counts in [`BUCKETS`] time buckets of a quarter window each.
#[derive(Debug, Clone, Default)]
struct Buckets([Bucket; BUCKETS]);

impl Buckets {
    fn record(&mut self, epoch: u64, lost: bool) {
        let b = &mut self.0[(epoch % BUCKETS as u64) as usize];
        if b.epoch != epoch {
            *b = Bucket {
                epoch,
                sent: 0,
                lost: 0,
            };
        }
        b.sent = b.sent.saturating_add(1);
        b.lost = b.lost.saturating_add(u32::from(lost));
    }

    /// Counts of the buckets of the last window ending at `epoch`.
    fn count(&self, epoch: u64) -> FlowCount {
        let mut c = FlowCount::default();
        for b in &self.0 {
            if b.epoch + (BUCKETS as u64) > epoch && b.epoch <= epoch && b.sent > 0 {
                c.sent += u64::from(b.sent);
                c.lost += u64::from(b.lost);
            }
        }
        c
    }
}

#[derive(Debug)]
struct PeerFlows {
    /// The flow of the next probe (rotation).
    next: usize,
    flows: Vec<Buckets>,
    /// The epoch of the last probe, to forget peers no longer probed.
    touched: u64,
}

/// Per peer: the flow rotation and each flow's recent counts. Bounded by
/// the peers being probed (peers not probed for two windows are swept).
#[derive(Debug)]
pub struct FlowBook {
    flows: usize,
    bucket: Duration,
    origin: Instant,
    peers: Mutex<HashMap<IpAddr, PeerFlows>>,
    last_sweep: Mutex<u64>,
}

impl FlowBook {
    /// `flows` flows per peer (at least 1), counts over `window`.
    pub fn new(flows: usize, window: Duration, now: Instant) -> FlowBook {
        FlowBook {
            flows: flows.max(1),
            bucket: (window / BUCKETS as u32).max(Duration::from_millis(1)),
            origin: now,
            peers: Mutex::new(HashMap::new()),
            last_sweep: Mutex::new(0),
        }
    }

    /// Flows per peer.
    pub fn flows(&self) -> usize {
        self.flows
    }

    fn epoch(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.origin).as_nanos() / self.bucket.as_nanos().max(1))
            as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, PeerFlows>> {
        self.peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The flow of the next probe to `peer`: each in turn.
    pub fn next_flow(&self, peer: IpAddr, now: Instant) -> usize {
        let epoch = self.epoch(now);
        let n = self.flows;
        let mut peers = self.lock();
        let p = peers.entry(peer).or_insert_with(|| PeerFlows {
            next: 0,
            flows: vec![Buckets::default(); n],
            touched: epoch,
        });
        let f = p.next % n;
        p.next = (f + 1) % n;
        p.touched = epoch;
        f
    }

    /// A probe of `peer` over `flow` finished at `now` (answered, or
    /// `lost`). Returns the worst flow's loss ratio over the window.
    pub fn record(&self, peer: IpAddr, flow: usize, lost: bool, now: Instant) -> Option<f64> {
        let epoch = self.epoch(now);
        let mut peers = self.lock();
        let p = peers.get_mut(&peer)?;
        p.flows.get_mut(flow)?.record(epoch, lost);
        Some(
            p.flows
                .iter()
                .map(|b| b.count(epoch).ratio())
                .fold(0.0, f64::max),
        )
    }

    /// Each flow's counts over the window, in flow order.
    pub fn counts(&self, peer: IpAddr, now: Instant) -> Option<Vec<FlowCount>> {
        let epoch = self.epoch(now);
        let peers = self.lock();
        Some(
            peers
                .get(&peer)?
                .flows
                .iter()
                .map(|b| b.count(epoch))
                .collect(),
        )
    }

    /// Forget `peer`'s flows now (it said it is leaving): no counts of it
    /// until it is probed again, so nothing traces or publishes its paths.
    pub fn forget(&self, peer: IpAddr) {
        self.lock().remove(&peer);
    }

    /// Forget peers not probed for two windows (they left); at most once a
    /// bucket, so callers may call it often.
    pub fn sweep(&self, now: Instant) {
        let epoch = self.epoch(now);
        {
            let mut last = self
                .last_sweep
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last == epoch {
                return;
            }
            *last = epoch;
        }
        self.lock()
            .retain(|_, p| p.touched + 2 * BUCKETS as u64 > epoch);
    }

    /// Peers currently tracked.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no peer is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_ip as ip;

    #[test]
    fn flows_rotate_per_peer() {
        let t0 = Instant::now();
        let b = FlowBook::new(3, Duration::from_secs(4), t0);
        let got: Vec<usize> = (0..7).map(|_| b.next_flow(ip(1), t0)).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(b.next_flow(ip(2), t0), 0, "each peer rotates on its own");
        let one = FlowBook::new(0, Duration::from_secs(4), t0);
        assert_eq!((one.flows(), one.next_flow(ip(1), t0)), (1, 0));
    }

    #[test]
    fn counts_slide_with_the_window_and_the_worst_flow_is_reported() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let b = FlowBook::new(2, s(4), t0);
        assert_eq!(b.record(ip(1), 0, true, t0), None, "unknown peer");
        b.next_flow(ip(1), t0);
        assert_eq!(b.record(ip(1), 0, false, t0), Some(0.0));
        assert_eq!(b.record(ip(1), 1, true, t0), Some(1.0));
        assert_eq!(b.record(ip(1), 1, false, t0 + s(1)), Some(0.5));
        assert_eq!(b.record(ip(1), 9, false, t0), None, "no such flow");
        let c = b.counts(ip(1), t0 + s(1)).unwrap();
        assert_eq!(c[0], FlowCount { sent: 1, lost: 0 });
        assert_eq!(c[1], FlowCount { sent: 2, lost: 1 });
        // Four seconds on, the probes of t0 fell out; the one of t0+1s is
        // in the oldest bucket still.
        let c = b.counts(ip(1), t0 + s(4)).unwrap();
        assert_eq!((c[0].sent, c[1].sent, c[1].lost), (0, 1, 0));
        let c = b.counts(ip(1), t0 + s(5)).unwrap();
        assert_eq!(c[1].sent, 0);
        assert_eq!(b.record(ip(1), 0, false, t0 + s(9)), Some(0.0));
    }

    #[test]
    fn peers_no_longer_probed_are_swept() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let b = FlowBook::new(2, s(4), t0);
        b.next_flow(ip(1), t0);
        b.next_flow(ip(2), t0 + s(6));
        b.sweep(t0 + s(7));
        assert_eq!(b.len(), 2);
        b.sweep(t0 + s(8));
        assert_eq!(b.len(), 1, "ip(1) untouched for two windows");
        assert!(b.counts(ip(1), t0 + s(8)).is_none());
    }
}
