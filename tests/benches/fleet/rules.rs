//! The rules the fleet's store evaluates (`FLEET_RULES`) and what a round
//! of them costs.
//!
//! A round is read from the store while the localizer cycles: Prometheus
//! keeps only each group's last evaluation, so the bench samples them
//! every few seconds through the measured cycles ([`RuleRounds`]) and
//! prints the median and the worst round, not one evaluation caught at
//! the end (when the bench's own count queries load the store).

use anyhow::{bail, Context, Result};
use skeletonhunter_tools::deploy::{group_rules, yaml_docs};
use skeletonhunter_tools::fabric::{default_rule_files, shipped_rule_files};
use skeletonhunter_tools::process::{http_get, wait_http_ok, ChildGuard};
use skeletonhunter_tools::servers::{free_loopback_addr, Server, VMALERT_BIN};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The rule files a store evaluates.
pub struct RuleSet {
    /// (`rules-*.yml` name for a server's directory, path).
    pub files: Vec<(String, PathBuf)>,
}

impl RuleSet {
    /// `FLEET_RULES`: the default rule files `rules/*.yml` when unset (or
    /// 1), `pair-detail` those and the opt-in `rules/pair-detail/*.yml`,
    /// 0 none.
    pub fn from_env() -> Result<RuleSet> {
        let files = match std::env::var("FLEET_RULES").as_deref() {
            Err(_) | Ok("1") => default_rule_files()?,
            Ok("pair-detail") => shipped_rule_files()?,
            Ok("0") => Vec::new(),
            Ok(v) => bail!("FLEET_RULES={v}: want 0, 1 or pair-detail"),
        };
        let files = files.into_iter();
        let files = files.map(|(name, p)| (name.replace('/', "-"), p)).collect();
        Ok(RuleSet { files })
    }

    /// The file names, for the bench's header.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.files.iter().map(|(n, _)| n.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }
}

/// vmalert evaluating `rules` against `vm`, writing back into it.
pub fn start_vmalert(
    vm: &Server,
    rules: &RuleSet,
    every: Duration,
) -> Result<(ChildGuard, std::net::SocketAddr)> {
    let listen = free_loopback_addr()?;
    let mut cmd = Command::new(VMALERT_BIN);
    for (_, from) in &rules.files {
        cmd.arg(format!("-rule={}", from.display()));
    }
    cmd.args([
        format!("-datasource.url={}", vm.url()),
        format!("-remoteWrite.url={}", vm.url()),
        format!("-evaluationInterval={}s", every.as_secs().max(1)),
        format!("-httpListenAddr={listen}"),
        // vmalert needs a notifier for the alerting rules; nothing listens
        // there (the alerts are not what is measured).
        format!("-notifier.url=http://{}", free_loopback_addr()?),
    ]);
    let child = ChildGuard::spawn("vmalert", cmd)?;
    wait_http_ok(
        "vmalert /metrics",
        listen,
        "/metrics",
        Duration::from_secs(60),
        Duration::from_millis(200),
    )?;
    Ok((child, listen))
}

/// Prometheus rule group evaluations seen so far: per group, each
/// evaluation's duration by its timestamp.
#[derive(Default)]
pub struct RuleRounds {
    groups: BTreeMap<String, BTreeMap<u64, f64>>,
}

/// `name{labels} value` lines of `metric` in an exposition, as the value of
/// the `rule_group` label -> value.
fn by_group(text: &str, metric: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(metric)?.strip_prefix("{rule_group=\"")?;
            let (group, rest) = rest.split_once("\"}")?;
            Some((group.to_string(), rest.trim().parse().ok()?))
        })
        .collect()
}

impl RuleRounds {
    /// Record the last evaluation of every group in Prometheus' /metrics.
    pub fn sample(&mut self, prometheus: &Server) {
        let Ok((_, text)) = prometheus.get("/metrics") else {
            return;
        };
        let at = by_group(
            &text,
            "prometheus_rule_group_last_evaluation_timestamp_seconds",
        );
        let took = by_group(&text, "prometheus_rule_group_last_duration_seconds");
        for (group, seconds) in took {
            // A group not evaluated yet reports timestamp 0.
            if let Some(&t) = at.get(&group).filter(|&&t| t > 0.0) {
                let evals = self.groups.entry(group).or_default();
                evals.insert((t * 1000.0) as u64, seconds);
            }
        }
    }

    /// Each complete round seen, as the sum over groups of their i-th
    /// newest evaluation (groups share one interval), oldest first.
    pub fn rounds(&self) -> Vec<f64> {
        let n = self.groups.values().map(BTreeMap::len).min().unwrap_or(0);
        (0..n)
            .rev()
            .map(|i| {
                let ith_newest = |evals: &BTreeMap<u64, f64>| evals.values().rev().nth(i).copied();
                self.groups.values().filter_map(ith_newest).sum()
            })
            .collect()
    }

    /// Each group's median evaluation, for the log.
    pub fn print(&self) {
        for (group, evals) in &self.groups {
            let v: Vec<f64> = evals.values().copied().collect();
            let median = crate::median(&v).unwrap_or(f64::NAN);
            let worst = v.iter().copied().fold(f64::NAN, f64::max);
            let group = group.rsplit('/').next().unwrap_or(group);
            println!(
                "  rule group {group}: median {median:.3} s, worst {worst:.3} s ({} evaluations)",
                v.len()
            );
        }
    }
}

/// vmalert's median iteration of every group, summed (seconds).
pub fn vmalert_round(addr: std::net::SocketAddr) -> Option<f64> {
    let text = http_get(addr, "/metrics", Duration::from_secs(5)).ok()?.1;
    let groups: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("vmalert_iteration_duration_seconds{"))
        .filter(|l| l.contains("quantile=\"0.5\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse().ok())
        .collect();
    (!groups.is_empty()).then(|| groups.iter().sum())
}

/// Every rule's expression of `rules` sent alone to the store as an
/// instant query (best of two), summed: what a round costs a store with
/// nothing else to do (call with the localizer paused; ingestion goes on).
pub fn time_rules_alone(store: &Server, rules: &RuleSet) -> Result<f64> {
    let mut total = 0.0;
    for (name, path) in &rules.files {
        let text = std::fs::read_to_string(path)?;
        for doc in yaml_docs(&text, name)? {
            for (_, rule) in group_rules(&doc) {
                let expr = rule["expr"].as_str().unwrap_or_default();
                let mut best = f64::INFINITY;
                for _ in 0..2 {
                    let started = Instant::now();
                    store
                        .query(expr)
                        .with_context(|| format!("{name}: {expr}"))?;
                    best = best.min(started.elapsed().as_secs_f64());
                }
                let what = rule["alert"].as_str().or(rule["record"].as_str());
                println!("  rule alone {}: {best:.3} s", what.unwrap_or("?"));
                total += best;
            }
        }
    }
    Ok(total)
}
