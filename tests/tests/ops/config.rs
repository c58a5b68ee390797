//! The shipped operations config (rules/, alertmanager/) checked by the real
//! tools and servers, and the server helpers themselves. The Alertmanager
//! inhibition and notifications are checked in `ops/alertmanager.rs`, the
//! dashboards in `ops/dashboards.rs`.

use anyhow::Result;
use skeletonhunter_tools::deploy::{group_rules, yaml_docs};
use skeletonhunter_tools::repo::{repo_file, rule_files, yaml_files};
use skeletonhunter_tools::servers::{self, ServerOpts};
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
    let ns = skeletonhunter_tools::Netns::new("srv")?;
    ns.ip(&["addr", "add", "198.18.200.1/32", "dev", "lo"])?;
    let addr = "198.18.200.1:9090".parse()?;
    let prom = servers::start_prometheus(
        ServerOpts::new(
            addr,
            "global: {scrape_interval: 1s}\nscrape_configs: [{job_name: self, static_configs: [{targets: ['198.18.200.1:9090']}]}]\n",
        )
        .in_netns(&ns),
    )?;
    let up = skeletonhunter_tools::wait_until(
        "Prometheus scraping itself in the namespace",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || prom.targets_up().ok().filter(|n| *n == 1),
    )?;
    assert_eq!(up, 1);
    Ok(())
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
        let got = servers::amtool_route(&config, labels)?;
        assert_eq!(got, *want, "route for {labels:?}");
    }
    Ok(())
}

/// A critical verdict of every kind the localizer can blame pages an
/// on-call, in the full example and in the kube-prometheus config alike:
/// a kind that falls through to the ticket receiver (as the overlay's
/// `vport` and `vswitch` once did) pages nobody.
#[test]
fn every_blamable_kind_pages_when_critical() -> Result<()> {
    for file in [
        "alertmanager/alertmanager.yml",
        "alertmanager/kube-prometheus.yml",
    ] {
        let config = repo_file(file);
        for kind in skeletonhunter_common::topology::Kind::BLAMABLE {
            let k = format!("kind={kind}");
            let labels = [
                "alertname=SkeletonHunterComponentFaulty",
                k.as_str(),
                "component=x",
                "severity=critical",
            ];
            let receiver = servers::amtool_route(&config, &labels)?;
            assert!(
                receiver.ends_with("-page"),
                "{file}: a critical {kind} verdict goes to {receiver:?}, which pages nobody"
            );
        }
    }
    Ok(())
}

/// Every shipped rule file, the default ones and the opt-in pair detail,
/// loads in one `promtool check rules`, as a deployment that opts in loads
/// them.
#[test]
fn promtool_accepts_the_rules() -> Result<()> {
    let files = rule_files();
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
    for f in rule_files() {
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

/// Every expression of the shipped rule files evaluates in a real
/// VictoriaMetrics. `vmalert -dryRun` (above) checks syntax, not function
/// names: a rule naming a function MetricsQL lacks (`histogram_count`,
/// `histogram_sum`, `histogram_fraction`, which the mixin uses only with
/// `nativeHistograms: true`) passes it and then fails every evaluation,
/// its classic half included.
#[test]
fn victoriametrics_evaluates_every_shipped_rule() -> Result<()> {
    let vm = servers::start_victoria_metrics(ServerOpts::new(servers::free_loopback_addr()?, ""))?;
    let mut checked = 0;
    for f in rule_files() {
        let text = std::fs::read_to_string(&f)?;
        for doc in yaml_docs(&text, &f)? {
            for (group, rule) in group_rules(&doc) {
                let name = rule["record"]
                    .as_str()
                    .or(rule["alert"].as_str())
                    .unwrap_or("?");
                let expr = rule["expr"].as_str().unwrap_or_default();
                if let Err(e) = vm.query(expr) {
                    // VictoriaMetrics repeats the expression once per `or`:
                    // its last words name the cause.
                    let msg = format!("{e:#}");
                    let tail: String = msg.chars().rev().take(300).collect();
                    let tail: String = tail.chars().rev().collect();
                    anyhow::bail!(
                        "{f}: group {group}, rule {name}: VictoriaMetrics fails it: ...{tail}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} rules");
    // The check can fail: a Prometheus-only function is refused.
    let native = "histogram_count(sum(rate(skeletonhunter_probe_rtt_seconds[1m])))";
    let err = vm
        .query(native)
        .expect_err("VictoriaMetrics knows histogram_count");
    assert!(format!("{err:#}").contains("histogram_count"), "{err:#}");
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

/// The localizer Deployment's `--scrape-interval` is the exporters' scrape
/// interval (the PodMonitor's): it sizes how long the localizer holds
/// findings after a clear, and the page-latency benchmark runs the shipped
/// timing from these files. Read through `StackOpts::shipped`, which parses
/// the Deployment's flags with the localizer's own parser.
#[test]
fn the_localizer_is_told_the_shipped_scrape_interval() -> anyhow::Result<()> {
    use skeletonhunter_tools::fabric::StackOpts;
    let opts = StackOpts::shipped("exporter".into(), "localizer".into())?;
    let told: Vec<&String> = opts
        .localizer_args
        .iter()
        .filter(|a| a.starts_with("--scrape-interval"))
        .collect();
    let [flag] = told.as_slice() else {
        anyhow::bail!(
            "the localizer Deployment sets --scrape-interval {} times, not once",
            told.len()
        );
    };
    let value = flag
        .trim_start_matches("--scrape-interval")
        .trim_start_matches('=');
    let told = skeletonhunter_common::duration::parse(value)?;
    assert_eq!(
        told, opts.scrape_interval,
        "the localizer Deployment says {flag}, the exporters' PodMonitor scrapes every {:?}",
        opts.scrape_interval
    );
    assert!(
        opts.probe_interval < opts.scrape_interval
            && opts.localizer_window >= opts.scrape_interval * 2,
        "shipped timing out of proportion: probe {:?}, scrape {:?}, window {:?}",
        opts.probe_interval,
        opts.scrape_interval,
        opts.localizer_window
    );
    Ok(())
}
