//! The fleet benchmark's figures and how they are printed: one line per
//! configuration as it is measured, then one table side by side.

use super::store_load::LoadFigures;
use super::Config;
use skeletonhunter_tests::localizer::Alone;

/// What one configuration measured.
#[derive(Default)]
pub struct Figures {
    pub pairs: usize,
    pub targets: usize,
    pub probe_series: Option<f64>,
    pub head_series: Option<f64>,
    pub round_bytes: u64,
    pub store_rss_mib: u64,
    pub store_peak_mib: u64,
    /// One round of every rule group: the median of the rounds seen in
    /// the measured cycles (Prometheus) or of vmalert's iterations.
    pub rules_seconds: Option<f64>,
    /// The worst round seen (Prometheus only), and how many were seen.
    pub rules_worst: Option<f64>,
    pub rule_rounds: usize,
    /// Every rule's expression sent alone to the store, summed.
    pub rules_alone: Option<f64>,
    pub cycle_median: Option<f64>,
    pub cycle_max: Option<f64>,
    /// The median cycle and how many, of the cycles the store collected
    /// garbage in (first) and of the others.
    pub cycles_by_collection: [(Option<f64>, usize); 2],
    /// The store's CPU, allocations and collections per cycle.
    pub load: LoadFigures,
    pub cycles_ok: usize,
    pub cycles_measured: usize,
    /// Reads of the per-pair series in the measured cycles: (every pair,
    /// one shard of `--pair-shards`).
    pub pair_reads: (f64, f64),
    pub localizer_peak_mib: u64,
    /// The localizer's CPU seconds per measured cycle (its own
    /// `process_cpu_seconds_total`, the bench's reads of its /metrics
    /// included).
    pub localizer_cpu_per_cycle: Option<f64>,
    pub found: String,
    /// Mean seconds of each of the localizer's queries over the measured
    /// cycles, slowest first: where a cycle's time goes.
    pub queries: Vec<(String, f64)>,
    /// Each query sent alone to the store after the cycles (see
    /// `skeletonhunter_tests::localizer::time_queries_alone`).
    pub alone: Vec<Alone>,
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or_else(|| "?".to_string(), |v| format!("{v:.2}{unit}"))
}

pub fn summary(f: &Figures) -> String {
    let queries: Vec<String> = f
        .queries
        .iter()
        .map(|(q, s)| format!("{q} {s:.2} s"))
        .collect();
    let alone: Vec<String> = f
        .alone
        .iter()
        .map(|a| {
            format!(
                "{} {:.2} s ({} series, {:.1} MB)",
                a.name,
                a.seconds,
                a.series,
                a.bytes as f64 / 1e6
            )
        })
        .collect();
    format!(
        "series {} (all {}), round {:.1} MB, store {} MiB (peak {}), rules {}, cycle median {} max {} ({}/{} ok; per-pair reads: {} all, {} shard), {}, queries (mean) [{}], each alone [{}], localizer CPU {} per cycle, peak {} MiB, faults {}",
        opt(f.probe_series, ""),
        opt(f.head_series, ""),
        f.round_bytes as f64 / 1e6,
        f.store_rss_mib,
        f.store_peak_mib,
        opt(f.rules_seconds, " s"),
        opt(f.cycle_median, " s"),
        opt(f.cycle_max, " s"),
        f.cycles_ok,
        f.cycles_measured,
        f.pair_reads.0,
        f.pair_reads.1,
        store_load(f),
        queries.join(", "),
        alone.join(", "),
        opt(f.localizer_cpu_per_cycle, " s"),
        f.localizer_peak_mib,
        f.found
    )
}

/// The store's load per cycle and the cycles split by its collections.
fn store_load(f: &Figures) -> String {
    format!(
        "store per cycle: CPU {}, {} allocated, {} collections",
        opt(f.load.cpu_per_cycle, " s"),
        opt(f.load.allocated_mb_per_cycle, " MB"),
        opt(f.load.collections_per_cycle, ""),
    )
}

/// "median (n)" of one side of [`Figures::cycles_by_collection`].
fn cycles_of(side: (Option<f64>, usize)) -> String {
    format!("{} ({})", opt(side.0, " s"), side.1)
}

