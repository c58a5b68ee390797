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
//!
//! The folder: this file holds the data types; `load` parses dashboard
//! files, `promql` fills in variables and finds the metrics a query reads,
//! `check` runs the queries, `lint` checks the files' own consistency.

mod check;
mod lint;
mod load;
mod promql;

pub use check::{check_dashboards, check_dashboards_with};
pub use lint::lint_dashboards;
pub use load::{dashboards_dir, load_dashboard, load_dashboards};
pub use promql::{metric_names, substitute};

use anyhow::{bail, Result};
use std::fmt;
use std::time::Duration;

/// One query of one panel, as written in the dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelQuery {
    /// Dashboard file name (e.g. `skeletonhunter-fabric.json`).
    pub dashboard: String,
    /// The panel's title, to say which panel failed.
    pub panel: String,
    /// The query's `refId` (A, B, ...) within the panel.
    pub ref_id: String,
    /// The PromQL as written, variables unresolved.
    pub expr: String,
    /// Grafana runs it as an instant query (table and stat views).
    pub instant: bool,
}

/// A template variable of a dashboard.
#[derive(Debug, Clone)]
pub struct Variable {
    /// Variable name, as referenced by `$name`.
    pub name: String,
    /// Grafana variable type (`query`, `custom`, `constant`, `datasource`...).
    pub kind: String,
    /// `label_values(...)`, a custom list, a constant...
    pub query: String,
    /// Whether an "All" option exists (the default view uses it).
    pub include_all: bool,
    /// Whether several values can be selected at once (regex-joined).
    pub multi: bool,
    /// The custom value "All" stands for, when the dashboard sets one.
    pub all_value: Option<String>,
    /// Values listed in the dashboard (custom variables).
    pub options: Vec<String>,
}

/// One dashboard file: its queries and variables.
#[derive(Debug, Clone)]
pub struct Dashboard {
    /// File name within the dashboards directory.
    pub file: String,
    /// Grafana uid; must be unique across the shipped dashboards.
    pub uid: String,
    /// Title; must be unique across the shipped dashboards.
    pub title: String,
    /// Every panel query, rows flattened.
    pub queries: Vec<PanelQuery>,
    /// Template variables in dashboard order.
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
    Empty {
        /// Input metrics without any data.
        missing: Vec<String>,
    },
    /// Prometheus rejected it (or a variable could not be resolved).
    Error(String),
}

#[derive(Debug, Clone)]
/// One query run in one pass, with what happened.
pub struct QueryResult {
    /// The query as written in the dashboard.
    pub query: PanelQuery,
    /// `all` or `first` (see the module docs).
    pub pass: &'static str,
    /// The expression as run, variables substituted.
    pub expr: String,
    /// What Prometheus answered.
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

    /// Whether the query was empty only because its inputs are absent.
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
                write!(f, "NO DATA although all its inputs have data")?;
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
    /// Every query of every dashboard, in both passes.
    pub results: Vec<QueryResult>,
}

impl Report {
    /// Results that fail the check (see [`QueryResult::is_failure`]).
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
            let lines: Vec<String> = f.iter().map(std::string::ToString::to_string).collect();
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
