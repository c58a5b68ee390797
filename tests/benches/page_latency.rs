//! Page latency on the namespace fabric: from a fault to the page (the
//! first firing notification naming the faulty component at a paging
//! receiver of the shipped Alertmanager config) and from the fault's
//! removal to its resolved notification. Run with the shipped timing (the
//! deployment files' scrape and probe intervals, the localizer's
//! Deployment flags and defaults, the shipped `alertmanager.yml` with its
//! group_wait and group_interval) beside the end-to-end tests' short
//! timing, each fault kind `PAGE_RUNS` times; printed as p50/p95/max per
//! timing and fault, with missed pages and pages for a wrong component.
//! Run as root:
//!
//! ```text
//! cargo build --release --workspace   # the binaries the bench runs
//! cargo bench -p skeletonhunter-tests --bench page_latency
//! ```
//!
//! Knobs: `PAGE_RUNS` (runs per fault kind, default 10), `PAGE_FAULTS`
//! (comma list of `tor`, `host`, `node`; default all), `PAGE_TIMINGS`
//! (comma list of `shipped`, `test`; default both), `PAGE_HEALTHY`
//! (minutes of healthy fabric watched for false pages before the faults,
//! per timing; default 0), `PAGE_VERBOSE` (set: print the localizer's log
//! after each timing).

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::bin_path;
use skeletonhunter_tools::fabric::{Fabric, Stack, StackOpts, Timing};
use std::time::{Duration, Instant};

/// The longest wait for a page or a resolved notification before the run
/// counts as missed.
const PAGE_LIMIT: Duration = Duration::from_secs(300);
/// The longest wait for a quiet fabric before a run.
const CLEAN_LIMIT: Duration = Duration::from_secs(600);

/// A fault kind: what to inject and which components are the right page.
/// Run `i` of a kind faults another component of its kind than run `i-1`
/// (see [`host_of_run`], [`node_of_run`]), so that each run is an
/// independent fault: not the return of the last within the localizer's
/// flapping window, and not beneath a ToR or host that alerted minutes
/// before (the localizer holds such a fault as that one's possible return,
/// see the runbook's hold beneath a faulty component).
#[derive(Debug, Clone, Copy, PartialEq)]
enum FaultKind {
    /// 30 % loss at a ToR.
    Tor,
    /// A host's uplink down (the host or its NIC is right).
    Host,
    /// A container cut off the data plane.
    Node,
}

impl FaultKind {
    const ALL: [FaultKind; 3] = [FaultKind::Tor, FaultKind::Host, FaultKind::Node];

    fn name(self) -> &'static str {
        match self {
            FaultKind::Tor => "tor",
            FaultKind::Host => "host",
            FaultKind::Node => "node",
        }
    }

    /// Inject (`on`) or clear the fault of run `i`.
    fn apply(self, stack: &Stack, i: usize, on: bool) -> Result<()> {
        let f = &stack.fabric;
        match self {
            FaultKind::Tor => f.tor_loss(i % f.tors.len(), if on { 30 } else { 0 }),
            FaultKind::Host => f.host_link(&f.hosts[host_of_run(f, i)], !on),
            FaultKind::Node => f.isolate_node(&f.nodes[node_of_run(f, i)], on),
        }
    }

    /// The (kind, component) label pairs a page for run `i` may carry.
    fn expected(self, stack: &Stack, i: usize) -> Vec<(String, String)> {
        let f = &stack.fabric;
        match self {
            FaultKind::Tor => vec![("tor".into(), f.tors[i % f.tors.len()].name.clone())],
            FaultKind::Host => {
                let h = &f.hosts[host_of_run(f, i)];
                vec![
                    ("host".into(), h.name.clone()),
                    ("nic".into(), h.nic_ip.to_string()),
                ]
            }
            FaultKind::Node => {
                let n = &f.nodes[node_of_run(f, i)];
                vec![("node".into(), n.identity.node.clone())]
            }
        }
    }
}

