//! Containers that leave mid-window. When a container ends (its job ends,
//! its pod is deleted), its peers' probes stop within a round or two, and
//! the round in flight as it goes fails. Read alone, those last failures
//! look like a container that became unreachable. What tells them apart
//! is what follows: probes to a container that is down but still scheduled
//! keep coming (and keep failing) until the window ends, while probes to a
//! container that left stop. So a pair whose next round was due before the
//! log ended and did not come, after at most [`MAX_DEPARTURE_ROUNDS`] failed
//! rounds since its last answered one, has its trailing failures dropped:
//! they are the departure, not a fault.
//!
//! The log can end before the peers' probes do: a container that left in
//! the last round or two of the window still has failing rows inbound at
//! the very end. Then the container's own probes say it: they stopped (a
//! round of its own was due before the end and did not come), so it is
//! gone, and the failures towards it after its last probe are its
//! departure too ([`gone`]). A container cut off the network keeps
//! probing (its dials fail), so it is not gone.
//!
//! A container probed but probing nothing says it through its peers:
//! when every peer probing it (at least two) stopped, the latest of them
//! a whole round (of the least of their intervals) before the end, it
//! left ([`unprobed`]), and each of those pairs' trailing failures is its
//! departure, however close to the end its own rows stop. One pair's rows
//! stopping may be a row lost, so that pair alone waits 1.2 of its
//! rounds; all of a container's peers stopping by one round is the
//! container.

use std::collections::{HashMap, HashSet};

/// Most failed rounds at the end of a pair's rows read as its end's
/// departure. More failures before the probes stopped are a fault that
/// lasted (then the probing stopped), and stay evidence.
pub const MAX_DEPARTURE_ROUNDS: usize = 2;

/// When one pair's rounds ran and which failed.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    rows: u64,
    first: u64,
    last: u64,
    /// The latest answered (connected) round.
    last_ok: Option<u64>,
    /// The failed rounds' times (rare: only failures are kept).
    fails: Vec<u64>,
}

impl Timeline {
    /// A round at `t` (ns), answered or not.
    pub fn add(&mut self, t: u64, connected: bool) {
        if self.rows == 0 {
            self.first = t;
            self.last = t;
        }
        self.rows += 1;
        self.first = self.first.min(t);
        self.last = self.last.max(t);
        if connected {
            self.last_ok = Some(self.last_ok.map_or(t, |o| o.max(t)));
        } else {
            self.fails.push(t);
        }
    }

    /// Failed rounds at the end of the pair's rows that are its end's
    /// departure, given that the log ends at `end`: 0 unless the pair had
    /// an answered round, its rows stopped more than 1.2 of its own round
    /// intervals before `end` (a round was due and did not come), and at most
    /// [`MAX_DEPARTURE_ROUNDS`] failures followed its last answer.
    ///
    /// `gone`: when the destination's own probes stopped, if they did
    /// ([`gone`]); the failures after it and after the last answer are the
    /// departure, wherever the pair's rows end. `unprobed`: every pair
    /// towards the destination stopped ([`unprobed`]), this one with them.
    pub fn departure_rounds(&self, end: u64, gone: Option<u64>, unprobed: bool) -> usize {
        let Some(last_ok) = self.last_ok else {
            return 0;
        };
        let Some(interval) = self.interval() else {
            return 0;
        };
        let since = match gone {
            Some(g) => g.max(last_ok),
            // Its next round was due before the log ended.
            None if unprobed || self.stopped_before(end, interval) => last_ok,
            None => return 0,
        };
        let trailing = self.fails.iter().filter(|&&t| t > since).count();
        if trailing <= MAX_DEPARTURE_ROUNDS {
            trailing
        } else {
            0
        }
    }

    /// The pair's round interval (ns); `None` with too few rows to know.
    pub fn interval(&self) -> Option<f64> {
        (self.rows >= 3 && self.last > self.first)
            .then(|| (self.last - self.first) as f64 / (self.rows - 1) as f64)
    }

    /// Whether a round was due before `end` and did not come (a fifth of a
    /// round spare for timing noise; missing rows only lengthen the
    /// interval).
    fn stopped_before(&self, end: u64, interval: f64) -> bool {
        end.saturating_sub(self.last) as f64 > 1.2 * interval
    }
}

