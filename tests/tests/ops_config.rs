//! The shipped operations config (rules/, alertmanager/, dashboards/) checked
//! by the real tools and servers.

use anyhow::Result;
use skeletonhunter_tests::servers::{self, ServerOpts};
use std::time::Duration;

/// The server helpers themselves: each real server starts, answers
/// `/-/ready`, and serves its API.
#[test]
fn servers_start_and_answer() -> Result<()> {
    let prom = servers::start_prometheus(ServerOpts::new(
        servers::free_loopback_addr()?,
        "global: {scrape_interval: 1s}\n",
    ))?;
    let r = prom.query("vector(1)")?;
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(prom.query("sum(").is_err(), "bad PromQL must be an error");

    let am = servers::start_alertmanager(ServerOpts::new(
        servers::free_loopback_addr()?,
        "route: {receiver: none}\nreceivers: [{name: none}]\n",
    ))?;
    assert!(am.alerts()?.is_empty());

    let vm = servers::start_victoria_metrics(ServerOpts::new(servers::free_loopback_addr()?, ""))?;
    let r = vm.query("vector(1)")?;
    assert_eq!(r.len(), 1, "{r:?}");
    Ok(())
}

/// The same inside a network namespace, on a namespace-internal address.
#[test]
fn servers_start_inside_a_namespace() -> Result<()> {
    if !skeletonhunter_tests::require_privileges("servers_start_inside_a_namespace") {
        return Ok(());
    }
    let ns = skeletonhunter_tests::Netns::new("srv")?;
    ns.ip(&["addr", "add", "198.18.200.1/32", "dev", "lo"])?;
    let addr = "198.18.200.1:9090".parse()?;
    let prom = servers::start_prometheus(
        ServerOpts::new(
            addr,
            "global: {scrape_interval: 1s}\nscrape_configs: [{job_name: self, static_configs: [{targets: ['198.18.200.1:9090']}]}]\n",
        )
        .in_netns(&ns),
    )?;
    let up = skeletonhunter_tests::wait_until(
        "Prometheus scraping itself in the namespace",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || prom.targets_up().ok().filter(|n| *n == 1),
    )?;
    assert_eq!(up, 1);
    Ok(())
}

fn repo_file(rel: &str) -> String {
    servers::repo_root().join(rel).display().to_string()
}

/// Every YAML file of `dir` (relative to the repository root), sorted.
fn yaml_files(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(servers::repo_root().join(dir))
        .unwrap_or_else(|e| panic!("read {dir}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no YAML files in {dir}");
    out
}

#[test]
fn amtool_accepts_the_alertmanager_config() -> Result<()> {
    let out =
        servers::amtool(&["check-config", &repo_file("alertmanager/alertmanager.yml")])?.ok()?;
    // The templates must have been found and parsed, not silently skipped.
    assert!(out.stdout.contains("1 templates"), "{}", out.stdout);
    Ok(())
}

/// The routing tree sends each kind and severity where docs/operations.md
/// says it goes.
#[test]
fn alertmanager_routes_by_kind_and_severity() -> Result<()> {
    let config = repo_file("alertmanager/alertmanager.yml");
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=tor",
                "component=t1",
                "severity=critical",
            ],
            "skeletonhunter-network-page",
        ),
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=spine",
                "component=s1",
                "severity=critical",
            ],
            "skeletonhunter-network-page",
        ),
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=nic",
                "component=10.0.0.1",
                "severity=critical",
            ],
            "skeletonhunter-compute-page",
        ),
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=node",
                "component=a",
                "severity=warning",
            ],
            "skeletonhunter-ticket",
        ),
        (
            &[
                "alertname=SkeletonHunterComponentFaulty",
                "kind=tor",
                "component=t1",
                "severity=warning",
            ],
            "skeletonhunter-ticket",
        ),
        (
            &[
                "alertname=SkeletonHunterPairUnreachable",
                "kind=pair",
                "component=a->b",
                "severity=critical",
            ],
            "skeletonhunter-ticket",
        ),
        (
            &[
                "alertname=SkeletonHunterExporterDown",
                "kind=exporter",
                "severity=warning",
            ],
            "skeletonhunter-monitoring",
        ),
        (
            &[
                "alertname=SkeletonHunterLocalizerDown",
                "kind=localizer",
                "severity=critical",
            ],
            "skeletonhunter-monitoring",
        ),
    ];
    for (labels, want) in cases {
        let mut args = vec!["config", "routes", "test", "--config.file", config.as_str()];
        args.extend_from_slice(labels);
        let out = servers::amtool(&args)?.ok()?;
        assert_eq!(out.stdout.trim(), *want, "route for {labels:?}");
    }
    Ok(())
}

