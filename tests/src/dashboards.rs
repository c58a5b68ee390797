//! Checks the shipped Grafana dashboards against a real Prometheus: every
//! panel query is extracted from `dashboards/*.json`, its template variables
//! are filled in the way Grafana would, and it is run through the Prometheus
//! HTTP API.
//!
//! A query fails the check when Prometheus rejects it, or when it returns
//! nothing although every metric it reads has data (a wrong label, a wrong
//! job name, a recording rule that is not loaded, a join that never
//! matches). A query whose input metrics do not exist at all (say RDMA
//! histograms on a fabric without RDMA) is reported as skipped, so the
//! caller can decide whether that is acceptable.
//!
//! Variables are resolved in dashboard order, each seeing the ones before
//! it. Every query runs twice: with multi-value variables on "All" (the
//! default view; must have data as above) and with the first concrete value
//! of every variable (must not error; it may legitimately be empty, e.g. a
//! ToR whose pairs have no RTT for the chosen protocol).

use crate::servers::{urlencode, Server};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One query of one panel, as written in the dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelQuery {
    /// Dashboard file name (e.g. `skeletonhunter-fabric.json`).
    pub dashboard: String,
    pub panel: String,
    pub ref_id: String,
    pub expr: String,
    /// Grafana runs it as an instant query (table and stat views).
    pub instant: bool,
}

/// A template variable of a dashboard.
#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    pub kind: String,
    /// `label_values(...)`, a custom list, a constant...
    pub query: String,
    pub include_all: bool,
    pub multi: bool,
    pub all_value: Option<String>,
    pub options: Vec<String>,
}

/// One dashboard file: its queries and variables.
#[derive(Debug, Clone)]
pub struct Dashboard {
    pub file: String,
    pub uid: String,
    pub title: String,
    pub queries: Vec<PanelQuery>,
    pub variables: Vec<Variable>,
}

/// Knobs for Grafana's built-in variables.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Value for `$__rate_interval` (Grafana: at least 4 scrape intervals).
    pub rate_interval: String,
    /// Value for `$__interval` (and the step of range queries).
    pub interval: Duration,
    /// Time range of range queries, ending now (`$__range`).
    pub range: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            rate_interval: "1m".into(),
            interval: Duration::from_secs(15),
            range: Duration::from_secs(300),
        }
    }
}

/// What one query did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Returned this many series.
    Data(usize),
    /// Returned nothing; `missing` lists the input metrics without any data
    /// (empty: all inputs exist, so the emptiness is a dashboard bug).
    Empty { missing: Vec<String> },
    /// Prometheus rejected it (or a variable could not be resolved).
    Error(String),
}

#[derive(Debug, Clone)]
pub struct QueryResult {
    pub query: PanelQuery,
    /// `all` or `first` (see the module docs).
    pub pass: &'static str,
    /// The expression as run, variables substituted.
    pub expr: String,
    pub outcome: Outcome,
}

impl QueryResult {
    /// Whether this result fails the check.
    pub fn is_failure(&self) -> bool {
        match &self.outcome {
            Outcome::Error(_) => true,
            Outcome::Empty { missing } => self.pass == "all" && missing.is_empty(),
            Outcome::Data(_) => false,
        }
    }

    pub fn is_skipped(&self) -> bool {
        matches!(&self.outcome, Outcome::Empty { missing } if !missing.is_empty())
    }
}

impl fmt::Display for QueryResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = &self.query;
        write!(
            f,
            "{} / {:?} / {} [{}]: ",
            q.dashboard, q.panel, q.ref_id, self.pass
        )?;
        match &self.outcome {
            Outcome::Data(n) => write!(f, "{n} series")?,
            Outcome::Empty { missing } if missing.is_empty() => {
                write!(f, "NO DATA although all its inputs have data")?
            }
            Outcome::Empty { missing } => write!(f, "no data; inputs without data: {missing:?}")?,
            Outcome::Error(e) => write!(f, "ERROR {e}")?,
        }
        write!(f, "\n    {}", self.expr.replace('\n', " "))
    }
}

/// The outcome of checking every dashboard.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub results: Vec<QueryResult>,
}

impl Report {
    pub fn failures(&self) -> Vec<&QueryResult> {
        self.results.iter().filter(|r| r.is_failure()).collect()
    }

    /// "All"-pass queries that were empty because an input metric has no data.
    pub fn skipped(&self) -> Vec<&QueryResult> {
        self.results
            .iter()
            .filter(|r| r.pass == "all" && r.is_skipped())
            .collect()
    }

    /// "All"-pass queries that returned data.
    pub fn with_data(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.pass == "all" && matches!(r.outcome, Outcome::Data(_)))
            .count()
    }

    /// Fail listing every failing query.
    pub fn ensure_ok(&self) -> Result<()> {
        let f = self.failures();
        if !f.is_empty() {
            let lines: Vec<String> = f.iter().map(|r| r.to_string()).collect();
            bail!(
                "{} of {} dashboard queries failed:\n{}",
                f.len(),
                self.results.len(),
                lines.join("\n")
            );
        }
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all = self.results.iter().filter(|r| r.pass == "all").count();
        writeln!(
            f,
            "{all} panel queries: {} with data, {} skipped (inputs absent), {} failures",
            self.with_data(),
            self.skipped().len(),
            self.failures().len()
        )?;
        for r in self.failures().iter().chain(self.skipped().iter()) {
            writeln!(f, "  {r}")?;
        }
        Ok(())
    }
}

