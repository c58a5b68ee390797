//! The localizer's online loop when its neighbours fail: an unreachable
//! Prometheus is logged and alerts nothing, a Prometheus outage holds the
//! alerts as they were, an Alertmanager outage loses no alert; `/-/ready`
//! follows the cycles, SIGHUP and `POST /-/reload` leave it running; a
//! store streaming 100 MB to every query is held to the cycle's answer
//! budget. Real Debian
//! servers on loopback, probe data from the synthetic scrape target
//! (`skeletonhunter_tests::localizer::FakeFabric`).

use anyhow::{Context, Result};
use skeletonhunter_tests::exposition::metric_value;
use skeletonhunter_tests::localizer::{
    describe, is_component, sh_alerts, start_alertmanager, start_store, tor, wait_for_only_alert,
    FakeFabric, FloodingStore, Localizer, Store,
};
use skeletonhunter_tools::process::status_kib;
use skeletonhunter_tools::servers::free_loopback_addr;
use skeletonhunter_tools::sys;
use skeletonhunter_tools::wait_until;
use std::time::Duration;

#[test]
fn unreachable_prometheus_is_logged_and_alerts_nothing() -> Result<()> {
    let am = start_alertmanager(free_loopback_addr()?)?;
    // Nothing listens on 127.0.0.2 (our servers bind 127.0.0.1), so a free
    // port there cannot be taken by a server of a test running in parallel.
    let dead = format!("http://127.0.0.2:{}", free_loopback_addr()?.port());
    let mut loc = Localizer::start(&dead, Some(&am.url()))?;
    wait_until(
        "three failed cycles",
        Duration::from_secs(15),
        Duration::from_millis(250),
        || {
            (loc.metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")? >= 3.0)
                .then_some(())
        },
    )?;
    loc.child.check_running()?;
    let log = loc.child.log();
    assert!(
        log.contains(&format!("cannot reach {dead}/api/v1/query")),
        "log does not name the unreachable URL:\n{log}"
    );
    let m = loc.metrics();
    assert!(
        metric_value(
            &m,
            "skeletonhunter_localizer_query_errors_total{query=\"sent\",reason=\"unreachable\"}"
        )
        .unwrap_or(0.0)
            >= 3.0,
        "{m}"
    );
    assert_eq!(
        metric_value(
            &m,
            "skeletonhunter_localizer_last_success_timestamp_seconds"
        ),
        Some(0.0)
    );
    assert!(sh_alerts(&am)?.is_empty());
    // Up, but not ready: no cycle has analyzed anything.
    assert_eq!(loc.request("GET", "/-/healthy")?.0, 200);
    let (status, body) = loc.request("GET", "/-/ready")?;
    assert_eq!(status, 503, "{body}");
    // SIGHUP (exit 129 by default) and POST /-/reload re-read nothing and
    // leave it running.
    let reloads = "skeletonhunter_config_last_reload_success_timestamp_seconds";
    let loaded_at = loc.metric(reloads).unwrap_or(0.0);
    assert!(loaded_at > 0.0);
    sys::kill(loc.child.pid() as i32, libc::SIGHUP)?;
    wait_until(
        "SIGHUP logged",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            loc.child
                .log()
                .contains("SIGHUP: nothing to reload")
                .then_some(())
        },
    )?;
    let (status, body) = loc.request("POST", "/-/reload")?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(loc.request("GET", "/-/reload")?.0, 405);
    loc.child.check_running()?;
    assert_eq!(
        loc.metric("skeletonhunter_config_last_reload_successful"),
        Some(1.0)
    );
    let (_, am_metrics) = am.get("/metrics")?;
    assert_eq!(
        metric_value(
            &am_metrics,
            "alertmanager_alerts_received_total{status=\"firing\",version=\"v2\"}"
        ),
        Some(0.0),
        "the localizer posted alerts without data"
    );
    Ok(())
}

