//! Alerting as operators expect it: every alert links to its runbook section
//! and dashboard, every runbook query is valid PromQL, every alert has a
//! promtool unit test that fires it and one that does not, and the
//! Alertmanager route subtree merges into a foreign configuration and
//! never drifts from the full example.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use skeletonhunter_common::topology::Kind;
use skeletonhunter_tools::deploy::{group_rules, read, yaml_docs};
use skeletonhunter_tools::repo::{
    markdown_anchor, markdown_anchors, repo_root, rule_files, yaml_files,
};
use skeletonhunter_tools::servers::{self, ServerOpts, TempDir};
use std::collections::{BTreeMap, BTreeSet};

/// Every alerting rule of `rules/*.yml` and the opt-in
/// `rules/pair-detail/*.yml` as (alert name, annotations).
fn rule_alerts() -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for f in rule_files() {
        let text = std::fs::read_to_string(&f)?;
        for doc in yaml_docs(&text, &f)? {
            for (_, rule) in group_rules(&doc) {
                if let Some(name) = rule["alert"].as_str() {
                    out.push((name.to_string(), rule["annotations"].clone()));
                }
            }
        }
    }
    assert!(out.len() >= 10, "only {} alerts in rules/", out.len());
    Ok(out)
}

/// The sections of docs/runbooks.md as (heading level, heading, body up
/// to the next heading); `#` lines inside code blocks are not headings.
fn runbook_sections() -> Result<Vec<(usize, String, String)>> {
    let mut out: Vec<(usize, String, String)> = Vec::new();
    let mut fenced = false;
    for line in read("docs/runbooks.md")?.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') {
            let level = line.chars().take_while(|c| *c == '#').count();
            out.push((level, line[level..].trim().to_string(), String::new()));
        } else if let Some(last) = out.last_mut() {
            last.2.push_str(line);
            last.2.push('\n');
        }
    }
    Ok(out)
}

/// docs/runbooks.md in the repository named by Cargo.toml's `repository`.
fn runbook_base() -> Result<String> {
    let manifest = read("Cargo.toml")?;
    let repo = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("repository = "))
        .context("Cargo.toml has no repository")?
        .trim_matches('"');
    Ok(format!("{repo}/blob/main/docs/runbooks.md"))
}

/// The uids of the shipped dashboards.
fn dashboard_uids() -> Result<BTreeSet<String>> {
    let dir = skeletonhunter_tests::dashboards::dashboards_dir();
    Ok(skeletonhunter_tests::dashboards::load_dashboards(&dir)?
        .into_iter()
        .map(|d| d.uid)
        .collect())
}

