//! The rounds of a pair that lost probes, with when they ran: what the
//! engine reads to tell a blip (several pairs losing probes in one moment)
//! from a gray fault (probes lost round after round), see
//! `engine::persistence`. Only lossy rows are kept, so a healthy log costs
//! nothing here.

use crate::engine::model::LossyRow;

/// One pair's (and protocol's) lossy rounds.
#[derive(Default)]
pub struct LossyRounds {
    /// `ping_time` (ns), loss rate, and the row's own probe count (NaN:
    /// none, the log's probes per row apply).
    rows: Vec<(u64, f32, f32)>,
}

impl LossyRounds {
    /// A connected round at `at` (ns) that lost `loss` of its probes.
    pub fn add(&mut self, at: u64, loss: f64, count: Option<f64>) {
        self.rows
            .push((at, loss as f32, count.map_or(f32::NAN, |c| c as f32)));
    }

    /// How many there were.
    pub fn len(&self) -> f64 {
        self.rows.len() as f64
    }

    /// The rounds as the engine takes them: seconds before the log's `end`
    /// (ns, negative), probes sent and lost with `ppr` probes per row for a
    /// row without a count of its own, lost rounded as the pair's totals.
    pub fn rows(&self, end: u64, ppr: f64) -> impl Iterator<Item = LossyRow> + '_ {
        self.rows.iter().map(move |&(at, loss, count)| {
            let sent = if count.is_nan() {
                ppr
            } else {
                f64::from(count)
            };
            LossyRow {
                at_seconds: -(end.saturating_sub(at) as f64) * 1e-9,
                sent,
                lost: (f64::from(loss) * sent).round(),
            }
        })
    }
}
