//! The monitoring mixin (`mixin/`, jsonnet) is the source of `rules/*.yml`,
//! the opt-in `rules/pair-detail/*.yml`
//! and `dashboards/*.json`: rendered by the real `jsonnet` through
//! `mixin/render.sh`, it must give the shipped files byte for byte; its
//! monitoring-mixin fields (`prometheusRules`, `prometheusAlerts`,
//! `grafanaDashboards`) must hold what those files hold; and `_config`
//! overrides must reach the rules and dashboards they name.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_tools::deploy::{self, group_rules, require_tool, yaml_docs};
use skeletonhunter_tools::fabric::{
    default_rule_files, pair_detail_rule_files, shipped_rule_files,
};
use skeletonhunter_tools::process::run_tool;
use skeletonhunter_tools::repo::{repo_root, PAIR_DETAIL_RULES};
use skeletonhunter_tools::servers::TempDir;
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
    let dirs = [
        ("rules", ".yml"),
        (PAIR_DETAIL_RULES, ".yml"),
        ("dashboards", ".json"),
    ];
    for (dir, ext) in dirs {
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
    for dir in ["rules", PAIR_DETAIL_RULES] {
        for (name, text) in texts(&repo_root(), dir, ".yml")? {
            assert!(
                text.starts_with("# GENERATED from mixin/"),
                "{dir}/{name} lacks the header saying it is generated"
            );
        }
    }
    Ok(())
}

/// The groups of every shipped rule file, by path (`rules/...`).
fn shipped_groups() -> Result<BTreeMap<String, Vec<Value>>> {
    let mut out = BTreeMap::new();
    for (name, path) in shipped_rule_files()? {
        let text = std::fs::read_to_string(&path)?;
        let doc = yaml_docs(&text, &name)?
            .into_iter()
            .next()
            .context("empty YAML")?;
        let groups = doc["groups"].as_array().cloned().unwrap_or_default();
        out.insert(name, groups);
    }
    Ok(out)
}

