//! Running every panel query against a Prometheus API, variables resolved
//! as Grafana would.

use super::load::load_dashboards;
use super::promql::{metric_names, regex_escape, substitute};
use super::{CheckOptions, Outcome, QueryResult, Report, Variable};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_tools::http::urlencode;
use skeletonhunter_tools::servers::Server;
use std::path::Path;

/// Resolve `vars` in order against Prometheus (`api` GETs a Prometheus API
/// path and returns the JSON, failing on a non-success status). Returns
/// every variable's values.
fn resolve_variables(
    vars: &[Variable],
    api: &dyn Fn(&str) -> Result<Value>,
    opts: &CheckOptions,
) -> Result<Vec<(Variable, Vec<String>)>> {
    let mut resolved: Vec<(Variable, Vec<String>)> = Vec::new();
    for v in vars {
        // Earlier variables on their "All" value scope later ones.
        let scope: Vec<(String, String)> = resolved
            .iter()
            .map(|(var, vals)| (var.name.clone(), all_value(var, vals)))
            .collect();
        let query = substitute(&v.query, &scope, opts);
        let values: Vec<String> = match v.kind.as_str() {
            "query" => query_variable(&query, api)
                .with_context(|| format!("variable ${} ({query})", v.name))?,
            "custom" => query
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            "interval" => v
                .options
                .first()
                .cloned()
                .or_else(|| query.split(',').next().map(|s| s.trim().to_string()))
                .into_iter()
                .collect(),
            "constant" | "textbox" => vec![query.clone()],
            // Datasource and ad-hoc variables do not appear in expressions.
            _ => continue,
        };
        resolved.push((v.clone(), values));
    }
    Ok(resolved)
}

fn all_value(var: &Variable, values: &[String]) -> String {
    if var.include_all {
        if let Some(a) = &var.all_value {
            return a.clone();
        }
        let parts: Vec<String> = values.iter().map(|v| regex_escape(v)).collect();
        return format!("({})", parts.join("|"));
    }
    first_value(var, values)
}

fn first_value(var: &Variable, values: &[String]) -> String {
    match values.first() {
        Some(v) if var.multi || var.include_all => regex_escape(v),
        Some(v) => v.clone(),
        None => var.all_value.clone().unwrap_or_else(|| ".*".into()),
    }
}

/// `label_values(label)`, `label_values(selector, label)`,
/// `query_result(expr)` (every series' value text) or `metrics(regex)`.
fn query_variable(query: &str, api: &dyn Fn(&str) -> Result<Value>) -> Result<Vec<String>> {
    let q = query.trim();
    let inner = |prefix: &str| -> Option<String> {
        q.strip_prefix(prefix)
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
            .map(|r| r.trim().to_string())
    };
    if let Some(args) = inner("label_values") {
        let (selector, label) = match args.rfind(',') {
            Some(i) => (
                Some(args[..i].trim().to_string()),
                args[i + 1..].trim().to_string(),
            ),
            None => (None, args.clone()),
        };
        let mut path = format!("/api/v1/label/{label}/values");
        if let Some(sel) = selector {
            path.push_str(&format!("?match[]={}", urlencode(&sel)));
        }
        let v = api(&path)?;
        return Ok(v["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect());
    }
    if let Some(expr) = inner("query_result") {
        let v = api(&format!("/api/v1/query?query={}", urlencode(&expr)))?;
        return Ok(v["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(std::string::ToString::to_string)
            .collect());
    }
    bail!("unsupported variable query {q:?} (use label_values or query_result)")
}

/// Check every dashboard of `dir` against the Prometheus `prom` (a server
/// from [`skeletonhunter_tools::servers`], possibly inside a namespace).
pub fn check_dashboards(prom: &Server, dir: &Path, opts: &CheckOptions) -> Result<Report> {
    check_dashboards_with(dir, opts, &|path: &str| prom.prom_api(path))
}

/// As [`check_dashboards`] with any way of reaching the Prometheus API:
/// `api(path)` GETs `path` (e.g. `/api/v1/query?query=up`) and returns the
/// JSON document, failing when `status` is not `success`.
pub fn check_dashboards_with(
    dir: &Path,
    opts: &CheckOptions,
    api: &dyn Fn(&str) -> Result<Value>,
) -> Result<Report> {
    let dashboards = load_dashboards(dir)?;
    let mut report = Report::default();
    let mut has_data: std::collections::HashMap<String, bool> = Default::default();
    for d in &dashboards {
        let resolved = match resolve_variables(&d.variables, api, opts) {
            Ok(r) => r,
            Err(e) => {
                for q in &d.queries {
                    report.results.push(QueryResult {
                        query: q.clone(),
                        pass: "all",
                        expr: q.expr.clone(),
                        outcome: Outcome::Error(format!("{e:#}")),
                    });
                }
                continue;
            }
        };
        let all: Vec<(String, String)> = resolved
            .iter()
            .map(|(v, vals)| (v.name.clone(), all_value(v, vals)))
            .collect();
        let first: Vec<(String, String)> = resolved
            .iter()
            .map(|(v, vals)| (v.name.clone(), first_value(v, vals)))
            .collect();
        for q in &d.queries {
            for (pass, vars) in [("all", &all), ("first", &first)] {
                let expr = substitute(&q.expr, vars, opts);
                let outcome = match run(&expr, q.instant, api, opts) {
                    Err(e) => Outcome::Error(format!("{e:#}")),
                    Ok(n) if n > 0 => Outcome::Data(n),
                    Ok(_) => {
                        let mut missing = Vec::new();
                        for m in metric_names(&expr) {
                            let exists = match has_data.get(&m) {
                                Some(e) => *e,
                                None => {
                                    let sel = format!("count({{__name__=\"{m}\"}})");
                                    let e = run(&sel, false, api, opts).map(|n| n > 0)?;
                                    has_data.insert(m.clone(), e);
                                    e
                                }
                            };
                            if !exists {
                                missing.push(m);
                            }
                        }
                        Outcome::Empty { missing }
                    }
                };
                report.results.push(QueryResult {
                    query: q.clone(),
                    pass,
                    expr,
                    outcome,
                });
            }
        }
    }
    Ok(report)
}

/// Run `expr` as Grafana would (instant, or a range over `opts.range`);
/// the number of series returned.
fn run(
    expr: &str,
    instant: bool,
    api: &dyn Fn(&str) -> Result<Value>,
    opts: &CheckOptions,
) -> Result<usize> {
    let path = if instant {
        format!("/api/v1/query?query={}", urlencode(expr))
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs_f64();
        format!(
            "/api/v1/query_range?query={}&start={:.3}&end={:.3}&step={:.3}",
            urlencode(expr),
            now - opts.range.as_secs_f64(),
            now,
            opts.interval.as_secs_f64().max(0.001)
        )
    };
    let v = api(&path)?;
    let result = &v["data"]["result"];
    Ok(match result {
        Value::Array(a) => a.len(),
        // Scalars and strings always carry a value.
        Value::Null => 0,
        _ => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_values_are_regex_escaped() {
        let v = Variable {
            name: "node".into(),
            kind: "query".into(),
            query: String::new(),
            include_all: true,
            multi: true,
            all_value: None,
            options: vec![],
        };
        assert_eq!(
            all_value(&v, &["10.0.0.1".into(), "b".into()]),
            r"(10\\.0\\.0\\.1|b)"
        );
    }
}
