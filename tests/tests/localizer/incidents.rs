//! One incident, one notification: what an on-call receiver gets from the
//! localizer through the shipped Alertmanager configuration. A fault held
//! through a Prometheus pause pages once and never resolves falsely; a loss
//! that escalates to an outage is one notification group; a dead container
//! is paged as that container. Real Debian Prometheus and Alertmanager on
//! loopback, probe data from the synthetic scrape target, notifications
//! counted at a webhook sink.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_common::topology::{Component, Kind};
use skeletonhunter_tests::localizer::{
    describe, is_component, sh_alerts, start_prometheus_per_node, start_shipped_alertmanager, tor,
    wait_for_alerts_among, wait_for_only_alert, FakeFabric, Localizer,
};
use skeletonhunter_tools::sink::Sink;
use skeletonhunter_tools::wait_until;
use std::time::Duration;

/// Webhook notifications of the group of `kind/id`.
fn notifications_of(sink: &Sink, kind: &str, id: &str) -> Vec<Value> {
    sink.webhooks()
        .into_iter()
        .filter(|n| n["groupLabels"]["kind"] == kind && n["groupLabels"]["component"] == id)
        .collect()
}

/// One line per notification, for failure messages.
fn describe_notifications(ns: &[Value]) -> String {
    ns.iter()
        .map(|n| {
            let alerts: Vec<String> = n["alerts"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| format!("{}:{}", x["status"], x["labels"]))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "{} {} {} [{}]",
                n["path"],
                n["groupKey"],
                n["status"],
                alerts.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Wait until the localizer has run `n` more cycles with result `result`.
fn wait_cycles(loc: &Localizer, result: &str, n: f64, timeout: Duration) -> Result<()> {
    let series = format!("skeletonhunter_localizer_cycles_total{{result=\"{result}\"}}");
    let start = loc.metric(&series).unwrap_or(0.0);
    wait_until(
        &format!("{n} more {result} cycles"),
        timeout,
        Duration::from_millis(200),
        || (loc.metric(&series).unwrap_or(0.0) >= start + n).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))
}

/// Wait for the first notification of the group of `kind/id`.
fn wait_for_notification(sink: &Sink, kind: &str, id: &str, timeout: Duration) -> Result<Value> {
    wait_until(
        &format!("a notification for {kind} {id}"),
        timeout,
        Duration::from_millis(200),
        || notifications_of(sink, kind, id).into_iter().next(),
    )
    .with_context(|| {
        format!(
            "webhooks so far:\n{}",
            describe_notifications(&sink.webhooks())
        )
    })
}

#[test]
fn fault_held_through_a_prometheus_pause_is_paged_once_and_never_resolved() -> Result<()> {
    let sink = Sink::start()?;
    let fabric = FakeFabric::start()?;
    // One scrape target per node: after the pause their scrapes come back
    // at staggered times, so the first cycles see part of the fabric.
    let prom = start_prometheus_per_node(&fabric)?;
    let am = start_shipped_alertmanager(&sink, Some("2s"))?;
    let loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let first = wait_for_notification(&sink, "tor", "t1", Duration::from_secs(40))?;
    assert_eq!(first["status"], "firing");
    let started =
        wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(5))?["startsAt"].clone();

    // Prometheus hangs for at least three localizer cycles.
    prom.pause()?;
    let paused = wait_cycles(&loc, "query_failed", 3.0, Duration::from_secs(40));
    prom.resume()?;
    paused?;
    // Back: the window refills (5 s) and several more cycles run, enough for
    // the group interval (2 s) to pass and for a false resolution (after 3
    // clean cycles) to have happened.
    let ok = "skeletonhunter_localizer_cycles_total{result=\"ok\"}";
    let ok_at_resume = loc.metric(ok).unwrap_or(0.0);
    let mut unknown_seen = 0.0f64;
    wait_until(
        "10 analyzed cycles after the pause",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            let m = loc.metrics();
            let unknown = skeletonhunter_tests::exposition::metric_value(
                &m,
                "skeletonhunter_localizer_components_unknown",
            );
            unknown_seen = unknown_seen.max(unknown.unwrap_or(0.0));
            let done = skeletonhunter_tests::exposition::metric_value(&m, ok)?;
            (done >= ok_at_resume + 10.0).then_some(())
        },
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    println!("components unknown after the pause (max seen): {unknown_seen}");

    let ns = notifications_of(&sink, "tor", "t1");
    assert_eq!(
        ns.len(),
        1,
        "expected one notification (the first page), got:\n{}",
        describe_notifications(&ns)
    );
    let alerts = sh_alerts(&am)?;
    assert_eq!(alerts.len(), 1, "{}", describe(&alerts));
    assert!(is_component(&alerts[0], "tor", "t1"));
    assert_eq!(
        alerts[0]["startsAt"], started,
        "the alert was restarted: it resolved in between"
    );
    // Nothing else was paged meanwhile.
    let all = sink.webhooks();
    assert_eq!(all.len(), 1, "{}", describe_notifications(&all));
    Ok(())
}

#[test]
fn loss_escalating_to_unreachable_is_one_notification_group() -> Result<()> {
    let sink = Sink::start()?;
    let fabric = FakeFabric::start()?;
    let prom = start_prometheus_per_node(&fabric)?;
    let am = start_shipped_alertmanager(&sink, Some("2s"))?;
    let loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let first = wait_for_notification(&sink, "tor", "t1", Duration::from_secs(40))?;
    assert_eq!(first["alerts"][0]["labels"]["symptom"], "loss");

    // The ToR now drops everything.
    fabric.set_fault(Some((tor("t1"), 1.0)));
    wait_for_alerts_among(
        &am,
        &[("tor", "t1")],
        |a| a.len() == 1 && a[0]["annotations"]["symptom"] == "unreachable",
        Duration::from_secs(40),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    // Several group intervals (2 s) later, still one group, one notification.
    wait_cycles(&loc, "ok", 6.0, Duration::from_secs(40))?;
    let alerts = sh_alerts(&am)?;
    assert_eq!(alerts.len(), 1, "{}", describe(&alerts));
    assert_eq!(alerts[0]["labels"]["symptom"], "loss", "identity kept");
    assert!(alerts[0]["annotations"]["summary"]
        .as_str()
        .is_some_and(|s| s.contains("is unreachable")));
    let all = sink.webhooks();
    let groups: std::collections::BTreeSet<String> =
        all.iter().map(|n| n["groupKey"].to_string()).collect();
    assert_eq!(groups.len(), 1, "{}", describe_notifications(&all));
    assert_eq!(
        all.len(),
        1,
        "the escalation notified again:\n{}",
        describe_notifications(&all)
    );
    Ok(())
}

/// Depends on the engine blaming the smallest component that explains the
/// evidence (issue 10, item 4): one node per host makes the node, its NIC
/// and its host indistinguishable, and the node must win.
#[test]
fn dead_container_is_paged_as_that_container() -> Result<()> {
    let sink = Sink::start()?;
    let fabric = FakeFabric::start()?;
    let prom = start_prometheus_per_node(&fabric)?;
    let am = start_shipped_alertmanager(&sink, Some("2s"))?;
    let loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    // Every probe and dial to and from n12 fails.
    fabric.set_fault(Some((Component::new(Kind::Node, "n12"), 1.0)));
    let alert = wait_for_only_alert(&am, "node", "n12", Duration::from_secs(40))
        .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    assert_eq!(alert["labels"]["symptom"], "unreachable");
    // A node's severity for an outage (critical, see docs/localizer-online.md),
    // routed to the compute on-call, not the network pager.
    assert_eq!(alert["labels"]["severity"], "critical");
    let n = wait_for_notification(&sink, "node", "n12", Duration::from_secs(20))?;
    assert_eq!(n["path"], "/skeletonhunter/compute-page");
    let all = sink.webhooks();
    if all.iter().any(|n| n["groupLabels"]["kind"] == "spine") {
        bail!("a spine was paged:\n{}", describe_notifications(&all));
    }
    Ok(())
}

/// Two replicas against one store post identical alerts: Alertmanager
/// deduplicates them into one notification. Killing one (SIGKILL) while
/// the fault stands neither resolves the alert nor notifies again; the
/// survivor resolves it once the fault is gone (issue 15, item 4).
#[test]
fn two_localizers_page_once_and_survive_losing_one() -> Result<()> {
    let sink = Sink::start()?;
    let fabric = FakeFabric::start()?;
    let prom = start_prometheus_per_node(&fabric)?;
    let am = start_shipped_alertmanager(&sink, Some("2s"))?;
    let first_replica = Localizer::start(&prom.url(), Some(&am.url()))?;
    let second_replica = Localizer::start(&prom.url(), Some(&am.url()))?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let first = wait_for_notification(&sink, "tor", "t1", Duration::from_secs(40))?;
    assert_eq!(first["status"], "firing");
    // Both replicas have posted and several group intervals (2 s) passed.
    wait_cycles(&first_replica, "ok", 4.0, Duration::from_secs(40))?;
    wait_cycles(&second_replica, "ok", 4.0, Duration::from_secs(40))?;
    let started =
        wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(5))?["startsAt"].clone();

    // One replica dies mid-fault; the other carries on for a while.
    drop(first_replica);
    wait_cycles(&second_replica, "ok", 8.0, Duration::from_secs(60))?;
    let alerts = sh_alerts(&am)?;
    assert_eq!(alerts.len(), 1, "{}", describe(&alerts));
    assert_eq!(
        alerts[0]["startsAt"], started,
        "the alert resolved in between"
    );
    let all = sink.webhooks();
    assert_eq!(
        all.len(),
        1,
        "two replicas (or losing one) notified more than once:\n{}",
        describe_notifications(&all)
    );

    // The fault goes: the survivor resolves it, with one resolve notification.
    fabric.set_fault(None);
    let resolved = wait_until(
        "the resolve notification",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            notifications_of(&sink, "tor", "t1")
                .into_iter()
                .find(|n| n["status"] == "resolved")
        },
    )
    .with_context(|| {
        format!(
            "webhooks so far:\n{}\nlocalizer log:\n{}",
            describe_notifications(&sink.webhooks()),
            second_replica.child.log()
        )
    })?;
    assert_eq!(resolved["alerts"][0]["labels"]["component"], "t1");
    let all = sink.webhooks();
    assert_eq!(all.len(), 2, "{}", describe_notifications(&all));
    Ok(())
}

