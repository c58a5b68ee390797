//! SkeletonHunter in a default kube-prometheus installation, whose pieces
//! each fail silently unless the deployment accounts for them
//! (`tests/fixtures/kube-prometheus/` restates what kube-prometheus ships):
//! its Prometheus may discover pods only in its own namespaces (RBAC), its
//! NetworkPolicies admit its Prometheus and Alertmanager only from its own
//! pods, and its Alertmanager inhibition lets any critical alert silence
//! every warning of the same alertname and namespace. The mixin's
//! `addMixin` combination is checked in `ops_mixin`.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use skeletonhunter_tests::deploy::{self, kustomized, yaml_docs};
use skeletonhunter_tests::netpol::{allows, PodRef};
use skeletonhunter_tests::repo::{markdown_anchors, repo_root};
use skeletonhunter_tests::servers::{self, ServerOpts, TempDir};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The kustomization with the monitoring namespace's objects.
const MONITORING_DIR: &str = "deploy/kubernetes/monitoring";
/// kube-prometheus' Prometheus service account.
const PROMETHEUS_SA: (&str, &str) = ("monitoring", "prometheus-k8s");

fn fixture(name: &str) -> Result<Vec<Value>> {
    let rel = format!("tests/fixtures/kube-prometheus/{name}");
    yaml_docs(&deploy::read(&rel)?, &rel)
}

/// The localizer's `--<flag>=URL` arguments as (namespace of the service,
/// port): `http://svc.ns.svc:port`.
fn localizer_targets(objs: &[Value], flag: &str) -> Result<Vec<(String, u16)>> {
    let d = deploy::find(objs, "Deployment", "skeletonhunter-localizer")?;
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .context("localizer args")?;
    let prefix = format!("--{flag}=");
    let mut out = Vec::new();
    for a in args.iter().filter_map(Value::as_str) {
        let Some(url) = a.strip_prefix(&prefix) else {
            continue;
        };
        let authority = url.split("://").nth(1).unwrap_or(url);
        let (host, port) = authority
            .trim_end_matches('/')
            .rsplit_once(':')
            .with_context(|| format!("{a}: no port"))?;
        let ns = host
            .split('.')
            .rev()
            .nth(1)
            .context("host without namespace")?;
        out.push((ns.to_string(), port.parse()?));
    }
    if out.is_empty() {
        bail!("the localizer has no --{flag}");
    }
    Ok(out)
}

/// kube-prometheus' Prometheus (`prometheus-k8s` in `monitoring`) may list
/// and watch what the PodMonitor and ServiceMonitor select, in the
/// namespace they live in: a RoleBinding there to its service account,
/// left in `monitoring` by kustomize (the subject's namespace is explicit).
#[test]
fn prometheus_k8s_may_discover_the_monitored_namespace() -> Result<()> {
    let objs = kustomized(deploy::KUBE_DIR)?;
    let (sa_ns, sa) = PROMETHEUS_SA;
    let prom_ns = &localizer_targets(&objs, "prometheus")?[0].0;
    assert_eq!(
        prom_ns, sa_ns,
        "the localizer's Prometheus is kube-prometheus'"
    );
    // What each monitor kind makes Prometheus list and watch.
    let mut needed: BTreeSet<(&str, String)> = BTreeSet::new();
    for m in objs
        .iter()
        .filter(|o| o["apiVersion"] == "monitoring.coreos.com/v1")
    {
        let ns = m["metadata"]["namespace"]
            .as_str()
            .context("monitor namespace")?;
        assert!(
            m["spec"].get("namespaceSelector").is_none(),
            "monitors select their own namespace"
        );
        let resources: &[&str] = match m["kind"].as_str() {
            Some("PodMonitor") => &["pods"],
            Some("ServiceMonitor") => &["services", "endpoints"],
            _ => &[],
        };
        needed.extend(resources.iter().map(|r| (*r, ns.to_string())));
    }
    assert!(needed.len() >= 3, "monitors: {needed:?}");
    let bindings: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "RoleBinding")
        .filter(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == sa_ns
            })
        })
        .collect();
    let mut granted: BTreeSet<(String, String)> = BTreeSet::new();
    for b in &bindings {
        assert_eq!(b["roleRef"]["kind"], "Role", "{b}");
        let role = deploy::find(&objs, "Role", b["roleRef"]["name"].as_str().unwrap_or(""))?;
        let ns = b["metadata"]["namespace"]
            .as_str()
            .context("binding namespace")?;
        assert_eq!(role["metadata"]["namespace"].as_str(), Some(ns));
        for rule in role["rules"].as_array().into_iter().flatten() {
            let verbs: BTreeSet<&str> = rule["verbs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !["get", "list", "watch"].iter().all(|v| verbs.contains(v)) {
                continue;
            }
            let core = rule["apiGroups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g == ""));
            for r in rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|_| core)
            {
                granted.insert((r.as_str().unwrap_or("").to_string(), ns.to_string()));
            }
        }
    }
    let missing: Vec<_> = needed
        .iter()
        .filter(|(r, ns)| !granted.contains(&(r.to_string(), ns.clone())))
        .collect();
    assert!(
        missing.is_empty(),
        "{sa_ns}/{sa} may not get/list/watch {missing:?} (bindings: {})",
        bindings.len()
    );
    Ok(())
}

