//! Consistency of the dashboard files themselves, without a server.

use super::load::load_dashboards;
use super::promql::metric_names;
use anyhow::Result;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// Static checks that need no Prometheus: unique uids and titles, every
/// panel on the `${datasource}` variable (so provisioning and manual import
/// both work), the import inputs and the `cluster` / `job` variables, every
/// selector scoped by them, every query with a refId. Returns the problems
/// found.
pub fn lint_dashboards(dir: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut uids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for d in load_dashboards(dir)? {
        if d.uid.is_empty() || !uids.insert(d.uid.clone()) {
            problems.push(format!("{}: missing or duplicate uid {:?}", d.file, d.uid));
        }
        if d.title.is_empty() || !titles.insert(d.title.clone()) {
            problems.push(format!(
                "{}: missing or duplicate title {:?}",
                d.file, d.title
            ));
        }
        if !d.variables.iter().any(|v| v.kind == "datasource") {
            problems.push(format!("{}: no datasource variable", d.file));
        }
        let mut refs = BTreeSet::new();
        for q in &d.queries {
            if !refs.insert((q.panel.clone(), q.ref_id.clone())) {
                problems.push(format!(
                    "{}: panel {:?} repeats refId {}",
                    d.file, q.panel, q.ref_id
                ));
            }
        }
        let exprs = d
            .queries
            .iter()
            .map(|q| (q.panel.as_str(), q.expr.as_str()));
        // Query variables other than the two scoping ones are scoped too
        // (the selector of their `label_values(selector, label)`).
        let vars = d
            .variables
            .iter()
            .filter(|v| v.kind == "query" && v.name != "cluster" && v.name != "job")
            .map(|v| {
                let sel = v.query.strip_prefix("label_values(");
                let sel = sel.and_then(|s| s.rsplit_once(',')).map(|(s, _)| s);
                (v.name.as_str(), sel.unwrap_or(v.query.as_str()))
            });
        for (what, expr) in exprs.chain(vars) {
            check_scoping(&d.file, what, expr, &mut problems);
        }
        let text = std::fs::read_to_string(dir.join(&d.file))?;
        let v: Value = serde_json::from_str(&text)?;
        check_datasources(&d.file, v.get("panels"), &mut problems);
        check_import(&d.file, &v, &mut problems);
    }
    Ok(problems)
}

fn check_datasources(file: &str, panels: Option<&Value>, problems: &mut Vec<String>) {
    for p in panels.and_then(Value::as_array).into_iter().flatten() {
        check_datasources(file, p.get("panels"), problems);
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().unwrap_or("(untitled)");
        if p["datasource"]["uid"].as_str() != Some("${datasource}") {
            problems.push(format!(
                "{file}: panel {title:?} does not use the ${{datasource}} variable"
            ));
        }
        if p["gridPos"].is_null() {
            problems.push(format!("{file}: panel {title:?} has no gridPos"));
        }
    }
}

/// Grafana's import asks for a Prometheus data source (`__inputs`) and the
/// `datasource` variable starts on the one chosen; `__requires` names every
/// panel type; `cluster` is optional (All is `.*`: single-cluster setups
/// have no such label) and `job` exists.
fn check_import(file: &str, v: &Value, problems: &mut Vec<String>) {
    let input = v["__inputs"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == "DS_PROMETHEUS"));
    if input.is_none_or(|i| i["type"] != "datasource" || i["pluginId"] != "prometheus") {
        problems.push(format!("{file}: no DS_PROMETHEUS datasource in __inputs"));
    }
    let vars = v["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let var = |name: &str| vars.iter().find(|x| x["name"] == name);
    if var("datasource").is_none_or(|d| d["current"]["value"] != "${DS_PROMETHEUS}") {
        problems.push(format!(
            "{file}: the datasource variable does not start on ${{DS_PROMETHEUS}}"
        ));
    }
    if var("cluster").is_none_or(|c| c["includeAll"] != true || c["allValue"] != ".*") {
        problems.push(format!(
            "{file}: no optional cluster variable (includeAll, allValue .*)"
        ));
    }
    if var("job").is_none() {
        problems.push(format!("{file}: no job variable"));
    }
    let required: Vec<&str> = v["__requires"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "panel")
        .filter_map(|r| r["id"].as_str())
        .collect();
    let mut used = Vec::new();
    panel_types(v.get("panels"), &mut used);
    for t in used {
        if !required.contains(&t.as_str()) {
            problems.push(format!("{file}: panel type {t} missing from __requires"));
        }
    }
}

fn panel_types(panels: Option<&Value>, out: &mut Vec<String>) {
    for p in panels.and_then(Value::as_array).into_iter().flatten() {
        panel_types(p.get("panels"), out);
        if let Some(t) = p["type"].as_str().filter(|t| *t != "row") {
            out.push(t.to_string());
        }
    }
}

/// Every selector of a SkeletonHunter series, recording rule or scrape
/// series starts with `cluster=~"$cluster"`; raw exporter series (they keep
/// their `job`, which recording rules aggregate away and the localizer's
/// series — `skeletonhunter_localizer_*`, `_component_*`, `_overview_*` —
/// have their own of) also with `job=~"$job"`.
fn check_scoping(file: &str, what: &str, expr: &str, problems: &mut Vec<String>) {
    for name in metric_names(expr) {
        if name == "ALERTS" {
            continue;
        }
        let local = ["localizer", "component", "overview"]
            .iter()
            .any(|p| name.starts_with(&format!("skeletonhunter_{p}_")));
        let want = if name.starts_with("skeletonhunter_") && !local {
            "{cluster=~\"$cluster\", job=~\"$job\""
        } else {
            "{cluster=~\"$cluster\""
        };
        let mut rest = expr;
        while let Some(i) = rest.find(name.as_str()) {
            let before = rest[..i].chars().next_back();
            let after = &rest[i + name.len()..];
            rest = after;
            let boundary = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
                && !after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
            if boundary && !after.starts_with(want) {
                problems.push(format!(
                    "{file}: {what:?}: selector of {name} does not start with {want}: {expr}"
                ));
            }
        }
    }
}
