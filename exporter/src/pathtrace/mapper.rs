//! Which probe flows to trace so each is mapped to its path: every flow
//! once at start, again on a slow jittered timer (paths move when links
//! come and go), and at once when the flow starts losing probes (then
//! with a per-flow back-off while it keeps losing). All within a budget of
//! traces per minute of its own, apart from the anomaly traces' budget.
//! Pure: the caller passes the time.

use super::budget::Budget;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Mean time between two refreshing traces of one flow; each wait is
/// drawn from half to one and a half times this, so flows mapped together
/// at start spread out.
pub const REFRESH: Duration = Duration::from_secs(600);
/// The first re-trace of a flow that keeps losing waits this long; each
/// further one twice as long, up to [`LOSSY_MAX`].
pub const LOSSY_BASE: Duration = Duration::from_secs(30);
/// The longest wait between re-traces of a lossy flow.
pub const LOSSY_MAX: Duration = Duration::from_secs(480);

/// Why a flow is traced, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Why {
    /// The flow lost probes in the window.
    Lossy,
    /// The flow was never traced.
    Unmapped,
    /// The refresh timer of the flow ran out.
    Refresh,
}

#[derive(Debug, Clone)]
struct FlowState {
    refresh_at: Instant,
    /// While the flow is lossy: no lossy re-trace before `.0`; next wait `.1`.
    lossy: Option<(Instant, Duration)>,
}

/// The mapping policy: per-flow timers and back-off, and the budget.
#[derive(Debug)]
pub struct Mapper {
    budget: Option<Budget>,
    refresh: Duration,
    flows: HashMap<(IpAddr, usize), FlowState>,
    rng: u64,
}

impl Mapper {
    /// `per_minute` mapping traces a minute (`0`: no mapping at all),
    /// refreshing every `refresh` on average; `seed` drives the jitter.
    pub fn new(per_minute: u32, refresh: Duration, seed: u64, now: Instant) -> Mapper {
        Mapper {
            budget: (per_minute > 0).then(|| Budget::new(per_minute, now)),
            refresh,
            flows: HashMap::new(),
            rng: seed | 1,
        }
    }

    /// Whether mapping is on at all.
    pub fn enabled(&self) -> bool {
        self.budget.is_some()
    }

    /// Why flow `flow` of `peer` should be traced at `now`, if it should;
    /// `lossy`: it lost probes in the window.
    pub fn due(&self, peer: IpAddr, flow: usize, lossy: bool, now: Instant) -> Option<Why> {
        self.budget.as_ref()?;
        let Some(s) = self.flows.get(&(peer, flow)) else {
            return Some(if lossy { Why::Lossy } else { Why::Unmapped });
        };
        if lossy && s.lossy.is_none_or(|(at, _)| now >= at) {
            return Some(Why::Lossy);
        }
        (now >= s.refresh_at).then_some(Why::Refresh)
    }

    /// The flow lost nothing in the window: its next loss is traced at once.
    pub fn clean(&mut self, peer: IpAddr, flow: usize) {
        if let Some(s) = self.flows.get_mut(&(peer, flow)) {
            s.lossy = None;
        }
    }

    /// Whether the budget allows a trace at `now` (nothing is taken).
    pub fn available(&mut self, now: Instant) -> bool {
        self.budget.as_mut().is_some_and(|b| b.available(now))
    }

    fn jittered(&mut self) -> Duration {
        // xorshift64: a uniform factor in [0.5, 1.5).
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let u = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        self.refresh.mul_f64(0.5 + u)
    }

    /// A trace of the flow started at `now` for `why`: take a token, set
    /// its refresh timer, and back off if it was lossy.
    pub fn started(&mut self, peer: IpAddr, flow: usize, why: Why, now: Instant) {
        if let Some(b) = self.budget.as_mut() {
            b.take(now);
        }
        let refresh_at = now + self.jittered();
        let s = self.flows.entry((peer, flow)).or_insert(FlowState {
            refresh_at,
            lossy: None,
        });
        s.refresh_at = refresh_at;
        if why == Why::Lossy {
            let wait = s.lossy.map_or(LOSSY_BASE, |(_, w)| (w * 2).min(LOSSY_MAX));
            s.lossy = Some((now + wait, wait));
        }
    }

    /// Forget `peer` (it left).
    pub fn forget(&mut self, peer: IpAddr) {
        self.flows.retain(|(p, _), _| *p != peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_ip as ip;

    #[test]
    fn every_flow_is_mapped_then_refreshed_with_jitter() {
        let t0 = Instant::now();
        let mut m = Mapper::new(60, REFRESH, 7, t0);
        assert_eq!(m.due(ip(1), 0, false, t0), Some(Why::Unmapped));
        let mut refreshes = Vec::new();
        for f in 0..20 {
            m.started(ip(1), f, Why::Unmapped, t0);
            assert_eq!(m.due(ip(1), f, false, t0), None);
            let mut t = t0;
            while m.due(ip(1), f, false, t).is_none() {
                t += Duration::from_secs(10);
            }
            assert_eq!(m.due(ip(1), f, false, t), Some(Why::Refresh));
            refreshes.push((t - t0).as_secs());
        }
        assert!(
            refreshes.iter().all(|s| (300..=910).contains(s)),
            "{refreshes:?}"
        );
        let distinct: std::collections::HashSet<_> = refreshes.iter().collect();
        assert!(distinct.len() > 5, "jittered: {refreshes:?}");
    }

    #[test]
    fn a_lossy_flow_is_traced_at_once_then_backs_off_until_clean() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut m = Mapper::new(60, REFRESH, 7, t0);
        assert_eq!(m.due(ip(1), 0, true, t0), Some(Why::Lossy));
        m.started(ip(1), 0, Why::Unmapped, t0);
        assert_eq!(m.due(ip(1), 0, true, t0), Some(Why::Lossy), "loss appeared");
        m.started(ip(1), 0, Why::Lossy, t0);
        assert_eq!(m.due(ip(1), 0, true, t0 + s(29)), None);
        assert_eq!(m.due(ip(1), 0, true, t0 + s(30)), Some(Why::Lossy));
        m.started(ip(1), 0, Why::Lossy, t0 + s(30));
        assert_eq!(m.due(ip(1), 0, true, t0 + s(89)), None, "60 s now");
        assert_eq!(m.due(ip(1), 0, true, t0 + s(90)), Some(Why::Lossy));
        m.clean(ip(1), 0);
        assert_eq!(m.due(ip(1), 0, true, t0 + s(31)), Some(Why::Lossy), "reset");
        m.forget(ip(1));
        assert_eq!(m.due(ip(1), 0, false, t0), Some(Why::Unmapped));
    }

    #[test]
    fn the_budget_bounds_mapping_and_zero_turns_it_off() {
        let t0 = Instant::now();
        let mut m = Mapper::new(5, REFRESH, 7, t0);
        let mut n = 0;
        for f in 0..50 {
            if m.available(t0) {
                m.started(ip(1), f, Why::Unmapped, t0);
                n += 1;
            }
        }
        assert_eq!(n, 5);
        let mut off = Mapper::new(0, REFRESH, 7, t0);
        assert!(!off.enabled());
        assert!(!off.available(t0));
        assert_eq!(off.due(ip(1), 0, true, t0), None);
    }
}
