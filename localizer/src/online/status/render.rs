//! The status page as HTML: a verdict banner, the verdicts with their
//! evidence, the ToR × ToR loss matrix, recent cycles, and links to the
//! machine endpoints. Pure: a [`Snapshot`] in, a page out. Every string
//! that comes from outside (component names are Prometheus label values)
//! goes through [`escape`]; the page has no script.

use super::{svg, CycleEntry, Snapshot, Verdict, VerdictState, HISTORY_CAP, MATRIX_CAP};
use crate::clients::alertmanager::rfc3339;
use crate::jobs::groups::GroupState;
use crate::online::metrics::CycleResult;
use skeletonhunter_common::build::BUILD;
use skeletonhunter_common::landing::escape;
use std::fmt::Write as _;
use std::time::SystemTime;

/// History rows listed under the strip (the strip shows every cycle kept).
const EVENT_ROWS: usize = 30;

/// Jobs listed on the page (hurt ones first); `/jobs` has them all.
const JOB_ROWS: usize = 50;

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
h1{margin:0 0 .2em}h2{margin-top:1.5em;border-bottom:1px solid #ccc}\
.banner{padding:.6em 1em;font-size:1.2em;border-radius:4px}\
.banner.bad{background:#ffebee;border-left:6px solid #c62828}\
.banner.good{background:#e8f5e9;border-left:6px solid #2e7d32}\
.banner.wait{background:#f5f5f5;border-left:6px solid #9e9e9e}\
table{border-collapse:collapse}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr.firing td:first-child{color:#c62828;font-weight:bold}tr.pending td:first-child{color:#ef6c00}\
tr.kept td:first-child{color:#555}ul.lines{margin:0;padding-left:1.1em;font-size:.9em}\
ul.legend{list-style:none;padding:0;display:flex;gap:1em;flex-wrap:wrap}\
svg text{font-size:11px;font-family:monospace}.muted{color:#666}code{background:#eee;padding:0 .2em}";

/// The UTC second of `t`, as `2006-01-02T15:04:05Z`.
fn stamp(t: SystemTime) -> String {
    let mut s = rfc3339(t);
    s.truncate(19);
    s.push('Z');
    s
}

/// `t` relative to the snapshot (`12 s ago`), or nothing without a clock.
fn ago(now: Option<SystemTime>, t: SystemTime) -> String {
    now.and_then(|n| n.duration_since(t).ok())
        .map(|d| format!(" ({} s ago)", d.as_secs()))
        .unwrap_or_default()
}

/// The page reloads every interval, but at most every 5 s: a person reads
/// it, and a faster reload would restart them mid-table.
fn refresh_secs(s: &Snapshot) -> u64 {
    s.info.interval.as_secs().max(5)
}

/// `x` as a percentage with two decimals, or an en dash.
fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{:.2}%", 100.0 * v))
}

/// A p-value in scientific notation; one too small for a double is shown
/// as such rather than as 0.
fn p_value(p: f64) -> String {
    if p > 0.0 {
        format!("{p:.1e}")
    } else {
        "< 1e-300".to_string()
    }
}

/// The page for `s`.
pub fn render(s: &Snapshot) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let title = "SkeletonHunter localizer — status";
    let refresh = refresh_secs(s);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"refresh\" content=\"{refresh}\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>{title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>{STYLE}</style>\n</head>\n<body>\n\
<h1>{title}</h1>\n"
    );
    summary(&mut h, s);
    verdicts(&mut h, s);
    jobs(&mut h, s);
    matrix(&mut h, s);
    history(&mut h, s);
    footer(&mut h, s);
    h.push_str("</body>\n</html>\n");
    h
}

/// The banner and the one-line state of the loop.
fn summary(h: &mut String, s: &Snapshot) {
    let firing: Vec<&Verdict> = s
        .verdicts
        .iter()
        .filter(|v| v.state != VerdictState::Pending)
        .collect();
    h.push_str("<section id=\"summary\">\n");
    if firing.is_empty() && s.verdicts_at.is_none() {
        h.push_str("<p class=\"banner wait\">No cycle has analyzed usable data yet.</p>\n");
    } else if firing.is_empty() {
        h.push_str("<p class=\"banner good\">No component is alerted.</p>\n");
    } else {
        let names: Vec<String> = firing
            .iter()
            .map(|v| {
                format!(
                    "<strong>{} {}</strong> ({}, {})",
                    escape(v.component.kind.as_str()),
                    escape(&v.component.id),
                    v.symptom,
                    v.severity.as_str()
                )
            })
            .collect();
        let _ = writeln!(
            h,
            "<p class=\"banner bad\">Alerted: {}.</p>",
            names.join("; ")
        );
    }
    match s.history.last() {
        None => h.push_str("<p>No cycle has run yet.</p>\n"),
        Some(last) => {
            let _ = write!(
                h,
                "<p>Last cycle: <strong>{}</strong> at {}{}",
                last.result.as_str(),
                stamp(last.at),
                ago(s.now, last.at)
            );
            if let Some((seen, bad)) = last.pairs {
                let _ = write!(h, "; {seen} pairs analyzed, {bad} anomalous");
            }
            let _ = write!(
                h,
                "; {} of {} expected pairs with fresh data.",
                last.covered.0, last.covered.1
            );
            if last.result != CycleResult::Ok {
                h.push_str(" Its data was unusable: it raised and cleared nothing.");
                if let Some(t) = s.verdicts_at {
                    let _ = write!(
                        h,
                        " What follows is from the last usable cycle, at {}.",
                        stamp(t)
                    );
                }
            }
            h.push_str("</p>\n");
        }
    }
    let _ = writeln!(
        h,
        "<p class=\"muted\">Every {} s over a {} s window of <code>{}</code>, posting to {} Alertmanager(s). This page refreshes itself every {} s.</p>",
        s.info.interval.as_secs_f64(),
        s.info.window.as_secs_f64(),
        escape(&s.info.prometheus),
        s.info.alertmanagers,
        refresh_secs(s)
    );
    h.push_str("</section>\n");
}

/// The verdict table.
fn verdicts(h: &mut String, s: &Snapshot) {
    h.push_str("<section id=\"verdicts\">\n<h2>Verdicts</h2>\n");
    if s.verdicts.is_empty() {
        h.push_str("<p>No component is blamed.</p>\n</section>\n");
        return;
    }
    h.push_str(
        "<p class=\"muted\"><em>firing</em>: blamed and alerted; <em>pending</em>: blamed, awaiting confirmation \
         (or held after a clear); <em>kept</em>: alerted, not blamed this cycle, resolves after enough clean cycles. \
         Score is the engine's estimate of the component's failure probability (for loss, the share of packets it drops); \
         the p-value is how unlikely the evidence is if the component were healthy (smaller: more confident). \
         Pairs: anomalous pairs crossing it / pairs the verdict explains. Loss, no answer and latency shift are measured \
         on the pairs the verdict explains (the shift against the other pairs of the same path class).</p>\n\
         <table>\n<thead><tr><th>State</th><th>Kind</th><th>Component</th><th>Symptom</th><th>Severity</th>\
         <th>Score</th><th>p-value</th><th>Pairs</th><th>Loss</th><th>No answer</th><th>Latency shift</th>\
         <th>Worst pairs</th></tr></thead>\n<tbody>\n",
    );
    for v in &s.verdicts {
        let e = &v.evidence;
        let lines: String = e
            .lines
            .iter()
            .map(|l| format!("<li>{}</li>", escape(l)))
            .collect();
        let _ = writeln!(
            h,
            "<tr class=\"verdict {state}\"><td class=\"state\">{state}</td><td class=\"kind\">{}</td>\
             <td class=\"component\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td><ul class=\"lines\">{lines}</ul></td></tr>",
            escape(v.component.kind.as_str()),
            escape(&v.component.id),
            v.symptom,
            v.severity.as_str(),
            pct(v.score),
            v.p_value.map_or_else(|| "–".into(), p_value),
            if v.state == VerdictState::Kept {
                "–".to_string()
            } else {
                format!("{} / {}", v.pairs, e.hit_pairs)
            },
            pct(e.loss),
            pct(e.unanswered),
            e.latency_shift_seconds
                .map_or_else(|| "–".into(), |d| format!("{:+.1} µs", d * 1e6)),
            state = v.state.as_str(),
        );
    }
    h.push_str("</tbody>\n</table>\n</section>\n");
}

/// A job's groups in a few words.
fn groups_cell(g: Option<&GroupState>) -> String {
    match g {
        None => "—".into(),
        Some(GroupState::Inferred(l)) => l.describe(),
        Some(GroupState::Pending) => "not solved yet".into(),
        Some(GroupState::Unranked) => "unknown: containers without ranks".into(),
        Some(GroupState::Uneven) => "unknown: containers hold unequal ranks".into(),
        Some(GroupState::TooLarge) => "unknown: too many ranks".into(),
    }
}

/// The jobs: which are hurt, by what, and how badly.
fn jobs(h: &mut String, s: &Snapshot) {
    h.push_str("<section id=\"jobs\">\n<h2>Jobs</h2>\n");
    let all = &s.jobs.jobs;
    if all.is_empty() {
        h.push_str(
            "<p>No job among the pairs: no pair has both ends in one <code>tenant</code>.</p>\n</section>\n",
        );
        return;
    }
    let hurt = all.iter().filter(|j| !j.hurt_by.is_empty()).count();
    let _ = writeln!(
        h,
        "<p class=\"muted\">{hurt} of {} jobs touched by a blamed component. Ranks as the job numbers them where \
         its containers publish them, else one per container. <em>Under</em>: its ranks placed beneath the component; \
         <em>hit</em>: its ranks with a skeleton pair crossing it. \
         <em>Groups</em>: its parallel layout as its skeleton between containers shows it.</p>\n\
         <table>\n<thead><tr><th>Job</th><th>Ranks</th><th>Containers</th><th>Pairs</th><th>Groups</th><th>Hurt by</th></tr></thead>\n<tbody>",
        all.len() + s.jobs.omitted
    );
    for j in all.iter().take(JOB_ROWS) {
        let hurt_by: String = j
            .hurt_by
            .iter()
            .map(|x| {
                let i = &x.impact;
                format!(
                    "<li>{} {}: {} ranks under it{}, {} hit ({} of {} pairs){}</li>",
                    escape(x.component.kind.as_str()),
                    escape(&x.component.id),
                    i.ranks_under,
                    escape(&i.spans_note()),
                    i.ranks_hit,
                    i.pairs_hit,
                    i.pairs,
                    escape(&i.groups_note())
                )
            })
            .collect();
        let _ = writeln!(
            h,
            "<tr class=\"job\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td>{}</td><td><ul class=\"lines\">{hurt_by}</ul></td></tr>",
            escape(&j.job),
            j.ranks,
            j.containers,
            j.pairs,
            escape(&groups_cell(j.groups.as_ref()))
        );
    }
    h.push_str("</tbody>\n</table>\n");
    let more = all.len().saturating_sub(JOB_ROWS) + s.jobs.omitted;
    if more > 0 {
        let _ = writeln!(h, "<p class=\"muted\">{more} more jobs, none hurt more: see <a href=\"/jobs\">/jobs</a>.</p>");
    }
    h.push_str("</section>\n");
}

/// The matrix with its reading notes.
fn matrix(h: &mut String, s: &Snapshot) {
    let m = &s.matrix;
    h.push_str("<section id=\"matrix\">\n<h2>ToR × ToR loss</h2>\n");
    if m.tors.is_empty() {
        h.push_str("<p>No pair with a ToR on both ends has been analyzed yet.</p>\n</section>\n");
        return;
    }
    let shown = if m.total_tors > m.tors.len() {
        format!(
            "Showing the {} lossiest of {} ToRs (at most {MATRIX_CAP}).",
            m.tors.len(),
            m.total_tors
        )
    } else {
        format!("All {} ToRs.", m.total_tors)
    };
    let _ = writeln!(
        h,
        "<p class=\"muted\">Row: the prober's ToR; column: the responder's ToR; the diagonal is traffic within a ToR. \
         A cell is the share of probes lost over the window (a round with no answer counts as all lost). \
         A bad ToR shows as a cross: its row and its column; a bad link between two ToRs as one cell (and its mirror). \
         Hover a cell for the figures. {shown}</p>"
    );
    h.push_str(&svg::matrix(m));
    h.push('\n');
    h.push_str(&svg::legend());
    h.push_str("\n</section>\n");
}

/// The strip and the latest alert changes.
fn history(h: &mut String, s: &Snapshot) {
    let _ = writeln!(
        h,
        "<section id=\"history\">\n<h2>Recent cycles</h2>\n<p class=\"muted\">The last {} cycles (at most {HISTORY_CAP}), oldest left: \
         bar height is the share of anomalous pairs, red while an alert fires, grey where the data was unusable; \
         a red mark above a bar where an alert fired, green where one resolved.</p>",
        s.history.len()
    );
    h.push_str(&svg::history(&s.history, |e: &CycleEntry| stamp(e.at)));
    h.push('\n');
    let rows: Vec<String> = s
        .history
        .iter()
        .rev()
        .flat_map(|e| {
            let extra = (e.events_dropped > 0).then(|| {
                format!(
                    "<tr><td>{}</td><td colspan=\"3\">{} more change(s)</td></tr>",
                    stamp(e.at),
                    e.events_dropped
                )
            });
            e.events
                .iter()
                .map(move |ev| {
                    format!(
                        "<tr class=\"{c}\"><td>{}</td><td>{c}</td><td>{} {}</td><td>{}</td></tr>",
                        stamp(e.at),
                        escape(&ev.kind),
                        escape(&ev.id),
                        escape(&ev.severity),
                        c = if ev.fired { "fired" } else { "resolved" },
                    )
                })
                .chain(extra)
        })
        .take(EVENT_ROWS)
        .collect();
    if rows.is_empty() {
        h.push_str("<p>No alert fired or resolved in these cycles.</p>\n");
    } else {
        let _ = writeln!(
            h,
            "<table class=\"events\">\n<thead><tr><th>Cycle</th><th>Change</th><th>Component</th><th>Severity</th></tr></thead>\n<tbody>\n{}\n</tbody>\n</table>",
            rows.join("\n")
        );
    }
    h.push_str("</section>\n");
}

/// Links to the machine endpoints and the build.
fn footer(h: &mut String, s: &Snapshot) {
    let metrics = escape(&s.info.telemetry_path);
    let _ = write!(
        h,
        "<footer>\n<h2>Endpoints</h2>\n<ul>\n\
<li><a href=\"{metrics}\">{metrics}</a>: metrics (blame, cycles)</li>\n\
<li><a href=\"/report\">/report</a>: the last analysis (JSON)</li>\n\
<li><a href=\"/jobs\">/jobs</a>: every job of the last usable cycle and what hurts it (JSON)</li>\n\
<li><a href=\"/-/healthy\">/-/healthy</a>: health, the process is up</li>\n\
<li><a href=\"/-/ready\">/-/ready</a>: readiness, a recent cycle analyzed complete data</li>\n</ul>\n\
<p class=\"muted\">Version <code>{}</code>, revision <code>{}</code>, branch <code>{}</code>, built <code>{}</code>.</p>\n</footer>\n",
        escape(BUILD.version),
        escape(BUILD.revision),
        escape(BUILD.branch),
        escape(BUILD.build_date)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::Symptom;
    use crate::jobs::groups::JobLayout;
    use crate::jobs::impact::{GroupsUnder, JobImpact};
    use crate::jobs::layout::{Grid, Order, Shape};
    use crate::jobs::roster::{Hurt, JobView, Roster};
    use crate::jobs::Layout;
    use crate::online::alerts::Severity;
    use crate::online::status::{Cell, Event, Evidence, Matrix, PageInfo};
    use skeletonhunter_common::topology::{Component, Kind};
    use std::time::Duration;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn verdict(id: &str, state: VerdictState) -> Verdict {
        Verdict {
            component: Component::new(Kind::Tor, id),
            symptom: Symptom::Loss,
            severity: Severity::Critical,
            state,
            score: Some(0.31),
            p_value: Some(1e-9),
            pairs: 8,
            evidence: Evidence {
                hit_pairs: 6,
                loss: Some(0.3),
                unanswered: Some(0.0),
                latency_shift_seconds: Some(12e-6),
                lines: vec![format!("a -> {id}: 30.0% loss")],
            },
        }
    }

    fn entry(t: u64, result: CycleResult, events: Vec<Event>) -> CycleEntry {
        CycleEntry {
            at: at(t),
            result,
            pairs: (result == CycleResult::Ok).then_some((30, 6)),
            covered: (30, 30),
            firing: 1,
            events,
            events_dropped: 0,
        }
    }

    fn snapshot(id: &str) -> Snapshot {
        Snapshot {
            info: PageInfo {
                interval: Duration::from_secs(10),
                window: Duration::from_secs(30),
                prometheus: "http://prom:9090".into(),
                alertmanagers: 2,
                telemetry_path: "/metrics".into(),
            },
            now: Some(at(25)),
            verdicts_at: Some(at(20)),
            verdicts: vec![verdict(id, VerdictState::Firing)],
            matrix: Matrix {
                tors: vec![id.into(), "t2".into()],
                cells: vec![
                    Some(Cell {
                        loss: 0.3,
                        pairs: 3
                    });
                    4
                ],
                total_tors: 40,
            },
            jobs: Roster {
                jobs: vec![JobView {
                    job: format!("job-{id}"),
                    ranks: 64,
                    containers: 8,
                    pairs: 128,
                    hurt_by: vec![Hurt {
                        component: Component::new(Kind::Tor, id),
                        impact: JobImpact {
                            job: format!("job-{id}"),
                            ranks_under: 8,
                            spans_under: "0-7".into(),
                            ranks_hit: 24,
                            ranks: 64,
                            pairs_hit: 40,
                            pairs: 128,
                            groups_under: Some(GroupsUnder {
                                touched: [1, 8, 8],
                                of: [8, 16, 32],
                            }),
                            under: Vec::new(),
                        },
                    }],
                    groups: Some(GroupState::Inferred(JobLayout {
                        layout: Layout {
                            grid: Grid::new(8, 4, 2, Order::TpDpPp, Some(8)),
                            shapes: [Shape::Silent, Shape::Ring, Shape::Chain],
                        },
                        determined: false,
                        names_determined: false,
                        score: 0.97,
                        groups: [8, 16, 32],
                        alternatives: vec![Layout {
                            grid: Grid::new(4, 8, 2, Order::TpDpPp, Some(8)),
                            shapes: [Shape::Silent, Shape::Ring, Shape::Chain],
                        }],
                        more_alternatives: 2,
                    })),
                }],
                omitted: 60,
            },
            history: vec![
                entry(
                    10,
                    CycleResult::Ok,
                    vec![Event {
                        fired: true,
                        kind: "tor".into(),
                        id: id.into(),
                        severity: "critical".into(),
                    }],
                ),
                entry(20, CycleResult::Ok, vec![]),
            ],
        }
    }

    #[test]
    fn page_shows_verdict_evidence_matrix_and_history() {
        let p = render(&snapshot("tor1"));
        assert!(
            p.contains("Alerted: <strong>tor tor1</strong> (loss, critical)"),
            "{p}"
        );
        assert!(p.contains("<td class=\"component\">tor1</td>"));
        for cell in [
            "31.00%",
            "1.0e-9",
            "8 / 6",
            "30.00%",
            "+12.0 µs",
            "a -&gt; tor1: 30.0% loss",
        ] {
            assert!(p.contains(cell), "missing {cell}");
        }
        assert!(p.contains("Showing the 2 lossiest of 40 ToRs"));
        assert!(p.contains("<svg class=\"matrix\""));
        assert!(p.contains("<svg class=\"history\""));
        assert!(p.contains("<td>fired</td><td>tor tor1</td>"));
        assert!(
            p.contains("1 of 61 jobs touched by a blamed component"),
            "{p}"
        );
        assert!(
            p.contains("<td>job-tor1</td><td class=\"num\">64</td>"),
            "{p}"
        );
        assert!(p.contains(
            "<li>tor tor1: 8 ranks under it (0-7), 24 hit (40 of 128 pairs), \
             groups under it: TP 1 of 8, DP 8 of 16, PP 8 of 32</li>"
        ));
        assert!(
            p.contains("<td>TP 8 × DP 4 × PP 2 (a guess: or TP 4 × DP 8 × PP 2, or 2 more)</td>"),
            "{p}"
        );
        assert!(p.contains("60 more jobs, none hurt more"));
        assert!(p.contains("Last cycle: <strong>ok</strong> at 2023-11-14T22:13:40Z (5 s ago)"));
        assert!(p.contains("content=\"10\""));
        for link in ["/metrics", "/report", "/jobs", "/-/healthy", "/-/ready"] {
            assert!(p.contains(&format!("<a href=\"{link}\">")), "{link}");
        }
    }

    /// Component names are label values from Prometheus: a hostile one is
    /// text on the page, never markup.
    #[test]
    fn label_values_are_escaped_everywhere() {
        let evil = "<script>alert(\"x\")</script>&'";
        let mut s = snapshot(evil);
        s.info.prometheus = "http://<b>".into();
        s.info.telemetry_path = "/m\"><script>".into();
        let p = render(&s);
        assert!(!p.contains("<script"), "{p}");
        assert!(!p.contains("<b>"));
        assert!(p.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"));
    }

    #[test]
    fn unusable_last_cycle_and_empty_state_are_explained() {
        let mut s = snapshot("t1");
        s.history.push(entry(30, CycleResult::QueryFailed, vec![]));
        let p = render(&s);
        assert!(p.contains("Last cycle: <strong>query_failed</strong>"));
        assert!(p.contains("What follows is from the last usable cycle, at 2023-11-14T22:13:40Z."));
        let empty = render(&Snapshot::default());
        assert!(empty.contains("No cycle has analyzed usable data yet."));
        assert!(empty.contains("No cycle has run yet."));
        assert!(empty.contains("No component is blamed."));
        assert!(empty.contains("No job among the pairs"));
        assert!(empty.contains("content=\"5\""));
        assert_eq!(p_value(0.0), "< 1e-300");
        assert_eq!(p_value(2.5e-7), "2.5e-7");
    }
}
