//! What keeps the monitoring running through a cluster's routine: the
//! localizer's replicas on different nodes and at most one evicted at a
//! time, and the exporter's priority class admitted in its namespace on
//! clusters that limit the critical classes by quota. The objects are the
//! kustomization's (kubernetes-validate checks them in `ops::deploy`).

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tests::netpol::selects;
use skeletonhunter_tools::deploy::{self, kustomized};

/// The localizer's replicas never share a node, and a drain evicts at most
/// one of them: its PodDisruptionBudget selects exactly its pods and keeps
/// at least one but fewer than all (else no drain could proceed).
#[test]
fn localizer_replicas_spread_and_survive_a_drain() -> Result<()> {
    let objs = kustomized(deploy::KUBE_DIR)?;
    let d = deploy::find(&objs, "Deployment", "skeletonhunter-localizer")?;
    let replicas = d["spec"]["replicas"].as_u64().context("replicas")?;
    assert!(replicas >= 2, "one localizer is a single point of failure");
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    let pod = &d["spec"]["template"]["spec"];

    let spread: Vec<&Value> = pod["topologySpreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let by_host = spread
        .iter()
        .find(|c| c["topologyKey"] == "kubernetes.io/hostname")
        .context("no topology spread over kubernetes.io/hostname")?;
    assert_eq!(by_host["maxSkew"], 1);
    assert_eq!(
        by_host["whenUnsatisfiable"], "DoNotSchedule",
        "a hard rule: never one node"
    );
    assert!(
        selects(&by_host["labelSelector"], labels),
        "it counts the localizer's own pods"
    );
    assert!(
        spread
            .iter()
            .any(|c| c["topologyKey"] == "topology.kubernetes.io/zone"),
        "spread across zones too"
    );

    let budgets: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "PodDisruptionBudget")
        .filter(|b| selects(&b["spec"]["selector"], labels))
        .collect();
    assert_eq!(
        budgets.len(),
        1,
        "one PodDisruptionBudget for the localizer"
    );
    let pdb = budgets[0];
    assert_eq!(pdb["metadata"]["namespace"], d["metadata"]["namespace"]);
    let kept = match (
        pdb["spec"]["minAvailable"].as_u64(),
        pdb["spec"]["maxUnavailable"].as_u64(),
    ) {
        (Some(min), None) => min,
        (None, Some(max)) => replicas.saturating_sub(max),
        other => panic!("minAvailable or maxUnavailable as a number, not {other:?}"),
    };
    assert!(kept >= 1 && kept < replicas, "keeps {kept} of {replicas}");
    let exporter = deploy::find(&objs, "DaemonSet", "skeletonhunter-exporter")?;
    let exporter_labels = &exporter["spec"]["template"]["metadata"]["labels"];
    assert!(
        !selects(&pdb["spec"]["selector"], exporter_labels),
        "the budget is the localizer's only"
    );
    Ok(())
}

/// The exporter's priority class has quota in its namespace: a
/// ResourceQuota scoped to that class, with room for a large fleet's nodes.
#[test]
fn exporter_priority_class_has_quota_in_its_namespace() -> Result<()> {
    let objs = kustomized(deploy::KUBE_DIR)?;
    let ds = deploy::find(&objs, "DaemonSet", "skeletonhunter-exporter")?;
    let class = ds["spec"]["template"]["spec"]["priorityClassName"]
        .as_str()
        .context("the exporter has a priority class")?;
    let ns = &ds["metadata"]["namespace"];
    let quota = objs
        .iter()
        .filter(|o| o["kind"] == "ResourceQuota" && &o["metadata"]["namespace"] == ns)
        .find(|q| {
            q["spec"]["scopeSelector"]["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| {
                    e["scopeName"] == "PriorityClass"
                        && e["operator"] == "In"
                        && e["values"]
                            .as_array()
                            .is_some_and(|v| v.iter().any(|c| c == class))
                })
        })
        .with_context(|| format!("no ResourceQuota in {ns} scoped to PriorityClass {class}"))?;
    let pods: u64 = quota["spec"]["hard"]["pods"]
        .as_str()
        .context("hard.pods")?
        .parse()?;
    assert!(
        pods >= 10_000,
        "room for the exporters of a large fleet: {pods}"
    );
    Ok(())
}
