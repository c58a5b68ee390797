//! The configuration files of the stack: each exporter's YAML, Prometheus's
//! scrape config, and the shipped `rules/` and `alertmanager/` files.

use super::opts::{StackOpts, Timing};
use super::ports;
use super::topology::{Fabric, Node};
use crate::repo::{repo_root, PAIR_DETAIL_RULES};
use anyhow::{Context, Result};
use skeletonhunter_common::topology::Kind;
use std::path::PathBuf;
use std::time::Duration;

/// A duration as config text: whole seconds (`2s`) or milliseconds (`200ms`).
pub(super) fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The exporter's YAML configuration for `node`: its identity, its skeleton
/// peers (static), short probe intervals, metrics on the management address.
pub fn exporter_config(fabric: &Fabric, node: &Node, opts: &StackOpts) -> String {
    exporter_config_traffic(fabric, node, opts, "  ebpf: false\n")
}

/// [`exporter_config`] with `traffic` as its `discovery.ebpf` lines.
fn exporter_config_traffic(
    fabric: &Fabric,
    node: &Node,
    opts: &StackOpts,
    traffic: &str,
) -> String {
    let id = &node.identity;
    let mut y = String::new();
    y.push_str(&format!(
        "listen: \"{}:{}\"\n",
        node.mgmt_ip,
        ports::EXPORTER_METRICS
    ));
    y.push_str("identity:\n");
    // The configuration keys are the kinds' names (the label names differ).
    for k in Kind::ALL {
        y.push_str(&format!("  {k}: \"{}\"\n", id.get(k)));
    }
    y.push_str(&format!(
        "responder:\n  udp: \"{ip}:{u}\"\n  tcp: \"{ip}:{t}\"\n",
        ip = node.data_ip,
        u = ports::EXPORTER_UDP,
        t = ports::EXPORTER_TCP
    ));
    y.push_str(&format!(
        "probe:\n  interval: {}\n  protocols: [udp, tcp]\n  udp_port: {}\n  tcp_port: {}\n",
        secs(opts.probe_interval),
        ports::EXPORTER_UDP,
        ports::EXPORTER_TCP
    ));
    if opts.timing == Timing::Test {
        let timeout = (opts.probe_interval * 2).min(Duration::from_secs(1));
        y.push_str(&format!("  timeout: {}\n", secs(timeout)));
        // Per-flow and per-path loss over the localizer's window, as the
        // defaults have it (both 1m): the localizer reads a path's ratio as
        // covering its own window.
        y.push_str(&format!("  flow_window: {}\n", secs(opts.localizer_window)));
    }
    if fabric.spines.len() > 1 {
        // One path per spine; flows mapped within seconds of start.
        y.push_str(&format!(
            "  ecmp_width: {}\n  flow_traces_per_minute: 600\n",
            fabric.spines.len()
        ));
    }
    if let Some(k) = opts.flows {
        y.push_str(&format!("  flows: {k}\n"));
    }
    y.push_str("discovery:\n");
    y.push_str(traffic);
    y.push_str("  static:\n");
    for p in fabric.peers_of(node) {
        y.push_str(&format!(
            "    - {{address: \"{}\", name: \"{}\"}}\n",
            p.data_ip, p.identity.node
        ));
    }
    y
}

/// The configuration of a host's one exporter ([`Fabric::underlay`]'s
/// `host_node`) that also probes from inside the host's containers: the
/// cgroups `pattern` selects under `root`, each container's peers learned
/// from its own connections (polled every second; a connection open for 2 s
/// makes a peer).
pub fn container_host_config(
    fabric: &Fabric,
    host_node: &Node,
    opts: &StackOpts,
    pattern: &str,
    root: &std::path::Path,
) -> String {
    let traffic = "  ebpf:\n    mode: poll\n    poll_interval: 1s\n    long_lived: 2s\n";
    let y = exporter_config_traffic(fabric, host_node, opts, traffic);
    format!(
        "{y}containers:\n  cgroups: [\"{pattern}\"]\n  cgroup_root: \"{}\"\n  rescan: 1s\n",
        root.display()
    )
}

/// Prometheus configuration: every exporter by management address, the
/// localizer, the shipped rule files, and
/// Alertmanager.
pub fn prometheus_config(fabric: &Fabric, opts: &StackOpts, rule_files: &[String]) -> String {
    prometheus_config_of(fabric, opts, rule_files, &|_| true)
}

