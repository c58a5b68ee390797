//! `skeletonhunter-localizer rules`: read the topology from Prometheus and
//! write the recording rules of [`crate::rulesgen`].

use super::flags::{endpoint_config, positive_duration, BadInput, HistogramsArg};
use crate::clients::Endpoint;
use crate::input::histograms::RttForm;
use crate::input::promql::{topology_from, Queries};
use crate::rulesgen::{check, generate, RulesOptions};
use anyhow::Context;
use skeletonhunter_common::topology::Identity;

/// Flags of `skeletonhunter-localizer rules`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Generate Prometheus recording rules (per-ToR, per-spine, per-tenant loss and RTT) for the topology Prometheus sees",
    long_about = "Read the exporters' skeletonhunter_node_info from Prometheus and write a rule file with one \
loss-ratio and RTT-quantile recording rule per ToR, spine and tenant (names level:metric:operation, e.g. \
tor:skeletonhunter_probe_loss:ratio_rate1m{tor=\"...\"}). Check it with `promtool check rules FILE`; \
re-generate when the topology changes."
)]
pub struct RulesArgs {
    /// Prometheus-compatible API root to read the topology from.
    #[arg(long, env = "SKELETONHUNTER_PROMETHEUS", value_name = "URL")]
    pub prometheus: String,
    /// TLS and credentials for --prometheus: a YAML file in the shape of Prometheus' http_config
    /// (tls_config, basic_auth, authorization, bearer_token_file), as promtool's --http.config.file.
    #[arg(long = "prometheus.http-config-file", value_name = "FILE")]
    pub prometheus_http_config: Option<std::path::PathBuf>,
    /// Write the rules here instead of stdout (replaced atomically).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Rate window of the rules, a PromQL duration.
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub window: String,
    /// Evaluation interval of the generated groups (default: Prometheus' global one).
    #[arg(long, value_name = "DURATION")]
    pub evaluation_interval: Option<String>,
    /// RTT quantiles to record; repeat or separate with commas.
    #[arg(long = "quantile", default_values_t = [0.5, 0.9, 0.99], value_delimiter = ',', value_name = "Q")]
    pub quantiles: Vec<f64>,
    /// How far back to look for skeletonhunter_node_info.
    #[arg(long, default_value = "1h", value_parser = positive_duration, value_name = "DURATION")]
    pub topology_window: std::time::Duration,
    /// Extra PromQL label matchers for the topology query and every generated selector,
    /// e.g. 'job="skeletonhunter-exporter"'.
    #[arg(long, value_name = "MATCHERS")]
    pub matchers: Option<String>,
    /// Which RTT histogram series the quantile rules read: classic (_bucket; the same rules as
    /// rules/pair-detail/skeletonhunter.aggregates.yml), native (one native-histogram series a pair; a store
    /// with native histograms), or auto: native where a series has it, else classic (`or`).
    #[arg(long, value_enum, default_value_t = HistogramsArg::Classic, value_name = "MODE")]
    pub histograms: HistogramsArg,
    /// HTTP timeout of the topology queries.
    #[arg(long, default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub timeout: std::time::Duration,
}

/// Entry point of `skeletonhunter-localizer rules` (logging is set up by
/// the caller).
pub fn run(args: RulesArgs) -> anyhow::Result<()> {
    let opts = RulesOptions {
        window: args.window.clone(),
        interval: args.evaluation_interval.clone(),
        quantiles: args.quantiles.clone(),
        matchers: args.matchers.clone(),
        histograms: args.histograms.rules_form(),
    };
    // Fail on bad options before touching the network.
    check(&opts)?;
    let nodes = read_topology(&args)?;
    let text = generate(&nodes, &opts)?;
    match &args.output {
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(text.as_bytes())
                .context("writing to stdout failed")?;
        }
        Some(path) => {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, &text)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", tmp.display()))?;
            std::fs::rename(&tmp, path).map_err(|e| {
                anyhow::anyhow!("cannot move {} to {}: {e}", tmp.display(), path.display())
            })?;
        }
    }
    Ok(())
}

/// The node identities Prometheus sees, sorted by node id.
fn read_topology(args: &RulesArgs) -> anyhow::Result<Vec<Identity>> {
    let http = endpoint_config(
        "--prometheus.http-config-file",
        args.prometheus_http_config.as_deref(),
    )?;
    let client = Endpoint::new(&args.prometheus, args.timeout, &http)
        .map_err(|e| BadInput(format!("--prometheus: {e}")))?;
    let queries = Queries::new(
        args.topology_window,
        args.topology_window,
        args.matchers.as_deref(),
        RttForm::Classic,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    let (now, recent) = rt.block_on(async {
        tokio::join!(
            client.instant(&queries.topology_now, None),
            client.instant(&queries.topology_recent, None)
        )
    });
    let now = now.map_err(|e| anyhow::anyhow!("reading the topology failed: {e}"))?;
    let recent = recent.map_err(|e| anyhow::anyhow!("reading the topology failed: {e}"))?;
    let (topology, conflicts) = topology_from(&now, &recent);
    if topology.is_empty() {
        tracing::warn!(
            "no skeletonhunter_node_info at {}: writing an empty rule file",
            client.shown_url()
        );
    }
    if !conflicts.is_empty() {
        tracing::warn!(
            "{} node(s) report several identities (e.g. {}); using one",
            conflicts.len(),
            conflicts[0]
        );
    }
    let mut nodes: Vec<Identity> = topology.into_values().collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    Ok(nodes)
}
