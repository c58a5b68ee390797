//! The monitoring mixin (`mixin/`, jsonnet) is the source of `rules/*.yml`
//! and `dashboards/*.json`: rendered by the real `jsonnet` through
//! `mixin/render.sh`, it must give the shipped files byte for byte; its
//! monitoring-mixin fields (`prometheusRules`, `prometheusAlerts`,
//! `grafanaDashboards`) must hold what those files hold; and `_config`
//! overrides must reach the rules and dashboards they name.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_tests::deploy::{self, group_rules, require_tool, yaml_docs};
use skeletonhunter_tests::fabric::shipped_rule_files;
use skeletonhunter_tests::process::run_tool;
use skeletonhunter_tests::repo::repo_root;
use skeletonhunter_tests::servers::TempDir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const INSTALL: &str = "apt-get install jsonnet (scripts/setup.sh does)";

/// Files of `dir` (relative to `root`) ending in `ext`, as name -> text.
fn texts(root: &Path, dir: &str, ext: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(root.join(dir)).with_context(|| format!("read {dir}"))? {
        let p = e?.path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if p.is_file() && name.ends_with(ext) {
            let text = std::fs::read_to_string(&p).with_context(|| format!("read {dir}/{name}"))?;
            out.insert(name, text);
        }
    }
    Ok(out)
}

