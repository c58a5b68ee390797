//! `skeletonhunter-localizer analyze`: localize faults in a CSV ping log,
//! JSON on stdout. Bad input (an unreadable file, a malformed CSV, a bad
//! flag value) is an [`AnalyzeError`], which the binary exits with 2 for.

use super::flags::{parse_size, EngineArgs};
use crate::engine::model::{Fault, PairStats};
use crate::engine::pipeline::analyze;
use crate::engine::planes::analyze_planes;
use crate::input::csv::{self, CsvOptions, ReadError, DEFAULT_MAX_PAIRS};
use crate::input::lines::DEFAULT_MAX_LINE_LENGTH;
use crate::jobs::impact::impact;
use skeletonhunter_common::topology::{Component, Plane};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// Bad input to `analyze`: exit status 2, like clap's usage errors.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// `--packets-per-round` below 1 or not finite.
    #[error("--packets-per-round must be at least 1, got {0}")]
    PacketsPerRound(f64),
    /// The ping log cannot be opened or is not a valid ping log.
    #[error(transparent)]
    Input(#[from] ReadError),
}

/// Flags of `analyze`.
#[derive(clap::Args, Debug, Clone)]
pub struct AnalyzeArgs {
    /// The ping log (`-` for standard input).
    #[arg(long)]
    pub pings: PathBuf,
    /// Packets per probe round (a row's `loss_rate` is a share of them).
    /// Default: a count column when the log has one, else inferred from the
    /// lattice of the `loss_rate` values (see `probes_per_row` in the JSON).
    #[arg(long)]
    pub packets_per_round: Option<f64>,
    /// Longest CSV line accepted (bytes; units B, KiB, MiB, ...). A longer
    /// line is an error naming its number, and is never read into memory.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE_LENGTH, value_parser = parse_size)]
    pub max_line_length: usize,
    /// Most distinct (src, dst) pairs read (each costs about 700 bytes through the analysis). The
    /// row that brings one more is an error naming its line (exit 2).
    #[arg(long, default_value_t = DEFAULT_MAX_PAIRS, value_name = "N")]
    pub max_pairs: usize,
    /// Pretty-print the JSON.
    #[arg(long)]
    pub pretty: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub engine: EngineArgs,
}

/// Read, analyze, print.
pub fn run(args: AnalyzeArgs) -> anyhow::Result<()> {
    if let Some(n) = args.packets_per_round {
        if !(n.is_finite() && n >= 1.0) {
            return Err(AnalyzeError::PacketsPerRound(n).into());
        }
    }
    let opts = CsvOptions {
        packets_per_round: args.packets_per_round,
        max_line_length: args.max_line_length,
        max_pairs: args.max_pairs,
    };
    let (pairs, summary) = if args.pings.as_os_str() == "-" {
        csv::read_pings_stdin_counted(&opts).map_err(AnalyzeError::from)?
    } else {
        csv::read_pings_file_counted(&args.pings, &opts).map_err(AnalyzeError::from)?
    };
    let probes = &summary.probes;
    if !probes.confident && probes.matters {
        eprintln!(
            "skeletonhunter-localizer: warning: cannot tell the probes per CSV row from {} distinct \
             loss_rate value(s); assuming {} (set it with --packets-per-round)",
            probes.distinct_rates, probes.value
        );
    }
    let config = args.engine.config();
    // The JSON, and the component of each of its faults, in order.
    let (mut json, blamed): (serde_json::Value, Vec<Component>) =
        match split_planes(&pairs, &summary.planes) {
            Some((overlay, underlay)) => {
                let report = analyze_planes(&overlay, &underlay, &config);
                let mut json = serde_json::to_value(&report)?;
                if let serde_json::Value::Object(map) = &mut json {
                    let n =
                        serde_json::json!({"overlay": overlay.len(), "underlay": underlay.len()});
                    map.insert("plane_pairs".into(), n);
                }
                let blamed = report.faults.iter().map(|f| f.fault.component());
                (json, blamed.collect())
            }
            None => {
                let report = analyze(&pairs, &config);
                let blamed = report.faults.iter().map(Fault::component).collect();
                (serde_json::to_value(&report)?, blamed)
            }
        };
    if let serde_json::Value::Object(map) = &mut json {
        map.insert("probes_per_row".into(), serde_json::to_value(probes)?);
        map.insert("task_rows".into(), serde_json::to_value(&summary.tasks)?);
        // Which jobs (tenants) each verdict hurts, where the log says.
        if let Some(serde_json::Value::Array(faults)) = map.get_mut("faults") {
            for (c, out) in blamed.iter().zip(faults.iter_mut()) {
                let jobs = impact(
                    pairs.iter().map(|p| (&p.src, &p.dst)),
                    &HashMap::new(),
                    c.kind,
                    &c.id,
                );
                match out {
                    serde_json::Value::Object(o) if !jobs.is_empty() => {
                        o.insert("jobs".into(), serde_json::to_value(&jobs)?);
                    }
                    _ => {}
                }
            }
        }
    }
    let out = if args.pretty {
        serde_json::to_string_pretty(&json)?
    } else {
        serde_json::to_string(&json)?
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")?;
    Ok(())
}

/// The overlay and the underlay pairs, when the log measured both planes
/// (then each is analyzed apart and the verdicts set against each other);
/// `None` for a log of one plane, or that does not say: pairs whose plane
/// is not given go with the overlay, as rows of a container's agent.
fn split_planes(
    pairs: &[PairStats],
    planes: &[Option<Plane>],
) -> Option<(Vec<PairStats>, Vec<PairStats>)> {
    if !planes.contains(&Some(Plane::Underlay))
        || planes.iter().all(|p| *p == Some(Plane::Underlay))
    {
        return None;
    }
    let (mut overlay, mut underlay) = (Vec::new(), Vec::new());
    for (p, plane) in pairs.iter().zip(planes) {
        match plane {
            Some(Plane::Underlay) => underlay.push(p.clone()),
            _ => overlay.push(p.clone()),
        }
    }
    Some((overlay, underlay))
}
