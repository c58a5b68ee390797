//! Does a loss verdict stand without its busiest moment?
//!
//! A gray fault drops probes one by one, round after round. A blip (a
//! microburst, a reroute) takes a few probes of several pairs in one
//! moment and leaves the rounds before and after it clean. When the pairs
//! of a blip happen to share a component (a small fabric's spine, a
//! container), their counts page it as surely as a gray fault's would:
//! only *when* the probes were lost tells the two apart.
//!
//! Where the source says when each lossy round ran
//! ([`PairStats::lossy_rows`], CSV logs), a loss verdict's pairs are
//! therefore read again without their busiest moment: the one round
//! interval in which they lost the most probes. A fault still loses more
//! than the background outside it, by at least the effect an operator
//! acts on (`min_loss_excess`, the floor every loss verdict meets); a blip
//! leaves a probe or two at most. An effect, not a p-value: at a 0.001 %
//! background floor one probe lost outside is "significant", and a gray
//! container whose few losses bunched up is not, at any useful level.
//! Online the counters span the window and say nothing of when: verdicts
//! stand as they are (the alert's own hold does this work there).

use super::model::{LossyRow, PairStats};
use super::stats::median;

/// What the pairs of a loss verdict lost outside their busiest moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outside {
    /// Probes lost in the busiest moment.
    pub lost_at_once: f64,
    /// Probes lost in all.
    pub lost: f64,
    /// Probes sent outside the busiest moment (its clean rows are not
    /// known, so they count as outside: the rate is, if anything, low).
    pub rest_sent: f64,
    /// Probes lost outside the busiest moment.
    pub rest_lost: f64,
}

impl Outside {
    /// The loss rate outside the busiest moment above `background`.
    pub fn excess_rate(&self, background: f64) -> f64 {
        if self.rest_sent > 0.0 {
            self.rest_lost / self.rest_sent - background
        } else {
            0.0
        }
    }
}

/// The pairs' loss outside their busiest moment (one round interval, the
/// median of the pairs' own); `None` when some pair does not say when its
/// rounds ran, or none lost a probe.
pub fn outside_busiest_moment(pairs: &[&PairStats]) -> Option<Outside> {
    if pairs.is_empty() {
        return None;
    }
    let mut periods = Vec::with_capacity(pairs.len());
    for p in pairs {
        periods.push(p.round_seconds.filter(|s| s.is_finite() && *s > 0.0)?);
    }
    let period = median(&mut periods);
    let mut rows: Vec<LossyRow> = pairs
        .iter()
        .flat_map(|p| p.lossy_rows.iter().copied())
        .filter(|r| r.at_seconds.is_finite())
        .collect();
    if rows.is_empty() {
        return None;
    }
    rows.sort_by(|a, b| a.at_seconds.total_cmp(&b.at_seconds));
    let (busy_sent, busy_lost) = busiest(&rows, period);
    let sent: f64 = pairs.iter().map(|p| p.sent).sum();
    let lost: f64 = pairs.iter().map(|p| p.lost).sum();
    let (rest_sent, rest_lost) = ((sent - busy_sent).max(0.0), (lost - busy_lost).max(0.0));
    Some(Outside {
        lost_at_once: busy_lost,
        lost,
        rest_sent,
        rest_lost,
    })
}

