//! Inline SVG for the status page: the ToR × ToR loss matrix, its colour
//! legend, and the history strip. Pure; every name from outside is escaped.

use super::{CycleEntry, Matrix};
use crate::online::metrics::CycleResult;
use skeletonhunter_common::landing::escape;
use std::fmt::Write as _;

/// Side of one matrix cell, in pixels: a few ToRs get big cells, 32 get
/// 16 px.
fn cell_side(n: usize) -> usize {
    (512 / n.max(1)).clamp(16, 48)
}
/// Room for the ToR names left of and above the cells.
const LABEL: usize = 110;
/// ToR names longer than this are cut (the full name is in the tooltip).
const LABEL_CHARS: usize = 14;

/// Loss buckets, upper bounds exclusive, with their colours; the last one
/// is everything above. Buckets, not a gradient, so a reader can name the
/// range a cell is in from the legend.
const BUCKETS: [(f64, &str, &str); 6] = [
    (1e-12, "#c8e6c9", "0"),
    (0.001, "#e6ee9c", "< 0.1%"),
    (0.01, "#fff176", "< 1%"),
    (0.05, "#ffb74d", "< 5%"),
    (0.2, "#f4511e", "< 20%"),
    (f64::INFINITY, "#b71c1c", "≥ 20%"),
];
/// A pair of ToRs no probe crossed.
const NO_DATA: &str = "#eeeeee";

/// The fill of a cell with `loss`.
pub fn loss_colour(loss: f64) -> &'static str {
    BUCKETS
        .iter()
        .find(|(upper, _, _)| loss < *upper)
        .map_or(BUCKETS[BUCKETS.len() - 1].1, |b| b.1)
}

/// `s` cut to `n` characters, with an ellipsis when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut o: String = s.chars().take(n - 1).collect();
        o.push('…');
        o
    }
}