/// With kube-prometheus' NetworkPolicies in force, the localizer's pods
/// reach its Prometheus on the `--prometheus` port and its Alertmanager on
/// the `--alertmanager` port: the localizer's own egress policy and the
/// shipped policies of `deploy/kubernetes/monitoring` admit it. The
/// exporter's pods are still refused (the policies admit the localizer, not
/// the namespace).
#[test]
fn localizer_reaches_kube_prometheus_through_network_policies() -> Result<()> {
    let ours = kustomized(deploy::KUBE_DIR)?;
    let monitoring = kustomized(MONITORING_DIR)?;
    let theirs = fixture("networkpolicies.yaml")?;
    let pods = fixture("pods.yaml")?;
    let policies: Vec<Value> = [&ours[..], &monitoring[..], &theirs[..]].concat();

    let pod_of = |name: &str| -> Result<PodRef> {
        let d = deploy::find(&ours, "Deployment", name)
            .or_else(|_| deploy::find(&ours, "DaemonSet", name))?;
        let ns = d["metadata"]["namespace"].as_str().context("namespace")?;
        let namespace = deploy::find(&ours, "Namespace", ns)?;
        let mut p = PodRef::new(ns, d["spec"]["template"]["metadata"]["labels"].clone());
        for (k, v) in namespace["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
        {
            p.namespace_labels[k] = v.clone();
        }
        Ok(p)
    };
    let localizer = pod_of("skeletonhunter-localizer")?;
    let exporter = pod_of("skeletonhunter-exporter")?;
    let target = |app: &str| -> Result<PodRef> {
        let p = pods
            .iter()
            .find(|p| p["metadata"]["labels"]["app.kubernetes.io/name"] == app)
            .with_context(|| format!("no {app} pod in the fixture"))?;
        Ok(PodRef::new(
            p["metadata"]["namespace"].as_str().unwrap_or(""),
            p["metadata"]["labels"].clone(),
        ))
    };
    for (flag, app) in [
        ("prometheus", "prometheus"),
        ("alertmanager", "alertmanager"),
    ] {
        let to = target(app)?;
        for (ns, port) in localizer_targets(&ours, flag)? {
            assert_eq!(ns, to.namespace, "--{flag} points into {ns}");
            assert!(
                allows(&policies, &localizer, &to, port, "TCP"),
                "the localizer cannot reach {app}:{port} under kube-prometheus' NetworkPolicies"
            );
            assert!(
                !allows(&policies, &exporter, &to, port, "TCP"),
                "the exporter's pods reach {app}:{port}: the policies admit too much"
            );
        }
    }
    // The fixture alone refuses the localizer: what the shipped policies fix.
    let prometheus = target("prometheus")?;
    assert!(!allows(&theirs, &localizer, &prometheus, 9090, "TCP"));
    Ok(())
}

/// The monitoring namespace's objects pass `kubernetes-validate --strict`.
#[test]
fn monitoring_manifests_validate() -> Result<()> {
    let tool = "kubernetes-validate";
    if !deploy::require_tool(
        "monitoring_manifests_validate",
        tool,
        "pip install kubernetes-validate",
    ) {
        return Ok(());
    }
    let dir = TempDir::new("kp-kv")?;
    let objs = kustomized(MONITORING_DIR)?;
    assert!(!objs.is_empty());
    let mut args = vec!["--strict".to_string(), "-k".into(), "1.29.0".into()];
    for (i, obj) in objs.iter().enumerate() {
        let f = dir.path().join(format!("{i:02}.yaml"));
        std::fs::write(&f, obj.to_string())?;
        args.push(f.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = deploy::tool(tool, &args, dir.path())?;
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    Ok(())
}

/// The exception every kube-prometheus inhibition that compares
/// `alertname` gains for SkeletonHunter alerts.
const EXCEPT: &str = "alertname !~ \"SkeletonHunter.+\"";

/// kube-prometheus' default configuration merged with the subtree the
/// documented way; `amended` adds the SkeletonHunter exception to its
/// inhibitions that compare alertname (without it: the merge as the docs
/// described it before).
fn merged(amended: bool) -> Result<Value> {
    let kp = fixture("alertmanager.yaml")?.remove(0);
    let sub = yaml_docs(
        &deploy::read("alertmanager/skeletonhunter-route.yml")?,
        "subtree",
    )?
    .remove(0);
    let mut m = kp.clone();
    let mut routes = vec![sub["route"].clone()];
    routes.extend(
        kp["route"]["routes"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    m["route"]["routes"] = Value::Array(routes);
    let mut inhibit = Vec::new();
    for r in kp["inhibit_rules"].as_array().into_iter().flatten() {
        let mut r = r.clone();
        let by_name = r["equal"]
            .as_array()
            .is_some_and(|e| e.iter().any(|l| l == "alertname"));
        if amended && by_name {
            r["target_matchers"]
                .as_array_mut()
                .context("target_matchers")?
                .push(json!(EXCEPT));
        }
        inhibit.push(r);
    }
    inhibit.extend(sub["inhibit_rules"].as_array().cloned().unwrap_or_default());
    m["inhibit_rules"] = Value::Array(inhibit);
    let mut receivers = kp["receivers"].as_array().cloned().unwrap_or_default();
    receivers.extend(sub["receivers"].as_array().cloned().unwrap_or_default());
    m["receivers"] = Value::Array(receivers);
    m["templates"] = json!(["/etc/alertmanager/config/*.tmpl"]);
    Ok(m)
}

/// `alertmanager/kube-prometheus.yml` is kube-prometheus' default plus
/// `skeletonhunter-route.yml`, merged as documented, with the exception.
#[test]
fn kube_prometheus_alertmanager_config_is_its_default_plus_ours() -> Result<()> {
    let shipped = yaml_docs(
        &deploy::read("alertmanager/kube-prometheus.yml")?,
        "kube-prometheus.yml",
    )?
    .remove(0);
    let want = merged(true)?;
    for key in ["global", "templates", "route", "inhibit_rules", "receivers"] {
        assert_eq!(
            shipped[key], want[key],
            "alertmanager/kube-prometheus.yml: {key}"
        );
    }
    let keys: BTreeSet<&String> = shipped.as_object().context("object")?.keys().collect();
    assert_eq!(keys.len(), 5, "{keys:?}");
    Ok(())
}

/// Alert to post, its labels given as `name=value` words, with a `test_id`
/// label to find it again.
fn alert(id: &str, labels: &str) -> Value {
    let mut l: BTreeMap<&str, &str> = labels
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    l.insert("test_id", id);
    json!({"labels": l, "annotations": {"summary": id}})
}

fn fabric_alerts() -> Value {
    const CF: &str = "alertname=SkeletonHunterComponentFaulty";
    let tor = |id: &str| {
        format!("{CF} kind=tor component={id} tor={id} src_tor={id} dst_tor={id} severity=critical symptom=unreachable")
    };
    json!([
        alert("tor-t1", &tor("t1")),
        // Unrelated, elsewhere in the fabric: must stay active.
        alert(
            "host-h9-latency",
            &format!("{CF} kind=host component=h9 host=h9 tor=t7 severity=warning symptom=latency")
        ),
        // With a namespace label on both, the same.
        alert("tor-t2-ns", &format!("{} namespace=skeletonhunter", tor("t2"))),
        alert(
            "node-n5-ns",
            &format!("{CF} kind=node component=n5 node_id=n5 tor=t8 severity=warning symptom=loss namespace=skeletonhunter")
        ),
        // Beneath ToR t1: SkeletonHunter's own inhibition silences it.
        alert(
            "node-n1-beneath-t1",
            &format!("{CF} kind=node component=n1 node_id=n1 tor=t1 severity=warning symptom=loss")
        ),
        // kube-prometheus' own alerts keep its inhibition.
        alert("kp-critical", "alertname=KubePodCrashLooping namespace=x severity=critical"),
        alert("kp-warning", "alertname=KubePodCrashLooping namespace=x severity=warning pod=p2"),
    ])
}

/// Start Alertmanager with `config` and the shipped template, post the
/// alerts, and return each alert's state by `test_id` once all are in.
fn states(config: &Value) -> Result<BTreeMap<String, String>> {
    let root = repo_root();
    let text = config
        .to_string()
        .replace("/etc/alertmanager/config/*.tmpl", "templates/*.tmpl");
    let tmpl = root.join("alertmanager/templates/skeletonhunter.tmpl");
    let opts = ServerOpts::new(servers::free_loopback_addr()?, &text)
        .copy_file("templates/skeletonhunter.tmpl", &tmpl)?;
    let am = servers::start_alertmanager(opts)?;
    // Alertmanager computes an alert's state on each read from what its
    // inhibitor has taken in so far, and the inhibitor takes alerts in the
    // order they arrived, asynchronously. So kube-prometheus' critical
    // alert goes in last, on its own: once its warning reads suppressed,
    // the inhibitor has seen every alert before it and the states are final.
    let mut posted = fabric_alerts();
    let all = posted.as_array_mut().context("alerts")?;
    let n = all.len();
    let last = all
        .iter()
        .position(|a| a["labels"]["test_id"] == "kp-critical")
        .context("kp-critical")?;
    let canary = all.remove(last);
    am.post_alerts(&posted)?;
    am.post_alerts(&json!([canary]))?;
    skeletonhunter_tests::wait_until(
        "Alertmanager to hold every posted alert, kube-prometheus' warning suppressed by the critical alert posted last",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || {
            let alerts = am.alerts().ok()?;
            let s: BTreeMap<String, String> = alerts
                .iter()
                .filter_map(|a| {
                    let id = a["labels"]["test_id"].as_str()?;
                    let st = a["status"]["state"].as_str()?;
                    (st != "unprocessed").then(|| (id.to_string(), st.to_string()))
                })
                .collect();
            let caught_up = s.get("kp-warning").is_some_and(|st| st == "suppressed");
            (s.len() == n && caught_up).then_some(s)
        },
    )
}

/// On a real Alertmanager with the shipped kube-prometheus configuration, a
/// ToR outage no longer silences an unrelated SkeletonHunter warning, with
/// or without a `namespace` label, while SkeletonHunter's location-based
/// inhibition and kube-prometheus' own inhibition of its alerts still work.
/// The same alerts on the merge without the exception show the failure.
#[test]
fn kube_prometheus_inhibition_spares_unrelated_skeletonhunter_alerts() -> Result<()> {
    let shipped = yaml_docs(
        &deploy::read("alertmanager/kube-prometheus.yml")?,
        "kube-prometheus.yml",
    )?
    .remove(0);
    let got = states(&shipped)?;
    let want: BTreeMap<String, String> = [
        ("tor-t1", "active"),
        ("host-h9-latency", "active"),
        ("tor-t2-ns", "active"),
        ("node-n5-ns", "active"),
        ("node-n1-beneath-t1", "suppressed"),
        ("kp-critical", "active"),
        ("kp-warning", "suppressed"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(
        got, want,
        "alert states under alertmanager/kube-prometheus.yml"
    );

    let naive = states(&merged(false)?)?;
    assert_eq!(
        naive["host-h9-latency"], "suppressed",
        "without the exception: {naive:?}"
    );
    assert_eq!(
        naive["node-n5-ns"], "suppressed",
        "namespace labels do not help: {naive:?}"
    );
    Ok(())
}

/// docs/deploy.md's walk-through from nothing to a page names only what
/// the repository ships: every path it mentions exists, every `kubectl
/// apply -k` is a kustomization, every workload it waits for is in the
/// default kustomization, and its numbered steps run 1, 2, 3… without a
/// gap.
#[test]
fn the_walkthrough_names_what_the_repository_ships() -> Result<()> {
    let doc = deploy::read("docs/deploy.md")?;
    let start = doc
        .find("\n## Kubernetes")
        .context("no Kubernetes section")?;
    let end = doc[start..]
        .find("\n## systemd")
        .map_or(doc.len(), |e| start + e);
    let section = &doc[start..end];
    let root = repo_root();
    let mut problems = Vec::new();
    // (`deploy/NAME` alone is kubectl's short form of a Deployment.)
    let prefixes = [
        "deploy/kubernetes",
        "deploy/systemd",
        "alertmanager/",
        "rules/",
        "dashboards/",
        "scripts/",
        "mixin/",
    ];
    for word in section.split(|c: char| c.is_whitespace() || "`()[],;:'\"".contains(c)) {
        let Some(p) = prefixes
            .iter()
            .find_map(|p| word.find(p).map(|i| &word[i..]))
        else {
            continue;
        };
        let p = p.trim_end_matches(['.', ')']);
        if p.contains("://") || p.contains('<') {
            continue;
        }
        let (p, anchor) = p.split_once('#').unwrap_or((p, ""));
        if !anchor.is_empty() && !markdown_anchors(p).contains(anchor) {
            problems.push(format!("links {p}#{anchor}, a heading it does not have"));
        }
        let exists = match p.split_once('*') {
            // A glob: its directory holds a file with its suffix.
            Some((dir, suffix)) => std::fs::read_dir(root.join(dir)).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().ends_with(suffix)))
            }),
            None => root.join(p).exists(),
        };
        if !exists {
            problems.push(format!("names {p}, which does not exist"));
        }
    }
    let mut workloads = BTreeSet::new();
    for obj in kustomized("deploy/kubernetes")? {
        let kind = obj["kind"].as_str().unwrap_or_default().to_lowercase();
        workloads.insert(format!(
            "{kind}/{}",
            obj["metadata"]["name"].as_str().unwrap_or_default()
        ));
    }
    for line in section.lines().map(str::trim) {
        if let Some(dir) = line.strip_prefix("kubectl apply -k ") {
            let dir = dir.split_whitespace().next().unwrap_or_default();
            if !root.join(dir).join("kustomization.yaml").exists() {
                problems.push(format!("applies {dir}, which has no kustomization.yaml"));
            }
        }
        if let Some(rest) = line.split("rollout status ").nth(1) {
            let w = rest.split_whitespace().next().unwrap_or_default();
            if !workloads.contains(w) {
                problems.push(format!(
                    "waits for {w}, which deploy/kubernetes does not create"
                ));
            }
        }
    }
    let steps: Vec<u32> = section
        .lines()
        .filter_map(|l| l.strip_prefix("### ")?.split_once(". ")?.0.parse().ok())
        .collect();
    if steps.is_empty() || steps.iter().zip(1..).any(|(&s, n)| s != n) {
        problems.push(format!("steps numbered {steps:?}"));
    }
    assert!(
        problems.is_empty(),
        "docs/deploy.md:\n{}",
        problems.join("\n")
    );
    Ok(())
}
