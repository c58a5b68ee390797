//! The deployment files (`deploy/kubernetes/`, `deploy/systemd/`,
//! `Dockerfile`) checked by real tools and against each other: core
//! Kubernetes kinds by `kubernetes-validate`, the PrometheusRule's groups by
//! `promtool`, the generated PrometheusRules (the opt-in pair detail's too)
//! and dashboard ConfigMaps against `rules/` and `dashboards/`, the units by
//! `systemd-analyze verify`, and the
//! run-time contract (user, capabilities, mounts, ports, probes) of the image
//! and the manifests against the documented privileges and a real exporter
//! started with the shipped configuration. No container runtime runs here,
//! so the image itself is never started: its contract is read from the
//! Dockerfile. `UPDATE_DEPLOY=1` rewrites the three generated manifests.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use skeletonhunter_common::topology::RESERVED_TARGET_LABELS;
use skeletonhunter_tests::contract::{
    self, caps, dockerfile_contract, documented_caps, documented_container_caps, unit_value, Image,
};
use skeletonhunter_tests::exporter;
use skeletonhunter_tools::deploy::{self, find, manifests, read};
use skeletonhunter_tools::process::bin_path;
use skeletonhunter_tools::repo::{repo_root, PAIR_DETAIL_RULES};
use skeletonhunter_tools::servers::{self, TempDir};
use skeletonhunter_tools::{http_get, wait_until, Netns};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

const EXPORTER: &str = "skeletonhunter-exporter";
const LOCALIZER: &str = "skeletonhunter-localizer";
/// With `UPDATE_DEPLOY=1`, rewrite a generated manifest from its sources.
fn update(rel: &str, rendered: &str) -> Result<()> {
    if deploy::update_if_asked(rel, rendered)? {
        eprintln!("wrote {rel}");
    }
    Ok(())
}

/// A generated manifest equals, as text, what its sources render to.
fn check_generated(rel: &str, rendered: &str) -> Result<()> {
    let shipped = read(rel)?;
    if shipped != rendered {
        bail!("{rel} is out of date: run `UPDATE_DEPLOY=1 cargo test -p skeletonhunter-tests --test ops deploy::`");
    }
    Ok(())
}

/// One PrometheusRule per `rules/*.yml` carries exactly its groups,
/// compared as parsed YAML (and as text, comments included), and no other
/// PrometheusRule exists; the same for the opt-in pair detail's own
/// kustomization ([`deploy::check_pair_detail`]).
#[test]
fn prometheus_rules_carry_the_rules_dir() -> Result<()> {
    let rendered = deploy::render_prometheus_rule()?;
    update(deploy::PROMETHEUS_RULE, &rendered)?;
    let detail = deploy::render_prometheus_rules(PAIR_DETAIL_RULES)?;
    update(deploy::PAIR_DETAIL_PROMETHEUS_RULE, &detail)?;

    let objs = manifests()?;
    let files = deploy::rules_groups()?;
    assert_eq!(files.len(), 1, "rules/ files: {files:?}");
    deploy::check_prometheus_rules(&objs, "rules", &files)?;

    deploy::check_pair_detail(&objs)?;

    check_generated(deploy::PROMETHEUS_RULE, &rendered)?;
    check_generated(deploy::PAIR_DETAIL_PROMETHEUS_RULE, &detail)
}

/// `promtool check rules` accepts each PrometheusRule's groups as the rule
/// file prometheus-operator writes for it, the opt-in pair detail's too.
#[test]
fn promtool_checks_the_prometheus_rule_groups() -> Result<()> {
    let dir = TempDir::new("deploy-rules")?;
    let sets = [
        (manifests()?, deploy::rules_groups()?),
        deploy::pair_detail_rules()?,
    ];
    for (objs, files) in &sets {
        for (file, groups) in files {
            let name = deploy::prometheus_rule_name(file);
            let rule = find(objs, "PrometheusRule", &name)?;
            let path = dir.path().join(format!("{name}.yml"));
            std::fs::write(&path, json!({"groups": rule["spec"]["groups"]}).to_string())?;
            let out = servers::promtool(&["check", "rules", &path.display().to_string()])?.ok()?;
            let rules: usize = groups
                .iter()
                .map(|g| g["rules"].as_array().map_or(0, Vec::len))
                .sum();
            assert!(rules > 0, "{file}");
            assert!(
                out.stdout
                    .contains(&format!("SUCCESS: {rules} rules found")),
                "{}",
                out.stdout
            );
        }
    }
    Ok(())
}