/// The matrix: rows are source ToRs, columns destination ToRs; each cell
/// carries a tooltip with the exact loss and the pairs behind it.
pub fn matrix(m: &Matrix) -> String {
    let n = m.tors.len();
    let cell = cell_side(n);
    let side = LABEL + n * cell;
    let mut s = String::with_capacity(256 + n * n * 120);
    let _ = write!(
        s,
        "<svg class=\"matrix\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{side}\" height=\"{side}\" \
         viewBox=\"0 0 {side} {side}\" role=\"img\" aria-label=\"ToR by ToR loss matrix\">"
    );
    for (i, t) in m.tors.iter().enumerate() {
        let name = escape(&cut(t, LABEL_CHARS));
        let full = escape(t);
        let mid = LABEL + i * cell + cell / 2;
        let _ = write!(
            s,
            "<text class=\"row\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{name}<title>{full}</title></text>",
            LABEL - 4,
            mid
        );
        let _ = write!(
            s,
            "<text class=\"col\" transform=\"translate({mid},{}) rotate(-60)\">{name}<title>{full}</title></text>",
            LABEL - 4
        );
    }
    for (r, src) in m.tors.iter().enumerate() {
        for (c, dst) in m.tors.iter().enumerate() {
            let (fill, tip) = match m.cell(r, c) {
                Some(cell) => (
                    loss_colour(cell.loss),
                    format!(
                        "{} → {}: {:.2}% loss over {} pair(s)",
                        escape(src),
                        escape(dst),
                        100.0 * cell.loss,
                        cell.pairs
                    ),
                ),
                None => (
                    NO_DATA,
                    format!("{} → {}: no pair probed", escape(src), escape(dst)),
                ),
            };
            let _ = write!(
                s,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"#fff\"><title>{tip}</title></rect>",
                LABEL + c * cell,
                LABEL + r * cell,
                cell,
                cell
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// The colour legend of the matrix.
pub fn legend() -> String {
    let mut s = String::from("<ul class=\"legend\">");
    for (fill, text) in std::iter::once((NO_DATA, "no data"))
        .chain(BUCKETS.iter().map(|(_, fill, text)| (*fill, *text)))
    {
        let _ = write!(
            s,
            "<li><svg width=\"12\" height=\"12\" aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{fill}\" stroke=\"#999\"/></svg> {}</li>",
            escape(text)
        );
    }
    s.push_str("</ul>");
    s
}

/// Width of one cycle in the history strip.
const BAR: usize = 6;
/// Height of the history strip.
const STRIP: usize = 60;

/// The history strip, one bar per cycle, oldest left: height is the
/// share of anomalous pairs, red while an alert fires, grey for a cycle
/// whose data was unusable; a mark above a bar where an alert fired (red)
/// or resolved (green). `stamp` formats a cycle's time for its tooltip.
pub fn history(h: &[CycleEntry], stamp: impl Fn(&CycleEntry) -> String) -> String {
    let width = (h.len() * BAR).max(BAR);
    let base = STRIP - 2;
    let mut s = String::with_capacity(128 + h.len() * 160);
    let _ = write!(
        s,
        "<svg class=\"history\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{STRIP}\" \
         viewBox=\"0 0 {width} {STRIP}\" role=\"img\" aria-label=\"recent cycles\">\
         <line x1=\"0\" y1=\"{base}\" x2=\"{width}\" y2=\"{base}\" stroke=\"#999\"/>"
    );
    for (i, e) in h.iter().enumerate() {
        let x = i * BAR;
        let (height, fill, what) = match (e.result, e.pairs) {
            (CycleResult::Ok, Some((seen, bad))) => {
                let share = if seen == 0 {
                    0.0
                } else {
                    bad as f64 / seen as f64
                };
                let fill = if e.firing > 0 { "#c62828" } else { "#1565c0" };
                let h = ((share * (base - 10) as f64).ceil() as usize).max(1);
                (
                    h,
                    fill,
                    format!(
                        "{bad} of {seen} pairs anomalous, {} alert(s) firing",
                        e.firing
                    ),
                )
            }
            (r, _) => (
                base - 10,
                "#cccccc",
                format!("data unusable ({})", r.as_str()),
            ),
        };
        let _ = write!(
            s,
            "<rect x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{height}\" fill=\"{fill}\"><title>{}: {}</title></rect>",
            base - height,
            BAR - 1,
            escape(&stamp(e)),
            what
        );
        for (n, fired) in [(true, "#c62828"), (false, "#2e7d32")] {
            if e.events.iter().any(|ev| ev.fired == n) {
                let y = if n { 1 } else { 5 };
                let _ = write!(
                    s,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"3\" fill=\"{fired}\"/>",
                    BAR - 1
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::online::status::{Cell, Event};
    use std::time::SystemTime;

    #[test]
    fn colours_follow_the_buckets() {
        assert_eq!(loss_colour(0.0), "#c8e6c9");
        assert_eq!(loss_colour(0.0005), "#e6ee9c");
        assert_eq!(loss_colour(0.03), "#ffb74d");
        assert_eq!(loss_colour(0.3), "#b71c1c");
        assert_eq!(loss_colour(1.0), "#b71c1c");
        assert_eq!(loss_colour(f64::NAN), "#b71c1c");
    }

    #[test]
    fn matrix_escapes_and_cuts_names() {
        let m = Matrix {
            tors: vec!["<script>alert(1)</script>".into(), "t2".into()],
            cells: vec![
                None,
                Some(Cell {
                    loss: 0.3,
                    pairs: 2,
                }),
                Some(Cell {
                    loss: 0.0,
                    pairs: 1,
                }),
                None,
            ],
            total_tors: 2,
        };
        let s = matrix(&m);
        assert!(!s.contains("<script"), "{s}");
        assert!(
            s.contains("&lt;script&gt;alert(1)&lt;/script&gt; → t2: 30.00% loss over 2 pair(s)")
        );
        assert!(s.contains("&lt;script&gt;alert…"), "{s}");
        assert_eq!(s.matches("<rect").count(), 4);
        assert!(s.contains("fill=\"#b71c1c\""));
    }

    #[test]
    fn history_marks_alerts_and_unusable_cycles() {
        let e = |result, firing, fired: Option<bool>| CycleEntry {
            at: SystemTime::UNIX_EPOCH,
            result,
            pairs: (result == CycleResult::Ok).then_some((10, 2)),
            covered: (10, 10),
            firing,
            events: fired
                .map(|fired| Event {
                    fired,
                    kind: "tor".into(),
                    id: "t1".into(),
                    severity: "critical".into(),
                })
                .into_iter()
                .collect(),
            events_dropped: 0,
        };
        let h = [
            e(CycleResult::Ok, 0, None),
            e(CycleResult::QueryFailed, 0, None),
            e(CycleResult::Ok, 1, Some(true)),
            e(CycleResult::Ok, 0, Some(false)),
        ];
        let s = history(&h, |_| "t".into());
        assert!(s.contains("data unusable (query_failed)"));
        assert!(s.contains("2 of 10 pairs anomalous, 1 alert(s) firing"));
        assert_eq!(s.matches("fill=\"#2e7d32\"").count(), 1);
        assert_eq!(s.matches("fill=\"#c62828\"").count(), 2);
        assert!(history(&[], |_| String::new()).starts_with("<svg"));
    }
}
