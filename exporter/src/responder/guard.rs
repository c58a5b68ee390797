//! Whom the UDP echo responder answers, decided per datagram before it is
//! even decoded: the source must be on the allow-list (`responder.allow`
//! networks, or a current peer with `responder.allow_peers`) and within
//! its rate (`responder.rate_limit` per second, a token bucket per source
//! address). The bucket table is bounded: when it is full, idle sources
//! are swept out (at most once a second) and sources still without a
//! place share one overflow bucket, so a flood from spoofed addresses
//! costs neither memory nor the service of the peers already known.

use crate::config::ResponderPolicy;
use crate::discovery::PeerSet;
use crate::model::traffic::canonical;
use crate::model::DropReason;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Sources with a bucket of their own at most.
pub const MAX_SOURCES: usize = 4096;

/// A token bucket: `tokens` refilled at `rate` per second up to `burst`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Refill, then take one token if there is one.
    fn take(&mut self, rate: f64, burst: f64, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether it would be full again at `now` (the source went quiet).
    fn idle(&self, rate: f64, burst: f64, now: Instant) -> bool {
        self.tokens + now.saturating_duration_since(self.at).as_secs_f64() * rate >= burst
    }
}

/// Per-source token buckets in a bounded table; pure (the clock is passed
/// in).
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    capacity: usize,
    buckets: HashMap<IpAddr, Bucket>,
    overflow: Bucket,
    last_sweep: Option<Instant>,
}

impl RateLimiter {
    /// `rate` per second and source, bursts of one second's worth, at most
    /// `capacity` sources with their own bucket.
    pub fn new(rate: u32, capacity: usize, now: Instant) -> RateLimiter {
        let rate = f64::from(rate.max(1));
        RateLimiter {
            rate,
            burst: rate,
            capacity: capacity.max(1),
            buckets: HashMap::new(),
            overflow: Bucket::full(rate, now),
            last_sweep: None,
        }
    }

    /// Whether a datagram from `src` at `now` is within its rate.
    pub fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        let (rate, burst) = (self.rate, self.burst);
        if let Some(b) = self.buckets.get_mut(&src) {
            return b.take(rate, burst, now);
        }
        if self.buckets.len() >= self.capacity && self.may_sweep(now) {
            self.buckets.retain(|_, b| !b.idle(rate, burst, now));
        }
        if self.buckets.len() < self.capacity {
            let mut b = Bucket::full(burst, now);
            let ok = b.take(rate, burst, now);
            self.buckets.insert(src, b);
            return ok;
        }
        self.overflow.take(rate, burst, now)
    }

    /// Sweeps cost a pass over the table: at most one a second.
    fn may_sweep(&mut self, now: Instant) -> bool {
        let due = self
            .last_sweep
            .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(1));
        if due {
            self.last_sweep = Some(now);
        }
        due
    }

    /// Sources with a bucket of their own.
    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

/// The responder's admission check: allow-list, then rate.
pub struct Guard {
    policy: ResponderPolicy,
    peers: Option<(PeerSet, watch::Receiver<u64>)>,
    known: HashSet<IpAddr>,
    limiter: Option<RateLimiter>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("policy", &self.policy)
            .field("known", &self.known.len())
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// A guard for `policy`; `peers` is read only with `allow_peers`.
    pub fn new(policy: ResponderPolicy, peers: &PeerSet) -> Guard {
        let peers = policy.allow_peers.then(|| {
            let mut rx = peers.subscribe();
            rx.mark_changed();
            (peers.clone(), rx)
        });
        let limiter = (policy.rate_limit > 0)
            .then(|| RateLimiter::new(policy.rate_limit, MAX_SOURCES, Instant::now()));
        Guard {
            policy,
            peers,
            known: HashSet::new(),
            limiter,
        }
    }

    /// `Ok` to answer a datagram from `src`, else the drop reason.
    pub fn check(&mut self, src: IpAddr, now: Instant) -> Result<(), DropReason> {
        let src = canonical(src);
        if !self.allowed(src) {
            return Err(DropReason::NotAllowed);
        }
        let within = self.limiter.as_mut().is_none_or(|l| l.allow(src, now));
        if within {
            Ok(())
        } else {
            Err(DropReason::RateLimited)
        }
    }

