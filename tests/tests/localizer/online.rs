//! `skeletonhunter-localizer run` and `rules` against real servers: Prometheus,
//! VictoriaMetrics and Alertmanager from the Debian packages, on loopback.
//!
//! The probe data comes from a scrape target served by the test itself
//! (`skeletonhunter_tests::localizer::FakeFabric`): a small fabric (2 ToRs
//! under one spine, 3 hosts each, one container per host, full-mesh
//! skeleton) whose counters advance with wall time, with a switchable fault
//! on one component. The stores scrape it exactly as they would scrape
//! exporters, and the alerts the localizer posts are checked in
//! Alertmanager's own API.
//!
//! This file: faults alerted and resolved, and an Alertmanager cluster
//! found through one DNS name. Store and Alertmanager outages
//! are in `localizer/outages.rs`, the `rules` subcommand, `run --once` and
//! flag errors in `localizer/rules.rs`.

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_common::topology::{Component, Kind};
use skeletonhunter_tests::exposition::metric_value;
use skeletonhunter_tests::localizer::{
    describe, is_component, sh_alerts, start_alertmanager, start_store, tor, wait_for_alerts_among,
    wait_for_only_alert, with_hosts_file, FakeFabric, Localizer, Store, ALERT,
};
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::servers::{free_loopback_addr, Server, TempDir};
use skeletonhunter_tools::wait_until;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The whole online story on one store: healthy, one faulty ToR alerted with
/// evidence and nothing else, the alert resolved after the fault clears.
fn fault_is_alerted_and_resolved(store: Store) -> Result<()> {
    let fabric = FakeFabric::start()?;
    let db = start_store(store, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let loc = Localizer::start(&db.url(), Some(&am.url()))?;
    healthy_fabric_alerts_nothing(store, &loc, &am)?;
    let alert = tor_loss_is_alerted(store, &fabric, &loc, &am)?;
    alert_is_reposted_while_firing(&loc, &am, &alert)?;
    cleared_fault_resolves(store, &fabric, &loc, &am)
}

/// Cycles succeed on real data and nothing is alerted.
fn healthy_fabric_alerts_nothing(store: Store, loc: &Localizer, am: &Server) -> Result<()> {
    // Healthy: cycles succeed on real data and nothing is alerted.
    wait_until(
        "a successful cycle with all 30 pairs",
        Duration::from_secs(25),
        Duration::from_millis(250),
        || (loc.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )
    .with_context(|| format!("store {store:?}; localizer log:\n{}", loc.child.log()))?;
    std::thread::sleep(Duration::from_secs(2));
    let alerts = sh_alerts(am)?;
    assert!(
        alerts.is_empty(),
        "healthy fabric alerted:\n{}",
        describe(&alerts)
    );
    assert!(
        loc.metric("skeletonhunter_localizer_last_success_timestamp_seconds")
            .unwrap_or(0.0)
            > 1e9
    );
    Ok(())
}

/// 30% loss at ToR t1 is alerted on t1 alone, with its evidence.
fn tor_loss_is_alerted(
    store: Store,
    fabric: &FakeFabric,
    loc: &Localizer,
    am: &Server,
) -> Result<Value> {
    // 30% loss on every pair crossing ToR t1.
    let injected = Instant::now();
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let alert = wait_for_only_alert(am, "tor", "t1", Duration::from_secs(30))
        .with_context(|| format!("store {store:?}; localizer log:\n{}", loc.child.log()))?;
    println!(
        "{store:?}: tor t1 alerted {:.1?} after injection",
        injected.elapsed()
    );
    let l = &alert["labels"];
    assert_eq!(l["alertname"], ALERT);
    assert_eq!(l["symptom"], "loss", "{l}");
    assert_eq!(l["severity"], "critical", "{l}");
    assert_eq!(l["tor"], "t1", "{l}");
    assert_eq!(l["spine"], "s1", "{l}");
    assert_eq!(l["src_tor"], "t1", "{l}");
    assert_eq!(l["dst_tor"], "t1", "{l}");
    let an = &alert["annotations"];
    let pairs: usize = an["pairs"].as_str().unwrap_or("0").parse()?;
    assert!((2..=24).contains(&pairs), "pairs annotation {an}");
    let score: f64 = an["score"].as_str().unwrap_or("nan").parse()?;
    // Early on the window still dilutes the loss; the score is only positive.
    assert!(score > 0.0 && score <= 1.0, "score annotation {an}");
    let p: f64 = an["p_value"].as_str().unwrap_or("nan").parse()?;
    assert!(p < 1e-3, "p_value annotation {an}");
    assert!(
        an["summary"].as_str().unwrap_or("").contains("tor t1"),
        "{an}"
    );
    assert!(
        an["evidence"].as_str().unwrap_or("").contains("% loss"),
        "{an}"
    );
    // The links of every alert: the ToR section of the runbook (the
    // default --runbook-url) and the fabric dashboard.
    assert_eq!(
        an["runbook_url"],
        "https://github.com/skeletonhunter/skeletonhunter/blob/main/docs/runbooks.md#skeletonhuntercomponentfaulty-tor",
        "{an}"
    );
    assert_eq!(an["dashboard_url"], "/d/skeletonhunter-fabric", "{an}");
    Ok(alert)
}

/// The blame metrics agree, and the alert is re-posted (same start, fresh
/// update, the ToR's loss as score) while the fault lasts.
fn alert_is_reposted_while_firing(loc: &Localizer, am: &Server, alert: &Value) -> Result<()> {
    // Blame metrics agree, and the alert is re-posted while the fault lasts.
    wait_until(
        "faulty metric for tor t1",
        Duration::from_secs(5),
        Duration::from_millis(200),
        || {
            (loc.metric("skeletonhunter_component_faulty{kind=\"tor\",id=\"t1\"}") == Some(1.0))
                .then_some(())
        },
    )?;
    let first_update = alert["updatedAt"].as_str().unwrap_or("").to_string();
    std::thread::sleep(Duration::from_secs(4));
    let again = wait_for_only_alert(am, "tor", "t1", Duration::from_secs(1))?;
    assert_ne!(
        again["updatedAt"].as_str().unwrap_or(""),
        first_update,
        "alert not re-posted"
    );
    assert_eq!(
        again["startsAt"], alert["startsAt"],
        "startsAt must not move while firing"
    );
    // Once the window holds only faulty time, the score is the ToR's loss.
    let score: f64 = again["annotations"]["score"]
        .as_str()
        .unwrap_or("nan")
        .parse()?;
    assert!(
        (0.2..=0.4).contains(&score),
        "re-posted score {score}, injected 0.3"
    );
    Ok(())
}

/// Clearing the fault resolves the alert in Alertmanager.
fn cleared_fault_resolves(
    store: Store,
    fabric: &FakeFabric,
    loc: &Localizer,
    am: &Server,
) -> Result<()> {
    // Clear: the alert resolves (Alertmanager drops it from its active list).
    let cleared = Instant::now();
    fabric.set_fault(None);
    wait_until(
        "the t1 alert to resolve",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || {
            let alerts = sh_alerts(am).ok()?;
            assert!(
                alerts.iter().all(|a| is_component(a, "tor", "t1")),
                "other component alerted while clearing:\n{}",
                describe(&alerts)
            );
            alerts.is_empty().then_some(())
        },
    )
    .with_context(|| format!("store {store:?}; localizer log:\n{}", loc.child.log()))?;
    println!(
        "{store:?}: resolved {:.1?} after the fault cleared",
        cleared.elapsed()
    );
    let (_, am_metrics) = am.get("/metrics")?;
    assert!(
        metric_value(
            &am_metrics,
            "alertmanager_alerts_received_total{status=\"resolved\",version=\"v2\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "Alertmanager never received the resolution"
    );
    Ok(())
}

#[test]
fn prometheus_fault_is_alerted_and_resolved() -> Result<()> {
    fault_is_alerted_and_resolved(Store::Prometheus)
}

#[test]
fn victoriametrics_fault_is_alerted_and_resolved() -> Result<()> {
    fault_is_alerted_and_resolved(Store::VictoriaMetrics)
}

/// A container cut off entirely (every probe lost, every dial failing) is
/// alerted as unreachable. With one container per host, the container, its
/// NIC and its host are crossed by the same pairs, so any one of them may be
/// named (the others listed as equivalent); nothing else may be.
#[test]
fn isolated_container_is_alerted_unreachable() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let prom = start_store(Store::Prometheus, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    wait_until(
        "a successful cycle with all 30 pairs",
        Duration::from_secs(25),
        Duration::from_millis(250),
        || (loc.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )?;
    let injected = Instant::now();
    fabric.set_fault(Some((Component::new(Kind::Node, "n23"), 1.0)));
    let allowed = [("node", "n23"), ("nic", "198.18.2.3"), ("host", "host23")];
    // The current symptom is the annotation; the `symptom` label is the
    // one the alert fired with (partial onset evidence may say loss). After
    // a loss onset the warning stays beside the critical alert the
    // escalation adds, in no fixed order: the critical one is the verdict.
    let critical_unreachable = |a: &&Value| {
        a["annotations"]["symptom"] == "unreachable" && a["labels"]["severity"] == "critical"
    };
    let alerts = wait_for_alerts_among(
        &am,
        &allowed,
        |alerts| alerts.iter().any(|a| critical_unreachable(&a)),
        Duration::from_secs(30),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    println!(
        "isolated n23 alerted unreachable {:.1?} after injection:\n{}",
        injected.elapsed(),
        describe(&alerts)
    );
    let a = alerts
        .iter()
        .find(critical_unreachable)
        .context("critical unreachable alert")?;
    assert_eq!(a["labels"]["tor"], "t2", "{}", a["labels"]);
    // The two components it could not be told apart from are named.
    let named = format!(
        "{}/{},{}",
        a["labels"]["kind"].as_str().unwrap_or(""),
        a["labels"]["component"].as_str().unwrap_or(""),
        a["annotations"]["equivalent"].as_str().unwrap_or("")
    );
    for (k, i) in allowed {
        assert!(
            named.contains(&format!("{k}/{i}")),
            "{k}/{i} not in {named}"
        );
    }
    assert!(
        a["annotations"]["evidence"]
            .as_str()
            .unwrap_or("")
            .contains("got no answer"),
        "{}",
        a["annotations"]
    );
    fabric.set_fault(None);
    wait_until(
        "the alerts to resolve",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || sh_alerts(&am).ok()?.is_empty().then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    Ok(())
}

/// `--alertmanager dns+http://NAME:PORT` posts to every address NAME has,
/// looked up by the localizer itself: two real Alertmanagers, at 127.0.0.1
/// and 127.0.0.2 on one port, behind one name (a hosts file in the
/// localizer's own mount namespace stands in for kube-prometheus' headless
/// `alertmanager-operated` Service) both get the ToR alert, and each has
/// its own series, labelled with its address.
#[test]
fn a_dns_name_stands_for_every_alertmanager_member() -> Result<()> {
    if !require_privileges("a_dns_name_stands_for_every_alertmanager_member") {
        return Ok(());
    }
    let fabric = FakeFabric::start()?;
    let db = start_store(Store::Prometheus, &fabric)?;
    let port = free_loopback_addr()?.port();
    let members = [[127, 0, 0, 1], [127, 0, 0, 2]].map(|ip| SocketAddr::from((ip, port)));
    let ams = [
        start_alertmanager(members[0])?,
        start_alertmanager(members[1])?,
    ];
    let dir = TempDir::new("amdns")?;
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        "127.0.0.1 localhost\n127.0.0.1 am.skeletonhunter.test\n127.0.0.2 am.skeletonhunter.test\n",
    )?;
    let mut args = Localizer::cadence();
    args.extend([
        "--alertmanager".to_string(),
        format!("dns+http://am.skeletonhunter.test:{port}"),
    ]);
    let loc = Localizer::start_behind(&with_hosts_file(&hosts), &db.url(), &args)?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    for am in &ams {
        wait_for_only_alert(am, "tor", "t1", Duration::from_secs(30))
            .with_context(|| format!("{}; localizer log:\n{}", am.url(), loc.child.log()))?;
    }
    for m in members {
        let series =
            format!("skeletonhunter_localizer_alerts_posted_total{{alertmanager=\"http://{m}\"}}");
        let posted = loc.metric(&series).unwrap_or(0.0);
        assert!(posted >= 1.0, "{series} = {posted}");
    }
    assert!(
        loc.child.log().contains("Alertmanager members of"),
        "the members found are not logged:\n{}",
        loc.child.log()
    );
    Ok(())
}
