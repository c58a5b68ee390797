//! The topology map's way from node labels to the exporter, without a
//! cluster: `deploy/kubernetes/topology-from-nodes.sh` reads a saved
//! `kubectl get nodes -o json` (tests/fixtures/kubectl-get-nodes.json)
//! and prints the ConfigMap; its map, and the shipped example's, are
//! what the real exporter accepts (`--check-config`), each node getting
//! its own rack's fields. See docs/deploy.md, "Topology".

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tools::deploy::{self, find, manifests, yaml_docs, TOPOLOGY};
use skeletonhunter_tools::process::bin_path;
use skeletonhunter_tools::repo::repo_root;
use skeletonhunter_tools::servers::TempDir;
use std::path::Path;

const SCRIPT: &str = "deploy/kubernetes/topology-from-nodes.sh";

/// A finished run of the script.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(self) -> Result<Run> {
        anyhow::ensure!(
            self.code == Some(0),
            "exit {:?}: {}",
            self.code,
            self.stderr
        );
        Ok(self)
    }
}

/// The script run by `sh` (POSIX: dash on Debian) with `args`.
fn script(args: &[&str]) -> Result<Run> {
    let out = std::process::Command::new("sh")
        .arg(repo_root().join(SCRIPT))
        .args(args)
        .current_dir(repo_root())
        .output()?;
    Ok(Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout)?,
        stderr: String::from_utf8(out.stderr)?,
    })
}

/// `--check-config` of an exporter on host `host` with the map at `map`.
fn check_config(host: &str, map: &Path) -> Result<String> {
    let out = std::process::Command::new(bin_path("skeletonhunter-exporter"))
        .args(["--host", host, "--check-config", "--topology-file"])
        .arg(map)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "--check-config for {host}: {stderr}");
    Ok(String::from_utf8(out.stdout)?)
}

/// The one ConfigMap a run printed, and its map written to `dir`.
fn printed_map(stdout: &str, dir: &Path) -> Result<(Value, std::path::PathBuf)> {
    let docs = yaml_docs(stdout, "script output")?;
    anyhow::ensure!(docs.len() == 1, "{} documents:\n{stdout}", docs.len());
    let cm = docs.into_iter().next().context("no document")?;
    let map = cm["data"]["topology.yaml"]
        .as_str()
        .context("data.topology.yaml")?;
    let path = dir.join("topology.yaml");
    std::fs::write(&path, map)?;
    Ok((cm, path))
}

#[test]
fn the_script_builds_from_node_labels_the_map_the_exporter_reads() -> Result<()> {
    if !deploy::require_tool("the_script_builds_...", "jq", "apt-get install jq") {
        return Ok(());
    }
    let dir = TempDir::new("topo-script")?;
    let out = script(&[
        "--from-file",
        "tests/fixtures/kubectl-get-nodes.json",
        // The fixture's zones are racks.
        "--tor-label",
        "topology.kubernetes.io/zone",
        "--spine-label",
        "example.com/spine",
        "--pod-label",
        "example.com/network-pod",
    ])?
    .ok()?;
    // cpu-node-4 has none of the labels: left out, and said so.
    assert!(out.stderr.contains("cpu-node-4"), "{}", out.stderr);
    assert!(!out.stdout.contains("cpu-node-4"), "{}", out.stdout);
    let (cm, map) = printed_map(&out.stdout, dir.path())?;
    // The same object the kustomization ships, so the output replaces it.
    let shipped = find(&manifests()?, "ConfigMap", TOPOLOGY)?.clone();
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], shipped["metadata"]["name"]);
    assert_eq!(cm["metadata"]["labels"], shipped["metadata"]["labels"]);
    assert_eq!(cm["metadata"]["namespace"], "skeletonhunter");
    for (host, want) in [
        (
            "gpu-node-1",
            ["tor: asw-a12 (", "spine: dsw-a (", "pod: pod-1 ("],
        ),
        (
            "gpu-node-2",
            ["tor: asw-a12 (", "spine: dsw-a (", "pod: pod-1 ("],
        ),
        (
            "gpu-node-3",
            ["tor: asw-b07 (", "spine: dsw-b (", "pod: - (unset)"],
        ),
    ] {
        let s = check_config(host, &map)?;
        for w in want {
            assert!(s.contains(w), "{host}: {w:?} missing from\n{s}");
        }
        assert!(
            s.contains("tor: asw-") && s.contains("(topology_file)"),
            "{s}"
        );
        assert!(
            s.contains(&format!("entry for host \"{host}\": found")),
            "{s}"
        );
    }
    let s = check_config("cpu-node-4", &map)?;
    assert!(
        s.contains("tor: - (missing)") && s.contains("MISSING"),
        "{s}"
    );
    Ok(())
}

