//! The topology labels under a Kubernetes scrape: real exporters and a
//! localizer on a small fabric, scraped by a real Prometheus whose targets
//! carry every target label Kubernetes service discovery and
//! prometheus-operator attach (`pod`, `node`, `namespace`, `container`,
//! `service`, `endpoint`, plus `job` and `instance`), with values unlike any
//! topology value and without `honor_labels`. The shipped recording rules
//! must join on the network topology, never on the Kubernetes names, no
//! exposed label may be renamed to `exported_*`, and the localizer must read
//! every node's identity.
//!
//! With the old vocabulary (topology labels `node` and `pod`) Prometheus
//! renamed the exposed ones to `exported_node`/`exported_pod`, the rules
//! joined pairs on the Kubernetes node name (so no pair had a topology) and
//! the localizer knew no node: every check below failed.

use anyhow::{ensure, Context, Result};
use serde_json::Value;
use skeletonhunter_common::topology::{Identity, Kind, RESERVED_TARGET_LABELS};
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::fabric::{FabricSpec, Stack, StackOpts};
use skeletonhunter_tools::{bin_path, wait_until};
use std::collections::BTreeMap;
use std::time::Duration;

/// A metric label of a query result ("" when absent).
fn label<'a>(series: &'a Value, name: &str) -> &'a str {
    series["metric"][name].as_str().unwrap_or("")
}

/// Every side of every topology series names the identity the fabric gave
/// that node; `Err` says which label differs.
fn check_topology(series: &[Value], ids: &BTreeMap<String, Identity>) -> Result<()> {
    for s in series {
        for side in ["src", "dst"] {
            let node = label(s, &format!("{side}_node"));
            let id = ids
                .get(node)
                .with_context(|| format!("{side}_node {node:?} is no fabric node: {s}"))?;
            // The join carries every kind but the NIC.
            for k in Kind::ALL.into_iter().filter(|k| *k != Kind::Nic) {
                let got = label(s, &format!("{side}_{}", k.as_str()));
                ensure!(
                    got == id.get(k),
                    "{side}_{k} is {got:?}, the network's is {:?}: {s}",
                    id.get(k)
                );
            }
        }
    }
    Ok(())
}

#[test]
fn topology_survives_kubernetes_target_labels() -> Result<()> {
    if !require_privileges("topology_survives_kubernetes_target_labels") {
        return Ok(());
    }
    let mut opts = StackOpts::new(
        bin_path("skeletonhunter-exporter"),
        Some(bin_path("skeletonhunter-localizer")),
    );
    opts.spec = FabricSpec {
        tors: 2,
        spines: 1,
        hosts_per_tor: 2,
        containers_per_host: 1,
    };
    let mut stack = Stack::start(&opts)?;
    stack.wait_healthy(Duration::from_secs(90))?;
    let prom = &stack.prometheus;
    let ids: BTreeMap<String, Identity> = stack
        .fabric
        .nodes
        .iter()
        .map(|n| (n.identity.node.clone(), n.identity.clone()))
        .collect();
    let pairs = stack.skeleton_pairs();

    // (a) The recorded topology of every pair is the network's.
    let last = wait_until(
        "every pair joined to its topology by the recording rules",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let s = prom
                .query("topology:skeletonhunter_probe_sent:rate1m")
                .ok()?;
            let by_pair = prom
                .query("count by (src_node, dst_node) (topology:skeletonhunter_probe_sent:rate1m)")
                .ok()?;
            (by_pair.len() == pairs).then_some(s)
        },
    )?;
    check_topology(&last, &ids)?;
    for rule in [
        "src:skeletonhunter_node_info:relabel",
        "dst:skeletonhunter_node_info:relabel",
    ] {
        let side = &rule[..3];
        let s = prom.query(rule)?;
        ensure!(s.len() == ids.len(), "{rule}: {s:?}");
        for x in &s {
            let node = label(x, &format!("{side}_node"));
            let id = ids.get(node).with_context(|| format!("{rule}: {x}"))?;
            ensure!(label(x, &format!("{side}_pod")) == id.pod, "{rule}: {x}");
        }
    }

    // (b) No exposed label was renamed by a target label of the same name.
    let all = prom.query(r#"{__name__=~"skeletonhunter_.+|.+:skeletonhunter_.+"}"#)?;
    ensure!(all.len() > ids.len(), "too few series: {}", all.len());
    for s in &all {
        let names = s["metric"].as_object().context("metric")?;
        let renamed: Vec<&String> = names
            .keys()
            .filter(|k| k.starts_with("exported_"))
            .collect();
        ensure!(renamed.is_empty(), "renamed labels {renamed:?} on {s}");
    }

    // The scrape really attaches the Kubernetes labels beside the exposed
    // topology labels.
    let info = prom.query("skeletonhunter_node_info")?;
    ensure!(info.len() == ids.len(), "node_info series: {info:?}");
    for s in &info {
        let id = ids
            .get(label(s, "node_id"))
            .with_context(|| format!("node_id is no fabric node: {s}"))?;
        ensure!(label(s, "network_pod") == id.pod, "network_pod: {s}");
        ensure!(
            label(s, "node").starts_with("k8s-worker-"),
            "target label node: {s}"
        );
        ensure!(label(s, "pod").contains("-7f9c-"), "target label pod: {s}");
        for l in RESERVED_TARGET_LABELS {
            ensure!(!label(s, l).is_empty(), "target label {l} missing: {s}");
        }
    }

    // The localizer reads every node's identity and drops no pair.
    wait_until(
        "the localizer knowing every node and every pair",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let one = |q: &str| {
                prom.query(q)
                    .ok()?
                    .first()
                    .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
            };
            let nodes = one("skeletonhunter_localizer_nodes")?;
            let observed = one("skeletonhunter_localizer_pairs_observed")?;
            let dropped = one("skeletonhunter_localizer_pairs_dropped")?;
            (nodes == ids.len() as f64 && observed == pairs as f64 && dropped == 0.0).then_some(())
        },
    )?;
    stack.check_running()
}
