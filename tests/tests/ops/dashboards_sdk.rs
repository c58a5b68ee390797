//! The shipped dashboards as Grafana's own typed models read them:
//! `tests/grafana/dashboards.py` parses each with `grafana-foundation-sdk`
//! (PyPI) and reports its panels. Every panel must decode into its plugin's
//! options and its queries into Prometheus queries, carry a unit and a
//! description, name every time series by a legend, and show per-pair rows
//! only through `topk` (a fleet of 1,000 nodes has tens of thousands of
//! pairs). The sidecar's copies (`deploy/kubernetes/dashboards.yaml`) parse
//! the same and have no import input left to resolve.

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tests::privilege::skip_or_fail;
use skeletonhunter_tools::deploy::{self, yaml_docs};
use skeletonhunter_tools::process::run_tool;
use skeletonhunter_tools::repo::repo_root;
use skeletonhunter_tools::servers::TempDir;
use std::path::PathBuf;

const TEST: &str = "dashboards_parse_with_grafana_foundation_sdk";

/// The report of `tests/grafana/dashboards.py` on `files`.
fn sdk_report(files: &[PathBuf]) -> Result<Value> {
    let script = repo_root().join("tests/grafana/dashboards.py");
    let mut args = vec![script.display().to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_tool("python3", &args, None)?.ok()?;
    serde_json::from_str(&out.stdout).context("the SDK report is not JSON")
}

/// Whether a query returns one series per pair: its outermost aggregation
/// keeps both `src_node` and `dst_node`, and no `topk` bounds it.
fn unbounded_per_pair(expr: &str) -> bool {
    let e = expr.trim();
    if e.starts_with("topk(") || e.starts_with("bottomk(") {
        return false;
    }
    let head = e.split('(').next().unwrap_or("");
    let by = e
        .split_once(" by (")
        .map(|(agg, rest)| (agg, rest.split(')').next().unwrap_or("")));
    match by {
        Some((agg, labels)) if !agg.contains('(') && !head.is_empty() => {
            labels.contains("src_node") && labels.contains("dst_node")
        }
        _ => false,
    }
}

/// What is wrong with one panel of `file`'s report.
fn panel_problems(file: &str, p: &Value, problems: &mut Vec<String>) {
    let kind = p["type"].as_str().unwrap_or("?");
    if kind == "row" {
        for inner in p["panels"].as_array().into_iter().flatten() {
            panel_problems(file, inner, problems);
        }
        return;
    }
    let title = format!("{file}: {kind} {:?}", p["title"].as_str().unwrap_or(""));
    let mut bad = |what: String| problems.push(format!("{title}: {what}"));
    if p["options_class"]
        .as_str()
        .is_none_or(|c| !c.starts_with("grafana_foundation_sdk.models."))
    {
        bad(format!(
            "options not decoded by the SDK ({})",
            p["options_class"]
        ));
    }
    if p["unit"].as_str().is_none_or(str::is_empty) {
        bad("no unit".into());
    }
    if p["description"].as_str().is_none_or(str::is_empty) {
        bad("no description".into());
    }
    let series = ["timeseries", "state-timeline", "status-history", "heatmap"].contains(&kind);
    if kind == "timeseries" {
        let legend = &p["legend"];
        if legend["show"] != true || legend["calcs"].as_array().is_none_or(Vec::is_empty) {
            bad(format!("legend hidden or without values: {legend}"));
        }
    }
    for t in p["targets"].as_array().into_iter().flatten() {
        if t["class"] != "grafana_foundation_sdk.models.prometheus.Dataquery" {
            bad(format!("query decoded as {}", t["class"]));
        }
        let expr = t["expr"].as_str().unwrap_or("");
        if series && t["legend_format"].as_str().is_none_or(str::is_empty) {
            bad(format!("series without a legend: {expr}"));
        }
        if unbounded_per_pair(expr) {
            bad(format!("one row per pair without topk: {expr}"));
        }
    }
}

/// The dashboards of the sidecar's ConfigMaps, written to `dir`.
fn sidecar_copies(dir: &TempDir) -> Result<Vec<PathBuf>> {
    let docs = yaml_docs(&deploy::read(deploy::DASHBOARDS)?, deploy::DASHBOARDS)?;
    let mut out = Vec::new();
    for cm in &docs {
        for (key, text) in cm["data"].as_object().context("ConfigMap data")? {
            let text = text.as_str().context("data value")?;
            assert!(
                !text.contains("${DS_"),
                "{key}: an import input the sidecar never resolves"
            );
            let v: Value = serde_json::from_str(text)?;
            assert!(
                v.get("__inputs").is_none(),
                "{key}: __inputs left for the sidecar"
            );
            let path = dir.path().join(key);
            std::fs::write(&path, text)?;
            out.push(path);
        }
    }
    Ok(out)
}

#[test]
fn dashboards_parse_with_grafana_foundation_sdk() -> Result<()> {
    let probe = run_tool("python3", &["-c", "import grafana_foundation_sdk"], None);
    if probe.as_ref().map_or(true, |o| !o.success) {
        skip_or_fail(TEST, "python3 cannot import grafana_foundation_sdk (pip install grafana-foundation-sdk; scripts/setup.sh does)");
        return Ok(());
    }
    let shipped: Vec<PathBuf> = deploy::dashboards()?
        .iter()
        .map(|(name, _)| repo_root().join("dashboards").join(name))
        .collect();
    let dir = TempDir::new("dash-sdk")?;
    let sidecar = sidecar_copies(&dir)?;
    assert_eq!(
        sidecar.len(),
        shipped.len(),
        "one ConfigMap copy per dashboard"
    );
    let mut problems = Vec::new();
    let mut panels = 0;
    for (files, datasource) in [(&shipped, "${DS_PROMETHEUS}"), (&sidecar, "default")] {
        let report = sdk_report(files)?;
        for (file, d) in report.as_object().context("report")? {
            let name = file.rsplit('/').next().unwrap_or(file);
            let list = d["panels"].as_array().context("panels")?;
            assert_eq!(
                d["reencoded"]["panels"],
                list.len(),
                "{name}: the SDK re-encodes every panel"
            );
            assert!(d["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("SkeletonHunter")));
            let ds = d["variables"]
                .as_array()
                .and_then(|v| v.iter().find(|v| v["type"] == "datasource"));
            assert_eq!(
                ds.map(|v| &v["current"]),
                Some(&Value::from(datasource)),
                "{file}"
            );
            for p in list {
                panels += usize::from(p["type"] != "row");
                panel_problems(name, p, &mut problems);
            }
        }
    }
    assert!(panels >= 2 * 40, "only {panels} panels");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    Ok(())
}

#[test]
fn per_pair_queries_are_recognised() {
    let pair =
        "max by (src_node, dst_node) (topology:skeletonhunter_probe_loss:ratio_rate1m{a=\"b\"})";
    assert!(unbounded_per_pair(pair));
    assert!(!unbounded_per_pair(&format!("topk(50, {pair})")));
    assert!(!unbounded_per_pair(&format!("count({pair})")));
    assert!(!unbounded_per_pair(
        "max by (kind, id) (skeletonhunter_component_blame)"
    ));
    assert!(!unbounded_per_pair(
        "tor:skeletonhunter_probe_loss:ratio_rate1m{tor=~\"$tor\"}"
    ));
}