/// Every alert of `rules/` links to its own runbook section (the one per
/// kind for component alerts) and to a shipped dashboard; every runbook
/// section of an alert belongs to an alert that exists and says what it
/// means, what to check, the likely causes and when it resolves.
#[test]
fn every_alert_links_to_its_runbook_section_and_dashboard() -> Result<()> {
    let base = runbook_base()?;
    let sections = runbook_sections()?;
    let anchors: BTreeSet<String> = sections
        .iter()
        .map(|(_, h, _)| markdown_anchor(h))
        .collect();
    let uids = dashboard_uids()?;
    let alerts = rule_alerts()?;
    let mut problems = Vec::new();
    for (name, ann) in &alerts {
        let runbook = ann["runbook_url"].as_str().unwrap_or_default();
        let dashboard = ann["dashboard_url"].as_str().unwrap_or_default();
        let Some(fragment) = runbook.strip_prefix(&format!("{base}#")) else {
            problems.push(format!(
                "{name}: runbook_url {runbook:?} is not {base}#<anchor>"
            ));
            continue;
        };
        let wanted: Vec<String> = if fragment.contains("{{") {
            Kind::BLAMABLE
                .iter()
                .map(|k| fragment.replace("{{ $labels.kind }}", k.as_str()))
                .collect()
        } else {
            vec![fragment.to_string()]
        };
        for a in wanted {
            if !a.starts_with(&name.to_lowercase()) || !anchors.contains(&a) {
                problems.push(format!("{name}: no section #{a} in docs/runbooks.md"));
            }
        }
        let uid = dashboard
            .strip_prefix("/d/")
            .map(|r| r.split(['?', '{']).next().unwrap_or_default());
        if !uid.is_some_and(|u| uids.contains(u)) {
            problems.push(format!(
                "{name}: dashboard_url {dashboard:?} names no shipped dashboard {uids:?}"
            ));
        }
    }
    let names: BTreeSet<String> = alerts.iter().map(|(n, _)| n.to_lowercase()).collect();
    for (_, h, body) in &sections {
        if !h.starts_with("SkeletonHunter") {
            continue;
        }
        let alert = h.split(' ').next().unwrap_or_default().to_lowercase();
        if !names.contains(&alert) {
            problems.push(format!(
                "docs/runbooks.md: section {h:?} is for no alert of rules/"
            ));
        }
        // The component alert's own section is the common part; its
        // per-kind sections carry the checks.
        let parts: &[&str] = if h == "SkeletonHunterComponentFaulty" {
            &["**Meaning.**", "**Resolves**"]
        } else {
            &[
                "**Meaning.**",
                "**First checks.**",
                "**Likely causes.**",
                "**Resolves**",
            ]
        };
        for p in parts {
            if !body.contains(p) {
                problems.push(format!("docs/runbooks.md: section {h:?} lacks {p}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// The localizer's own alerts carry the same links by default: its
/// `--runbook-url` defaults to the rules' runbook base (what it appends,
/// per kind, is checked against docs/runbooks.md by its unit tests, and
/// the annotations of a real posted alert in `localizer/online.rs`).
#[test]
fn localizer_alert_links_default_to_the_rules_base() -> Result<()> {
    let out =
        std::process::Command::new(skeletonhunter_tools::bin_path("skeletonhunter-localizer"))
            .args(["run", "--help"])
            .output()?;
    let help = String::from_utf8_lossy(&out.stdout);
    let base = runbook_base()?;
    assert!(
        help.contains(&format!("[default: {base}]")),
        "run --help does not default --runbook-url to {base}:\n{help}"
    );
    assert!(help.contains("--grafana-url"), "{help}");
    Ok(())
}

/// Per alert name: (a case expecting it to fire, a case expecting silence)
/// in the promtool unit tests of `rules/tests/`.
fn promtool_cases() -> Result<BTreeMap<String, (bool, bool)>> {
    let mut cases: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for f in yaml_files("rules/tests") {
        for doc in yaml_docs(&std::fs::read_to_string(&f)?, &f)? {
            for t in doc["tests"].as_array().into_iter().flatten() {
                for c in t["alert_rule_test"].as_array().into_iter().flatten() {
                    let name = c["alertname"].as_str().unwrap_or_default().to_string();
                    let fires = c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
                    let e = cases.entry(name).or_default();
                    if fires {
                        e.0 = true;
                    } else {
                        e.1 = true;
                    }
                }
            }
        }
    }
    Ok(cases)
}

/// A new alert without a unit test fails here: every alert of `rules/` has
/// a promtool case where it fires and one where it does not (the tests
/// themselves run in `ops/config.rs`, `promtool_rule_unit_tests_pass`).
#[test]
fn every_alert_has_a_firing_and_a_silent_promtool_case() -> Result<()> {
    let cases = promtool_cases()?;
    let mut missing = Vec::new();
    for (name, _) in rule_alerts()? {
        match cases.get(&name) {
            Some((true, true)) => {}
            Some((fires, _)) => missing.push(format!(
                "{name}: no case where it {}",
                if *fires { "stays silent" } else { "fires" }
            )),
            None => missing.push(format!("{name}: no promtool case at all")),
        }
    }
    assert!(
        missing.is_empty(),
        "rules/tests lacks:\n{}",
        missing.join("\n")
    );
    Ok(())
}

/// The PromQL of the runbooks' `promql` blocks, one query per line
/// (indented lines continue the one above), placeholders `<...>` filled.
fn runbook_queries() -> Result<Vec<String>> {
    let text = read("docs/runbooks.md")?;
    let mut out: Vec<String> = Vec::new();
    for block in text.split("```promql\n").skip(1) {
        let body = block.split("```").next().unwrap_or_default();
        for line in body.lines() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            match out.last_mut() {
                Some(last) if line.starts_with(' ') => {
                    last.push(' ');
                    last.push_str(line.trim());
                }
                _ => out.push(line.to_string()),
            }
        }
    }
    let placeholder = |s: &str| -> String {
        let mut r = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('<') {
            r.push_str(&rest[..i]);
            match rest[i..].find('>') {
                Some(j)
                    if rest[i + 1..i + j]
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_') =>
                {
                    r.push('x');
                    rest = &rest[i + j + 1..];
                }
                _ => {
                    r.push('<');
                    rest = &rest[i + 1..];
                }
            }
        }
        r.push_str(rest);
        r
    };
    Ok(out.iter().map(|q| placeholder(q)).collect())
}

/// Every query the runbooks tell an operator to run is accepted by a real
/// Prometheus that loads the shipped rules.
#[test]
fn runbook_queries_are_valid_promql() -> Result<()> {
    let queries = runbook_queries()?;
    assert!(
        queries.len() >= 30,
        "only {} runbook queries",
        queries.len()
    );
    let prom = servers::start_prometheus(ServerOpts::new(
        servers::free_loopback_addr()?,
        "global: {scrape_interval: 1s}\n",
    ))?;
    let bad: Vec<String> = queries
        .iter()
        .filter_map(|q| prom.query(q).err().map(|e| format!("{q}\n    {e:#}")))
        .collect();
    assert!(
        bad.is_empty(),
        "runbook queries rejected:\n{}",
        bad.join("\n")
    );
    Ok(())
}

/// `alertmanager/` files as JSON: (full example, route subtree).
fn alertmanager_configs() -> Result<(Value, Value)> {
    let one = |rel: &str| -> Result<Value> {
        yaml_docs(&read(rel)?, rel)?
            .into_iter()
            .next()
            .with_context(|| format!("{rel} is empty"))
    };
    Ok((
        one("alertmanager/alertmanager.yml")?,
        one("alertmanager/skeletonhunter-route.yml")?,
    ))
}

/// The full example is a root route over exactly the subtree: the same
/// route, inhibition, receivers and templates, so the two cannot drift.
/// The subtree touches SkeletonHunter alerts only.
#[test]
fn alertmanager_full_example_is_the_subtree_under_a_root() -> Result<()> {
    let (full, sub) = alertmanager_configs()?;
    assert_eq!(
        full["route"]["routes"],
        json!([sub["route"]]),
        "route drifted"
    );
    for key in ["inhibit_rules", "receivers", "templates"] {
        assert!(
            sub[key].as_array().is_some_and(|a| !a.is_empty()),
            "subtree has no {key}"
        );
        assert_eq!(full[key], sub[key], "{key} drifted");
    }
    assert_eq!(
        sub["route"]["matchers"],
        json!(["alertname=~\"SkeletonHunter.+\""])
    );
    assert!(
        sub["route"]["continue"].is_null(),
        "the subtree must keep its alerts"
    );
    for rule in sub["inhibit_rules"].as_array().into_iter().flatten() {
        for side in ["source_matchers", "target_matchers"] {
            let scoped = rule[side]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|m| m.starts_with("alertname=") && m.contains("SkeletonHunter"));
            assert!(
                scoped,
                "inhibit rule {side} not limited to SkeletonHunter alerts: {rule}"
            );
        }
    }
    Ok(())
}

/// A configuration of someone else's Alertmanager: its own routes,
/// receivers and inhibition.
const FOREIGN: &str = r#"
global: {resolve_timeout: 5m}
route:
  receiver: foreign-default
  group_by: [alertname, instance]
  routes:
    - receiver: foreign-db
      matchers: ['team="db"']
receivers:
  - name: foreign-default
  - name: foreign-db
inhibit_rules:
  - source_matchers: ['alertname="NodeDown"']
    target_matchers: ['team="db"']
    equal: [instance]
"#;

/// Merge the subtree into `base` as docs/operations.md says: its route
/// first among the root's routes, the rest appended.
fn merge(mut base: Value, sub: &Value) -> Result<Value> {
    let mut routes = vec![sub["route"].clone()];
    routes.extend(
        base["route"]["routes"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    base["route"]["routes"] = Value::Array(routes);
    for key in ["inhibit_rules", "receivers", "templates"] {
        let mut list = base[key].as_array().cloned().unwrap_or_default();
        list.extend(sub[key].as_array().cloned().context(key)?);
        base[key] = Value::Array(list);
    }
    Ok(base)
}

/// The subtree merged into a foreign configuration passes the real
/// `amtool check-config`, routes SkeletonHunter alerts to its receivers and
/// leaves the foreign alerts (even one with SkeletonHunter-like labels)
/// where they went before.
#[test]
fn alertmanager_subtree_merges_into_a_foreign_config() -> Result<()> {
    let (_, sub) = alertmanager_configs()?;
    let foreign = yaml_docs(FOREIGN, "foreign config")?.remove(0);
    let merged = merge(foreign, &sub)?;
    let dir = TempDir::new("am-merge")?;
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(&config, yaml_serde::to_string(&merged)?)?;
    std::fs::create_dir(dir.path().join("templates"))?;
    for e in std::fs::read_dir(repo_root().join("alertmanager/templates"))? {
        let p = e?.path();
        std::fs::copy(
            &p,
            dir.path()
                .join("templates")
                .join(p.file_name().context("name")?),
        )?;
    }
    let config = config.display().to_string();
    let out = servers::amtool(&["check-config", &config])?.ok()?;
    assert!(out.stdout.contains("1 templates"), "{}", out.stdout);
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=tor",
                "severity=critical",
            ],
            "skeletonhunter-network-page",
        ),
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=host",
                "severity=critical",
            ],
            "skeletonhunter-compute-page",
        ),
        (
            &[
                "alertname=SkeletonHunterPairLoss",
                "kind=pair",
                "severity=warning",
            ],
            "skeletonhunter-ticket",
        ),
        (
            &[
                "alertname=SkeletonHunterExporterDown",
                "kind=exporter",
                "severity=warning",
                "team=db",
            ],
            "skeletonhunter-monitoring",
        ),
        (&["alertname=DiskFull", "team=db"], "foreign-db"),
        (
            &["alertname=HighLoad", "kind=tor", "severity=critical"],
            "foreign-default",
        ),
    ];
    for (labels, want) in cases {
        let got = servers::amtool_route(&config, labels)?;
        if got != *want {
            bail!("{labels:?} routed to {got:?}, want {want}");
        }
    }
    Ok(())
}

/// Every blamable kind's runbook anchor, as the localizer's alerts link
/// it, is a heading of docs/runbooks.md, and the alerts' dashboard uid is a
/// shipped dashboard's.
#[test]
fn runbook_anchors_and_dashboard_exist() -> Result<()> {
    use skeletonhunter_localizer::online::alerts::{runbook_anchor, DASHBOARD_UID};
    let anchors = markdown_anchors("docs/runbooks.md");
    for kind in Kind::BLAMABLE {
        let anchor = runbook_anchor(kind);
        assert!(
            anchors.contains(&anchor),
            "docs/runbooks.md has no heading for #{anchor}"
        );
    }
    let uids = dashboard_uids()?;
    assert!(uids.contains(DASHBOARD_UID), "{uids:?}");
    Ok(())
}