#[test]
fn prometheus_outage_holds_alerts_without_raising_or_clearing() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let mut prom = start_store(Store::Prometheus, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let mut loc = Localizer::start(&prom.url(), Some(&am.url()))?;
    fabric.set_fault(Some((tor("t2"), 0.3)));
    wait_for_only_alert(&am, "tor", "t2", Duration::from_secs(30))
        .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    let ready = |loc: &Localizer, want: u16| {
        loc.request("GET", "/-/ready")
            .ok()
            .filter(|(s, _)| *s == want)
            .map(|_| ())
    };
    wait_until(
        "ready",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || ready(&loc, 200),
    )?;
    // Prometheus goes away; the fault clears where nobody can see it.
    prom.stop()?;
    fabric.set_fault(None);
    let failed_before = loc
        .metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")
        .unwrap_or(0.0);
    wait_until(
        "four failed cycles",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            (loc.metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")?
                >= failed_before + 4.0)
                .then_some(())
        },
    )?;
    loc.child.check_running()?;
    // Four failed 1 s cycles: the last good one is more than two intervals old.
    wait_until(
        "not ready",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || ready(&loc, 503),
    )?;
    assert_eq!(loc.request("GET", "/-/healthy")?.0, 200);
    // The last known alert is kept alive, nothing else appears.
    let alerts = sh_alerts(&am)?;
    assert_eq!(alerts.len(), 1, "{}", describe(&alerts));
    assert!(is_component(&alerts[0], "tor", "t2"));
    assert!(loc.child.log().contains("raises and clears no alert"));
    Ok(())
}

