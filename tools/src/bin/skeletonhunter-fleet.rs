//! `skeletonhunter-fleet`: a synthetic fleet of exporters in one process
//! (see `skeletonhunter_tools::fleet`), for scale tests of stores,
//! scrapers and the localizer without thousands of processes.

use anyhow::{Context, Result};
use clap::{error::ErrorKind, CommandFactory, Parser};
use serde_json::json;
use skeletonhunter_exporter::model::HistogramMode;
use skeletonhunter_localizer::sim::{Fabric, FabricSpec};
use skeletonhunter_tools::fleet::{
    parse_fault, shape_for_pairs, write_file_sd, Effect, Fleet, FleetServer, FleetSpec,
};
use skeletonhunter_tools::sys::SignalSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Serve the /metrics of a simulated fleet of skeletonhunter exporters.
#[derive(Debug, Parser)]
#[command(
    name = "skeletonhunter-fleet",
    version,
    long_about = "Serve the /metrics of a simulated fleet of skeletonhunter exporters from one process, \
so a real scraper (Prometheus, vmagent) sees thousands of targets without thousands of processes.\n\n\
The fabric is the localizer simulator's (hosts x rails containers, ToRs per rail, spine blocks; \
skeleton pairs: a ring in each host, a ring on each rail, strides of one ToR segment and half the \
fabric). Each node is a real exporter metrics registry served at /node/<index>/metrics (classic \
text, OpenMetrics, protobuf with native histograms, gzip, as the exporter negotiates); node i is a \
target of port i mod --ports. Every --tick the UDP probe counters of every pair advance by \
--probe-rate probes a second; --fault specs lose or delay the probes of the pairs whose path \
crosses a component. /-/stats gives the scrape counts as JSON (bytes before gzip).\n\n\
On start it prints one JSON line (ports, nodes, pairs, the faults with their component ids) and \
writes --targets-file; it runs until SIGINT or SIGTERM."
)]
struct Args {
    /// Size the fabric to at least this many probe pairs (whole ToR segments of hosts).
    #[arg(long, value_name = "N", conflicts_with = "hosts")]
    pairs: Option<usize>,
    /// Hosts of the fabric (default 64 unless --pairs is given).
    #[arg(long, value_name = "N")]
    hosts: Option<usize>,
    /// NICs (rails) per host.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64), value_name = "N")]
    rails: u16,
    /// Containers sharing a NIC.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64), value_name = "N")]
    nodes_per_nic: u16,
    /// Hosts under one ToR per rail.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=4096), value_name = "N")]
    hosts_per_tor: u16,
    /// ToR segments sharing a spine block.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=4096), value_name = "N")]
    tors_per_spine: u16,
    /// Loopback ports to serve on.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256), value_name = "N")]
    ports: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    listen_address: IpAddr,
    /// First port (the others follow it); 0: free ports chosen by the kernel.
    #[arg(long, default_value_t = 0, value_name = "PORT")]
    base_port: u16,
    /// RTT histograms as the exporter's metrics.histograms: classic, native or both.
    #[arg(long, default_value = "classic", value_name = "MODE")]
    histograms: HistogramMode,
    /// A fault: <kind>=<name>:loss=<ratio> or <kind>=<name>:latency=<duration>, kind one of
    /// node, nic, host, tor, spine, name a component id or its index among that kind's
    /// components (e.g. tor=3:loss=0.05, spine=0:latency=200us). Repeatable.
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<String>,
    /// Write the targets as a Prometheus file_sd JSON file here.
    #[arg(long, value_name = "FILE")]
    targets_file: Option<PathBuf>,
    /// How often the driver advances the probe counters.
    #[arg(long, default_value = "1s", value_parser = tick, value_name = "DURATION")]
    tick: Duration,
    /// UDP probes per second on every pair.
    #[arg(long, default_value_t = 10.0, value_parser = probe_rate, value_name = "RATE")]
    probe_rate: f64,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn tick(s: &str) -> Result<Duration, String> {
    match skeletonhunter_common::duration::parse(s) {
        Ok(d) if d >= Duration::from_millis(10) && d <= Duration::from_secs(60) => Ok(d),
        Ok(_) => Err("must be between 10ms and 60s".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn probe_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 10_000.0 => Ok(r),
        _ => Err("must be a number of probes per second in (0, 10000]".into()),
    }
}

/// The fabric shape the flags ask for.
fn shape(a: &Args) -> FabricSpec {
    let base = FabricSpec {
        hosts: a.hosts.unwrap_or(64),
        rails: a.rails.into(),
        nodes_per_nic: a.nodes_per_nic.into(),
        hosts_per_tor: a.hosts_per_tor.into(),
        tors_per_spine: a.tors_per_spine.into(),
        ..FabricSpec::default()
    };
    match a.pairs {
        Some(n) => shape_for_pairs(&base, n),
        None => base,
    }
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("skeletonhunter-fleet: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    // Blocked before any thread starts, so only `wait` below sees them.
    let signals = SignalSet::new(&[libc::SIGINT, libc::SIGTERM]).context("signal set")?;
    signals.block().context("block signals")?;
    let spec = FleetSpec {
        fabric: shape(&args),
        histograms: args.histograms,
        probe_rate: args.probe_rate,
        seed: args.seed,
    };
    let fleet = Arc::new(Fleet::new(spec));
    let faults = faults(fleet.fabric(), &args.faults);
    fleet.set_faults(&faults.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>());
    let listen: Vec<SocketAddr> = (0..args.ports)
        .map(|i| {
            let port = if args.base_port == 0 {
                0
            } else {
                args.base_port.saturating_add(i)
            };
            SocketAddr::new(args.listen_address, port)
        })
        .collect();
    let server = FleetServer::start(fleet.clone(), &listen, args.tick)?;
    if let Some(path) = &args.targets_file {
        write_file_sd(path, server.addrs(), fleet.nodes())?;
    }
    let summary = json!({
        "ports": server.addrs().iter().map(SocketAddr::port).collect::<Vec<_>>(),
        "nodes": fleet.nodes(),
        "pairs": fleet.fabric().pairs.len(),
        "histograms": args.histograms.as_str(),
        "faults": faults.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
        "targets_file": args.targets_file,
    });
    println!("{summary}");
    let sig = signals.wait().context("wait for a signal")?;
    eprintln!("skeletonhunter-fleet: signal {sig}: stopping");
    drop(server);
    Ok(())
}

/// The `--fault` specs parsed against `fabric`, each with its JSON summary;
/// a bad one exits 2 naming the flag.
fn faults(
    fabric: &Fabric,
    specs: &[String],
) -> Vec<(skeletonhunter_tools::fleet::FleetFault, serde_json::Value)> {
    specs
        .iter()
        .map(|s| match parse_fault(fabric, s) {
            Ok(f) => {
                let (effect, value) = match f.effect {
                    Effect::Loss(r) => ("loss", r),
                    Effect::Latency(d) => ("latency_seconds", d.as_secs_f64()),
                };
                let v =
                    json!({"kind": f.component.kind.as_str(), "id": f.component.id, effect: value});
                (f, v)
            }
            Err(e) => Args::command()
                .error(
                    ErrorKind::ValueValidation,
                    format!("invalid value for --fault: {e}"),
                )
                .exit(),
        })
        .collect()
}