/// Every (symptom label, startsAt, status) of the alerts of `kind/id` in
/// the notifications so far, in order.
fn alert_states(sink: &Sink, kind: &str, id: &str) -> Vec<(String, String, String)> {
    notifications_of(sink, kind, id)
        .iter()
        .flat_map(|n| n["alerts"].as_array().cloned().unwrap_or_default())
        .map(|a| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&a["labels"]["symptom"]),
                s(&a["startsAt"]),
                s(&a["status"]),
            )
        })
        .collect()
}

/// The localizer with a 20-cycle flap window (20 s here), so the test
/// sees a flap end within a minute.
fn flap_localizer(prom: &str, am: &str) -> Result<Localizer> {
    Localizer::start_with(
        prom,
        Some(am),
        &["--flap-window-cycles".into(), "20".into()],
    )
}

/// Flap t1 `flaps` times: cut for 2 cycles, healthy for 12 (longer than
/// the 5 s window plus 3 resolve cycles, so each outage would resolve and
/// page anew). Paced by the localizer's cycles, not the clock.
fn flap_tor(fabric: &FakeFabric, loc: &Localizer, flaps: usize, fault: bool) -> Result<()> {
    for _ in 0..flaps {
        if fault {
            fabric.set_fault(Some((tor("t1"), 1.0)));
        }
        wait_cycles(loc, "ok", 2.0, Duration::from_secs(30))?;
        fabric.set_fault(None);
        wait_cycles(loc, "ok", 12.0, Duration::from_secs(60))?;
    }
    Ok(())
}