/// How one row of the table prints a configuration's figures.
type Cell = fn(&Figures) -> String;

/// The rows about the store and its rules.
fn store_rows() -> [(&'static str, Cell); 8] {
    [
        ("pairs / targets", |f| {
            format!("{} / {}", f.pairs, f.targets)
        }),
        ("probe series", |f| opt(f.probe_series, "")),
        // The fleet probes each pair over one protocol (UDP).
        ("probe series per pair and protocol", |f| {
            opt(f.probe_series.map(|n| n / f.pairs.max(1) as f64), "")
        }),
        ("all series in the store", |f| opt(f.head_series, "")),
        ("scrape round (before gzip)", |f| {
            format!("{:.1} MB", f.round_bytes as f64 / 1e6)
        }),
        ("store RSS now / peak", |f| {
            format!("{} / {} MiB", f.store_rss_mib, f.store_peak_mib)
        }),
        ("rule groups, one round: median (worst, rounds)", |f| {
            if f.rule_rounds == 0 {
                // vmalert: its own median iteration, no rounds sampled.
                return opt(f.rules_seconds, " s");
            }
            format!(
                "{} ({}, {})",
                opt(f.rules_seconds, " s"),
                opt(f.rules_worst, " s"),
                f.rule_rounds
            )
        }),
        ("rule expressions alone, summed", |f| {
            opt(f.rules_alone, " s")
        }),
    ]
}

/// The rows about the localizer's cycles and what they cost.
fn cycle_rows() -> [(&'static str, Cell); 14] {
    [
        ("localizer cycle, median", |f| opt(f.cycle_median, " s")),
        ("localizer cycle, worst", |f| opt(f.cycle_max, " s")),
        ("cycles the store collected garbage in: median (n)", |f| {
            cycles_of(f.cycles_by_collection[0])
        }),
        ("the other cycles: median (n)", |f| {
            cycles_of(f.cycles_by_collection[1])
        }),
        ("store CPU per cycle (ingestion included)", |f| {
            opt(f.load.cpu_per_cycle, " s")
        }),
        ("store allocations / collections per cycle", |f| {
            format!(
                "{} / {}",
                opt(f.load.allocated_mb_per_cycle, " MB"),
                opt(f.load.collections_per_cycle, "")
            )
        }),
        ("slowest query, mean", |f| {
            f.queries
                .first()
                .map_or_else(|| "?".to_string(), |(q, s)| format!("{q} {s:.2} s"))
        }),
        ("slowest query alone", |f| {
            let slowest = f
                .alone
                .iter()
                .max_by(|a, b| a.seconds.total_cmp(&b.seconds));
            slowest.map_or_else(|| "?".into(), |a| format!("{} {:.2} s", a.name, a.seconds))
        }),
        ("queries alone, one after another", |f| {
            let sum: f64 = f.alone.iter().map(|a| a.seconds).sum();
            if f.alone.is_empty() {
                "?".into()
            } else {
                format!("{sum:.2} s")
            }
        }),
        ("cycles ok / measured", |f| {
            format!("{} / {}", f.cycles_ok, f.cycles_measured)
        }),
        ("per-pair reads: all / one shard", |f| {
            format!("{} / {}", f.pair_reads.0, f.pair_reads.1)
        }),
        ("localizer CPU per cycle", |f| {
            opt(f.localizer_cpu_per_cycle, " s")
        }),
        ("localizer peak RSS", |f| {
            format!("{} MiB", f.localizer_peak_mib)
        }),
        ("faults found", |f| f.found.clone()),
    ]
}

pub fn print_table(rows: &[(Config, Option<Figures>)]) {
    let head: Vec<String> = rows.iter().map(|(c, _)| c.name().to_string()).collect();
    println!("\n| | {} |", head.join(" | "));
    println!("|---|{}", "---|".repeat(rows.len()));
    for (name, cell) in store_rows().into_iter().chain(cycle_rows()) {
        let cells: Vec<String> = rows
            .iter()
            .map(|(_, f)| f.as_ref().map_or_else(|| "failed".to_string(), cell))
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}
