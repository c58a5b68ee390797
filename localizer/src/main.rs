//! `skeletonhunter-localizer`: thin CLI over the engine in the library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use skeletonhunter_localizer::{analyze, bench, csv, sim, Config};
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "skeletonhunter-localizer",
    version,
    about = "SkeletonHunter localizer: network tomography over probe results"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Localize faults in a ping log (SkeletonHunter CSV schema); JSON on stdout.
    Analyze {
        /// The ping log (`-` for standard input).
        #[arg(long)]
        pings: PathBuf,
        /// Packets per probe round (a row's `loss_rate` is a share of them).
        #[arg(long, default_value_t = csv::DEFAULT_PACKETS_PER_ROUND)]
        packets_per_round: f64,
        /// Pretty-print the JSON.
        #[arg(long)]
        pretty: bool,
        #[command(flatten)]
        engine: skeletonhunter_localizer::EngineArgs,
    },
    /// Write a simulated ping log of a rail-optimized fabric (CSV on stdout or
    /// to --out) and its ground truth (JSON on stderr).
    Simulate {
        #[command(flatten)]
        fabric: sim::FabricArgs,
        /// Faults to inject: `kind=index:symptom[:severity[:ecmp_fraction]]`,
        /// e.g. `tor=3:loss:0.02` or `spine=0:latency:20e-6:0.3`.
        #[arg(long = "fault")]
        faults: Vec<String>,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Localize online: query Prometheus every cycle, alert via Alertmanager.
    Run(skeletonhunter_localizer::run::RunArgs),
    /// Generate recording rules for the topology Prometheus sees.
    Rules(skeletonhunter_localizer::rules::RulesArgs),
    /// Accuracy over simulated scenarios and the speed case; prints figures.
    Bench {
        /// Number of accuracy scenarios.
        #[arg(long, default_value_t = 240)]
        scenarios: usize,
        /// Hosts of the speed case (8 rails each); 0 skips it.
        #[arg(long, default_value_t = 1024)]
        speed_hosts: usize,
        /// Where to write the speed-case CSV (default: a temporary file,
        /// removed afterwards).
        #[arg(long)]
        speed_csv: Option<PathBuf>,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Instead of the benchmark, print the truth and both reports of
        /// accuracy scenario K (to investigate a miss).
        #[arg(long, value_name = "K")]
        show: Option<usize>,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("skeletonhunter-localizer: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Analyze {
            pings,
            packets_per_round,
            pretty,
            engine,
        } => {
            anyhow::ensure!(
                packets_per_round.is_finite() && packets_per_round >= 1.0,
                "--packets-per-round must be at least 1, got {packets_per_round}"
            );
            let opts = csv::CsvOptions { packets_per_round };
            let pairs = if pings.as_os_str() == "-" {
                csv::read_pings(std::io::stdin().lock(), &opts).context("reading standard input")?
            } else {
                csv::read_pings_file(&pings, &opts)?
            };
            let report = analyze(&pairs, &engine.config());
            let out = if pretty {
                serde_json::to_string_pretty(&report)?
            } else {
                serde_json::to_string(&report)?
            };
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{out}")?;
            Ok(())
        }
        Command::Simulate {
            fabric,
            faults,
            seed,
            out,
        } => {
            let fabric = sim::Fabric::new(fabric.into_spec()?);
            let faults = faults
                .iter()
                .map(|f| sim::parse_fault(&fabric, f))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let scenario = sim::Scenario {
                faults,
                ..sim::Scenario::healthy(seed)
            };
            match out {
                Some(path) => {
                    let file = std::fs::File::create(&path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    sim::write_csv(&fabric, &scenario, std::io::BufWriter::new(file))?;
                }
                None => sim::write_csv(&fabric, &scenario, std::io::stdout().lock())?,
            }
            eprintln!("{}", serde_json::to_string(&scenario.faults)?);
            Ok(())
        }
        Command::Run(args) => skeletonhunter_localizer::run::main(args),
        Command::Rules(args) => skeletonhunter_localizer::rules::main(args),
        Command::Bench {
            scenarios,
            speed_hosts,
            speed_csv,
            seed,
            show,
        } => {
            let mut stdout = std::io::stdout().lock();
            if let Some(k) = show {
                writeln!(stdout, "{}", bench::show(k, seed, &Config::default())?)?;
                return Ok(());
            }
            if speed_hosts > 0 {
                let r = bench::speed(speed_hosts, speed_csv.as_deref(), seed)?;
                writeln!(stdout, "{r}")?;
            }
            if scenarios > 0 {
                let r = bench::accuracy(scenarios, seed, &Config::default());
                writeln!(stdout, "{r}")?;
            }
            Ok(())
        }
    }
}
