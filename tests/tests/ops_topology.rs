//! The topology map's way from node labels to the exporter, without a
//! cluster: `deploy/kubernetes/topology-from-nodes.sh` reads a saved
//! `kubectl get nodes -o json` (tests/fixtures/kubectl-get-nodes.json)
//! and prints the ConfigMap; its map, and the shipped example's, are
//! what the real exporter accepts (`--check-config`), each node getting
//! its own rack's fields. See docs/deploy.md, "Topology".

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tests::deploy::{self, find, manifests, yaml_docs, TOPOLOGY};
use skeletonhunter_tests::process::bin_path;
use skeletonhunter_tests::repo::repo_root;
use skeletonhunter_tests::servers::TempDir;
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
    let dir = TempDir::new("topo-bad")?;
    let bad = dir.path().join("pods.json");
    std::fs::write(&bad, r#"{"kind": "Pod", "metadata": {"name": "p"}}"#)?;
    let out = script(&["--from-file", bad.to_str().context("utf-8")?])?;
    assert!(out.code.is_some_and(|c| c != 0), "{}", out.stdout);
    assert!(out.stderr.contains("no items list"), "{}", out.stderr);
    // No labelled node at all: an empty map the exporter still accepts.
    std::fs::write(&bad, r#"{"kind": "List", "items": []}"#)?;
    let out = script(&["--from-file", bad.to_str().context("utf-8")?])?.ok()?;
    let (_, map) = printed_map(&out.stdout, dir.path())?;
    assert!(check_config("gpu-node-1", &map)?.contains("MISSING"));
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