#[test]
fn alertmanager_outage_loses_no_alert() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let prom = start_store(Store::Prometheus, &fabric)?;
    // An HA pair: one Alertmanager up throughout, the other down at first.
    let am_up = start_alertmanager(free_loopback_addr()?)?;
    let am_addr = free_loopback_addr()?;
    let am_url = format!("http://{am_addr}");
    let loc = Localizer::start(&prom.url(), Some(&format!("{},{am_url}", am_up.url())))?;
    let queue = format!("skeletonhunter_localizer_alert_queue_length{{alertmanager=\"{am_url}\"}}");
    let faulty = |id: &str| {
        loc.metric(&format!(
            "skeletonhunter_component_faulty{{kind=\"tor\",id=\"{id}\"}}"
        ))
    };

    // While Alertmanager is down: t1 fails and recovers, then t2 fails.
    fabric.set_fault(Some((tor("t1"), 0.3)));
    wait_until(
        "t1 blamed",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || (faulty("t1") == Some(1.0)).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    // The healthy member is not held back by the dead one.
    wait_for_only_alert(&am_up, "tor", "t1", Duration::from_secs(10))?;
    fabric.set_fault(None);
    wait_until(
        "t1 resolution queued",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || {
            (loc.metric(&queue)? >= 1.0
                && loc.metric("skeletonhunter_localizer_alerts_firing")? == 0.0)
                .then_some(())
        },
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    fabric.set_fault(Some((tor("t2"), 0.3)));
    wait_until(
        "t2 blamed",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || (faulty("t2") == Some(1.0)).then_some(()),
    )?;
    assert!(
        loc.metric(&format!(
            "skeletonhunter_localizer_alert_post_errors_total{{alertmanager=\"{am_url}\"}}"
        ))
        .unwrap_or(0.0)
            >= 1.0
    );
    assert!(loc
        .child
        .log()
        .contains(&format!("cannot reach {am_url}/api/v2/alerts")));

    // Alertmanager comes up: the firing t2 alert and the t1 resolution arrive.
    let am = start_alertmanager(am_addr)?;
    let alert = wait_for_only_alert(&am, "tor", "t2", Duration::from_secs(15))?;
    assert_eq!(alert["labels"]["symptom"], "loss");
    let (_, am_metrics) = am.get("/metrics")?;
    assert!(
        metric_value(
            &am_metrics,
            "alertmanager_alerts_received_total{status=\"resolved\",version=\"v2\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "the t1 resolution was lost"
    );
    wait_until(
        "the queue to drain",
        Duration::from_secs(5),
        Duration::from_millis(200),
        || (loc.metric(&queue)? == 0.0).then_some(()),
    )?;
    wait_for_only_alert(&am_up, "tor", "t2", Duration::from_secs(5))?;
    Ok(())
}

/// A store that stops answering (SIGSTOP): each query fails at
/// `--query.timeout` with reason `timeout`, the log names the query, the
/// bound and the flag to raise, and the overlong cycle is reported with
/// its slowest query; once the store answers again, cycles succeed.
#[test]
fn silent_prometheus_times_out_naming_the_query_and_the_flag() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let prom = start_store(Store::Prometheus, &fabric)?;
    let loc = Localizer::start_with(&prom.url(), None, &["--query.timeout=1500ms".to_string()])?;
    let ok = |loc: &Localizer| loc.metric("skeletonhunter_localizer_cycles_total{result=\"ok\"}");
    wait_until(
        "a good cycle",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || (ok(&loc)? >= 1.0).then_some(()),
    )
    .with_context(|| loc.child.log())?;
    prom.pause()?;
    let timed_out = wait_until(
        "a timed-out query and an overlong cycle in the log",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || {
            let log = loc.child.log();
            (log.contains("did not answer within 1.5s; raise --query.timeout")
                && log.contains("longer than --interval"))
            .then_some(log)
        },
    );
    let m = loc.metrics();
    prom.resume()?;
    let log = timed_out?;
    assert!(
        log.contains("query sent failed") || log.contains("query lost failed"),
        "the log names no query:\n{log}"
    );
    assert!(log.contains("(slowest query "), "{log}");
    assert!(
        metric_value(
            &m,
            "skeletonhunter_localizer_query_errors_total{query=\"sent\",reason=\"timeout\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{m}"
    );
    let before = ok(&loc).unwrap_or(0.0);
    wait_until(
        "good cycles again",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || (ok(&loc)? > before).then_some(()),
    )
    .with_context(|| loc.child.log())?;
    Ok(())
}

/// The reproduction: a store streaming 100 MB answers to each of
/// a cycle's eleven concurrent queries, at the default limits (64 MiB an
/// answer, so 704 MiB for eleven; 256 MiB for all answers held at once).
/// The cycle fails cleanly — queries refused with reason `too_large`,
/// nothing raised or cleared — and the most answer bytes held at once,
/// as the localizer reports it, stays within the budget.
#[test]
fn a_store_flooding_every_query_is_held_to_the_cycle_budget() -> Result<()> {
    const MIB: f64 = (1u64 << 20) as f64;
    let store = FloodingStore::start(100 << 20)?;
    let args = ["--interval", "2s", "--window", "5s", "--timeout", "20s"].map(String::from);
    let loc = Localizer::start_args(&store.url(), &args)?;
    let failed = |loc: &Localizer| {
        loc.metric("skeletonhunter_localizer_cycles_total{result=\"query_failed\"}")
    };
    wait_until(
        "a failed cycle",
        Duration::from_secs(120),
        Duration::from_millis(250),
        || (failed(&loc)? >= 1.0).then_some(()),
    )
    .with_context(|| loc.child.log())?;
    let m = loc.metrics();
    let hwm = status_kib(loc.child.pid(), "VmHWM").unwrap_or(0);
    let peak = metric_value(&m, "skeletonhunter_localizer_answer_bytes_peak");
    let too_large: f64 = m
        .lines()
        .filter(|l| {
            l.starts_with("skeletonhunter_localizer_query_errors_total{")
                && l.contains("reason=\"too_large\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let log = loc.child.log();
    println!(
        "{} requests; answer bytes held at once at most {:.1?} MiB; {too_large} queries too large; localizer peak RSS {:.1} MiB",
        store.requests(),
        peak.map(|p| p / MIB),
        hwm as f64 / 1024.0
    );
    for l in log.lines().filter(|l| l.contains("bytes")).take(12) {
        println!("{l}");
    }
    let peak = peak.context("no skeletonhunter_localizer_answer_bytes_peak")?;
    assert!(peak > 0.0 && peak <= 256.0 * MIB, "peak {peak}:\n{m}");
    assert!(too_large >= 1.0, "{m}");
    assert!(
        log.contains("--max-cycle-response-size") || log.contains("--max-response-size"),
        "{log}"
    );
    let ok = loc.metric("skeletonhunter_localizer_cycles_total{result=\"ok\"}");
    assert_eq!(ok.unwrap_or(0.0), 0.0, "{m}");
    Ok(())
}