/// Per timeline of `(source, destination, timeline)`, in order: its
/// failed rounds that are its destination's departure, given that the log
/// ends at `end` ([`Timeline::departure_rounds`], with [`gone`] read from
/// the sources and [`unprobed`] from the destinations that probe nobody).
pub fn departed<'t, K: std::hash::Hash + Eq + Copy>(
    timelines: impl Iterator<Item = (K, K, &'t Timeline)> + Clone,
    end: u64,
) -> Vec<usize> {
    let gone = gone(timelines.clone().map(|(s, _, t)| (s, t)), end);
    // A container that probes speaks for itself ([`gone`]).
    let probing: HashSet<K> = timelines.clone().map(|(s, _, _)| s).collect();
    let unprobed = unprobed(timelines.clone(), end);
    timelines
        .map(|(_, d, t)| {
            let left = unprobed.contains(&d) && !probing.contains(&d);
            t.departure_rounds(end, gone.get(&d).copied(), left)
        })
        .collect()
}

/// The containers whose own probes stopped before the log's `end`, and
/// when: from the timelines of the pairs each probes (`(source, timeline)`).
/// A container went at its latest probe, when a whole round of its own
/// passed after it before the end: its interval is the least of its
/// pairs' (a missing row only lengthens one pair's), so every one of its
/// pairs had a round due, and none came.
pub fn gone<'t, K: std::hash::Hash + Eq + Copy>(
    probes: impl Iterator<Item = (K, &'t Timeline)>,
    end: u64,
) -> HashMap<K, u64> {
    let mut last: HashMap<K, Stop<K>> = HashMap::new();
    for (src, t) in probes {
        last.entry(src).or_default().add(t, None);
    }
    last.into_iter()
        .filter(|(_, s)| s.before(end))
        .map(|(k, s)| (k, s.at))
        .collect()
}

/// The destinations probed by at least two peers that all stopped before
/// the log's `end` (the same reading as [`gone`]), from the timelines of
/// `(source, destination, timeline)`: one pair's rows stopping may be a
/// row lost, every peer's is the container.
pub fn unprobed<'t, K: std::hash::Hash + Eq + Copy>(
    timelines: impl Iterator<Item = (K, K, &'t Timeline)>,
    end: u64,
) -> HashSet<K> {
    let mut last: HashMap<K, Stop<K>> = HashMap::new();
    for (src, dst, t) in timelines {
        last.entry(dst).or_default().add(t, Some(src));
    }
    last.into_iter()
        .filter(|(_, s)| s.several && s.before(end))
        .map(|(k, _)| k)
        .collect()
}

/// The latest row and least interval of one container's timelines, and
/// whether they come from more than one peer.
#[derive(Debug)]
struct Stop<K> {
    at: u64,
    interval: f64,
    peer: Option<K>,
    several: bool,
}

impl<K> Default for Stop<K> {
    fn default() -> Self {
        Stop {
            at: 0,
            interval: f64::INFINITY,
            peer: None,
            several: false,
        }
    }
}

impl<K: PartialEq + Copy> Stop<K> {
    fn add(&mut self, t: &Timeline, peer: Option<K>) {
        self.at = self.at.max(t.last);
        self.interval = self.interval.min(t.interval().unwrap_or(f64::INFINITY));
        match (self.peer, peer) {
            (None, p) => self.peer = p,
            (Some(a), Some(b)) if a != b => self.several = true,
            _ => {}
        }
    }