/// The host run `i` takes down: under the ToR run `i` does not fault
/// (runs go tor, host, node), cycling through that ToR's hosts, so a ToR's
/// hosts fail a whole run after its own fault, past the localizer's memory
/// of it.
fn host_of_run(f: &Fabric, i: usize) -> usize {
    let tors = f.tors.len().max(1);
    let per_tor = f.spec.hosts_per_tor.max(1);
    ((i + 1) % tors) * per_tor + (i / tors) % per_tor
}

/// The container run `i` cuts off: under the same ToR as run `i`'s host,
/// on the next host of it (never beneath the host that just failed).
fn node_of_run(f: &Fabric, i: usize) -> usize {
    let tors = f.tors.len().max(1);
    let per_tor = (f.nodes.len() / tors).max(1);
    let per_host = f.spec.containers_per_host.max(1);
    let host = (host_of_run(f, i) % f.spec.hosts_per_tor.max(1) + 1) % f.spec.hosts_per_tor.max(1);
    let local = (host * per_host + (i / tors) % per_host) % per_tor;
    ((i + 1) % tors) * per_tor + local
}

/// The knobs, from the environment.
struct Knobs {
    runs: usize,
    faults: Vec<FaultKind>,
    timings: Vec<Timing>,
    healthy: Duration,
}

fn knobs() -> Result<Knobs> {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let runs: usize = var("PAGE_RUNS", "10")
        .parse()
        .context("PAGE_RUNS: a whole number")?;
    let mut faults = Vec::new();
    for name in var("PAGE_FAULTS", "tor,host,node").split(',') {
        match FaultKind::ALL.iter().find(|k| k.name() == name.trim()) {
            Some(k) => faults.push(*k),
            None => bail!("PAGE_FAULTS: unknown fault {name:?} (tor, host, node)"),
        }
    }
    let mut timings = Vec::new();
    for name in var("PAGE_TIMINGS", "shipped,test").split(',') {
        timings.push(match name.trim() {
            "shipped" => Timing::Shipped,
            "test" => Timing::Test,
            other => bail!("PAGE_TIMINGS: unknown timing {other:?} (shipped, test)"),
        });
    }
    let minutes: f64 = var("PAGE_HEALTHY", "0")
        .parse()
        .context("PAGE_HEALTHY: minutes")?;
    if runs == 0 || !(0.0..=1440.0).contains(&minutes) {
        bail!("PAGE_RUNS must be at least 1 and PAGE_HEALTHY 0 to 1440 minutes");
    }
    Ok(Knobs {
        runs,
        faults,
        timings,
        healthy: Duration::from_secs_f64(minutes * 60.0),
    })
}

/// One alert of a notification.
struct Alert {
    status: String,
    /// Alertmanager's id of the alert: its resolved notification carries
    /// the same one.
    fingerprint: String,
    kind: String,
    component: String,
    /// When the localizer first fired it, and why: printed for a wrong page.
    detail: String,
}

/// One notification's alerts, and whether it went to a paging receiver.
struct Notification {
    page: bool,
    alerts: Vec<Alert>,
}

impl Notification {
    fn from_json(v: &Value) -> Notification {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let alerts = v["alerts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        Notification {
            page: v["path"].as_str().unwrap_or_default().ends_with("-page"),
            alerts: alerts
                .iter()
                .map(|a| Alert {
                    status: s(&a["status"]),
                    fingerprint: s(&a["fingerprint"]),
                    kind: s(&a["labels"]["kind"]),
                    component: s(&a["labels"]["component"]),
                    detail: format!(
                        "{} since {}: {}",
                        s(&a["labels"]["symptom"]),
                        s(&a["startsAt"]),
                        s(&a["annotations"]["evidence"]).replace('\n', " | ")
                    ),
                })
                .collect(),
        }
    }

    /// Whether `a` names one of `expected`.
    fn names(a: &Alert, expected: &[(String, String)]) -> bool {
        expected
            .iter()
            .any(|(k, c)| *k == a.kind && *c == a.component)
    }
}

/// The pager's notifications from index `from` on.
fn notifications(stack: &Stack, from: usize) -> Vec<Notification> {
    let all = stack.pager.webhooks();
    all.get(from..)
        .unwrap_or(&[])
        .iter()
        .map(Notification::from_json)
        .collect()
}