/// [`prometheus_config`] with only the exporters of the nodes `scraped`
/// keeps as targets: the others' pods are gone, and service discovery
/// lists them no more. A kept target keeps its index (its pod name).
pub fn prometheus_config_of(
    fabric: &Fabric,
    opts: &StackOpts,
    rule_files: &[String],
    scraped: &dyn Fn(&Node) -> bool,
) -> String {
    let (iv, ev) = (secs(opts.scrape_interval), secs(opts.evaluation_interval));
    let mut y = format!(
        "global:\n  scrape_interval: {iv}\n  evaluation_interval: {ev}\n  scrape_timeout: {iv}\n"
    );
    y.push_str("rule_files:\n");
    for r in rule_files {
        y.push_str(&format!("  - \"{r}\"\n"));
    }
    y.push_str(&format!(
        "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"127.0.0.1:{}\"]\n",
        ports::ALERTMANAGER
    ));
    y.push_str("scrape_configs:\n  - job_name: skeletonhunter-exporter\n    static_configs:\n");
    // Every target carries the target labels Kubernetes and
    // prometheus-operator attach, with values unlike any topology value, as
    // in a cluster: every test runs with the label collisions of one.
    for (i, n) in fabric.probers().enumerate().filter(|(_, n)| scraped(n)) {
        y.push_str(&format!(
            "      - targets: [\"{}:{}\"]\n        labels: {}\n",
            n.mgmt_ip,
            ports::EXPORTER_METRICS,
            kubernetes_target_labels("skeletonhunter-exporter", i)
        ));
    }
    if opts.localizer_bin.is_some() {
        y.push_str(&format!(
            "  - job_name: skeletonhunter-localizer\n    static_configs:\n      - targets: [\"127.0.0.1:{}\"]\n        labels: {}\n",
            ports::LOCALIZER,
            kubernetes_target_labels("skeletonhunter-localizer", 0)
        ));
    }
    y
}

/// The target labels (a YAML flow map) a Kubernetes scrape attaches to the
/// `index`th pod of `app`: every name of
/// [`RESERVED_TARGET_LABELS`](skeletonhunter_common::topology::RESERVED_TARGET_LABELS)
/// except `job` and `instance`, which Prometheus sets itself. The values
/// (`k8s-worker-3`, `<app>-7f9c-3`) are never topology values.
pub fn kubernetes_target_labels(app: &str, index: usize) -> String {
    format!(
        "{{namespace: \"monitoring\", pod: \"{app}-7f9c-{index}\", container: \"{app}\", \
         node: \"k8s-worker-{index}\", service: \"{app}\", endpoint: \"metrics\"}}"
    )
}

/// Rule files of `dir` (`*.yml`/`*.yaml`, not the promtool unit tests
/// `*_test.yml`/`*.test.yml`): (relative name, path), sorted.
fn rule_files_of(dir: &str) -> Result<Vec<(String, PathBuf)>> {
    let path = repo_root().join(dir);
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&path) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    for e in entries {
        let p = e?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let is_yaml = name.ends_with(".yml") || name.ends_with(".yaml");
        let is_test = name.contains("_test.") || name.contains(".test.");
        if p.is_file() && is_yaml && !is_test {
            out.push((format!("{dir}/{name}"), p));
        }
    }
    out.sort();
    Ok(out)
}

/// The default rule files, `rules/*.yml`: the set that costs the same at
/// any number of pairs.
pub fn default_rule_files() -> Result<Vec<(String, PathBuf)>> {
    rule_files_of("rules")
}

/// The opt-in per-pair detail, `rules/pair-detail/*.yml`: recordings and
/// pair alerts loaded beside the default files.
pub fn pair_detail_rule_files() -> Result<Vec<(String, PathBuf)>> {
    rule_files_of(PAIR_DETAIL_RULES)
}

/// Every shipped rule file, the default ones and the pair detail:
/// (relative name such as `rules/pair-detail/skeletonhunter.rules.yml`,
/// path).
pub fn shipped_rule_files() -> Result<Vec<(String, PathBuf)>> {
    let mut out = default_rule_files()?;
    out.extend(pair_detail_rule_files()?);
    Ok(out)
}

/// The shipped Alertmanager config and every other file of `alertmanager/`
/// (templates), relative to the directory.
pub(super) fn shipped_alertmanager_files() -> Result<(String, Vec<(String, PathBuf)>)> {
    let dir = repo_root().join("alertmanager");
    let config = dir.join("alertmanager.yml");
    let text = std::fs::read_to_string(&config)
        .with_context(|| format!("read the shipped {}", config.display()))?;
    let mut files = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("read {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p != config {
                let rel = p.strip_prefix(&dir)?.to_string_lossy().into_owned();
                files.push((rel, p));
            }
        }
    }
    Ok((text, files))
}