/// Every dashboard is in a ConfigMap labelled for the Grafana sidecar, equal
/// to `dashboards/*.json` in the form the sidecar needs, and no other.
#[test]
fn dashboard_config_maps_carry_the_dashboards_dir() -> Result<()> {
    let rendered = deploy::render_dashboards()?;
    update(deploy::DASHBOARDS, &rendered)?;
    let objs = manifests()?;
    let mut shipped = Vec::new();
    for cm in objs.iter().filter(|o| o["kind"] == "ConfigMap") {
        if cm["metadata"]["labels"]["grafana_dashboard"] != "1" {
            continue;
        }
        for (key, text) in cm["data"].as_object().context("data")? {
            let v: Value = serde_json::from_str(text.as_str().context("data value")?)
                .with_context(|| format!("ConfigMap {}: {key}", cm["metadata"]["name"]))?;
            shipped.push((key.clone(), v));
        }
    }
    shipped.sort_by(|a, b| a.0.cmp(&b.0));
    let want = deploy::dashboards()?;
    let names = |v: &[(String, Value)]| v.iter().map(|d| d.0.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&shipped),
        names(&want),
        "dashboards in ConfigMaps vs dashboards/"
    );
    for ((name, a), (_, b)) in shipped.iter().zip(&want) {
        let mut b = b.clone();
        deploy::sidecar_form(&mut b);
        assert_eq!(a, &b, "{name} differs from dashboards/{name}");
    }
    check_generated(deploy::DASHBOARDS, &rendered)
}

/// `kustomization.yaml` lists every manifest of the directory, once.
#[test]
fn kustomization_lists_every_manifest() -> Result<()> {
    let listed = deploy::kustomization_resources()?;
    let set: BTreeSet<_> = listed.iter().cloned().collect();
    assert_eq!(
        set.len(),
        listed.len(),
        "a resource listed twice: {listed:?}"
    );
    let on_disk: BTreeSet<String> = std::fs::read_dir(repo_root().join(deploy::KUBE_DIR))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    assert_eq!(set, on_disk);
    Ok(())
}

/// Core kinds pass `kubernetes-validate --strict` (unknown fields refused)
/// for the oldest and the newest Kubernetes we document; prometheus-operator
/// kinds are checked in `monitors_scrape_what_the_rules_expect`. The
/// sidecar option's ConfigMap and PodTemplate as well.
#[test]
fn kubernetes_validate_accepts_the_core_kinds() -> Result<()> {
    let tool = "kubernetes-validate";
    if !deploy::require_tool(
        "kubernetes_validate_accepts_the_core_kinds",
        tool,
        "pip install kubernetes-validate",
    ) {
        return Ok(());
    }
    let dir = TempDir::new("deploy-kv")?;
    let mut files = Vec::new();
    let mut objs = manifests()?;
    objs.extend(deploy::kustomized(deploy::SIDECAR_KUBE_DIR)?);
    for (i, obj) in objs.iter().enumerate() {
        let api = obj["apiVersion"].as_str().context("apiVersion")?;
        if api.starts_with("monitoring.coreos.com/") {
            continue;
        }
        let f = dir.path().join(format!(
            "{i:02}-{}.yaml",
            obj["kind"].as_str().unwrap_or("x")
        ));
        std::fs::write(&f, obj.to_string())?;
        files.push(f.display().to_string());
    }
    assert!(files.len() >= 10, "only {} core objects", files.len());
    for version in ["1.29.0", "1.33.0"] {
        let mut args = vec!["--strict", "-k", version];
        args.extend(files.iter().map(String::as_str));
        let out = deploy::tool(tool, &args, dir.path())?;
        assert!(out.success, "{version}:\n{}\n{}", out.stdout, out.stderr);
        let log = format!("{}{}", out.stdout, out.stderr);
        let passed = log.matches(" passed for resource ").count();
        assert_eq!(passed, files.len(), "{version}:\n{log}");
    }
    Ok(())
}

/// The container (the only one) of a workload's pod template.
fn container(workload: &Value) -> Result<&Value> {
    let cs = workload["spec"]["template"]["spec"]["containers"]
        .as_array()
        .context("containers")?;
    assert_eq!(cs.len(), 1, "one container per workload");
    Ok(&cs[0])
}

/// Every `labels` entry of `selector.matchLabels` is on the pod template.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| &labels[k] == v))
}

