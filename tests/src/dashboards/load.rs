//! Reading dashboard files: panels (nested in rows too), their queries and
//! the template variables.

use super::{Dashboard, PanelQuery, Variable};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The shipped dashboards directory of this source tree.
pub fn dashboards_dir() -> PathBuf {
    skeletonhunter_tools::repo::repo_root().join("dashboards")
}

/// Parse every `*.json` in `dir` (sorted). Errors name the file and the
/// problem; a dashboard without any query is an error.
pub fn load_dashboards(dir: &Path) -> Result<Vec<Dashboard>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no dashboards (*.json) in {}", dir.display());
    }
    files.iter().map(|p| load_dashboard(p)).collect()
}

/// Parse one dashboard file.
pub fn load_dashboard(path: &Path) -> Result<Dashboard> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))?;
    let mut queries = Vec::new();
    collect_queries(&file, v.get("panels"), &mut queries)?;
    if queries.is_empty() {
        bail!("{file}: no panel queries");
    }
    let mut variables = Vec::new();
    for var in v["templating"]["list"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_string();
        if name.is_empty() {
            bail!("{file}: a template variable has no name");
        }
        let query = match &var["query"] {
            Value::String(s) => s.clone(),
            Value::Object(o) => o
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        variables.push(Variable {
            name,
            kind: var["type"].as_str().unwrap_or("query").to_string(),
            query,
            include_all: var["includeAll"].as_bool().unwrap_or(false),
            multi: var["multi"].as_bool().unwrap_or(false),
            all_value: var["allValue"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            options: var["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o["value"].as_str().map(str::to_string))
                .collect(),
        });
    }
    Ok(Dashboard {
        file: file.clone(),
        uid: v["uid"].as_str().unwrap_or_default().to_string(),
        title: v["title"].as_str().unwrap_or_default().to_string(),
        queries,
        variables,
    })
}

fn collect_queries(file: &str, panels: Option<&Value>, out: &mut Vec<PanelQuery>) -> Result<()> {
    for p in panels.and_then(Value::as_array).into_iter().flatten() {
        // Collapsed rows keep their panels inside.
        collect_queries(file, p.get("panels"), out)?;
        let title = p["title"].as_str().unwrap_or("(untitled)").to_string();
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            if expr.trim().is_empty() {
                bail!("{file}: panel {title:?} has an empty query");
            }
            out.push(PanelQuery {
                dashboard: file.to_string(),
                panel: title.clone(),
                ref_id: t["refId"].as_str().unwrap_or("?").to_string(),
                expr: expr.to_string(),
                instant: t["instant"].as_bool().unwrap_or(false)
                    || t["format"].as_str() == Some("table"),
            });
        }
    }
    Ok(())
}
