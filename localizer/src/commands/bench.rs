//! `skeletonhunter-localizer bench`: accuracy over simulated scenarios and
//! the speed case; prints figures.

use crate::engine::model::Config;
use crate::sim::{bench, linkbench};
use std::io::Write;
use std::path::PathBuf;

/// Flags of `bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Number of accuracy scenarios.
    #[arg(long, default_value_t = 240)]
    pub scenarios: usize,
    /// Number of multipath scenarios (spine members, K flows per pair,
    /// faults on one ECMP member link or a whole member); 0 skips them.
    #[arg(long, default_value_t = 120)]
    pub link_scenarios: usize,
    /// Hosts of the speed case (8 rails each); 0 skips it.
    #[arg(long, default_value_t = 1024)]
    pub speed_hosts: usize,
    /// Where to write the speed-case CSV (default: a temporary file,
    /// removed afterwards).
    #[arg(long)]
    pub speed_csv: Option<PathBuf>,
    #[arg(long, default_value_t = 7)]
    #[allow(missing_docs)]
    pub seed: u64,
    /// Instead of the benchmark, print the truth and both reports of
    /// accuracy scenario K (to investigate a miss).
    #[arg(long, value_name = "K")]
    pub show: Option<usize>,
    /// Instead of the benchmark, print the truth and the engine's report of
    /// multipath scenario K.
    #[arg(long, value_name = "K")]
    pub show_link: Option<usize>,
}

/// Run the benchmark (or show one scenario).
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if let Some(k) = args.show {
        writeln!(stdout, "{}", bench::show(k, args.seed, &Config::default())?)?;
        return Ok(());
    }
    if let Some(k) = args.show_link {
        let shown = linkbench::show_link(k, args.seed, &Config::default())?;
        writeln!(stdout, "{shown}")?;
        return Ok(());
    }
    if args.speed_hosts > 0 {
        let r = bench::speed(args.speed_hosts, args.speed_csv.as_deref(), args.seed)?;
        writeln!(stdout, "{r}")?;
    }
    if args.scenarios > 0 {
        let r = bench::accuracy(args.scenarios, args.seed, &Config::default());
        writeln!(stdout, "{r}")?;
    }
    if args.link_scenarios > 0 {
        let r = linkbench::run_links(args.link_scenarios, args.seed, &Config::default());
        writeln!(
            stdout,
            "multipath (ECMP members, multi-flow probing, link faults):"
        )?;
        writeln!(stdout, "{r}")?;
    }
    Ok(())
}