/// A ToR cut for 2 s every 14 cycles for about 70 s: its first outage may
/// page as itself, then one `flapping` alert stands through all the others
/// (no resolve/fire churn at the receiver) and resolves once after the
/// flapping stops.
#[test]
fn flapping_tor_is_one_flapping_alert_without_churn() -> Result<()> {
    let sink = Sink::start()?;
    let fabric = FakeFabric::start()?;
    let prom = start_prometheus_per_node(&fabric)?;
    let am = start_shipped_alertmanager(&sink, Some("2s"))?;
    let loc = flap_localizer(&prom.url(), &am.url())?;
    wait_cycles(&loc, "ok", 3.0, Duration::from_secs(40))?;
    let start = std::time::Instant::now();
    let flapping = |a: &[Value]| a.iter().any(|x| x["labels"]["symptom"] == "flapping");
    // Three flaps make the transitions fault, clear, fault (and a margin).
    flap_tor(&fabric, &loc, 3, true)?;
    let alerts = wait_for_alerts_among(&am, &[("tor", "t1")], flapping, Duration::from_secs(20))
        .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    let found_in = start.elapsed();
    assert!(
        found_in < Duration::from_secs(60),
        "flapping after {found_in:?}"
    );
    let flap = alerts
        .iter()
        .find(|a| a["labels"]["symptom"] == "flapping")
        .cloned()
        .unwrap_or_default();
    assert_eq!(flap["labels"]["severity"], "critical");
    let started = flap["startsAt"].clone();
    let notified = notifications_of(&sink, "tor", "t1").len();

    // Two more flaps: the same alert stands, nothing is notified.
    flap_tor(&fabric, &loc, 2, true)?;
    let alerts = sh_alerts(&am)?;
    assert_eq!(alerts.len(), 1, "{}", describe(&alerts));
    assert_eq!(alerts[0]["labels"]["symptom"], "flapping");
    assert_eq!(
        alerts[0]["startsAt"], started,
        "the flapping alert restarted"
    );

    // Quiet: it resolves once (20 quiet cycles, then 3 resolve cycles).
    wait_until(
        "the flapping alert resolved",
        Duration::from_secs(90),
        Duration::from_millis(250),
        || {
            alert_states(&sink, "tor", "t1")
                .iter()
                .any(|(s, _, st)| s == "flapping" && st == "resolved")
                .then_some(())
        },
    )
    .with_context(|| {
        format!(
            "webhooks so far:\n{}\nlocalizer log:\n{}",
            describe_notifications(&sink.webhooks()),
            loc.child.log()
        )
    })?;
    let all = sink.webhooks();
    let log = describe_notifications(&all);
    let states = alert_states(&sink, "tor", "t1");
    // At most one alert before the flapping one, one flapping alert, each
    // fired once and resolved once.
    let mut alerts: Vec<(String, String)> = states
        .iter()
        .map(|(s, at, _)| (s.clone(), at.clone()))
        .collect();
    alerts.dedup();
    alerts.sort();
    alerts.dedup();
    let flaps = alerts.iter().filter(|(s, _)| s == "flapping").count();
    assert_eq!(flaps, 1, "one flapping alert:\n{log}");
    assert!(
        alerts.len() <= 2,
        "more than one page before flapping:\n{log}"
    );
    for a in &alerts {
        let resolved = states
            .iter()
            .filter(|(s, at, st)| (s, at) == (&a.0, &a.1) && st == "resolved")
            .count();
        assert!(resolved <= 1, "{a:?} resolved {resolved} times:\n{log}");
    }
    assert!(
        notifications_of(&sink, "tor", "t1").len() <= notified + 1,
        "notified again while flapping:\n{log}"
    );
    assert!(
        all.iter().all(|n| n["groupLabels"]["component"] == "t1"),
        "another component was paged:\n{log}"
    );
    Ok(())
}

/// The same run without faults: nothing is paged, nothing flaps.
#[test]
fn healthy_run_has_no_flapping_alert() -> Result<()> {
    let sink = Sink::start()?;
    let fabric = FakeFabric::start()?;
    let prom = start_prometheus_per_node(&fabric)?;
    let am = start_shipped_alertmanager(&sink, Some("2s"))?;
    let loc = flap_localizer(&prom.url(), &am.url())?;
    wait_cycles(&loc, "ok", 3.0, Duration::from_secs(40))?;
    flap_tor(&fabric, &loc, 5, false)?;
    let all = sink.webhooks();
    assert!(all.is_empty(), "{}", describe_notifications(&all));
    let alerts = sh_alerts(&am)?;
    assert!(alerts.is_empty(), "{}", describe(&alerts));
    let m = loc.metrics();
    assert!(!m.contains("symptom=\"flapping\""), "{m}");
    Ok(())
}