/// Sent and lost probes of the half-open interval `[t, t + period)` that
/// lost the most, over `rows` sorted by time. Times are compared by
/// difference: `t + period` may round to `t` far from the origin.
fn busiest(rows: &[LossyRow], period: f64) -> (f64, f64) {
    let (mut best, mut sent, mut lost, mut start) = ((0.0, 0.0), 0.0, 0.0, 0);
    for (i, r) in rows.iter().enumerate() {
        sent += r.sent;
        lost += r.lost;
        while start < i && r.at_seconds - rows[start].at_seconds >= period {
            sent -= rows[start].sent;
            lost -= rows[start].lost;
            start += 1;
        }
        if lost > best.1 {
            best = (sent, lost);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair of 8 rounds of 10 probes, 3 s apart, losing `lost[k]`
    /// probes in round `k`, its rounds shifted by `phase` seconds.
    fn pair(phase: f64, lost: [f64; 8]) -> PairStats {
        PairStats {
            rounds: 8.0,
            sent: 80.0,
            lost: lost.iter().sum(),
            round_seconds: Some(3.0),
            lossy_rows: (0..8)
                .filter(|&k| lost[k] > 0.0)
                .map(|k| LossyRow {
                    at_seconds: phase + 3.0 * k as f64,
                    sent: 10.0,
                    lost: lost[k],
                })
                .collect(),
            ..PairStats::default()
        }
    }

    fn outside(pairs: &[PairStats]) -> Outside {
        let refs: Vec<&PairStats> = pairs.iter().collect();
        outside_busiest_moment(&refs).expect("timed pairs that lost probes")
    }

    #[test]
    fn a_blip_on_three_pairs_leaves_nothing_outside_its_moment() {
        // Three pairs lose 3 probes each within a second (rounds 4, 4 and
        // 3 of pairs with different phases), one more probe elsewhere.
        let pairs = [
            pair(0.1, [0., 0., 0., 0., 3., 0., 0., 0.]),
            pair(0.5, [0., 0., 0., 0., 3., 0., 0., 0.]),
            pair(2.7, [0., 0., 0., 3., 0., 0., 0., 0.]),
            pair(1.0, [1., 0., 0., 0., 0., 0., 0., 0.]),
        ];
        let o = outside(&pairs);
        assert_eq!((o.lost_at_once, o.lost), (9.0, 10.0));
        // One probe of the 290 or so outside: under a 0.5 % floor.
        assert!(o.excess_rate(0.0) < 0.005, "{o:?}");
    }

    #[test]
    fn a_gray_fault_stands_outside_its_busiest_moment() {
        // 3 % loss spread over the rounds: the busiest moment takes a
        // share, the rest is still well above the background.
        let pairs = [
            pair(0.1, [1., 0., 2., 0., 1., 0., 0., 1.]),
            pair(0.5, [0., 1., 0., 2., 0., 0., 1., 0.]),
            pair(2.7, [0., 0., 1., 0., 0., 1., 0., 3.]),
        ];
        let o = outside(&pairs);
        assert!(o.lost_at_once >= 4.0 && o.lost_at_once < o.lost, "{o:?}");
        assert!(o.excess_rate(0.001) > 0.02, "{o:?}");
    }

    #[test]
    fn without_times_there_is_nothing_to_read() {
        let mut untimed = pair(0.0, [1., 1., 1., 1., 1., 1., 1., 1.]);
        untimed.round_seconds = None;
        let timed = pair(0.0, [1., 1., 1., 1., 1., 1., 1., 1.]);
        assert_eq!(outside_busiest_moment(&[&timed, &untimed]), None);
        let clean = pair(0.0, [0.0; 8]);
        assert_eq!(outside_busiest_moment(&[&clean]), None);
    }

    #[test]
    fn the_busiest_moment_is_one_round_interval_long() {
        let row = |at: f64, lost: f64| LossyRow {
            at_seconds: at,
            sent: 10.0,
            lost,
        };
        // 2 + 2 within 3 s beat the single 3; 0 and 3.0 are a period apart.
        let rows = [row(0.0, 3.0), row(3.0, 2.0), row(5.9, 2.0), row(9.0, 1.0)];
        assert_eq!(busiest(&rows, 3.0), (20.0, 4.0));
        // Far from the origin `t + period` rounds to `t`: still one moment,
        // read without running off the rows.
        let far = [row(1e300, 1.0), row(1e300, 2.0)];
        assert_eq!(busiest(&far, 1e-300), (20.0, 3.0));
    }
}