/// The monitoring-mixin fields hold exactly the shipped groups and
/// dashboards, for users who render the mixin with their own tooling: by
/// default the default rule file's alerts and no recording rule; with
/// `pairDetail: true` the recordings of `rules/pair-detail/` and the pair
/// alerts before the other alert groups.
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
         local d = m + { _config+:: { pairDetail: true } }; \
         {rules: m.prometheusRules, alerts: m.prometheusAlerts, dashboards: m.grafanaDashboards, \
          detailRules: d.prometheusRules, detailAlerts: d.prometheusAlerts}",
    )?;
    let files = shipped_groups()?;
    assert_eq!(
        m["rules"]["groups"],
        Value::Array(vec![]),
        "prometheusRules"
    );
    let alerts = &files["rules/skeletonhunter.alerts.yml"];
    assert_eq!(
        m["alerts"]["groups"],
        Value::Array(alerts.clone()),
        "prometheusAlerts"
    );

    let recording: Vec<Value> = ["skeletonhunter.rules.yml", "skeletonhunter.aggregates.yml"]
        .iter()
        .flat_map(|f| files[&format!("{PAIR_DETAIL_RULES}/{f}")].clone())
        .collect();
    assert_eq!(
        m["detailRules"]["groups"],
        Value::Array(recording),
        "prometheusRules with pairDetail"
    );
    let pair_alerts = &files[&format!("{PAIR_DETAIL_RULES}/skeletonhunter.pair-alerts.yml")];
    let detail = m["detailAlerts"]["groups"].as_array().context("groups")?;
    assert_eq!(
        detail[..pair_alerts.len()],
        pair_alerts[..],
        "prometheusAlerts with pairDetail: the pair alerts first"
    );
    let names = |groups: &[Value]| -> Vec<String> {
        let names = groups.iter().filter_map(|g| g["name"].as_str());
        names.map(String::from).collect()
    };
    assert_eq!(
        names(&detail[pair_alerts.len()..]),
        names(alerts),
        "prometheusAlerts with pairDetail: then the default groups"
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
    let configs = [
        ("default", "{}"),
        ("pair-detail", "{pairDetail: true}"),
        ("native", "{pairDetail: true, nativeHistograms: true}"),
    ];
    for (name, config) in configs {
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
        assert!(names.len() >= 2, "{name}: only {names:?}");
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
          pairDetail: true,
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

    let pair_alerts = doc("rules/pair-detail/skeletonhunter.pair-alerts.yml")?;
    let loss = rule(&pair_alerts, "alert", "SkeletonHunterPairLoss");
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

    let rules = doc("rules/pair-detail/skeletonhunter.rules.yml")?;
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

/// (group, name, expr) of every rule of a rule file's first document.
fn rules_of(text: &str, what: &str) -> Result<Vec<(String, String, String)>> {
    let doc = yaml_docs(text, what)?
        .into_iter()
        .next()
        .context("empty YAML")?;
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Ok(group_rules(&doc)
        .into_iter()
        .map(|(g, r)| {
            let name = r["alert"].as_str().or(r["record"].as_str());
            (
                g.to_string(),
                name.unwrap_or_default().to_string(),
                s(&r["expr"]),
            )
        })
        .collect())
}

/// The default rule set, `rules/*.yml`, is the one for any fleet size: no
/// expression reads a probe series, a series the pair detail records
/// (`pair:`, `topology:`, `torpair…`, per ToR/spine/tenant) or every
/// node's identity (`skeletonhunter_node_info`), so a round costs the same
/// at any number of pairs (only `up` grows, with the exporters). The
/// opt-in `rules/pair-detail/*.yml` holds those, shares no group and no
/// rule name with the default files (loaded together, nothing is
/// evaluated twice), and `promtool` loads both together.
#[test]
fn default_rules_read_no_pair_or_node_series() -> Result<()> {
    let (default, detail) = (default_rule_files()?, pair_detail_rule_files()?);
    assert!(!default.is_empty(), "no rules/*.yml");
    assert!(detail.len() >= 3, "the pair detail: {detail:?}");
    let read = |files: &[(String, std::path::PathBuf)]| -> Result<Vec<_>> {
        let mut out = Vec::new();
        for (name, path) in files {
            out.extend(rules_of(&std::fs::read_to_string(path)?, name)?);
        }
        Ok(out)
    };
    let (cheap, opt_in) = (read(&default)?, read(&detail)?);

    let mut forbidden = vec![
        "skeletonhunter_probe_".to_string(),
        "skeletonhunter_node_info".to_string(),
        "pair:".to_string(),
        "topology:".to_string(),
        "torpair".to_string(),
    ];
    let recorded = opt_in.iter().filter(|(_, name, _)| name.contains(':'));
    forbidden.extend(recorded.map(|(_, name, _)| name.clone()));
    assert!(
        forbidden.iter().any(|f| f.starts_with("src:")) && forbidden.len() > 30,
        "the pair detail's recorded series were read: {forbidden:?}"
    );
    assert!(cheap.len() > 5, "only {} default rules", cheap.len());
    for (group, name, expr) in &cheap {
        for series in &forbidden {
            assert!(
                !expr.contains(series.as_str()),
                "default rules: group {group}, {name} reads {series}: {expr}"
            );
        }
    }

    let groups = |rules: &[(String, String, String)]| -> BTreeSet<String> {
        rules.iter().map(|(g, _, _)| g.clone()).collect()
    };
    let names = |rules: &[(String, String, String)]| -> BTreeSet<String> {
        rules.iter().map(|(_, n, _)| n.clone()).collect()
    };
    let both: Vec<_> = groups(&cheap)
        .intersection(&groups(&opt_in))
        .cloned()
        .collect();
    assert!(both.is_empty(), "groups in both sets: {both:?}");
    let both: Vec<_> = names(&cheap)
        .intersection(&names(&opt_in))
        .cloned()
        .collect();
    assert!(both.is_empty(), "rules in both sets: {both:?}");
    let pair_alerts = ["SkeletonHunterPairUnreachable", "SkeletonHunterPairLoss"];
    for alert in pair_alerts {
        assert!(
            names(&opt_in).contains(alert),
            "the pair detail lacks {alert}"
        );
    }

    // The opt-in loads beside the default files, in one Prometheus.
    let mut args = vec!["check".to_string(), "rules".to_string()];
    let paths = default.iter().chain(&detail);
    args.extend(paths.map(|(_, p)| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_tool("promtool", &args, None)?.ok()?;
    Ok(())
}

/// `pairDetail: true` renders the same pair-detail files as shipped, and
/// an alerts file with the same alerts whose exporter-down and node alerts
/// join every node's identity for their location (the other alerts are
/// the default's, expression for expression). Loaded with the pair
/// detail, those alerts fire with the location labels Alertmanager's
/// inhibition matches, by `promtool test rules`.
#[test]
fn pair_detail_alerts_carry_the_location() -> Result<()> {
    if !require_tool("pair_detail_alerts_carry_the_location", "jsonnet", INSTALL) {
        return Ok(());
    }
    let files = render_with("{ pairDetail: true }")?;
    let detail: Vec<&String> = files
        .keys()
        .filter(|p| p.starts_with(&format!("{PAIR_DETAIL_RULES}/")))
        .collect();
    assert_eq!(detail.len(), pair_detail_rule_files()?.len(), "{detail:?}");
    for path in &detail {
        let shipped = std::fs::read_to_string(repo_root().join(path))?;
        // `jsonnet -S -m` (render.sh) ends each file with a newline.
        assert!(
            shipped.trim_end() == files[*path].trim_end(),
            "{path} differs with pairDetail: true"
        );
    }
    let alerts = "rules/skeletonhunter.alerts.yml";
    let located = rules_of(&files[alerts], "pairDetail alerts")?;
    let shipped = rules_of(&std::fs::read_to_string(repo_root().join(alerts))?, alerts)?;
    let names = |rules: &[(String, String, String)]| -> Vec<(String, String)> {
        rules
            .iter()
            .map(|(g, n, _)| (g.clone(), n.clone()))
            .collect()
    };
    assert_eq!(names(&located), names(&shipped), "the same alerts");
    let joined = [
        "SkeletonHunterComponentFaulty",
        "SkeletonHunterExporterDown",
    ];
    for ((_, name, expr), (_, _, default)) in located.iter().zip(&shipped) {
        if joined.contains(&name.as_str()) {
            assert!(expr.contains("skeletonhunter_node_info"), "{name}: {expr}");
        } else {
            assert_eq!(expr, default, "{name}");
        }
    }

    let dir = TempDir::new("mixin-pair-detail-fire")?;
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("rules/")) {
        let to = dir.path().join(path);
        std::fs::create_dir_all(to.parent().context("a parent")?)?;
        std::fs::write(to, text)?;
    }
    let test = deploy::read("tests/fixtures/mixin/pair_detail_test.yml")?;
    let path = dir.path().join("pair_detail_test.yml");
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
