//! `skeletonhunter-localizer simulate`: a simulated ping log (CSV) and its
//! ground truth (JSON on stderr).

use crate::sim::fabric::{Fabric, FabricSpec};
use crate::sim::scenario::{parse_fault, Scenario};
use crate::sim::write_csv;
use anyhow::{bail, Context};
use std::path::PathBuf;

/// Flags of `simulate`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub fabric: FabricArgs,
    /// Faults to inject: `kind=index:symptom[:severity[:ecmp_fraction]]`,
    /// e.g. `tor=3:loss:0.02` or `spine=0:latency:20e-6:0.3`.
    #[arg(long = "fault")]
    pub faults: Vec<String>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file (default: stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Fabric shape on the command line.
#[derive(Debug, Clone, clap::Args)]
#[allow(missing_docs)]
pub struct FabricArgs {
    #[arg(long, default_value_t = 64)]
    pub hosts: usize,
    #[arg(long, default_value_t = 4)]
    pub rails: usize,
    #[arg(long, default_value_t = 1)]
    pub nodes_per_nic: usize,
    #[arg(long, default_value_t = 16)]
    pub hosts_per_tor: usize,
    #[arg(long, default_value_t = 2)]
    pub tors_per_spine: usize,
    #[arg(long, default_value_t = 6)]
    pub rounds: usize,
    #[arg(long, default_value_t = 100)]
    pub packets_per_round: u32,
}

impl FabricArgs {
    /// The fabric shape, each dimension at least 1 and the size bounded.
    pub fn into_spec(self) -> anyhow::Result<FabricSpec> {
        let spec = FabricSpec {
            hosts: self.hosts,
            rails: self.rails,
            nodes_per_nic: self.nodes_per_nic,
            hosts_per_tor: self.hosts_per_tor,
            tors_per_spine: self.tors_per_spine,
            rounds: self.rounds,
            packets_per_round: self.packets_per_round,
        };
        for (name, v) in [
            ("--hosts", spec.hosts),
            ("--rails", spec.rails),
            ("--nodes-per-nic", spec.nodes_per_nic),
            ("--hosts-per-tor", spec.hosts_per_tor),
            ("--tors-per-spine", spec.tors_per_spine),
            ("--rounds", spec.rounds),
            ("--packets-per-round", spec.packets_per_round as usize),
        ] {
            if v == 0 {
                bail!("{name} must be at least 1");
            }
        }
        if spec.hosts * spec.rails * spec.nodes_per_nic > 1 << 22 {
            bail!("fabric too large (more than 4M containers)");
        }
        Ok(spec)
    }
}

/// Build the fabric, inject the faults, write the log and the truth.
pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let fabric = Fabric::new(args.fabric.into_spec()?);
    let faults = args
        .faults
        .iter()
        .map(|f| parse_fault(&fabric, f))
        .collect::<Result<Vec<_>, _>>()?;
    let scenario = Scenario {
        faults,
        ..Scenario::healthy(args.seed)
    };
    match args.out {
        Some(path) => {
            let file = std::fs::File::create(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            write_csv(&fabric, &scenario, std::io::BufWriter::new(file))?;
        }
        None => write_csv(&fabric, &scenario, std::io::stdout().lock())?,
    }
    eprintln!("{}", serde_json::to_string(&scenario.faults)?);
    Ok(())
}
