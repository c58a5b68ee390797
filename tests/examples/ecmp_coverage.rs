//! ECMP coverage benchmark: on the multipath fabric (3 ToRs × 2 hosts
//! under 3 spines, L4 multipath hashing), the share of a pair's equal-cost
//! paths its probe flows cross — every flow is probed once per rotation of
//! K probe intervals, so this is the share of paths probed per pair per
//! rotation — against the flow count K: 1 (the single flow of old), 2, 4,
//! 8 and the coverage formula's default for 3 paths (15). Which spine each
//! flow crosses is read from the exporters' own per-flow Paris traces.
//! Each trial starts the exporters afresh (new source ports, so new
//! hashes).
//!
//! Run as root after `cargo build --workspace`:
//!
//! ```sh
//! cargo run -p skeletonhunter-tests --example ecmp_coverage
//! COVERAGE_TRIALS=5 cargo run -p skeletonhunter-tests --example ecmp_coverage
//! ```

use anyhow::{ensure, Context, Result};
use skeletonhunter_tools::fabric::{
    flow_traces, spines_by_pair, start_exporters, Fabric, FabricSpec, StackOpts,
};
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{bin_path, sys::geteuid, wait_until};
use std::time::Duration;

/// Flow counts measured; 15 is the default for 3 paths.
const FLOWS: [usize; 5] = [1, 2, 4, 8, 15];

/// (pairs, mean share of paths covered, pairs with every path covered)
/// of one trial with `k` flows.
fn trial(f: &Fabric, opts: &StackOpts, k: usize) -> Result<(usize, f64, usize)> {
    let dir = TempDir::new("coverage")?;
    let exporters = start_exporters(f, opts, dir.path())?;
    let width = f.spines.len();
    // Cross-ToR peers of every node: those crossing a spine.
    let expected: usize = f
        .nodes
        .iter()
        .map(|n| {
            f.skeleton_peers(n)
                .iter()
                .filter(|p| p.tor != n.tor)
                .count()
        })
        .sum();
    let covered = wait_until(
        "every cross-ToR flow mapped",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || {
            let mut traces = Vec::new();
            for n in &f.nodes {
                traces.push((n.identity.node.clone(), flow_traces(f, n).ok()?));
            }
            let by_pair = spines_by_pair(f, &traces, k);
            (by_pair.len() == expected).then_some(by_pair)
        },
    )
    .with_context(|| format!("{} flows; log: {}", k, exporters[0].log()))?;
    drop(exporters);
    let shares: Vec<f64> = covered
        .values()
        .map(|s| s.len() as f64 / width as f64)
        .collect();
    let full = covered.values().filter(|s| s.len() == width).count();
    Ok((
        shares.len(),
        shares.iter().sum::<f64>() / shares.len().max(1) as f64,
        full,
    ))
}

fn main() -> Result<()> {
    ensure!(geteuid() == 0, "run as root (network namespaces)");
    let trials: usize = std::env::var("COVERAGE_TRIALS")
        .ok()
        .map(|v| v.parse().context("COVERAGE_TRIALS: a count"))
        .transpose()?
        .unwrap_or(3);
    let mut opts = StackOpts::new(bin_path("skeletonhunter-exporter"), None);
    opts.spec = FabricSpec::multipath();
    let f = Fabric::new(opts.spec)?;
    let width = f.spines.len();
    println!(
        "{} ToRs x {} hosts, {width} spines (ECMP width {width}), {trials} trials per row",
        f.spec.tors, f.spec.hosts_per_tor
    );
    println!("| flows K | pairs | paths covered per pair (mean) | pairs with every path covered | expected 1-(1-1/W)^K |");
    println!("|---|---|---|---|---|");
    for k in FLOWS {
        opts.flows = Some(k as u32);
        let (mut pairs, mut sum, mut full) = (0, 0.0, 0);
        for _ in 0..trials {
            let (p, mean, f_) = trial(&f, &opts, k)?;
            pairs += p;
            sum += mean * p as f64;
            full += f_;
        }
        // The formula of exporter/src/config/ecmp.rs, for comparison.
        let expected = 1.0 - (1.0 - 1.0 / width as f64).powi(k as i32);
        println!(
            "| {k} | {pairs} | {:.1} % | {full} / {pairs} ({:.0} %) | {:.1} % |",
            100.0 * sum / pairs.max(1) as f64,
            100.0 * full as f64 / pairs.max(1) as f64,
            100.0 * expected
        );
    }
    Ok(())
}