#[test]
fn promtool_accepts_the_rules() -> Result<()> {
    let files = yaml_files("rules");
    let mut args = vec!["check", "rules"];
    args.extend(files.iter().map(String::as_str));
    let out = servers::promtool(&args)?.ok()?;
    // promtool reports "SUCCESS: N rules found" per file (on stderr).
    let text = format!("{}{}", out.stdout, out.stderr);
    let counts: Vec<usize> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("SUCCESS: "))
        .filter_map(|l| l.strip_suffix(" rules found"))
        .filter_map(|n| n.parse().ok())
        .collect();
    assert_eq!(counts.len(), files.len(), "{text}");
    assert!(
        counts.iter().all(|n| *n > 0),
        "a rule file without rules: {text}"
    );
    Ok(())
}

/// The same rule files parse as MetricsQL and their templates render in
/// vmalert, so VictoriaMetrics users can run them unchanged.
#[test]
fn vmalert_accepts_the_rules() -> Result<()> {
    for f in yaml_files("rules") {
        let rule = format!("-rule={f}");
        let out = servers::vmalert(&["-dryRun", &rule, "-loggerLevel=ERROR"])?;
        assert!(
            out.success,
            "vmalert rejects {f}:\n{}\n{}",
            out.stdout, out.stderr
        );
    }
    Ok(())
}

#[test]
fn promtool_rule_unit_tests_pass() -> Result<()> {
    let files = yaml_files("rules/tests");
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    servers::promtool(&args)?.ok()?;
    Ok(())
}

