//! One fault scenario on a running stack: inject, wait for the expected
//! alert while judging every other one, clear, wait for the resolution.

use skeletonhunter_tools::fabric::{AlertView, Fabric, Stack};
use std::time::{Duration, Instant};

/// Applies or removes a fault on the fabric.
pub(crate) type FaultFn = Box<dyn Fn(&Fabric) -> anyhow::Result<()>>;

/// One fault scenario: what to inject, how to undo it, and which components
/// may (and at least one must) be alerted.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) inject: FaultFn,
    pub(crate) clear: FaultFn,
    /// (kind, component) pairs that are all "the right component": a host
    /// port fault is indistinguishable between the host and its NIC. The
    /// alert's symptom must be `loss` or `unreachable`.
    pub(crate) expect: Vec<(String, String)>,
}

const DETECT_LIMIT: Duration = Duration::from_secs(60);
const RESOLVE_LIMIT: Duration = Duration::from_secs(90);

/// How an alert other than the expected one is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    /// Fails the scenario: an active (notifying) alert on another
    /// component (any symptom, latency included), or an exporter/localizer
    /// alert.
    Wrong,
    /// Printed, not counted: inhibited by Alertmanager (nobody is paged,
    /// which is what the shipped inhibition rules are for), or a busy
    /// host (`host_stack`: a true warning on a machine shared with
    /// Prometheus, the browser and the other tests, and no network
    /// component blamed; `fabric::host_noise` tests that verdict).
    Noted,
}

/// Judge one alert that is not the expected one; `None` for alerts that do
/// not matter here (pair records).
fn judge(a: &AlertView) -> Option<Verdict> {
    if a.is_monitoring() {
        return Some(Verdict::Wrong);
    }
    if !a.is_component() {
        return None;
    }
    if a.state == "suppressed" || a.symptom == "host_stack" {
        Some(Verdict::Noted)
    } else {
        Some(Verdict::Wrong)
    }
}

impl Scenario {
    /// Whether `a` is the detection. All three faults drop packets: a
    /// latency verdict on the right component is not the detection (it is
    /// judged like any latency alert).
    pub(crate) fn is_expected(&self, a: &AlertView) -> bool {
        a.symptom != "latency"
            && self
                .expect
                .iter()
                .any(|(k, c)| *k == a.kind && *c == a.component)
    }
}

/// The alerts other than the expected one seen during a scenario, each
/// printed when first seen, with the phase and its verdict, to make a
/// failure readable.
struct Judged<'a> {
    sc: &'a Scenario,
    start: Instant,
    wrong: Vec<String>,
    noted: Vec<String>,
}

impl Judged<'_> {
    fn all(&mut self, phase: &str, alerts: &[AlertView]) {
        for a in alerts.iter().filter(|a| !self.sc.is_expected(a)) {
            let Some(verdict) = judge(a) else { continue };
            let line = format!(
                "{} {}/{} ({}, {})",
                a.alertname, a.kind, a.component, a.symptom, a.state
            );
            let list = match verdict {
                Verdict::Wrong => &mut self.wrong,
                Verdict::Noted => &mut self.noted,
            };
            if !list.contains(&line) {
                println!(
                    "{}: {} {phase} at +{:.1} s: {line}",
                    self.sc.name,
                    match verdict {
                        Verdict::Wrong => "WRONG ALERT",
                        Verdict::Noted => "note: not counted",
                    },
                    self.start.elapsed().as_secs_f64()
                );
                if verdict == Verdict::Wrong {
                    let evidence = a.json["annotations"]["evidence"].as_str().unwrap_or("");
                    println!("    evidence: {}", evidence.replace('\n', " | "));
                }
                list.push(line);
            }
        }
    }
}

/// Inject, wait for the expected alert, check that nothing else is alerted,
/// clear, wait for the expected alert to resolve, then `settle_time` more
/// (still judging). Returns (detection, resolution) times.
/// `while_faulted` runs after the alert has held a few seconds, with the
/// fault still standing (the dashboard check, so the blame panels have
/// something to show).
pub(crate) fn run_scenario(
    stack: &mut Stack,
    sc: &Scenario,
    settle_time: Duration,
    while_faulted: &mut dyn FnMut(&Stack),
) -> anyhow::Result<(Duration, Duration)> {
    wait_until_clean(stack, sc)?;
    let mut judged = Judged {
        sc,
        start: Instant::now(),
        wrong: Vec::new(),
        noted: Vec::new(),
    };
    let t0 = Instant::now();
    (sc.inject)(&stack.fabric)?;
    let detected = wait_detected(stack, &mut judged, t0)?;
    let flapped = hold_fault(stack, &mut judged, t0)?;

    // Series born with the alert (e.g. alerts posted) now have a few
    // samples, so the dashboards' rate() panels can show them.
    while_faulted(stack);
    judged.all("while the fault stands", &stack.labelled_alerts()?);

    let resolved = clear_and_wait_resolved(stack, &mut judged)?;
    // The faults are independent: let this one's evidence leave the
    // localizer's window (it holds back findings on the same pairs until
    // then), still watching for leftovers alerted as another component.
    let settle = Instant::now();
    while settle.elapsed() < settle_time {
        judged.all("after resolution", &stack.labelled_alerts()?);
        std::thread::sleep(Duration::from_millis(250));
    }
    if let Some(t) = flapped {
        judged.wrong.push(format!(
            "the alert resolved {:.1} s after injection while the fault stood",
            t.as_secs_f64()
        ));
    }
    if !judged.wrong.is_empty() {
        anyhow::bail!("{}: wrong alerts: {}", sc.name, judged.wrong.join("; "));
    }
    Ok((detected, resolved))
}

