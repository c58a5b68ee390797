//! When an automatic trace may start: a global budget of traces per
//! minute across all peers (a token bucket) and a per-peer exponential
//! back-off for peers whose traces keep being triggered. Pure: the caller
//! passes the time, so tests drive the clock.

use skeletonhunter_common::ratelimit::TokenBucket;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Automatic traces per minute across all peers, by default.
pub const TRACES_PER_MINUTE: u32 = 30;
/// The first re-trace of a peer that stays anomalous waits this long; each
/// further one twice as long as the one before, up to [`MAX_BACKOFF`].
pub const BASE_BACKOFF: Duration = Duration::from_secs(60);
/// The longest wait between automatic traces of one peer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// A token bucket ([`TokenBucket`]): `per_minute` tokens a minute, at
/// most `per_minute` saved up (so a fabric-wide fault gets one minute's
/// worth at once).
#[derive(Debug, Clone)]
pub struct Budget(TokenBucket);

impl Budget {
    /// A full bucket at `now`.
    pub fn new(per_minute: u32, now: Instant) -> Budget {
        let per_minute = per_minute.max(1);
        Budget(TokenBucket::new(
            per_minute,
            Duration::from_secs(60),
            per_minute,
            now,
        ))
    }

    /// Whether a token is there at `now` (none is taken).
    pub fn available(&mut self, now: Instant) -> bool {
        self.0.available(now)
    }

    /// Take a token; false when the budget is spent.
    pub fn take(&mut self, now: Instant) -> bool {
        self.0.take(now)
    }
}

/// Per-peer exponential back-off of automatic traces.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    /// Per peer: no automatic trace before this, and the next wait.
    peers: HashMap<IpAddr, (Instant, Duration)>,
}

impl Backoff {
    /// No peer backed off yet.
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max: max.max(base),
            peers: HashMap::new(),
        }
    }

    /// Whether `peer` may be traced at `now`.
    pub fn allows(&self, peer: IpAddr, now: Instant) -> bool {
        self.peers.get(&peer).is_none_or(|(next, _)| now >= *next)
    }

    /// `peer` was traced at `now`: the next trace waits, twice as long as
    /// the last wait (from `base`, at most `max`).
    pub fn traced(&mut self, peer: IpAddr, now: Instant) {
        let wait = self.peers.get(&peer).map_or(self.base, |(_, w)| *w);
        self.peers
            .insert(peer, (now + wait, (wait * 2).min(self.max)));
    }

    /// `peer` recovered or left: its next anomaly is traced at once.
    pub fn reset(&mut self, peer: IpAddr) {
        self.peers.remove(&peer);
    }
}

/// Why an automatic trace did not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The peer was traced recently and is backing off.
    BackingOff,
    /// The global budget of traces per minute is spent.
    OverBudget,
}

/// The budget and the back-off together.
#[derive(Debug, Clone)]
pub struct AutoPolicy {
    /// Traces per minute across all peers.
    pub budget: Budget,
    /// Per-peer back-off.
    pub backoff: Backoff,
}

impl AutoPolicy {
    /// The defaults ([`TRACES_PER_MINUTE`], [`BASE_BACKOFF`], [`MAX_BACKOFF`]).
    pub fn new(now: Instant) -> AutoPolicy {
        AutoPolicy {
            budget: Budget::new(TRACES_PER_MINUTE, now),
            backoff: Backoff::new(BASE_BACKOFF, MAX_BACKOFF),
        }
    }

    /// Whether `peer` may be traced at `now` (nothing is consumed).
    pub fn check(&mut self, peer: IpAddr, now: Instant) -> Result<(), Refusal> {
        if !self.backoff.allows(peer, now) {
            return Err(Refusal::BackingOff);
        }
        if !self.budget.available(now) {
            return Err(Refusal::OverBudget);
        }
        Ok(())
    }

    /// A trace of `peer` started at `now`: take a token, back off.
    pub fn started(&mut self, peer: IpAddr, now: Instant) {
        self.budget.take(now);
        self.backoff.traced(peer, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_ip as ip;

    #[test]
    fn the_budget_caps_traces_per_minute_and_refills() {
        let t0 = Instant::now();
        let mut b = Budget::new(10, t0);
        assert_eq!(
            (0..50).filter(|_| b.take(t0)).count(),
            10,
            "one minute's worth at once"
        );
        assert!(
            !b.take(t0 + Duration::from_secs(5)),
            "5 s: not a whole token yet (one per 6 s)"
        );
        assert!(b.take(t0 + Duration::from_secs(6)), "one token per 6 s");
        assert!(!b.take(t0 + Duration::from_secs(7)));
        // Ten idle minutes save up one minute's worth, no more.
        let later = t0 + Duration::from_secs(600);
        assert_eq!((0..50).filter(|_| b.take(later)).count(), 10);
    }

    #[test]
    fn a_peer_that_keeps_triggering_backs_off_exponentially_up_to_the_cap() {
        let t0 = Instant::now();
        let min = Duration::from_secs(60);
        let mut b = Backoff::new(min, 8 * min);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..6 {
            assert!(b.allows(ip(1), now));
            b.traced(ip(1), now);
            let mut t = now;
            while !b.allows(ip(1), t) {
                t += Duration::from_secs(1);
            }
            waits.push((t - now).as_secs() / 60);
            now = t;
        }
        assert_eq!(waits, [1, 2, 4, 8, 8, 8]);
        assert!(b.allows(ip(2), t0), "other peers are not held back");
        b.reset(ip(1));
        assert!(b.allows(ip(1), now), "a recovered peer is traced at once");
    }

    #[test]
    fn many_dead_peers_get_the_budget_not_a_storm() {
        // 500 peers anomalous for 11 minutes, checked every second: the
        // old rule traced each once a minute (about 5,500 traces).
        let t0 = Instant::now();
        let mut p = AutoPolicy::new(t0);
        let mut traces = 0;
        for s in 0..660u64 {
            let now = t0 + Duration::from_secs(s);
            for n in 0..500u32 {
                let peer = IpAddr::from(std::net::Ipv4Addr::from(0xC612_0000u32 + n));
                if p.check(peer, now).is_ok() {
                    p.started(peer, now);
                    traces += 1;
                }
            }
        }
        // At most 30 at once plus 30 a minute.
        assert!(traces <= 30 + 11 * 30, "{traces} traces");
        assert!(traces >= 11 * 30, "the budget is used: {traces}");
    }

    #[test]
    fn refusals_say_why_and_consume_nothing() {
        let t0 = Instant::now();
        let mut p = AutoPolicy {
            budget: Budget::new(1, t0),
            backoff: Backoff::new(Duration::from_secs(60), Duration::from_secs(600)),
        };
        assert_eq!(p.check(ip(1), t0), Ok(()));
        assert_eq!(p.check(ip(1), t0), Ok(()), "check alone takes nothing");
        p.started(ip(1), t0);
        assert_eq!(p.check(ip(1), t0), Err(Refusal::BackingOff));
        assert_eq!(p.check(ip(2), t0), Err(Refusal::OverBudget));
    }
}