    /// Whether a whole round passed after the latest row before `end`.
    fn before(&self, end: u64) -> bool {
        end.saturating_sub(self.at) as f64 > self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds every 10 s from 0; `fail` the indexes that failed.
    fn timeline(rounds: u64, fail: &[u64]) -> Timeline {
        let mut t = Timeline::default();
        for i in 0..rounds {
            t.add(i * 10, !fail.contains(&i));
        }
        t
    }

    #[test]
    fn a_pair_whose_probes_stop_after_a_failure_departed() {
        // Six rounds, the last failed, in a log running to 90 s.
        assert_eq!(timeline(6, &[5]).departure_rounds(90, None, false), 1);
        assert_eq!(timeline(6, &[4, 5]).departure_rounds(90, None, false), 2);
    }

    #[test]
    fn failures_until_the_end_of_the_log_are_evidence() {
        // Probed to the end: a container down but scheduled.
        assert_eq!(timeline(10, &[8, 9]).departure_rounds(90, None, false), 0);
        // The end within a round of the last row: no round was missed.
        assert_eq!(timeline(9, &[8]).departure_rounds(89, None, false), 0);
        // A round due at 90 that never came, in a log running to 94.
        assert_eq!(timeline(9, &[8]).departure_rounds(94, None, false), 1);
    }

    #[test]
    fn long_outages_and_middle_failures_stay() {
        // Three failures before the probing stopped: a fault that lasted.
        assert_eq!(timeline(6, &[3, 4, 5]).departure_rounds(90, None, false), 0);
        // A failure followed by an answer is not a departure.
        assert_eq!(timeline(6, &[2]).departure_rounds(90, None, false), 0);
        // Never answered: nothing says it ever worked.
        assert_eq!(
            timeline(6, &[0, 1, 2, 3, 4, 5]).departure_rounds(90, None, false),
            0
        );
        // Too few rows to know the pair's interval.
        assert_eq!(timeline(2, &[1]).departure_rounds(90, None, false), 0);
    }

    #[test]
    fn rows_out_of_order_give_the_same_answer() {
        let mut t = Timeline::default();
        for (at, ok) in [
            (50, false),
            (0, true),
            (30, true),
            (10, true),
            (40, true),
            (20, true),
        ] {
            t.add(at, ok);
        }
        assert_eq!(t.departure_rounds(90, None, false), 1);
    }

    /// The log ends a round after the container left: its peers' last
    /// rows fail at the very end, but its own probes stopped a round
    /// before, so those failures are its departure. A container that
    /// keeps probing (cut off, its dials failing) is not gone.
    #[test]
    fn a_container_whose_own_probes_stopped_took_its_last_failures_with_it() {
        // It probed every 10 s until 70 s; the log runs to 92 s.
        let own = [("a", timeline(8, &[])), ("a", timeline(8, &[]))];
        let still = timeline(10, &[8, 9]);
        let gone = gone(own.iter().map(|(k, t)| (*k, t)).chain([("b", &still)]), 92);
        assert_eq!(gone, HashMap::from([("a", 70)]));
        // One pair a row short, another a little later in its round: the
        // least interval and the latest probe still say a round passed.
        let mut late = Timeline::default();
        for at in [5, 15, 25, 45, 55, 65, 75] {
            late.add(at, true);
        }
        let both = [("c", timeline(8, &[])), ("c", late)];
        let went = super::gone(both.iter().map(|(k, t)| (*k, t)), 86);
        assert_eq!(went, HashMap::from([("c", 75)]));
        let stays = super::gone(both.iter().map(|(k, t)| (*k, t)), 84);
        assert!(stays.is_empty(), "{stays:?}");
        // Its peer probed it to 90 s, the round at 90 failed.
        let inbound = timeline(10, &[9]);
        assert_eq!(inbound.departure_rounds(92, None, false), 0);
        assert_eq!(
            inbound.departure_rounds(92, gone.get("a").copied(), false),
            1
        );
        // Failures before it left stay evidence.
        assert_eq!(
            timeline(10, &[5, 9]).departure_rounds(92, Some(70), false),
            1
        );
    }

    /// A container probed by two peers, each at its own phase of the
    /// round, left after the round at 40 s: both last rows failed. The
    /// later peer's rows stop only 11 s before the end (under 1.2 rounds),
    /// so its pair alone cannot say it; both pairs stopping can.
    #[test]
    fn a_container_all_of_whose_peers_stopped_probing_it_left() {
        let phased = |phase: u64| {
            let mut t = Timeline::default();
            for i in 0..5 {
                t.add(phase + i * 10, i < 4);
            }
            t
        };
        let (early, late) = (phased(0), phased(3));
        let peers = [("a", "x", &early), ("b", "x", &late)];
        let left = unprobed(peers.iter().copied(), 54);
        assert_eq!(left, HashSet::from(["x"]));
        assert_eq!(late.departure_rounds(54, None, false), 0);
        assert_eq!(late.departure_rounds(54, None, true), 1);
        // Probed to within a round of the end: still there.
        assert!(unprobed(peers.iter().copied(), 52).is_empty());
        // One pair stopping may be a row lost, over one protocol or two.
        assert!(unprobed([("b", "x", &late)].into_iter(), 54).is_empty());
        let both = [("b", "x", &late), ("b", "x", &early)];
        assert!(unprobed(both.into_iter(), 54).is_empty());
        // Still probed by another peer: not gone, whatever these two say.
        let on = timeline(6, &[]);
        let more = peers.into_iter().chain([("c", "x", &on)]);
        assert!(unprobed(more, 54).is_empty());
        // Left or not, a long outage before the end stays evidence.
        assert_eq!(timeline(6, &[3, 4, 5]).departure_rounds(90, None, true), 0);
    }
}
