//! `skeletonhunter-localizer analyze`: localize faults in a CSV ping log,
//! JSON on stdout.

use super::flags::EngineArgs;
use crate::engine::pipeline::analyze;
use crate::input::csv::{self, CsvOptions};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;

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
        anyhow::ensure!(
            n.is_finite() && n >= 1.0,
            "--packets-per-round must be at least 1, got {n}"
        );
    }
    let opts = CsvOptions {
        packets_per_round: args.packets_per_round,
    };
    let (pairs, probes) = if args.pings.as_os_str() == "-" {
        csv::read_pings_counted(std::io::stdin().lock(), &opts).context("reading standard input")?
    } else {
        csv::read_pings_file_counted(&args.pings, &opts)?
    };
    if !probes.confident && probes.matters {
        eprintln!(
            "skeletonhunter-localizer: warning: cannot tell the probes per CSV row from {} distinct \
             loss_rate value(s); assuming {} (set it with --packets-per-round)",
            probes.distinct_rates, probes.value
        );
    }
    let report = analyze(&pairs, &args.engine.config());
    let mut json = serde_json::to_value(&report)?;
    if let serde_json::Value::Object(map) = &mut json {
        map.insert("probes_per_row".into(), serde_json::to_value(&probes)?);
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
