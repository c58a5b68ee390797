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
    pub fn departure_rounds(&self, end: u64) -> usize {
        let Some(last_ok) = self.last_ok else {
            return 0;
        };
        if self.rows < 3 || self.last <= self.first {
            return 0;
        }
        let interval = (self.last - self.first) as f64 / (self.rows - 1) as f64;
        // Its next round was due before the log ended (a fifth of a round
        // spare for timing noise; missing rows only lengthen the interval).
        if (end.saturating_sub(self.last) as f64) <= 1.2 * interval {
            return 0;
        }
        let trailing = self.fails.iter().filter(|&&t| t > last_ok).count();
        if trailing <= MAX_DEPARTURE_ROUNDS {
            trailing
        } else {
            0
        }
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
        assert_eq!(timeline(6, &[5]).departure_rounds(90), 1);
        assert_eq!(timeline(6, &[4, 5]).departure_rounds(90), 2);
    }

    #[test]
    fn failures_until_the_end_of_the_log_are_evidence() {
        // Probed to the end: a container down but scheduled.
        assert_eq!(timeline(10, &[8, 9]).departure_rounds(90), 0);
        // The end within a round of the last row: no round was missed.
        assert_eq!(timeline(9, &[8]).departure_rounds(89), 0);
        // A round due at 90 that never came, in a log running to 94.
        assert_eq!(timeline(9, &[8]).departure_rounds(94), 1);
    }

    #[test]
    fn long_outages_and_middle_failures_stay() {
        // Three failures before the probing stopped: a fault that lasted.
        assert_eq!(timeline(6, &[3, 4, 5]).departure_rounds(90), 0);
        // A failure followed by an answer is not a departure.
        assert_eq!(timeline(6, &[2]).departure_rounds(90), 0);
        // Never answered: nothing says it ever worked.
        assert_eq!(timeline(6, &[0, 1, 2, 3, 4, 5]).departure_rounds(90), 0);
        // Too few rows to know the pair's interval.
        assert_eq!(timeline(2, &[1]).departure_rounds(90), 0);
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
        assert_eq!(t.departure_rounds(90), 1);
    }
}