/// The shipped dashboards directory of this source tree.
pub fn dashboards_dir() -> PathBuf {
    crate::servers::repo_root().join("dashboards")
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

/// Escape a value for a PromQL regex matcher inside a double-quoted string,
/// as Grafana does for multi-value variables.
fn regex_escape(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}

/// Replace `$name`, `${name}`, `${name:fmt}` and `[[name]]` by the values in
/// `vars` (longest names first, so `$tor` does not eat `$tor_id`), and
/// Grafana's built-ins from `opts`.
pub fn substitute(expr: &str, vars: &[(String, String)], opts: &CheckOptions) -> String {
    let builtins = [
        ("__rate_interval".to_string(), opts.rate_interval.clone()),
        (
            "__interval_ms".to_string(),
            opts.interval.as_millis().to_string(),
        ),
        (
            "__interval".to_string(),
            format!("{}ms", opts.interval.as_millis()),
        ),
        ("__range_s".to_string(), opts.range.as_secs().to_string()),
        ("__range_ms".to_string(), opts.range.as_millis().to_string()),
        ("__range".to_string(), format!("{}s", opts.range.as_secs())),
    ];
    let mut all: Vec<&(String, String)> = vars.iter().chain(builtins.iter()).collect();
    all.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    let mut s = expr.to_string();
    for (name, value) in &all {
        s = s.replace(&format!("[[{name}]]"), value);
        // ${name} and ${name:format}
        while let Some(start) = s.find(&format!("${{{name}")) {
            let after = start + 2 + name.len();
            let rest = &s[after..];
            let end = if rest.starts_with('}') {
                Some(after + 1)
            } else if rest.starts_with(':') {
                rest.find('}').map(|i| after + i + 1)
            } else {
                None
            };
            match end {
                Some(end) => s.replace_range(start..end, value),
                None => break,
            }
        }
        // $name not followed by an identifier character.
        let pat = format!("${name}");
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find(&pat) {
            let next = rest[i + pat.len()..].chars().next();
            out.push_str(&rest[..i]);
            if next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push_str(&pat);
            } else {
                out.push_str(value);
            }
            rest = &rest[i + pat.len()..];
        }
        out.push_str(rest);
        s = out;
    }
    s
}

const NOT_METRICS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
    "atan2",
    // Aggregations may be followed by `by (...)` rather than `(`.
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Metric names a PromQL expression reads (selectors outside strings,
/// label matchers, ranges, grouping lists and function names).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let b = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    let is_start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':';
    let is_cont = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let skip_to = |i: usize, close: u8| -> usize {
        let mut j = i + 1;
        let mut quote: Option<u8> = None;
        while j < b.len() {
            let c = b[j];
            match quote {
                Some(_) if c == b'\\' => j += 1,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == b'"' || c == b'\'' || c == b'`' => quote = Some(c),
                None if c == close => return j + 1,
                None => {}
            }
            j += 1;
        }
        j
    };
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' || c == b'`' {
            // Skip a string literal.
            let mut j = i + 1;
            while j < b.len() && b[j] != c {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            i = j + 1;
        } else if c == b'{' {
            i = skip_to(i, b'}');
        } else if c == b'[' {
            i = skip_to(i, b']');
        } else if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_digit() || c == b'.' {
            // Numbers and durations (1m, 0.99, 1e-6).
            while i < b.len() && (is_cont(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if is_start(c) {
            let start = i;
            while i < b.len() && is_cont(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let lower = word.to_ascii_lowercase();
            if GROUPING.contains(&lower.as_str()) {
                if j < b.len() && b[j] == b'(' {
                    i = skip_to(j, b')');
                }
            } else if j < b.len() && b[j] == b'(' {
                // A function or aggregation: not a metric.
            } else if !NOT_METRICS.contains(&lower.as_str()) {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

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
            .map(|s| s.to_string())
            .collect());
    }
    bail!("unsupported variable query {q:?} (use label_values or query_result)")
}

/// Check every dashboard of `dir` against the Prometheus `prom` (a server
/// from [`crate::servers`], possibly inside a namespace).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_skip_functions_labels_and_grouping() {
        let m = metric_names(
            r#"sum by (tor, le) (rate(skeletonhunter_probe_rtt_seconds_bucket{job="x", a=~"b|c"}[$__rate_interval]))
               / on (tor) group_left (spine) tor:skeletonhunter_probe_sent:rate1m > bool 0.5 or vector(0)"#,
        );
        let want: BTreeSet<String> = [
            "skeletonhunter_probe_rtt_seconds_bucket",
            "tor:skeletonhunter_probe_sent:rate1m",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(m, want);
    }

    #[test]
    fn substitute_handles_all_syntaxes_and_longest_name_first() {
        let vars = vec![
            ("tor".to_string(), "t1".to_string()),
            ("tor_id".to_string(), "X".to_string()),
        ];
        let o = CheckOptions::default();
        assert_eq!(
            substitute(
                r#"x{a="$tor",b="${tor}",c="${tor:regex}",d="[[tor]]",e="$tor_id"}[$__rate_interval]"#,
                &vars,
                &o
            ),
            r#"x{a="t1",b="t1",c="t1",d="t1",e="X"}[1m]"#
        );
    }

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