/// The PodMonitor and ServiceMonitor select the workloads, scrape a port
/// they expose and name the job as the rules do. No exposed label collides
/// with a target label, so they neither honour exposed labels (a target
/// label keeps its Kubernetes meaning) nor drop target labels.
#[test]
fn monitors_scrape_what_the_rules_expect() -> Result<()> {
    let objs = manifests()?;
    let rules: String = deploy::rules_groups()?
        .iter()
        .flat_map(|(_, g)| g.iter().map(Value::to_string))
        .collect();
    let ds = find(&objs, "DaemonSet", EXPORTER)?;
    let pm = find(&objs, "PodMonitor", EXPORTER)?;
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    assert!(
        selects(&pm["spec"]["selector"], pod_labels),
        "PodMonitor selects the DaemonSet"
    );
    let job = &pod_labels[pm["spec"]["jobLabel"]
        .as_str()
        .context("PodMonitor jobLabel")?];
    assert_eq!(job, EXPORTER);
    let eps = pm["spec"]["podMetricsEndpoints"]
        .as_array()
        .context("endpoints")?;
    let port_names: Vec<&Value> = container(ds)?["ports"]
        .as_array()
        .context("ports")?
        .iter()
        .map(|p| &p["name"])
        .collect();
    for ep in eps {
        assert!(
            port_names.contains(&&ep["port"]),
            "PodMonitor port {}",
            ep["port"]
        );
    }

    let dep = find(&objs, "Deployment", LOCALIZER)?;
    let svc = find(&objs, "Service", LOCALIZER)?;
    let sm = find(&objs, "ServiceMonitor", LOCALIZER)?;
    let sel = json!({"matchLabels": svc["spec"]["selector"]});
    assert!(
        selects(&sel, &dep["spec"]["template"]["metadata"]["labels"]),
        "Service selects the Deployment"
    );
    assert!(
        selects(&sm["spec"]["selector"], &svc["metadata"]["labels"]),
        "ServiceMonitor selects the Service"
    );
    let job = &svc["metadata"]["labels"][sm["spec"]["jobLabel"].as_str().context("jobLabel")?];
    assert_eq!(job, LOCALIZER);
    for name in [EXPORTER, LOCALIZER] {
        assert!(
            rules.contains(&format!("job=\\\"{name}\\\"")),
            "rules name job {name}"
        );
    }
    let svc_ports: Vec<&Value> = svc["spec"]["ports"]
        .as_array()
        .context("ports")?
        .iter()
        .map(|p| &p["name"])
        .collect();
    for ep in sm["spec"]["endpoints"]
        .as_array()
        .context("endpoints")?
        .iter()
        .chain(eps)
    {
        assert!(
            ep.get("honorLabels").is_none_or(|h| h == false),
            "honorLabels on {ep}"
        );
        assert!(
            ep["relabelings"]
                .as_array()
                .is_none_or(|r| r.iter().all(|r| r["action"] != "labeldrop")),
            "no target label is dropped: {ep}"
        );
    }
    let exposed = deploy::exposed_labels()?;
    assert!(
        exposed.contains("node_id") && exposed.contains("src_node"),
        "{exposed:?}"
    );
    let colliding: Vec<String> = exposed
        .into_iter()
        .filter(|l| RESERVED_TARGET_LABELS.contains(&l.as_str()))
        .collect();
    assert!(
        colliding.is_empty(),
        "README metric labels named like target labels: {colliding:?}"
    );
    assert!(svc_ports.contains(&&sm["spec"]["endpoints"][0]["port"]));
    Ok(())
}

