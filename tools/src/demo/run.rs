//! The demo's six steps, from an empty machine back to one.

use super::args::Args;
use super::args::FaultKind;
use super::show;
use crate::fabric::{DataPlane, FabricSpec, Stack, StackOpts};
use crate::sys::geteuid;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn step(n: u32, text: &str) {
    println!("\n[{n}/6] {text}");
}

/// Run the demo: build, wait for a healthy baseline, inject the fault,
/// show its localization and alert, remove it, wait for the resolution.
pub fn run(args: &Args) -> Result<()> {
    if geteuid() != 0 {
        bail!("run as root (the demo creates network namespaces and nftables rules)");
    }
    let (fault, loss) = (args.fault, args.loss);
    let (exporter, localizer) = binaries(args.no_localizer)?;
    let mut opts = StackOpts::new(exporter, localizer);
    match fault {
        FaultKind::Link => opts.spec = FabricSpec::multipath(),
        FaultKind::Overlay => (opts.data_plane, opts.from_containers) = (DataPlane::Vxlan, true),
        FaultKind::Tor | FaultKind::Host | FaultKind::Node => {}
    }

    step(1, "building the fabric and starting everything");
    let started = Instant::now();
    let mut stack = Stack::start(&opts)?;
    show::fabric(&stack);

    step(
        2,
        "waiting for a healthy baseline (every skeleton pair probed, no loss)",
    );
    stack.wait_healthy(Duration::from_secs(90))?;
    println!(
        "healthy after {:.1} s: {} exporters scraped, {} skeleton pairs answering",
        started.elapsed().as_secs_f64(),
        stack.fabric.probers().count(),
        stack.skeleton_pairs()
    );
    show::pairs(&stack, "baseline")?;

    let (what, expect) = fault.describe(loss, &stack);
    step(3, &format!("injecting: {what}"));
    let t0 = Instant::now();
    fault.inject(loss, &stack, true)?;

    if stack.localizer.is_none() {
        // Nothing to wait on: the probes' 5 s window fills with the fault.
        std::thread::sleep(Duration::from_secs(8));
        show::pairs(&stack, "with the fault")?;
        step(4, "no localizer: skipping localization and alerting");
    } else {
        step(4, "waiting for the localizer's alert in Alertmanager");
        show::alert(&mut stack, &opts, &expect, t0)?;
    }

    step(5, "removing the fault");
    let t1 = Instant::now();
    fault.inject(loss, &stack, false)?;
    if stack.localizer.is_some() {
        crate::wait_until(
            "the alert to resolve",
            Duration::from_secs(120),
            Duration::from_millis(250),
            || {
                stack
                    .component_alerts()
                    .ok()
                    .filter(std::vec::Vec::is_empty)
            },
        )?;
        println!(
            "alert resolved {:.1} s after the fault was removed",
            t1.elapsed().as_secs_f64()
        );
    }

    step(6, "cleaning up (namespaces, processes, temp files)");
    drop(stack);
    println!("done.");
    Ok(())
}

/// The exporter binary, and the localizer's unless `--no-localizer` or
/// the build has no online loop.
fn binaries(no_localizer: bool) -> Result<(PathBuf, Option<PathBuf>)> {
    let exporter = sibling_bin("skeletonhunter-exporter")?;
    if no_localizer {
        return Ok((exporter, None));
    }
    let bin = sibling_bin("skeletonhunter-localizer")?;
    if online_loop_available(&bin) {
        return Ok((exporter, Some(bin)));
    }
    println!(
        "NOTE: this build's skeletonhunter-localizer has no working `run` \
         subcommand: showing live probe metrics without localization"
    );
    Ok((exporter, None))
}

/// A binary of this workspace next to the demo's own executable.
fn sibling_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locate the demo executable")?;
    let p = exe.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} not found: build the workspace first (cargo build --workspace)",
            p.display()
        );
    }
    Ok(p)
}

/// Whether `localizer run --help` works (the online loop is built in).
fn online_loop_available(bin: &Path) -> bool {
    std::process::Command::new(bin)
        .args(["run", "--help"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
