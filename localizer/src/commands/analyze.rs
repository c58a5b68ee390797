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
    #[arg(long, default_value_t = csv::DEFAULT_PACKETS_PER_ROUND)]
    pub packets_per_round: f64,
    /// Pretty-print the JSON.
    #[arg(long)]
    pub pretty: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub engine: EngineArgs,
}

/// Read, analyze, print.
pub fn run(args: AnalyzeArgs) -> anyhow::Result<()> {
    let packets_per_round = args.packets_per_round;
    anyhow::ensure!(
        packets_per_round.is_finite() && packets_per_round >= 1.0,
        "--packets-per-round must be at least 1, got {packets_per_round}"
    );
    let opts = CsvOptions { packets_per_round };
    let pairs = if args.pings.as_os_str() == "-" {
        csv::read_pings(std::io::stdin().lock(), &opts).context("reading standard input")?
    } else {
        csv::read_pings_file(&args.pings, &opts)?
    };
    let report = analyze(&pairs, &args.engine.config());
    let out = if args.pretty {
        serde_json::to_string_pretty(&report)?
    } else {
        serde_json::to_string(&report)?
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")?;
    Ok(())
}