/// Image, DaemonSet, Deployment, systemd units and docs agree: a numeric
/// non-root user, the documented capabilities (containers' too but in the
/// host's unit) and no others, every capability dropped from the localizer,
/// read-only root file systems, the exporter's mounts, exposed ports.
#[test]
fn image_manifests_and_units_agree_on_the_runtime_contract() -> Result<()> {
    let Image {
        uid,
        gid,
        caps: file_caps,
        expose,
    } = dockerfile_contract()?;
    assert!(uid != 0 && gid != 0, "USER must not be root");
    let host_caps = documented_caps()?;
    assert_eq!(host_caps.len(), 4, "{host_caps:?}");
    let want = caps(host_caps.iter().chain(&documented_container_caps()?));
    assert_eq!(want.len(), 6, "{want:?}");
    assert_eq!(file_caps, want, "Dockerfile setcap vs docs/operations.md");

    let objs = manifests()?;
    let ds = find(&objs, "DaemonSet", EXPORTER)?;
    let dep = find(&objs, "Deployment", LOCALIZER)?;
    for w in [ds, dep] {
        let psc = &w["spec"]["template"]["spec"]["securityContext"];
        assert_eq!(
            (psc["runAsUser"].as_u64(), psc["runAsGroup"].as_u64()),
            (Some(uid), Some(gid))
        );
        assert_eq!(psc["runAsNonRoot"], true);
        assert_eq!(
            w["spec"]["template"]["spec"]["automountServiceAccountToken"],
            false
        );
        let sc = &container(w)?["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    }
    let sc = &container(ds)?["securityContext"];
    let added = caps(
        sc["capabilities"]["add"]
            .as_array()
            .context("add")?
            .iter()
            .filter_map(Value::as_str),
    );
    assert_eq!(added, want, "DaemonSet capabilities.add vs docs");
    // File capabilities only apply without no_new_privs.
    assert_eq!(sc["allowPrivilegeEscalation"], true);
    let lsc = &container(dep)?["securityContext"];
    assert_eq!(lsc["allowPrivilegeEscalation"], false);
    assert!(lsc["capabilities"]["add"].is_null());

    let unit = read("deploy/systemd/skeletonhunter-exporter.service")?;
    for key in ["AmbientCapabilities", "CapabilityBoundingSet"] {
        let v = unit_value(&unit, key).with_context(|| format!("exporter unit: {key}"))?;
        assert_eq!(caps(v.split_whitespace()), host_caps, "exporter unit {key}");
    }
    let unit = read("deploy/systemd/skeletonhunter-localizer.service")?;
    for key in ["AmbientCapabilities", "CapabilityBoundingSet"] {
        assert_eq!(
            unit_value(&unit, key).as_deref(),
            Some(""),
            "localizer unit {key}"
        );
    }

    check_exporter_mounts(ds, &objs)?;
    let mut ports: Vec<String> = [ds, dep]
        .iter()
        .map(|w| container(w))
        .collect::<Result<Vec<_>>>()?
        .iter()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .map(|p| {
            format!(
                "{}/{}",
                p["containerPort"],
                p["protocol"].as_str().unwrap_or("TCP").to_lowercase()
            )
        })
        .collect();
    ports.sort();
    let mut expose = expose;
    expose.sort();
    assert_eq!(ports, expose, "container ports vs the Dockerfile's EXPOSE");
    Ok(())
}

/// The DaemonSet mounts every `/sys` path the exporter reads, and what its
/// `containers` section needs: the cgroup root and the host's PID namespace.
fn check_exporter_mounts(ds: &Value, objs: &[Value]) -> Result<()> {
    let mounts: Vec<String> = container(ds)?["volumeMounts"]
        .as_array()
        .context("volumeMounts")?
        .iter()
        .filter_map(|m| m["mountPath"].as_str().map(String::from))
        .collect();
    contract::check_sys_mounts(&mounts)?;
    let cm = find(objs, "ConfigMap", EXPORTER)?;
    let cfg: Value = yaml_serde::from_str(cm["data"]["exporter.yaml"].as_str().context("cfg")?)?;
    let root = cfg["containers"]["cgroup_root"].as_str();
    let root = root.context("the shipped exporter probes from containers")?;
    assert!(
        mounts.iter().any(|m| m == root),
        "{root} not mounted: {mounts:?}"
    );
    assert_eq!(
        ds["spec"]["template"]["spec"]["hostPID"], true,
        "containers need hostPID"
    );
    Ok(())
}

/// The shipped exporter configuration, with the DaemonSet's environment
/// (downward-API values filled in), passes `--check-config`; run for real
/// in a namespace it serves the probes' endpoints on the DaemonSet's ports
/// and answers on its UDP and TCP responder ports.
#[test]
fn exporter_runs_with_the_shipped_config_and_probes() -> Result<()> {
    if !skeletonhunter_tests::require_privileges("exporter_runs_with_the_shipped_config_and_probes")
    {
        return Ok(());
    }
    let objs = manifests()?;
    let cm = find(&objs, "ConfigMap", EXPORTER)?;
    let cfg = cm["data"]["exporter.yaml"]
        .as_str()
        .context("exporter.yaml")?;
    let ds = find(&objs, "DaemonSet", EXPORTER)?;
    let c = container(ds)?;
    let dir = TempDir::new("deploy-exporter")?;
    let path = dir.path().join("exporter.yaml");
    std::fs::write(&path, cfg)?;
    let topology = deploy::shipped_topology(&objs, dir.path())?;
    let mut check = std::process::Command::new(bin_path(EXPORTER));
    check.arg("--config").arg(&path).arg("--check-config");
    check.arg("--topology-file").arg(&topology);
    let pod_ip = |f: &str| (f == "status.podIP").then(|| "198.18.0.1".to_string());
    check.envs(deploy::downward_env(c, pod_ip)?);
    let out = check.output()?;
    assert!(
        out.status.success(),
        "--check-config: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let ns = Netns::new("deploy")?;
    let topology = topology.to_str().context("utf-8")?;
    let flags = ["--node", "n1", "--topology-file", topology];
    let _exp = exporter::start_with(&ns, dir.path(), "deploy", cfg, &flags)?;
    let port = |name: &str| -> Result<u64> {
        let ports = c["ports"].as_array().context("ports")?;
        let p = ports
            .iter()
            .find(|p| p["name"] == name)
            .with_context(|| format!("port {name}"))?;
        p["containerPort"].as_u64().context("containerPort")
    };
    let metrics = port("metrics")?;
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let get = &c[probe]["httpGet"];
        assert_eq!(
            port(get["port"].as_str().context("probe port name")?)?,
            metrics
        );
        let addr: SocketAddr = format!("127.0.0.1:{metrics}").parse()?;
        let path = get["path"].as_str().context("probe path")?.to_string();
        let what = format!("{probe} {path}");
        wait_until(
            &what,
            Duration::from_secs(30),
            Duration::from_millis(100),
            || {
                let p = path.clone();
                matches!(
                    ns.run_in(move || http_get(addr, &p, Duration::from_secs(2))),
                    Ok(Ok((200, _)))
                )
                .then_some(())
            },
        )?;
    }
    let listening = ns.exec(&["ss", "-Hlnut"])?;
    for (name, proto) in [("udp-echo", "udp"), ("tcp-dial", "tcp")] {
        let p = port(name)?;
        assert!(
            listening
                .lines()
                .any(|l| l.starts_with(proto) && l.contains(&format!(":{p} "))),
            "nothing listens on {proto}/{p}:\n{listening}"
        );
    }
    Ok(())
}

/// `systemd-analyze verify` accepts both units, with ExecStart pointing at
/// the built binaries; any warning (an unknown key) fails too.
#[test]
fn systemd_units_verify() -> Result<()> {
    if !deploy::require_tool(
        "systemd_units_verify",
        "systemd-analyze",
        "apt-get install systemd",
    ) {
        return Ok(());
    }
    let dir = TempDir::new("deploy-units")?;
    let units = units_with_built_binaries(&dir)?;
    let mut args = vec!["verify", "--man=no"];
    args.extend(units.iter().map(String::as_str));
    let out = deploy::tool("systemd-analyze", &args, dir.path())?;
    assert!(
        out.success && out.stderr.trim().is_empty(),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    Ok(())
}

/// Copies of both units in `dir` whose ExecStart runs the built binaries.
fn units_with_built_binaries(dir: &TempDir) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for bin in [EXPORTER, LOCALIZER] {
        let unit = read(&format!("deploy/systemd/{bin}.service"))?;
        let installed = format!("/usr/local/bin/{bin}");
        assert!(
            unit.contains(&format!("ExecStart={installed} ")),
            "{bin}.service ExecStart"
        );
        let built = bin_path(bin).display().to_string();
        let f = dir.path().join(format!("{bin}.service"));
        std::fs::write(&f, unit.replace(&installed, &built))?;
        out.push(format!("./{bin}.service"));
    }
    Ok(out)
}

/// `systemd-analyze security` scores both units as docs/deploy.md says.
#[test]
fn systemd_exposure_is_as_documented() -> Result<()> {
    if !deploy::require_tool(
        "systemd_exposure_is_as_documented",
        "systemd-analyze",
        "apt-get install systemd",
    ) {
        return Ok(());
    }
    let dir = TempDir::new("deploy-security")?;
    let docs = read("docs/deploy.md")?;
    for unit in units_with_built_binaries(&dir)? {
        let out = deploy::tool(
            "systemd-analyze",
            &["security", "--offline=true", &unit],
            dir.path(),
        )?;
        let text = format!("{}{}", out.stdout, out.stderr);
        let score = text
            .lines()
            .find_map(|l| l.split("Overall exposure level for ").nth(1))
            .and_then(|r| r.split(": ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .with_context(|| format!("no exposure level in:\n{text}"))?;
        let name = unit.trim_start_matches("./");
        let row = format!("| `{name}` | {score} |");
        eprintln!("{name}: exposure {score}");
        assert!(docs.contains(&row), "docs/deploy.md lacks the row `{row}`");
        let value: f64 = score.parse()?;
        assert!(value < 3.0, "{name}: exposure {value} is no longer OK");
    }
    Ok(())
}
