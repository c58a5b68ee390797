//! The shipped Grafana dashboards: well-formed, every query valid PromQL
//! for a real Prometheus with the shipped rules, and every query returning
//! data from real exporters probing each other between namespaces.

use anyhow::Result;
use skeletonhunter_tools::repo::yaml_files;
use skeletonhunter_tools::servers::{self, ServerOpts};
use std::time::Duration;

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
        .map(std::vec::Vec::len)
        .unwrap_or(0);
    assert!(
        groups >= 2,
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
        .map(std::string::ToString::to_string)
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
    use skeletonhunter_tools::netns::{attach, bridge, veth};
    use skeletonhunter_tools::{bin_path, wait_until, ChildGuard, Netns};
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
    // Half of what reaches c is lost, so the localizer has something to
    // blame. It must be a node of j1: the panels are checked with each
    // variable on its first value (tenant j1), and the tenant dashboard's
    // blame panel shows only components under that tenant's nodes — a
    // blamed j2 node left it empty whenever no shared ToR or spine was a
    // candidate too.
    hosts[2].set_loss(50, "")?;

    let mut guards = Vec::new();
    for (i, (node, tor, tenant)) in nodes.iter().enumerate() {
        let ip = format!("198.18.10.{}", i + 1);
        let peers: Vec<String> = (1..=nodes.len())
            .filter(|j| *j != i + 1)
            .map(|j| format!("198.18.10.{j}"))
            .collect();
        let mut cmd = hosts[i].command(exporter.to_str().unwrap());
        cmd.args([
            "--web.listen-address",
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
        "--web.listen-address",
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

    // Wait until every exporter and the localizer are scraped and the
    // localizer has finished a cycle over all 12 pairs (its overview feeds
    // the loss, pair and RTT panels) and blamed something.
    let ready = |q: &str, want: usize| prom.query(q).ok().filter(|r| r.len() >= want).map(|_| ());
    wait_until(
        "all five targets up",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || prom.targets_up().ok().filter(|n| *n == 5),
    )?;
    wait_until(
        "a localizer cycle over 12 pairs, and blame",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || {
            ready(
                "skeletonhunter_overview_pairs{scope=\"fabric\", state=\"all\"} >= 12",
                1,
            )?;
            ready("skeletonhunter_component_blame", 1)
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e:#}; localizer log:\n{}\nexporter log:\n{}",
            guards[4].log(),
            guards[0].log()
        )
    })?;
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
