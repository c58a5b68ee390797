//! The timing a cluster gets without extra flags, read from the shipped
//! files: the exporter's probe interval (its ConfigMap), the exporters'
//! scrape interval (the PodMonitor), and the localizer's flags (its
//! Deployment), parsed by the localizer's own flag parser so its cycle
//! and window are the binary's defaults unless the Deployment sets them.
//! Alertmanager runs the shipped `alertmanager.yml` in every stack.

use super::opts::{StackOpts, Timing};
use crate::deploy::{find, manifests};
use anyhow::{Context, Result};
use clap::Parser;
use serde_json::Value;
use skeletonhunter_common::duration;
use skeletonhunter_localizer::commands::run::RunArgs;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of the Deployment that name where things are, not how the
/// localizer behaves: the stack puts its own addresses there.
const ENDPOINT_FLAGS: [&str; 3] = ["--prometheus", "--alertmanager", "--web.listen-address"];

/// prometheus-operator's default rule evaluation interval (the shipped
/// files set none). Rules do not page: the localizer posts its verdicts.
const OPERATOR_EVALUATION_INTERVAL: Duration = Duration::from_secs(30);

/// The localizer's command line as the flag parser reads it.
#[derive(Parser)]
struct LocalizerCli {
    #[command(flatten)]
    run: RunArgs,
}

impl StackOpts {
    /// The stack as shipped: intervals and localizer flags from the
    /// deployment files, the shipped Alertmanager config (as always).
    /// What stays the fabric's own: addresses, the protocols a namespace
    /// can probe (UDP, TCP) and `min_latency_excess` (veth jitter).
    pub fn shipped(exporter_bin: PathBuf, localizer_bin: PathBuf) -> Result<StackOpts> {
        let objs = manifests()?;
        let exporter = find(&objs, "ConfigMap", "skeletonhunter-exporter")?;
        let config: Value = yaml_serde::from_str(
            exporter["data"]["exporter.yaml"]
                .as_str()
                .context("the exporter ConfigMap has no data.exporter.yaml")?,
        )
        .context("the shipped exporter.yaml")?;
        let probe_interval = interval(&config["probe"]["interval"], "probe.interval")?;
        let monitor = find(&objs, "PodMonitor", "skeletonhunter-exporter")?;
        let scrape_interval = interval(
            &monitor["spec"]["podMetricsEndpoints"][0]["interval"],
            "the exporter PodMonitor's interval",
        )?;
        let deployment = find(&objs, "Deployment", "skeletonhunter-localizer")?;
        let args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .context("the localizer Deployment has no args")?
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        let flags = args.iter().skip_while(|a| *a == "run");
        let cli = LocalizerCli::try_parse_from(
            std::iter::once("localizer").chain(flags.clone().map(String::as_str)),
        )
        .context("the localizer Deployment's args")?;
        let localizer_args = flags
            .filter(|a| {
                !ENDPOINT_FLAGS
                    .iter()
                    .any(|f| a.split('=').next() == Some(f))
            })
            .cloned()
            .collect();
        let mut opts = StackOpts::new(exporter_bin, Some(localizer_bin));
        opts.timing = Timing::Shipped;
        opts.probe_interval = probe_interval;
        opts.scrape_interval = scrape_interval;
        opts.evaluation_interval = OPERATOR_EVALUATION_INTERVAL;
        opts.localizer_interval = cli.run.interval;
        opts.localizer_window = cli.run.window;
        opts.localizer_args = localizer_args;
        Ok(opts)
    }
}

/// A duration field of a shipped file.
fn interval(v: &Value, what: &str) -> Result<Duration> {
    let text = v.as_str().with_context(|| format!("{what} is not set"))?;
    duration::parse(text).with_context(|| format!("{what}: {text:?}"))
}