/// Start from a fabric where nothing counts as wrong (earlier noise or a
/// previous scenario's alert must have resolved).
fn wait_until_clean(stack: &Stack, sc: &Scenario) -> anyhow::Result<()> {
    let blocking = |alerts: &[AlertView]| -> Vec<String> {
        alerts
            .iter()
            .filter(|a| judge(a) == Some(Verdict::Wrong) || sc.is_expected(a))
            .map(|a| format!("{}/{} ({})", a.kind, a.component, a.symptom))
            .collect()
    };
    let clean = Instant::now();
    loop {
        let left = blocking(&stack.labelled_alerts()?);
        if left.is_empty() {
            return Ok(());
        }
        if clean.elapsed() > RESOLVE_LIMIT {
            anyhow::bail!(
                "{}: alerts before injection did not clear: {left:?}",
                sc.name
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Wait for the expected alert after injecting at `t0`; clears the fault
/// and fails after [`DETECT_LIMIT`].
fn wait_detected(
    stack: &mut Stack,
    judged: &mut Judged<'_>,
    t0: Instant,
) -> anyhow::Result<Duration> {
    let sc = judged.sc;
    loop {
        stack.check_running()?;
        let alerts = stack.labelled_alerts()?;
        judged.all("before detection", &alerts);
        if let Some(a) = alerts.iter().find(|a| sc.is_expected(a)) {
            println!(
                "{}: alerted {:.1} s after injection: {} {}/{} ({}, {})",
                sc.name,
                t0.elapsed().as_secs_f64(),
                a.alertname,
                a.kind,
                a.component,
                a.symptom,
                a.state
            );
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > DETECT_LIMIT {
            (sc.clear)(&stack.fabric)?;
            anyhow::bail!(
                "{}: no alert for {:?} within {DETECT_LIMIT:?}; other alerts: {:?} {:?}",
                sc.name,
                sc.expect,
                judged.wrong,
                judged.noted
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Let the fault stand a few localizer cycles: a second component must not
/// be blamed as evidence accumulates. The alert must also stay: one that
/// resolves while the fault stands is a flap, and pages twice. Returns when
/// (after injection at `t0`) it flapped, if it did.
fn hold_fault(
    stack: &Stack,
    judged: &mut Judged<'_>,
    t0: Instant,
) -> anyhow::Result<Option<Duration>> {
    let hold = Instant::now();
    let mut flapped = None;
    while hold.elapsed() < Duration::from_secs(6) {
        let alerts = stack.labelled_alerts()?;
        judged.all("while the fault stands", &alerts);
        if flapped.is_none() && !alerts.iter().any(|a| judged.sc.is_expected(a)) {
            flapped = Some(t0.elapsed());
            println!(
                "{}: WRONG: the alert resolved while the fault stood (+{:.1} s)",
                judged.sc.name,
                t0.elapsed().as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(flapped)
}

/// Clear the fault and wait for the expected alert to resolve.
fn clear_and_wait_resolved(stack: &mut Stack, judged: &mut Judged<'_>) -> anyhow::Result<Duration> {
    let sc = judged.sc;
    let t1 = Instant::now();
    (sc.clear)(&stack.fabric)?;
    let resolved = loop {
        stack.check_running()?;
        let alerts = stack.labelled_alerts()?;
        judged.all("after clearing", &alerts);
        if !alerts.iter().any(|a| sc.is_expected(a)) {
            break t1.elapsed();
        }
        if t1.elapsed() > RESOLVE_LIMIT {
            anyhow::bail!(
                "{}: the alert did not resolve within {RESOLVE_LIMIT:?} of clearing the fault",
                sc.name
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    println!(
        "{}: resolved {:.1} s after the fault was removed",
        sc.name,
        resolved.as_secs_f64()
    );
    Ok(resolved)
}

/// One line of the detection-time table.
pub(crate) fn print_times(name: &str, detected: Duration, resolved: Duration) {
    println!(
        "  {name:<32} detect {:>5.1} s   resolve {:>5.1} s",
        detected.as_secs_f64(),
        resolved.as_secs_f64()
    );
}
