//! `skeletonhunter-localizer`: parse the command line, set up logging, hand
//! over to the subcommand, and turn its error into an exit status: 2 for bad
//! input (clap's usage errors, bad flags and files, `analyze`'s
//! [`analyze::AnalyzeError`]), 1 for any other failure.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use skeletonhunter_localizer::commands::{analyze, bench, flags, jobs, rules, run, simulate};

#[derive(Parser)]
#[command(
    name = "skeletonhunter-localizer",
    version = skeletonhunter_common::build::VERSION_TEXT,
    about = "SkeletonHunter localizer: network tomography over probe results"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Localize faults in a ping log (SkeletonHunter CSV schema); JSON on stdout.
    Analyze(analyze::AnalyzeArgs),
    /// Write a simulated ping log of a rail-optimized fabric (CSV on stdout or
    /// to --out) and its ground truth (JSON on stderr).
    Simulate(simulate::SimulateArgs),
    /// Localize online: query Prometheus every cycle, alert via Alertmanager.
    Run(Box<run::RunArgs>),
    /// Generate recording rules for the topology Prometheus sees.
    Rules(rules::RulesArgs),
    /// Accuracy over simulated scenarios and the speed case; prints figures.
    Bench(bench::BenchArgs),
    /// Training jobs' communication groups (TP, DP, PP) and grid from their
    /// skeletons; JSON in (--input), JSON on stdout.
    Jobs(jobs::JobsArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Run(args) => {
            skeletonhunter_common::logging::init(&args.log.directive(), args.log.log_format);
            for (old, new) in args.deprecated_flags() {
                tracing::warn!(
                    "flag {old} is deprecated and will be removed in the next release; use {new}"
                );
            }
            run::run(*args)
        }
        Command::Rules(args) => {
            skeletonhunter_common::logging::init("warn", Default::default());
            rules::run(args)
        }
        Command::Bench(args) => bench::run(args),
        Command::Jobs(args) => jobs::run(args),
    };
    if let Err(e) = result {
        eprintln!("skeletonhunter-localizer: {e:#}");
        // Bad flags, files or input exit 2, like clap's usage errors;
        // failures while running exit 1.
        let bad_input = e.downcast_ref::<flags::BadInput>().is_some()
            || e.downcast_ref::<analyze::AnalyzeError>().is_some();
        std::process::exit(if bad_input { 2 } else { 1 });
    }
}