#[test]
fn the_script_refuses_bad_arguments_and_documents() -> Result<()> {
    if !deploy::require_tool("the_script_refuses_...", "jq", "apt-get install jq") {
        return Ok(());
    }
    let out = script(&["--rack-label", "x"])?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--rack-label"), "{}", out.stderr);
    let out = script(&["--tor-label"])?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    // No default ToR label: a zone is not a switch.
    let fixture = "tests/fixtures/kubectl-get-nodes.json";
    let out = script(&["--from-file", fixture])?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--tor-label is required"),
        "{}",
        out.stderr
    );
    for bad in ["0", "many", "-3"] {
        let out = script(&[
            "--from-file",
            fixture,
            "--tor-label",
            "x",
            "--max-hosts-per-tor",
            bad,
        ])?;
        assert_eq!(out.code, Some(2), "{bad}: {}", out.stderr);
        assert!(out.stderr.contains("--max-hosts-per-tor"), "{}", out.stderr);
    }
    let dir = TempDir::new("topo-bad")?;
    let bad = dir.path().join("pods.json");
    std::fs::write(&bad, r#"{"kind": "Pod", "metadata": {"name": "p"}}"#)?;
    let tor = ["--tor-label", "example.com/rack"];
    let out = script(&[&["--from-file", bad.to_str().context("utf-8")?][..], &tor].concat())?;
    assert!(out.code.is_some_and(|c| c != 0), "{}", out.stdout);
    assert!(out.stderr.contains("no items list"), "{}", out.stderr);
    // A label no node carries (a typo, or nodes not labelled yet): refused.
    std::fs::write(&bad, r#"{"kind": "List", "items": []}"#)?;
    let out = script(&[&["--from-file", bad.to_str().context("utf-8")?][..], &tor].concat())?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("no node carries the label example.com/rack"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.is_empty(),
        "no ConfigMap on error: {}",
        out.stdout
    );
    let out = script(&["--from-file", fixture, "--tor-label", "example.com/rack"])?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    Ok(())
}

/// A `kubectl get nodes -o json` document of `count` nodes per zone.
fn nodes_in_zones(zones: &[(&str, usize)]) -> Value {
    let items: Vec<Value> = zones
        .iter()
        .flat_map(|(zone, count)| {
            (0..*count).map(move |i| {
                let name = format!("gpu-{zone}-{i:03}");
                serde_json::json!({"kind": "Node", "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}}})
            })
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// On a cloud cluster whose zone label is the only topology, taking it for
/// the ToR would put a whole zone under one "switch": the script refuses a
/// ToR with more hosts than the limit (exit 2, naming it and its count, and
/// printing no ConfigMap), and accepts it when the limit is raised.
#[test]
fn the_script_refuses_a_tor_with_more_hosts_than_ports() -> Result<()> {
    if !deploy::require_tool("the_script_refuses_a_tor_...", "jq", "apt-get install jq") {
        return Ok(());
    }
    let dir = TempDir::new("topo-zones")?;
    let file = dir.path().join("nodes.json");
    std::fs::write(
        &file,
        nodes_in_zones(&[("us-east-1a", 70), ("us-east-1b", 10)]).to_string(),
    )?;
    let from = file.to_str().context("utf-8")?;
    let zone = [
        "--from-file",
        from,
        "--tor-label",
        "topology.kubernetes.io/zone",
    ];
    let out = script(&zone)?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("us-east-1a (70 hosts)"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("us-east-1b"), "{}", out.stderr);
    assert!(out.stderr.contains("--max-hosts-per-tor"), "{}", out.stderr);
    assert!(
        out.stdout.is_empty(),
        "no ConfigMap on error: {}",
        out.stdout
    );
    // Raised to the largest ToR: accepted, every node in the map.
    let out = script(&[&zone[..], &["--max-hosts-per-tor", "70"]].concat())?.ok()?;
    let (cm, _) = printed_map(&out.stdout, dir.path())?;
    let map = cm["data"]["topology.yaml"].as_str().context("map")?;
    assert_eq!(map.matches("\"tor\":\"us-east-1a\"").count(), 70, "{map}");
    assert_eq!(map.matches("\"tor\":\"us-east-1b\"").count(), 10, "{map}");
    Ok(())
}

/// The shipped example map, mounted as the DaemonSet mounts it, gives a
/// listed node its rack.
#[test]
fn the_shipped_map_gives_a_listed_node_its_topology() -> Result<()> {
    let dir = TempDir::new("topo-shipped")?;
    let map = deploy::shipped_topology(&manifests()?, dir.path())?;
    let s = check_config("gpu-node-1", &map)?;
    assert!(s.contains("tor: asw-a12 (topology_file)"), "{s}");
    let s = check_config("gpu-node-2", &map)?;
    assert!(s.contains("tor: asw-b07 (topology_file)"), "{s}");
    Ok(())
}
