//! The status page at `/`: what an on-call engineer reads first.
//!
//! The cycle publishes a small [`Snapshot`] to a [`Board`] — the verdicts
//! of the last usable cycle with their evidence, a ToR × ToR loss matrix
//! of that cycle's pairs, and a bounded ring of recent cycles — and `/`
//! renders it as server-side HTML with inline SVG: no script, no
//! front-end build, a `Content-Security-Policy` that forbids scripts.
//!
//! One file per job: [`evidence`] (pure: verdicts and the matrix from a
//! cycle's report and pairs), [`render`] (pure: `Snapshot` → HTML),
//! [`svg`] (pure: the matrix and the history sparkline), [`board`] (the
//! shared, bounded state and the HTTP reply). This file holds the types
//! they share.

pub mod board;
pub mod evidence;
pub mod render;
pub mod svg;

pub use board::Board;
pub use evidence::{mark_states, tor_matrix, verdicts};
pub use render::render;

use super::alerts::Severity;
use super::metrics::CycleResult;
use crate::engine::model::Symptom;
use skeletonhunter_common::topology::Component;
use std::time::{Duration, SystemTime};

/// ToRs shown in the matrix at most (the lossiest; the page says how many
/// were left out): 32 × 32 cells stay readable and small.
pub const MATRIX_CAP: usize = 32;

/// Cycles kept in the history ring (at the default 5 s interval, 40 min).
pub const HISTORY_CAP: usize = 480;

/// Events (fired / resolved) kept per cycle; the rest are counted.
pub const EVENTS_CAP: usize = 16;

/// Evidence lines kept per verdict.
pub const LINES_CAP: usize = 5;

/// What the page says about the service itself (fixed at start).
#[derive(Debug, Clone, Default)]
pub struct PageInfo {
    /// Time between cycles (also the page's refresh).
    pub interval: Duration,
    /// Range of the per-pair aggregates.
    pub window: Duration,
    /// The Prometheus root, without credentials.
    pub prometheus: String,
    /// How many Alertmanagers are posted to.
    pub alertmanagers: usize,
    /// Where the metrics are served.
    pub telemetry_path: String,
}

skeletonhunter_common::labelled_enum! {
    /// Where a verdict stands with respect to alerting.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum VerdictState {
        /// Blamed this cycle and alerted.
        Firing,
        /// Blamed this cycle, not (yet) alerted: awaiting confirmation or held
        /// after a clear.
        Pending,
        /// Alerted, not blamed this cycle: kept until enough covered clean
        /// cycles resolve it.
        Kept,
    }
}

/// The measured side of a verdict, over the pairs it explains.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Pairs the verdict explains (the engine's hit pairs).
    pub hit_pairs: usize,
    /// Probes lost over probes sent on those pairs (`None`: none sent).
    pub loss: Option<f64>,
    /// Probe rounds without any answer over rounds (`None`: no rounds).
    pub unanswered: Option<f64>,
    /// Median RTT of those pairs minus the median of the other pairs of
    /// the same path classes (`None`: no RTT on either side).
    pub latency_shift_seconds: Option<f64>,
    /// The worst pairs, as in the alert's `evidence` annotation.
    pub lines: Vec<String>,
}

/// One blamed (or still alerted) component.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The component.
    pub component: Component,
    /// What it does to the probes.
    pub symptom: Symptom,
    /// The severity its alert has (or would have).
    pub severity: Severity,
    /// Alerted, pending or kept.
    pub state: VerdictState,
    /// The engine's failure-probability estimate (`None` when kept: not
    /// blamed this cycle).
    pub score: Option<f64>,
    /// The engine's p-value (likewise).
    pub p_value: Option<f64>,
    /// Anomalous pairs crossing the component.
    pub pairs: usize,
    /// What was measured.
    pub evidence: Evidence,
}

/// One cell of the ToR × ToR matrix: probes from a node under the row's
/// ToR to a node under the column's ToR.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cell {
    /// Share of probes that did not come back, a round without any answer
    /// counting as all its probes lost.
    pub loss: f64,
    /// Pairs aggregated.
    pub pairs: usize,
}

/// Loss between ToRs, from one cycle's pairs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    /// The ToRs shown, sorted by name (rows: source, columns: destination).
    pub tors: Vec<String>,
    /// Row-major, `tors.len()²` cells; `None` where no pair was probed.
    pub cells: Vec<Option<Cell>>,
    /// ToRs the cycle's pairs named, shown or not.
    pub total_tors: usize,
}

impl Matrix {
    /// The cell from ToR `row` to ToR `col` (indices into `tors`).
    pub fn cell(&self, row: usize, col: usize) -> Option<Cell> {
        self.cells
            .get(row * self.tors.len() + col)
            .copied()
            .flatten()
    }
}

/// An alert that started or ended in a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Fired or resolved.
    pub fired: bool,
    /// The component's kind.
    pub kind: String,
    /// The component's id.
    pub id: String,
    /// The alert's severity.
    pub severity: String,
}

/// One cycle in the history ring.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleEntry {
    /// When it ended.
    pub at: SystemTime,
    /// How it ended.
    pub result: CycleResult,
    /// Pairs analyzed and anomalous (`None` when the data was unusable).
    pub pairs: Option<(usize, usize)>,
    /// Expected pairs with fresh data, and expected pairs.
    pub covered: (usize, usize),
    /// Alerts held firing after it.
    pub firing: usize,
    /// Alerts that fired or resolved in it, at most [`EVENTS_CAP`].
    pub events: Vec<Event>,
    /// Events left out of `events`.
    pub events_dropped: usize,
}

/// Everything the page shows, taken at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The service itself.
    pub info: PageInfo,
    /// When the snapshot was taken.
    pub now: Option<SystemTime>,
    /// When the verdicts and matrix were computed (the last usable cycle).
    pub verdicts_at: Option<SystemTime>,
    /// Current verdicts, firing first.
    pub verdicts: Vec<Verdict>,
    /// The ToR × ToR loss matrix of the last usable cycle.
    pub matrix: Matrix,
    /// The jobs of the last usable cycle, hurt ones first.
    pub jobs: crate::jobs::roster::Roster,
    /// Recent cycles, oldest first, at most [`HISTORY_CAP`].
    pub history: Vec<CycleEntry>,
}