/// A tiny HTTP sink on loopback standing in for the paging/chat endpoints
/// the shipped config points at: records (path, body) of every POST.
struct Sink {
    addr: std::net::SocketAddr,
    got: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl Sink {
    fn start() -> Result<Sink> {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let store = got.clone();
        // The thread ends with the test process; it only ever serves loopback.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reader = BufReader::new(conn.try_clone().expect("clone socket"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                store
                    .lock()
                    .unwrap()
                    .push((path, String::from_utf8_lossy(&body).into_owned()));
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        Ok(Sink { addr, got })
    }

    fn posts(&self) -> Vec<(String, String)> {
        self.got.lock().unwrap().clone()
    }
}

/// Every string inside a JSON body, joined by newlines (Go escapes `>` and
/// `<` in JSON, so raw bodies cannot be searched for `a->b`).
fn json_strings(body: &str) -> String {
    fn walk(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => walk(&v, &mut out),
        Err(_) => out.push_str(body),
    }
    out
}

fn alert(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> serde_json::Value {
    let l: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let a: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    serde_json::json!({"labels": l, "annotations": a})
}

/// Alerts as the localizer and the shipped Prometheus rules produce them,
/// named by a `test_id` label so the assertions can find them.
fn fabric_alerts() -> serde_json::Value {
    const CF: &str = "SkeletonHunterComponentFaulty";
    serde_json::Value::Array(vec![
        // The localizer's verdict on ToR t1 (its labels: tor with its pair
        // twins, and spine context).
        alert(
            &[
                ("test_id", "tor-t1"),
                ("alertname", CF),
                ("kind", "tor"),
                ("component", "t1"),
                ("tor", "t1"),
                ("src_tor", "t1"),
                ("dst_tor", "t1"),
                ("spine", "s1"),
                ("severity", "critical"),
                ("symptom", "loss"),
            ],
            &[
                (
                    "summary",
                    "tor t1 drops packets: 17 anomalous probe pair(s) cross it",
                ),
                ("pairs", "17"),
                ("score", "0.9300"),
                ("p_value", "1.000e-9"),
                ("equivalent", "nic/10.0.3.1"),
                ("evidence", "a->c loss 31%"),
            ],
        ),
        // The Prometheus rule's copy of the same verdict, with pair location
        // labels but no symptom (the blame metric has none): it silences
        // nothing, only the localizer's own loss/unreachable verdicts do.
        alert(
            &[
                ("test_id", "tor-t1-rule"),
                ("alertname", CF),
                ("kind", "tor"),
                ("component", "t1"),
                ("id", "t1"),
                ("tor", "t1"),
                ("src_tor", "t1"),
                ("dst_tor", "t1"),
                ("severity", "critical"),
                ("origin", "prometheus"),
            ],
            &[("summary", "SkeletonHunter blames tor t1")],
        ),
        // Beneath t1: silenced.
        alert(
            &[
                ("test_id", "node-a"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "a"),
                ("node", "a"),
                ("host", "h1"),
                ("tor", "t1"),
                ("spine", "s1"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[("summary", "node a is unreachable")],
        ),
        alert(
            &[
                ("test_id", "host-h2"),
                ("alertname", CF),
                ("kind", "host"),
                ("component", "h2"),
                ("host", "h2"),
                ("tor", "t1"),
                ("severity", "critical"),
                ("symptom", "loss"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "exporter-h1"),
                ("alertname", "SkeletonHunterExporterDown"),
                ("kind", "exporter"),
                ("component", "h1:9100"),
                ("instance", "h1:9100"),
                ("host", "h1"),
                ("tor", "t1"),
                ("severity", "warning"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "pair-a-c"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "a->c"),
                ("src_node", "a"),
                ("dst_node", "c"),
                ("src_tor", "t1"),
                ("dst_tor", "t2"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "pair-c-a"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "c->a"),
                ("src_node", "c"),
                ("dst_node", "a"),
                ("src_tor", "t2"),
                ("dst_tor", "t1"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        // Beneath t2 (another ToR, same spine s1): NOT silenced.
        alert(
            &[
                ("test_id", "node-c"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "c"),
                ("node", "c"),
                ("host", "h3"),
                ("tor", "t2"),
                ("spine", "s1"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[
                ("summary", "node c is unreachable"),
                ("pairs", "4"),
                ("score", "0.8100"),
                ("p_value", "2.000e-6"),
                ("evidence", "b->c lost 100%\nd->c lost 100%"),
            ],
        ),
        alert(
            &[
                ("test_id", "pair-c-d"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "c->d"),
                ("src_node", "c"),
                ("dst_node", "d"),
                ("src_tor", "t2"),
                ("dst_tor", "t2"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        // A pair alert with no topology must not be silenced by accident.
        alert(
            &[
                ("test_id", "pair-x-y"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "x->y"),
                ("src_node", "x"),
                ("dst_node", "y"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        // A spine fault silences what is beneath that spine only.
        alert(
            &[
                ("test_id", "spine-s2"),
                ("alertname", CF),
                ("kind", "spine"),
                ("component", "s2"),
                ("spine", "s2"),
                ("severity", "critical"),
                ("symptom", "loss"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "node-e"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "e"),
                ("node", "e"),
                ("host", "h5"),
                ("tor", "t5"),
                ("spine", "s2"),
                ("severity", "warning"),
                ("symptom", "loss"),
            ],
            &[],
        ),
        // A latency verdict on a switch silences nothing: a slow spine or ToR
        // still forwards, so an unreachable node or host beneath it is news.
        alert(
            &[
                ("test_id", "spine-s3-latency"),
                ("alertname", CF),
                ("kind", "spine"),
                ("component", "s3"),
                ("spine", "s3"),
                ("src_spine", "s3"),
                ("dst_spine", "s3"),
                ("severity", "warning"),
                ("symptom", "latency"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "tor-t6-latency"),
                ("alertname", CF),
                ("kind", "tor"),
                ("component", "t6"),
                ("tor", "t6"),
                ("src_tor", "t6"),
                ("dst_tor", "t6"),
                ("spine", "s3"),
                ("severity", "warning"),
                ("symptom", "latency"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "node-f"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "f"),
                ("node", "f"),
                ("host", "h6"),
                ("tor", "t6"),
                ("spine", "s3"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "host-h7"),
                ("alertname", CF),
                ("kind", "host"),
                ("component", "h7"),
                ("host", "h7"),
                ("tor", "t6"),
                ("spine", "s3"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        // Unreachable silences lossy for the same pair.
        alert(
            &[
                ("test_id", "loss-c-d"),
                ("alertname", "SkeletonHunterPairLoss"),
                ("kind", "pair"),
                ("component", "c->d"),
                ("src_node", "c"),
                ("dst_node", "d"),
                ("src_tor", "t2"),
                ("dst_tor", "t2"),
                ("severity", "warning"),
                ("symptom", "loss"),
            ],
            &[],
        ),
    ])
}

/// Post alerts to a real Alertmanager running the shipped config and
/// check that inhibition silences exactly what it should, then that the
/// notifications carry the evidence through the templates and that nothing
/// is sent for a silenced alert.
#[test]
fn alertmanager_inhibits_alerts_beneath_a_faulty_tor_or_spine() -> Result<()> {
    let sink = Sink::start()?;
    let root = servers::repo_root();
    let config = std::fs::read_to_string(root.join("alertmanager/alertmanager.yml"))?
        // Point the placeholder receivers at the sink; notify quickly.
        .replace("127.0.0.1:9095", &sink.addr.to_string())
        .replace("group_wait: 10s", "group_wait: 1s")
        .replace("group_wait: 30s", "group_wait: 1s");
    assert!(
        config.contains(&sink.addr.to_string()),
        "placeholder URL changed?"
    );
    let mut opts = ServerOpts::new(servers::free_loopback_addr()?, &config);
    for entry in std::fs::read_dir(root.join("alertmanager/templates"))? {
        let p = entry?.path();
        let name = format!("templates/{}", p.file_name().unwrap().to_string_lossy());
        opts = opts.copy_file(&name, &p)?;
    }
    let am = servers::start_alertmanager(opts)?;
    am.post_alerts(&fabric_alerts())?;

    let suppressed_want: std::collections::BTreeSet<&str> = [
        "tor-t1-rule", // deduplicated: the localizer's own alert is active
        "node-a",
        "host-h2",
        "exporter-h1",
        "pair-a-c",
        "pair-c-a",
        "node-e",
        "loss-c-d",
    ]
    .into_iter()
    .collect();
    let active_want: std::collections::BTreeSet<&str> = [
        "tor-t1",
        "node-c",
        "pair-c-d",
        "pair-x-y",
        "spine-s2",
        "spine-s3-latency",
        "tor-t6-latency",
        "node-f",
        "host-h7",
    ]
    .into_iter()
    .collect();

    // Inhibition is computed as alerts arrive; poll briefly for all to land.
    let (suppressed, active) = skeletonhunter_tests::wait_until(
        "Alertmanager to hold every posted alert with its final state",
        Duration::from_secs(10),
        Duration::from_millis(200),
        || {
            let alerts = am.alerts().ok()?;
            let mut s = std::collections::BTreeSet::new();
            let mut a = std::collections::BTreeSet::new();
            for al in &alerts {
                let id = al["labels"]["test_id"].as_str()?.to_string();
                match al["status"]["state"].as_str()? {
                    "suppressed" => s.insert(id),
                    "active" => a.insert(id),
                    _ => return None,
                };
            }
            let done = s.len() == suppressed_want.len() && a.len() == active_want.len();
            done.then_some((s, a))
        },
    )
    .or_else(|e| -> Result<_> {
        anyhow::bail!("{e:#}; Alertmanager holds: {:#?}", am.alerts()?)
    })?;
    let suppressed: std::collections::BTreeSet<&str> =
        suppressed.iter().map(String::as_str).collect();
    let active: std::collections::BTreeSet<&str> = active.iter().map(String::as_str).collect();
    assert_eq!(suppressed, suppressed_want, "suppressed alerts");
    assert_eq!(active, active_want, "active alerts");

    // Notifications: node c (compute page) carries its evidence; node a,
    // silenced, is never sent.
    let posts = skeletonhunter_tests::wait_until(
        "notifications for node c and ToR t1",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || {
            let p = sink.posts();
            let has = |path: &str, what: &str| {
                p.iter()
                    .any(|(pa, b)| pa.ends_with(path) && json_strings(b).contains(what))
            };
            (has("/slack", "node c")
                && has("/slack", "tor t1")
                && has("/slack", "pair c->d")
                && has("/compute-page", "\"c\""))
            .then_some(p)
        },
    )?;
    // Give a straggling (wrong) notification for a silenced alert time to arrive.
    std::thread::sleep(Duration::from_secs(2));
    let posts = [posts, sink.posts()].concat();
    let slack_text: Vec<String> = posts
        .iter()
        .filter(|(p, _)| p.ends_with("/slack"))
        .map(|(_, b)| {
            let v: serde_json::Value = serde_json::from_str(b).unwrap_or_default();
            v["attachments"][0]["text"]
                .as_str()
                .unwrap_or(b)
                .to_string()
        })
        .collect();
    let tor_text = slack_text
        .iter()
        .find(|t| t.contains("tor t1"))
        .expect("a notification for tor t1");
    println!("tor t1 notification:\n{tor_text}");
    for want in [
        "score 0.9300",
        "p-value 1.000e-9",
        "anomalous pairs 17",
        "indistinguishable from: nic/10.0.3.1",
        "a->c loss 31%",
        "ToR t1",
    ] {
        assert!(
            tor_text.contains(want),
            "tor t1 notification lacks {want:?}:\n{tor_text}"
        );
    }
    let node_text = slack_text
        .iter()
        .find(|t| t.contains("node c"))
        .expect("a notification for node c");
    for want in ["score 0.8100", "b->c lost 100%", "host h3", "ToR t2"] {
        assert!(
            node_text.contains(want),
            "node c notification lacks {want:?}:\n{node_text}"
        );
    }
    // A pair alert says where both ends are.
    assert!(
        slack_text
            .iter()
            .any(|t| t.contains("where: from c (ToR t2) to d (ToR t2)")),
        "no pair c->d notification with its location: {slack_text:#?}"
    );
    for (path, body) in &posts {
        // Label values of silenced alerts never appear as a whole string
        // (webhook payloads carry every label of every alert notified).
        let strings = json_strings(body);
        for silenced in [
            "node a is unreachable",
            "a->c",
            "c->a",
            "h2",
            "h1:9100",
            "e",
        ] {
            assert!(
                !strings.lines().any(|l| l == silenced),
                "silenced alert notified ({silenced}) on {path}: {strings}"
            );
        }
    }
    Ok(())
}

/// The dashboards are well-formed: unique uids/titles, every panel on the
/// `${datasource}` variable, queries present.
#[test]
fn dashboards_are_well_formed() -> Result<()> {
    let dir = skeletonhunter_tests::dashboards::dashboards_dir();
    let problems = skeletonhunter_tests::dashboards::lint_dashboards(&dir)?;
    assert!(
        problems.is_empty(),
        "dashboard problems:\n{}",
        problems.join("\n")
    );
    let n: usize = skeletonhunter_tests::dashboards::load_dashboards(&dir)?
        .iter()
        .map(|d| d.queries.len())
        .sum();
    assert!(n >= 30, "only {n} panel queries found");
    Ok(())
}

/// Every panel query, variables filled in, is accepted by a real Prometheus
/// that loads the shipped rules (no exporter data here: that part of the
/// check runs in the end-to-end fabric, see
/// `dashboard_queries_return_data_from_real_exporters`).
#[test]
fn dashboard_queries_are_valid_promql() -> Result<()> {
    let mut opts = ServerOpts::new(
        servers::free_loopback_addr()?,
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: ['rules/*.yml']\n",
    );
    for f in yaml_files("rules") {
        let p = std::path::PathBuf::from(&f);
        let name = format!("rules/{}", p.file_name().unwrap().to_string_lossy());
        opts = opts.copy_file(&name, &p)?;
    }
    let prom = servers::start_prometheus(opts)?;
    // The rules loaded (a broken rule file would leave groups out).
    let groups = prom.prom_api("/api/v1/rules")?["data"]["groups"]
        .as_array()
        .map(|g| g.len())
        .unwrap_or(0);
    assert!(
        groups >= 4,
        "only {groups} rule groups loaded; log:\n{}",
        prom.log()
    );
    let report = skeletonhunter_tests::dashboards::check_dashboards(
        &prom,
        &skeletonhunter_tests::dashboards::dashboards_dir(),
        &Default::default(),
    )?;
    let errors: Vec<String> = report
        .results
        .iter()
        .filter(|r| {
            matches!(
                r.outcome,
                skeletonhunter_tests::dashboards::Outcome::Error(_)
            )
        })
        .map(|r| r.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "queries rejected by Prometheus:\n{}",
        errors.join("\n")
    );
    assert!(report.results.len() >= 60, "{report}");
    println!("{report}");
    Ok(())
}

/// Metrics that exist only once something goes wrong (errors, drops) or
/// with hardware this machine lacks (RDMA): a dashboard query reading only
/// these may find no data on a healthy namespace fabric.
const ONLY_ON_TROUBLE: &[&str] = &[
    "skeletonhunter_probe_errors_total",
    "skeletonhunter_discovery_dropped_events_total",
    "skeletonhunter_discovery_events_total",
    "skeletonhunter_responder_dropped_total",
    "skeletonhunter_localizer_query_errors_total",
    "skeletonhunter_localizer_alert_post_errors_total",
    "skeletonhunter_localizer_alerts_posted_total",
    "skeletonhunter_localizer_alerts_dropped_total",
    "skeletonhunter_rdma_responder_delay_seconds_bucket",
    "skeletonhunter_rdma_prober_delay_seconds_bucket",
];

/// Every dashboard panel's query against a real Prometheus that scrapes
/// real exporters probing each other between namespaces (and the real
/// localizer), with the shipped rules loaded. A query fails when
/// Prometheus rejects it or it returns nothing while its inputs have data.
#[test]
fn dashboard_queries_return_data_from_real_exporters() -> Result<()> {
    use skeletonhunter_tests::netns::{attach, bridge, veth};
    use skeletonhunter_tests::{bin_path, wait_until, ChildGuard, Netns};
    if !skeletonhunter_tests::require_privileges(
        "dashboard_queries_return_data_from_real_exporters",
    ) {
        return Ok(());
    }
    let exporter = bin_path("skeletonhunter-exporter");
    let localizer = bin_path("skeletonhunter-localizer");

    // One L2 segment: four hosts and a monitoring namespace on a bridge.
    // Their identities place a, b under ToR t1 and c, d under t2; a, b, c
    // run job j1, d job j2.
    let sw = Netns::new("dsw")?;
    bridge(&sw, "br0", "")?;
    let mon = Netns::new("dmon")?;
    veth(&sw, "vmon", "", &mon, "eth0", "198.18.10.100/24")?;
    attach(&sw, "vmon", "br0")?;
    let nodes = [
        ("a", "t1", "j1"),
        ("b", "t1", "j1"),
        ("c", "t2", "j1"),
        ("d", "t2", "j2"),
    ];
    let mut hosts = Vec::new();
    for (i, _) in nodes.iter().enumerate() {
        let ns = Netns::new(&format!("dh{i}"))?;
        veth(
            &sw,
            &format!("vh{i}"),
            "",
            &ns,
            "eth0",
            &format!("198.18.10.{}/24", i + 1),
        )?;
        attach(&sw, &format!("vh{i}"), "br0")?;
        hosts.push(ns);
    }
    // Half of what reaches d is lost, so the localizer has something to blame.
    hosts[3].set_loss(50, "")?;

    let mut guards = Vec::new();
    for (i, (node, tor, tenant)) in nodes.iter().enumerate() {
        let ip = format!("198.18.10.{}", i + 1);
        let peers: Vec<String> = (1..=nodes.len())
            .filter(|j| *j != i + 1)
            .map(|j| format!("198.18.10.{j}"))
            .collect();
        let mut cmd = hosts[i].command(exporter.to_str().unwrap());
        cmd.args([
            "--listen",
            &format!("{ip}:9465"),
            "--node",
            node,
            "--nic",
            &ip,
            "--host",
            &format!("h{}", i + 1),
            "--tor",
            tor,
            "--spine",
            "s1",
            "--pod",
            "p1",
            "--tenant",
            tenant,
            "--interval",
            "200ms",
            "--timeout",
            "150ms",
            "--protocols",
            "udp,tcp",
            "--peers",
            &peers.join(","),
        ]);
        guards.push(ChildGuard::spawn(
            &format!("exporter-{node}-{}", std::process::id()),
            cmd,
        )?);
    }

    let scrape = "
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ['rules/*.yml']
alerting:
  alertmanagers: [{static_configs: [{targets: ['198.18.10.100:9093']}]}]
scrape_configs:
  - job_name: skeletonhunter-exporter
    static_configs:
      - targets: ['198.18.10.1:9465', '198.18.10.2:9465', '198.18.10.3:9465', '198.18.10.4:9465']
  - job_name: skeletonhunter-localizer
    static_configs: [{targets: ['198.18.10.100:9479']}]
";
    let mut popts = ServerOpts::new("198.18.10.100:9090".parse()?, scrape).in_netns(&mon);
    for f in yaml_files("rules") {
        let p = std::path::PathBuf::from(&f);
        popts = popts.copy_file(
            &format!("rules/{}", p.file_name().unwrap().to_string_lossy()),
            &p,
        )?;
    }
    let prom = servers::start_prometheus(popts)?;
    let root = servers::repo_root();
    let mut aopts = ServerOpts::new(
        "198.18.10.100:9093".parse()?,
        &std::fs::read_to_string(root.join("alertmanager/alertmanager.yml"))?,
    )
    .in_netns(&mon);
    for entry in std::fs::read_dir(root.join("alertmanager/templates"))? {
        let p = entry?.path();
        aopts = aopts.copy_file(
            &format!("templates/{}", p.file_name().unwrap().to_string_lossy()),
            &p,
        )?;
    }
    let _am = servers::start_alertmanager(aopts)?;
    let mut cmd = mon.command(localizer.to_str().unwrap());
    cmd.args([
        "run",
        "--prometheus",
        "http://198.18.10.100:9090",
        "--alertmanager",
        "http://198.18.10.100:9093",
        "--listen",
        "198.18.10.100:9479",
        "--interval",
        "1s",
        "--window",
        "20s",
    ]);
    guards.push(ChildGuard::spawn(
        &format!("localizer-{}", std::process::id()),
        cmd,
    )?);

    // Wait until every exporter and the localizer are scraped, every pair
    // has a loss ratio through the topology join, and the localizer has
    // finished a cycle.
    let ready = |q: &str, want: usize| prom.query(q).ok().filter(|r| r.len() >= want).map(|_| ());
    wait_until(
        "all five targets up",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || prom.targets_up().ok().filter(|n| *n == 5),
    )?;
    wait_until(
        "12 pairs with topology",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            ready(
                "topology:skeletonhunter_probe_loss:ratio_rate1m{protocol=\"udp\"}",
                12,
            )
        },
    )
    .map_err(|e| anyhow::anyhow!("{e:#}; exporter log:\n{}", guards[0].log()))?;
    wait_until(
        "a localizer cycle and blame",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            ready(
                "skeletonhunter_localizer_last_success_timestamp_seconds > 0",
                1,
            )?;
            ready("skeletonhunter_component_blame", 1)
        },
    )
    .map_err(|e| anyhow::anyhow!("{e:#}; localizer log:\n{}", guards[4].log()))?;
    // The lossy node gets alerted, and the alert counter has samples enough
    // for a rate (a counter that appeared a second ago has none yet).
    wait_until(
        "the localizer posting alerts",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            ready(
                "count_over_time(skeletonhunter_localizer_alerts_posted_total[5s]) >= 4",
                1,
            )
        },
    )
    .map_err(|e| anyhow::anyhow!("{e:#}; localizer log:\n{}", guards[4].log()))?;
    for g in &mut guards {
        g.check_running()?;
    }

    let report = skeletonhunter_tests::dashboards::check_dashboards(
        &prom,
        &skeletonhunter_tests::dashboards::dashboards_dir(),
        &skeletonhunter_tests::dashboards::CheckOptions {
            rate_interval: "5s".into(),
            interval: Duration::from_secs(1),
            range: Duration::from_secs(60),
        },
    )?;
    println!("{report}");
    report.ensure_ok()?;
    for r in report.skipped() {
        if let skeletonhunter_tests::dashboards::Outcome::Empty { missing } = &r.outcome {
            for m in missing {
                assert!(
                    ONLY_ON_TROUBLE.contains(&m.as_str()),
                    "dashboard input {m} has no data on a running fabric: {r}"
                );
            }
        }
    }
    Ok(())
}