    fn allowed(&mut self, src: IpAddr) -> bool {
        if self.policy.open() || self.policy.allow.iter().any(|c| c.contains(src)) {
            return true;
        }
        let Some((set, rx)) = &mut self.peers else {
            return false;
        };
        // Re-read the peer set only when it changed (a cheap check).
        if rx.has_changed().unwrap_or(false) {
            rx.mark_unchanged();
            self.known = set.snapshot().iter().map(|p| canonical(p.addr)).collect();
        }
        self.known.contains(&src)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Peer, PeerSource};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_source_gets_its_rate_and_bursts_of_one_second() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(10, 8, t0);
        let granted = (0..25).filter(|_| l.allow(ip("10.0.0.1"), t0)).count();
        assert_eq!(granted, 10, "a burst of one second's worth");
        // Half a second later: five more.
        let t1 = t0 + Duration::from_millis(500);
        let granted = (0..25).filter(|_| l.allow(ip("10.0.0.1"), t1)).count();
        assert_eq!(granted, 5);
        // Another source is not affected.
        assert!(l.allow(ip("10.0.0.2"), t1));
    }

    #[test]
    fn the_table_is_bounded_and_new_sources_share_the_overflow() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(10, 4, t0);
        for i in 0..4 {
            assert!(l.allow(ip(&format!("10.0.0.{i}")), t0));
        }
        // A flood from many spoofed sources: the table stays at 4, and
        // together they get one bucket's worth.
        let granted = (0..1000)
            .filter(|i| l.allow(ip(&format!("10.1.{}.{}", i / 250, i % 250)), t0))
            .count();
        assert_eq!(granted, 10);
        assert_eq!(l.sources(), 4);
        // A known source still has its own bucket.
        assert!(l.allow(ip("10.0.0.1"), t0));
        // Once the first sources went quiet, a sweep makes room.
        let later = t0 + Duration::from_secs(2);
        assert!(l.allow(ip("10.2.0.1"), later));
        assert!(l.sources() <= 4);
    }

    fn policy(allow: &[&str], allow_peers: bool, rate: u32) -> ResponderPolicy {
        ResponderPolicy {
            allow: allow.iter().map(|c| c.parse().unwrap()).collect(),
            allow_peers,
            rate_limit: rate,
        }
    }

    #[test]
    fn allow_list_of_networks_and_peers() {
        let peers = PeerSet::new(None);
        peers.replace(
            PeerSource::Static,
            vec![Peer::new(ip("10.9.0.1"), PeerSource::Static)],
        );
        let now = Instant::now();
        let mut open = Guard::new(policy(&[], false, 0), &peers);
        assert_eq!(open.check(ip("192.0.2.1"), now), Ok(()));
        let mut g = Guard::new(policy(&["10.1.0.0/16"], true, 0), &peers);
        assert_eq!(g.check(ip("10.1.2.3"), now), Ok(()));
        assert_eq!(g.check(ip("::ffff:10.1.2.3"), now), Ok(()));
        assert_eq!(g.check(ip("10.9.0.1"), now), Ok(()));
        assert_eq!(g.check(ip("10.9.0.2"), now), Err(DropReason::NotAllowed));
        // A peer that appears later is answered; one that leaves is not.
        peers.replace(
            PeerSource::Static,
            vec![Peer::new(ip("10.9.0.2"), PeerSource::Static)],
        );
        assert_eq!(g.check(ip("10.9.0.2"), now), Ok(()));
        assert_eq!(g.check(ip("10.9.0.1"), now), Err(DropReason::NotAllowed));
        let mut only_net = Guard::new(policy(&["10.1.0.0/16"], false, 0), &peers);
        assert_eq!(
            only_net.check(ip("10.9.0.2"), now),
            Err(DropReason::NotAllowed)
        );
    }

    #[test]
    fn the_rate_is_checked_after_the_allow_list() {
        let peers = PeerSet::new(None);
        let mut g = Guard::new(policy(&["10.1.0.0/16"], false, 2), &peers);
        let now = Instant::now();
        assert_eq!(g.check(ip("10.1.0.1"), now), Ok(()));
        assert_eq!(g.check(ip("10.1.0.1"), now), Ok(()));
        assert_eq!(g.check(ip("10.1.0.1"), now), Err(DropReason::RateLimited));
        assert_eq!(g.check(ip("10.2.0.1"), now), Err(DropReason::NotAllowed));
    }
}