/// Firing pages among `ns` that name none of `expected`, as `kind/component`.
fn wrong_pages(ns: &[Notification], expected: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for n in ns.iter().filter(|n| n.page) {
        for a in &n.alerts {
            let line = format!("{}/{}", a.kind, a.component);
            if a.status == "firing" && !Notification::names(a, expected) && !out.contains(&line) {
                println!("    wrong page {line}: {}", a.detail);
                out.push(line);
            }
        }
    }
    out
}

/// Poll the pager from index `from` until a page carries an alert that
/// `wanted` accepts; its fingerprint and the time since `t0`, or `None`
/// after [`PAGE_LIMIT`].
fn wait_page(
    stack: &mut Stack,
    from: usize,
    t0: Instant,
    wanted: impl Fn(&Alert) -> bool,
) -> Result<Option<(String, Duration)>> {
    while t0.elapsed() < PAGE_LIMIT {
        stack.check_running()?;
        for n in notifications(stack, from).iter().filter(|n| n.page) {
            if let Some(a) = n.alerts.iter().find(|a| wanted(a)) {
                return Ok(Some((a.fingerprint.clone(), t0.elapsed())));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(None)
}

/// Wait until Alertmanager holds no component alert (a previous run's
/// resolved, nothing new firing).
fn wait_quiet(stack: &Stack) -> Result<()> {
    let t0 = Instant::now();
    loop {
        let firing = stack.component_alerts()?;
        if firing.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > CLEAN_LIMIT {
            let names: Vec<String> = firing
                .iter()
                .map(|a| format!("{}/{}", a.kind, a.component))
                .collect();
            bail!("alerts did not clear within {CLEAN_LIMIT:?}: {names:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What one run measured.
struct Run {
    page: Option<Duration>,
    resolved: Option<Duration>,
    wrong: Vec<String>,
}

/// Inject run `i` of `kind`, wait for its page, clear it, wait for that
/// alert's resolved notification, then let its evidence leave the window.
fn one_run(stack: &mut Stack, kind: FaultKind, i: usize, settle: Duration) -> Result<Run> {
    wait_quiet(stack)?;
    let expected = kind.expected(stack, i);
    let from = stack.pager.webhooks().len();
    let t0 = Instant::now();
    kind.apply(stack, i, true)?;
    println!("  {} {expected:?} injected at {}", kind.name(), utc_now());
    let page = wait_page(stack, from, t0, |a| {
        a.status == "firing" && Notification::names(a, &expected)
    })?;
    let t1 = Instant::now();
    kind.apply(stack, i, false)?;
    println!("  {} cleared at {}", kind.name(), utc_now());
    let resolved = match &page {
        Some((fingerprint, _)) => wait_page(stack, from, t1, |a| {
            a.status == "resolved" && a.fingerprint == *fingerprint
        })?,
        None => None,
    };
    let settle_from = Instant::now();
    while settle_from.elapsed() < settle {
        stack.check_running()?;
        std::thread::sleep(Duration::from_millis(500));
    }
    let wrong = wrong_pages(&notifications(stack, from), &expected);
    Ok(Run {
        page: page.map(|p| p.1),
        resolved: resolved.map(|r| r.1),
        wrong,
    })
}

/// Pages sent while a healthy fabric is watched for `watch`.
fn healthy_pages(stack: &mut Stack, watch: Duration) -> Result<Vec<String>> {
    let from = stack.pager.webhooks().len();
    let t0 = Instant::now();
    while t0.elapsed() < watch {
        stack.check_running()?;
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(wrong_pages(&notifications(stack, from), &[]))
}

/// The wall clock, to set beside the alerts' `startsAt`.
fn utc_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.%3NZ"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `q`-quantile (nearest rank) of the measured durations, in seconds.
fn quantile(xs: &[Duration], q: f64) -> String {
    let mut s: Vec<f64> = xs.iter().map(Duration::as_secs_f64).collect();
    if s.is_empty() {
        return "-".into();
    }
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    format!("{:.1}", s[rank - 1])
}

/// The table row of one timing and fault kind.
fn row(timing: Timing, kind: FaultKind, runs: &[Run]) -> String {
    let pages: Vec<Duration> = runs.iter().filter_map(|r| r.page).collect();
    let resolves: Vec<Duration> = runs.iter().filter_map(|r| r.resolved).collect();
    format!(
        "{:<8} {:<5} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}",
        timing_name(timing),
        kind.name(),
        runs.len(),
        quantile(&pages, 0.5),
        quantile(&pages, 0.95),
        quantile(&pages, 1.0),
        quantile(&resolves, 0.5),
        quantile(&resolves, 0.95),
        runs.len() - pages.len(),
        pages.len() - resolves.len(),
        runs.iter().map(|r| r.wrong.len()).sum::<usize>()
    )
}

fn timing_name(t: Timing) -> &'static str {
    match t {
        Timing::Shipped => "shipped",
        Timing::Test => "test",
    }
}

/// Every run of one timing, printed as they finish; one table row per fault.
fn measure(timing: Timing, k: &Knobs) -> Result<Vec<String>> {
    let exporter = bin_path("skeletonhunter-exporter");
    let localizer = bin_path("skeletonhunter-localizer");
    let opts = match timing {
        Timing::Shipped => StackOpts::shipped(exporter, localizer)?,
        Timing::Test => StackOpts::new(exporter, Some(localizer)),
    };
    println!(
        "{}: probe every {:?}, scrape every {:?}, localizer cycle {:?} over {:?}, localizer flags {:?}",
        timing_name(timing),
        opts.probe_interval,
        opts.scrape_interval,
        opts.localizer_interval,
        opts.localizer_window,
        opts.localizer_args
    );
    let mut stack = Stack::start(&opts)?;
    stack.wait_healthy(Duration::from_secs(120) + opts.scrape_interval * 4)?;
    let mut rows = Vec::new();
    if !k.healthy.is_zero() {
        let wrong = healthy_pages(&mut stack, k.healthy)?;
        println!(
            "{}: healthy {:?}: pages {wrong:?}",
            timing_name(timing),
            k.healthy
        );
        rows.push(format!(
            "{:<8} healthy {:>5.0} min: {} false page(s) {wrong:?}",
            timing_name(timing),
            k.healthy.as_secs_f64() / 60.0,
            wrong.len()
        ));
    }
    // Runs interleave the fault kinds: a component fails again only after
    // every other kind has had its turn.
    let mut runs: Vec<Vec<Run>> = k.faults.iter().map(|_| Vec::new()).collect();
    for i in 0..k.runs {
        for (kind, done) in k.faults.iter().zip(&mut runs) {
            let r = one_run(&mut stack, *kind, i, opts.settle_time())?;
            println!(
                "{} {} run {}: page {:?}, resolved {:?}, wrong pages {:?}",
                timing_name(timing),
                kind.name(),
                i + 1,
                r.page,
                r.resolved,
                r.wrong
            );
            done.push(r);
        }
    }
    for (kind, done) in k.faults.iter().zip(&runs) {
        rows.push(row(timing, *kind, done));
    }
    if std::env::var_os("PAGE_VERBOSE").is_some() {
        if let Some(l) = &stack.localizer {
            println!("--- localizer log ({})\n{}", timing_name(timing), l.log());
        }
    }
    Ok(rows)
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; nothing else is read from argv.
    if !require_privileges("page_latency") {
        bail!("the page-latency benchmark builds a namespace fabric: run it as root");
    }
    let k = knobs()?;
    let mut rows = Vec::new();
    for &t in &k.timings {
        rows.extend(measure(t, &k)?);
    }
    println!(
        "\npage latency, seconds. page: fault -> first firing page for the right component; \
         res: fault removed -> that alert's resolved notification; missed: no page within {PAGE_LIMIT:?}; \
         open: no resolved notification within {PAGE_LIMIT:?}; wrong: pages for another component"
    );
    println!(
        "{:<8} {:<5} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}",
        "timing",
        "fault",
        "runs",
        "page p50",
        "p95",
        "max",
        "res p50",
        "p95",
        "missed",
        "open",
        "wrong"
    );
    for r in rows {
        println!("{r}");
    }
    Ok(())
}