/// Where two texts first differ, as a message naming `file` and the line.
fn first_difference(file: &str, shipped: &str, rendered: &str) -> Option<String> {
    if shipped == rendered {
        return None;
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (shipped.lines().collect(), rendered.lines().collect());
    let at = (0..a.len().max(b.len()))
        .find(|&i| a.get(i) != b.get(i))
        .unwrap_or(a.len());
    let show = |l: Option<&&str>| l.map_or("<end of file>".to_string(), |l| format!("{l:?}"));
    Some(format!(
        "{file}: line {}\n  shipped:  {}\n  rendered: {}",
        at + 1,
        show(a.get(at)),
        show(b.get(at))
    ))
}

/// `jsonnet -J mixin -e <code>` evaluated as JSON.
fn eval(code: &str) -> Result<Value> {
    let mixin = repo_root().join("mixin");
    let out = run_tool(
        "jsonnet",
        &["-J", &mixin.display().to_string(), "-e", code],
        None,
    )?
    .ok()?;
    serde_json::from_str(&out.stdout).context("jsonnet output is not JSON")
}

#[test]
fn shipped_files_are_the_rendered_mixin() -> Result<()> {
    if !require_tool("shipped_files_are_the_rendered_mixin", "jsonnet", INSTALL) {
        return Ok(());
    }
    let out = TempDir::new("mixin")?;
    let script = repo_root().join("mixin/render.sh").display().to_string();
    run_tool(&script, &[&out.path().display().to_string()], None)?.ok()?;
    let mut problems = Vec::new();
    for (dir, ext) in [("rules", ".yml"), ("dashboards", ".json")] {
        let shipped = texts(&repo_root(), dir, ext)?;
        let rendered = texts(out.path(), dir, ext)?;
        let names: BTreeSet<&String> = shipped.keys().chain(rendered.keys()).collect();
        for name in names {
            let file = format!("{dir}/{name}");
            match (shipped.get(name), rendered.get(name)) {
                (Some(s), Some(r)) => problems.extend(first_difference(&file, s, r)),
                (Some(_), None) => {
                    problems.push(format!("{file}: shipped, not rendered by the mixin"));
                }
                (None, Some(_)) => {
                    problems.push(format!("{file}: rendered by the mixin, not shipped"));
                }
                (None, None) => {}
            }
        }
        if rendered.is_empty() {
            problems.push(format!("the mixin rendered no {dir}/*{ext}"));
        }
    }
    if !problems.is_empty() {
        bail!(
            "the shipped files are not the mixin's output; edit mixin/ and run mixin/render.sh:\n{}",
            problems.join("\n")
        );
    }
    for (name, text) in texts(&repo_root(), "rules", ".yml")? {
        assert!(
            text.starts_with("# GENERATED from mixin/"),
            "rules/{name} lacks the header saying it is generated"
        );
    }
    Ok(())
}

/// The monitoring-mixin fields hold exactly the shipped groups and
/// dashboards, for users who render the mixin with their own tooling.
#[test]
fn mixin_fields_hold_the_shipped_rules_and_dashboards() -> Result<()> {
    if !require_tool(
        "mixin_fields_hold_the_shipped_rules_and_dashboards",
        "jsonnet",
        INSTALL,
    ) {
        return Ok(());
    }
    let m = eval(
        "local m = import 'mixin.libsonnet'; \
         {rules: m.prometheusRules, alerts: m.prometheusAlerts, dashboards: m.grafanaDashboards}",
    )?;
    let files: BTreeMap<String, Vec<Value>> = deploy::rules_groups()?.into_iter().collect();
    let recording: Vec<Value> = ["skeletonhunter.rules.yml", "skeletonhunter.aggregates.yml"]
        .iter()
        .flat_map(|f| files[*f].clone())
        .collect();
    assert_eq!(
        m["rules"]["groups"],
        Value::Array(recording),
        "prometheusRules"
    );
    assert_eq!(
        m["alerts"]["groups"],
        Value::Array(files["skeletonhunter.alerts.yml"].clone()),
        "prometheusAlerts"
    );
    let dashboards = deploy::dashboards()?;
    assert_eq!(
        m["dashboards"].as_object().map(serde_json::Map::len),
        Some(dashboards.len())
    );
    for (name, shipped) in dashboards {
        assert_eq!(m["dashboards"][&name], shipped, "grafanaDashboards[{name}]");
    }
    Ok(())
}

/// kube-prometheus' `addMixin` puts `prometheusAlerts` and `prometheusRules`
/// into one PrometheusRule, which prometheus-operator writes to one rule
/// file: every group name must be unique across both fields, or Prometheus
/// refuses the file (and with it every rule of the mixin). Combined the same
/// way (alerts first, as addMixin does), `promtool check rules` accepts it.
#[test]
fn add_mixin_combination_passes_promtool() -> Result<()> {
    if !require_tool("add_mixin_combination_passes_promtool", "jsonnet", INSTALL)
        || !require_tool("add_mixin_combination_passes_promtool", "promtool", INSTALL)
    {
        return Ok(());
    }
    let dir = TempDir::new("mixin-addmixin")?;
    for (name, config) in [("default", "{}"), ("native", "{nativeHistograms: true}")] {
        let spec = eval(&format!(
            "local m = (import 'mixin.libsonnet') + {{ _config+:: {config} }}; \
             {{groups: m.prometheusAlerts.groups + m.prometheusRules.groups}}"
        ))?;
        let names: Vec<&str> = spec["groups"]
            .as_array()
            .context("groups")?
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(
            unique.len(),
            names.len(),
            "{name}: a group name repeats: {names:?}"
        );
        assert!(names.len() >= 5, "{name}: only {names:?}");
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, spec.to_string())?;
        let out = run_tool(
            "promtool",
            &["check", "rules", &file.display().to_string()],
            None,
        )?;
        assert!(
            out.success,
            "{name}: promtool refuses the addMixin combination:\n{}{}",
            out.stdout, out.stderr
        );
    }
    Ok(())
}

/// The rendered files with `overrides` merged into `_config`, as path -> text.
fn render_with(overrides: &str) -> Result<BTreeMap<String, String>> {
    let v = eval(&format!(
        "(import 'lib/files.libsonnet')((import 'mixin.libsonnet') + {{ _config+:: {overrides} }})"
    ))?;
    let obj = v.as_object().context("rendered files are not an object")?;
    Ok(obj
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect())
}

/// The rule with `key` = `name` among the groups of a rendered rule file.
fn rule<'a>(groups: &'a Value, key: &str, name: &str) -> &'a Value {
    group_rules(groups)
        .into_iter()
        .map(|(_, r)| r)
        .find(|r| r[key] == name)
        .unwrap_or_else(|| panic!("no rule {key}: {name}"))
}

