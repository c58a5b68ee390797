//! Consistency of the dashboard files themselves, without a server.

use super::load::load_dashboards;
use anyhow::Result;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// Static checks that need no Prometheus: unique uids and titles, every
/// panel on the `${datasource}` variable (so provisioning and manual import
/// both work), every query with a refId. Returns the problems found.
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
        let text = std::fs::read_to_string(dir.join(&d.file))?;
        let v: Value = serde_json::from_str(&text)?;
        check_datasources(&d.file, v.get("panels"), &mut problems);
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