/// The expr of the panel titled `title`'s first target.
fn panel_expr<'a>(dashboard: &'a Value, title: &str) -> &'a str {
    dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["title"] == title)
        .and_then(|p| p["targets"][0]["expr"].as_str())
        .unwrap_or_else(|| panic!("no panel {title:?} with a query"))
}

#[test]
fn config_overrides_reach_rules_and_dashboards() -> Result<()> {
    if !require_tool(
        "config_overrides_reach_rules_and_dashboards",
        "jsonnet",
        INSTALL,
    ) {
        return Ok(());
    }
    let files = render_with(
        r#"{
          exporterSelector: 'job="gpu-probes"',
          localizerSelector: 'job="sh-localizer"',
          runbookURL: 'https://wiki.example/sh-runbooks',
          grafanaURL: 'https://grafana.example',
          dashboardUids+: { fabric: 'net-fabric' },
          dashboardRefresh: '1m',
          labels+: { node: 'node_id', pod: 'network_pod' },
          pairLossThreshold: 0.02,
          pairLossFor: '10m',
        }"#,
    )?;
    let doc = |path: &str| -> Result<Value> {
        let text = files
            .get(path)
            .with_context(|| format!("{path} not rendered"))?;
        if path.ends_with(".json") {
            return Ok(serde_json::from_str(text)?);
        }
        yaml_docs(text, path)?
            .into_iter()
            .next()
            .context("empty YAML")
    };
    let alerts = doc("rules/skeletonhunter.alerts.yml")?;
    let down = rule(&alerts, "alert", "SkeletonHunterExporterDown");
    let expr = down["expr"].as_str().unwrap_or_default();
    assert!(expr.contains(r#"up{job="gpu-probes"} == 0"#), "{expr}");
    assert!(!expr.contains("skeletonhunter-exporter"), "{expr}");
    assert!(
        expr.contains("group_left (node_id, host, tor, spine, network_pod, tenant)"),
        "{expr}"
    );
    let absent = rule(&alerts, "alert", "SkeletonHunterExportersAbsent");
    assert_eq!(
        absent["annotations"]["summary"],
        "Prometheus has no gpu-probes targets"
    );
    let loc = rule(&alerts, "alert", "SkeletonHunterLocalizerDown");
    assert!(loc["expr"]
        .as_str()
        .unwrap_or_default()
        .contains(r#"up{job="sh-localizer"}"#));

    let loss = rule(&alerts, "alert", "SkeletonHunterPairLoss");
    assert!(loss["expr"]
        .as_str()
        .unwrap_or_default()
        .contains(") > 0.02,"));
    assert_eq!(loss["for"], "10m");
    let desc = loss["annotations"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(desc.ends_with("lost over 2% for 10 minutes."), "{desc}");
    assert_eq!(
        loss["annotations"]["runbook_url"],
        "https://wiki.example/sh-runbooks#skeletonhunterpairloss"
    );
    let link = loss["annotations"]["dashboard_url"]
        .as_str()
        .unwrap_or_default();
    assert!(
        link.starts_with("https://grafana.example/d/net-fabric{{"),
        "{link}"
    );

    let rules = doc("rules/skeletonhunter.rules.yml")?;
    let src = rule(&rules, "record", "src:skeletonhunter_node_info:relabel");
    let expr = src["expr"].as_str().unwrap_or_default();
    assert!(
        expr.contains(r#""src_node", "$1", "node_id", "(.*)""#),
        "{expr}"
    );
    assert!(
        expr.contains(r#""src_pod", "$1", "network_pod", "(.*)""#),
        "{expr}"
    );
    assert!(expr.contains("topk by (node_id)"), "{expr}");

    let fabric = doc("dashboards/skeletonhunter-fabric.json")?;
    assert_eq!(fabric["uid"], "net-fabric");
    assert_eq!(fabric["refresh"], "1m");
    let health = doc("dashboards/skeletonhunter-health.json")?;
    assert!(panel_expr(&health, "Localizer scrape").contains(r#"job="sh-localizer""#));
    let tenant = doc("dashboards/skeletonhunter-tenant.json")?;
    let nodes = panel_expr(&tenant, "Nodes");
    assert!(
        nodes.starts_with("max by (node_id, nic, host, tor, spine, network_pod)"),
        "{nodes}"
    );

    // The overridden rules are still rules Prometheus loads.
    let dir = TempDir::new("mixin-override")?;
    let mut paths = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.ends_with(".yml")) {
        let p = dir.path().join(path.replace('/', "_"));
        std::fs::write(&p, text)?;
        paths.push(p.display().to_string());
    }
    let mut args = vec!["check", "rules"];
    args.extend(paths.iter().map(String::as_str));
    run_tool("promtool", &args, None)?.ok()?;
    Ok(())
}

/// `largeFleet: true`, the rule set for large fleets: only the alerting
/// file, whose rules read no probe series, no recorded series and no
/// node identities, so a round costs the same at any number of pairs (only
/// `up` grows, with the exporters); it keeps every shipped alert but the
/// pair alerts, and Prometheus loads it.
#[test]
fn large_fleet_rules_read_no_pair_or_node_series() -> Result<()> {
    if !require_tool(
        "large_fleet_rules_read_no_pair_or_node_series",
        "jsonnet",
        INSTALL,
    ) {
        return Ok(());
    }
    let files = render_with("{ largeFleet: true }")?;
    let rule_files: Vec<&String> = files.keys().filter(|p| p.starts_with("rules/")).collect();
    assert_eq!(rule_files, ["rules/skeletonhunter.alerts.yml"]);
    let text = &files["rules/skeletonhunter.alerts.yml"];
    let first = |text: &str, what: &str| -> Result<Value> {
        yaml_docs(text, what)?
            .into_iter()
            .next()
            .context("empty YAML")
    };
    let large = first(text, "large-fleet alerts")?;
    let shipped_path = repo_root().join("rules/skeletonhunter.alerts.yml");
    let shipped = first(&std::fs::read_to_string(shipped_path)?, "shipped alerts")?;

    // (group, alert, expr) of every rule of a rule file.
    let rules = |doc: &Value| -> Vec<(String, String, String)> {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let rules = group_rules(doc).into_iter();
        rules
            .map(|(g, r)| (g.to_string(), s(&r["alert"]), s(&r["expr"])))
            .collect()
    };
    let names = |rules: &[(String, String, String)]| -> Vec<(String, String)> {
        rules
            .iter()
            .map(|(g, a, _)| (g.clone(), a.clone()))
            .collect()
    };
    let kept = rules(&large);
    let wanted: Vec<_> = rules(&shipped)
        .into_iter()
        .filter(|(group, _, _)| group != "skeletonhunter-pair-alerts")
        .collect();
    assert!(
        wanted.len() > 2,
        "the shipped alerts are more than the pair alerts"
    );
    assert_eq!(
        names(&kept),
        names(&wanted),
        "every shipped alert but the pair group"
    );
    // Every series the shipped recording rules record, and the raw series
    // read per pair or per node.
    let mut forbidden = vec![
        "skeletonhunter_probe_".to_string(),
        "skeletonhunter_node_info".to_string(),
    ];
    for (name, path) in shipped_rule_files()? {
        let doc = first(&std::fs::read_to_string(&path)?, &name)?;
        for (_, r) in group_rules(&doc) {
            forbidden.extend(r["record"].as_str().map(String::from));
        }
    }
    assert!(
        forbidden.iter().any(|f| f.starts_with("src:")) && forbidden.len() > 30,
        "the shipped recorded series were read: {forbidden:?}"
    );
    for (_, name, expr) in &kept {
        for series in &forbidden {
            assert!(
                !expr.contains(series.as_str()),
                "{name} reads {series}: {expr}"
            );
        }
    }

    let dir = TempDir::new("mixin-large-fleet")?;
    let path = dir.path().join("alerts.yml");
    std::fs::write(&path, text)?;
    run_tool(
        "promtool",
        &["check", "rules", &path.display().to_string()],
        None,
    )?
    .ok()?;
    Ok(())
}

/// The large-fleet alerts fire as the shipped ones do, by `promtool test
/// rules`: an exporter down names its last identity in its description
/// (looked up for that alert alone) or says none was reported, and a node
/// alert of the localizer is mirrored with the node's labels but no
/// location.
#[test]
fn large_fleet_alerts_fire_with_their_identity() -> Result<()> {
    if !require_tool(
        "large_fleet_alerts_fire_with_their_identity",
        "jsonnet",
        INSTALL,
    ) {
        return Ok(());
    }
    let files = render_with("{ largeFleet: true }")?;
    let dir = TempDir::new("mixin-large-fleet-fire")?;
    std::fs::write(
        dir.path().join("alerts.yml"),
        &files["rules/skeletonhunter.alerts.yml"],
    )?;
    let runbooks = "https://github.com/skeletonhunter/skeletonhunter/blob/main/docs/runbooks.md";
    let test = format!(
        r#"rule_files: [alerts.yml]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
      - series: 'up{{job="skeletonhunter-exporter",instance="h1:9100"}}'
        values: '1 1 1 1 0x16'
      - series: 'up{{job="skeletonhunter-exporter",instance="h9:9100"}}'
        values: '0x20'
      - series: 'skeletonhunter_node_info{{job="skeletonhunter-exporter",instance="h1:9100",node_id="a",nic="10.0.0.1",host="h1",tor="t1",spine="s1",network_pod="p1",tenant="j1"}}'
        values: '1 1 1 1'
      - series: 'skeletonhunter_component_alerting{{job="skeletonhunter-localizer",instance="loc:9200",kind="node",id="a",symptom="loss",severity="warning"}}'
        values: '1x20'
    alert_rule_test:
      - alertname: SkeletonHunterExporterDown
        eval_time: 3m
        exp_alerts:
          - exp_labels:
              alertname: SkeletonHunterExporterDown
              kind: exporter
              severity: warning
              job: skeletonhunter-exporter
              instance: h1:9100
              component: h1:9100
            exp_annotations:
              runbook_url: "{runbooks}#skeletonhunterexporterdown"
              dashboard_url: "/d/skeletonhunter-health?var-instance=h1%3A9100"
              summary: "SkeletonHunter exporter h1:9100 is down"
              description: "Prometheus cannot scrape the exporter at h1:9100 (host h1, ToR t1). Its skeleton pairs are not probed and the localizer cannot see them."
          - exp_labels:
              alertname: SkeletonHunterExporterDown
              kind: exporter
              severity: warning
              job: skeletonhunter-exporter
              instance: h9:9100
              component: h9:9100
            exp_annotations:
              runbook_url: "{runbooks}#skeletonhunterexporterdown"
              dashboard_url: "/d/skeletonhunter-health?var-instance=h9%3A9100"
              summary: "SkeletonHunter exporter h9:9100 is down"
              description: "Prometheus cannot scrape the exporter at h9:9100 (no identity reported in the last 1h). Its skeleton pairs are not probed and the localizer cannot see them."
      - alertname: SkeletonHunterComponentFaulty
        eval_time: 1m
        exp_alerts:
          - exp_labels:
              alertname: SkeletonHunterComponentFaulty
              origin: prometheus
              kind: node
              id: a
              symptom: loss
              severity: warning
              component: a
              node_id: a
              src_node: a
              dst_node: a
            exp_annotations:
              runbook_url: "{runbooks}#skeletonhuntercomponentfaulty-node"
              dashboard_url: "/d/skeletonhunter-fabric"
              summary: "SkeletonHunter blames node a (loss)"
              description: "The SkeletonHunter localizer's tomography marks node a faulty (estimated failure probability n/a)."
              evidence: "blame n/a"
"#
    );
    let path = dir.path().join("alerts_test.yml");
    std::fs::write(&path, test)?;
    let out = run_tool(
        "promtool",
        &["test", "rules", &path.display().to_string()],
        None,
    )?;
    assert!(
        out.success,
        "promtool test rules:\n{}{}",
        out.stdout, out.stderr
    );
    Ok(())
}
