//! A rollout and a training job that ends are not faults: on the overlay
//! namespace fabric (containers on each host's bridge, hosts joined by
//! VXLAN; see `skeletonhunter_tools::fabric`), deployed as the shipped
//! DaemonSet is — one exporter per host, probing the underlay host to host
//! and from inside each of its containers — every exporter is restarted
//! one by one (a DaemonSet rollout), one container of the job that stays
//! is re-created on its host, then one job's containers go away pod
//! by pod, seconds apart, as Kubernetes deletes them — their processes end,
//! their training connections close, their cgroups go — while the other
//! job keeps training. A restarting exporter gives its departure notice
//! for the host and every container it probes from (their replies say they
//! are leaving); an ended container's prober stops and its series go with
//! it. Nothing may be notified or fire for minutes after, and the
//! localizer's series of the ended job must be gone while the surviving
//! job stays covered.

use serde_json::Value;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::fabric::{DataPlane, Stack, StackOpts};
use skeletonhunter_tools::{bin_path, wait_until};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long the stack is watched after the job ended: past the longest
/// `for:` of a shipped rule that could trip on it (the localizer's blind
/// alert, 2 minutes; an exporter down, 1 minute), the localizer's
/// confirmation and Alertmanager's group wait before a notification.
/// `SKELETONHUNTER_TEST_HOLD_SECS` makes it longer by hand (a 10-minute
/// healthy run: `=600`); CI keeps the default.
fn hold() -> Duration {
    let secs = std::env::var("SKELETONHUNTER_TEST_HOLD_SECS").ok();
    let secs = secs.map(|s| {
        s.parse::<u64>()
            .unwrap_or_else(|_| panic!("SKELETONHUNTER_TEST_HOLD_SECS={s:?}: not whole seconds"))
    });
    Duration::from_secs(secs.unwrap_or(180).max(180))
}

/// How long the ended job's series may take to leave: the localizer's
/// window (10 s) and a cycle, then a scrape of the localizer.
const SERIES_GONE: Duration = Duration::from_secs(60);

/// Directed skeleton pairs with both ends in job `tenant`.
fn pairs_of(stack: &Stack, tenant: &str) -> usize {
    let f = &stack.fabric;
    f.nodes
        .iter()
        .filter(|n| n.identity.tenant == tenant)
        .map(|n| f.skeleton_peers(n).len())
        .sum()
}

/// The values of `promql` at Prometheus, one per series (empty: absent).
fn values(stack: &Stack, promql: &str) -> anyhow::Result<Vec<f64>> {
    Ok(stack
        .prometheus
        .query(promql)?
        .iter()
        .filter_map(|r| r["value"][1].as_str()?.parse().ok())
        .collect())
}

/// The single value of `promql`, or `None` when absent or not single.
fn value(stack: &Stack, promql: &str) -> Option<f64> {
    match values(stack, promql).ok()?.as_slice() {
        [v] => Some(*v),
        _ => None,
    }
}

/// The localizer's overview pairs (`state="all"`) of `scope`/`id`.
fn overview_pairs(stack: &Stack, scope: &str, id: &str) -> Option<f64> {
    value(
        stack,
        &format!("skeletonhunter_overview_pairs{{scope=\"{scope}\",id=\"{id}\",state=\"all\"}}"),
    )
}

/// Whether every container's exporter says which ranks it holds, as the
/// fabric gave them in its launcher's variables: one
/// `skeletonhunter_rank_info` per container, none for the hosts' own.
fn ranks_published(stack: &Stack) -> bool {
    let Ok(series) = stack.prometheus.query("skeletonhunter_rank_info") else {
        return false;
    };
    let label = |s: &Value, l: &str| s["metric"][l].as_str().unwrap_or("").to_string();
    let mut got: Vec<[String; 4]> = series
        .iter()
        .map(|s| ["node_id", "first_rank", "ranks", "world_size"].map(|l| label(s, l)))
        .collect();
    let f = &stack.fabric;
    let mut want: Vec<[String; 4]> = f
        .nodes
        .iter()
        .map(|n| {
            let (first, count, world) = f.ranks_of(n);
            [
                n.identity.node.clone(),
                first.to_string(),
                count.to_string(),
                world.to_string(),
            ]
        })
        .collect();
    got.sort();
    want.sort();
    got == want
}

/// The localizer's coverage gauges, for the log and the verdict.
fn coverage(stack: &Stack) -> (Option<f64>, Option<f64>, Option<f64>) {
    (
        value(stack, "skeletonhunter_localizer_pairs_covered"),
        value(stack, "skeletonhunter_localizer_pairs_expected"),
        value(stack, "skeletonhunter_localizer_components_unknown"),
    )
}

/// Every notification the pager got from index `from` on, one line each.
fn notifications(stack: &Stack, from: usize) -> Vec<String> {
    let all = stack.pager.webhooks();
    let mut out = Vec::new();
    for n in all.get(from..).unwrap_or(&[]) {
        for a in n["alerts"].as_array().into_iter().flatten() {
            let l = &a["labels"];
            out.push(format!(
                "{} {} {}/{} ({}) at {}",
                a["status"].as_str().unwrap_or("?"),
                l["alertname"].as_str().unwrap_or("?"),
                l["kind"].as_str().unwrap_or("?"),
                l["component"].as_str().unwrap_or("?"),
                l["severity"].as_str().unwrap_or("?"),
                n["path"].as_str().unwrap_or("?"),
            ));
        }
    }
    out
}

/// Prometheus' pending and firing alerts: (state, alertname/component).
fn rule_alerts(stack: &Stack) -> Vec<(String, String)> {
    let Ok(v) = stack.prometheus.prom_api("/api/v1/alerts") else {
        return Vec::new();
    };
    let s = |a: &Value, k: &str| a["labels"][k].as_str().unwrap_or("").to_string();
    v["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let state = a["state"].as_str().unwrap_or("?").to_string();
            (
                state,
                format!("{}/{}", s(a, "alertname"), s(a, "component")),
            )
        })
        .collect()
}

/// The ended job's series the localizer still exports, by query.
fn ended_series(stack: &Stack, job: &str, ended: &str) -> anyhow::Result<Vec<String>> {
    let queries = [
        format!("{{__name__=~\"skeletonhunter_overview_.*\",scope=\"tenant\",id=\"{job}\"}}"),
        format!("{{__name__=~\"skeletonhunter_overview_.*\",tenant=\"{job}\"}}"),
        format!("skeletonhunter_localizer_job_impact_ranks{{tenant=\"{job}\"}}"),
        format!("skeletonhunter_localizer_job_layout{{tenant=\"{job}\"}}"),
        // The surviving exporters probe none of the ended containers.
        format!("skeletonhunter_probe_sent_total{{dst_node=~\"{ended}\"}}"),
        // Their exporters no longer say which ranks they held.
        format!("skeletonhunter_rank_info{{node_id=~\"{ended}\"}}"),
    ];
    let mut left = Vec::new();
    for q in queries {
        let n = stack.prometheus.query(&q)?.len();
        if n > 0 {
            left.push(format!("{n} series of {q}"));
        }
    }
    Ok(left)
}

/// The localizer's log lines about alerts and coverage, the last few
/// hundred (for a failure's message).
fn localizer_says(stack: &Stack) -> String {
    let log = stack
        .localizer
        .as_ref()
        .map(skeletonhunter_tools::ChildGuard::log)
        .unwrap_or_default();
    let lines: Vec<&str> = log.lines().filter(|l| !l.contains("level=debug")).collect();
    lines[lines.len().saturating_sub(300)..].join("\n")
}

/// Watch the stack for [`hold`] after `t0`: fail on any notification
/// (from pager index `from`), any alert at Alertmanager, any rule alert
/// firing in Prometheus; print what goes pending and the coverage.
fn hold_quiet(stack: &mut Stack, from: usize, t0: Instant) {
    let mut seen = BTreeSet::new();
    let mut last_print = t0;
    let hold = hold();
    while t0.elapsed() < hold {
        stack.check_running().expect("the surviving stack runs");
        let at = t0.elapsed().as_secs_f64();
        let paged = notifications(stack, from);
        assert!(
            paged.is_empty(),
            "+{at:.0} s after the job ended the pager got: {paged:#?}\nthe localizer:\n{}",
            localizer_says(stack)
        );
        let rules = rule_alerts(stack);
        for r in &rules {
            if seen.insert(r.clone()) {
                println!("job end: +{at:.1} s rule alert {} {}", r.0, r.1);
            }
        }
        let firing: Vec<_> = rules.iter().filter(|r| r.0 == "firing").collect();
        assert!(
            firing.is_empty(),
            "+{at:.0} s rules firing: {firing:?}\nthe localizer:\n{}",
            localizer_says(stack)
        );
        let held = stack.labelled_alerts().expect("Alertmanager's alerts");
        let held: Vec<String> = held
            .iter()
            .map(|a| format!("{} {}/{}", a.alertname, a.kind, a.component))
            .collect();
        assert!(
            held.is_empty(),
            "+{at:.0} s Alertmanager holds {held:?}\nthe localizer:\n{}",
            localizer_says(stack)
        );
        if last_print.elapsed() >= Duration::from_secs(15) {
            println!(
                "job end: +{at:.0} s covered/expected/unknown {:?}",
                coverage(stack)
            );
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// How far apart the ended job's containers stop: kubelets on different
/// hosts stop a deleted job's pods seconds apart.
const POD_GAP: Duration = Duration::from_secs(3);

/// Every exporter restarted one by one, then every pair probed again
/// without loss; returns how many departures the exporters counted.
fn roll_out(stack: &mut Stack) -> f64 {
    let t0 = Instant::now();
    let n = stack.exporters.len();
    for i in 0..n {
        stack
            .restart_exporter(i, Duration::from_secs(30))
            .expect("restart an exporter");
    }
    println!(
        "rollout: {n} exporters restarted one by one in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    stack
        .wait_healthy(Duration::from_secs(90))
        .expect("every pair probed again, without loss, after the rollout");
    let departures = wait_until(
        "the departures counted",
        Duration::from_secs(30),
        Duration::from_secs(1),
        || value(stack, "sum(skeletonhunter_peer_departures_total)").filter(|d| *d > 0.0),
    );
    departures.expect("the restarted exporters' departure notices were seen")
}

/// Every exporter is rolled, then one job (`job-b`, a rail of every host)
/// ends pod by pod while `job-a` keeps training: no notification, no alert
/// for [`hold`], the ended job's series gone from the localizer, the
/// surviving job's pairs all covered.
#[test]
fn a_rollout_and_a_job_ending_pod_by_pod_page_nothing_and_leave_no_series() {
    if !require_privileges("a_rollout_and_a_job_ending_pod_by_pod_page_nothing_and_leave_no_series")
    {
        return;
    }
    let _turn = crate::alone();
    let mut opts = StackOpts::new(
        bin_path("skeletonhunter-exporter"),
        Some(bin_path("skeletonhunter-localizer")),
    );
    opts.data_plane = DataPlane::Vxlan;
    opts.from_containers = true;
    let mut stack = Stack::start(&opts).expect("start the stack");
    stack
        .wait_healthy(Duration::from_secs(90))
        .expect("healthy baseline");
    // From the healthy baseline on, nothing may be notified.
    let from = stack.pager.webhooks().len();
    let watched = Instant::now();
    let (ending, staying) = ("job-b", "job-a");
    let (n_end, n_stay) = (pairs_of(&stack, ending), pairs_of(&stack, staying));
    assert!(n_end > 0 && n_stay > 0, "both jobs have pairs");
    // The hosts' own endpoints probe each other on the underlay, in no job.
    let n_under = stack.skeleton_pairs() - n_end - n_stay;
    assert!(n_under > 0, "the overlay fabric's underlay pairs");
    let want = |n: usize| Some(n as f64);
    wait_until(
        "the localizer's overview of both jobs",
        SERIES_GONE,
        Duration::from_secs(1),
        || {
            let both = overview_pairs(&stack, "tenant", ending) == want(n_end)
                && overview_pairs(&stack, "tenant", staying) == want(n_stay)
                && overview_pairs(&stack, "fabric", "") == want(n_end + n_stay + n_under);
            both.then_some(())
        },
    )
    .expect("a baseline");
    wait_until(
        "each container's ranks in Prometheus",
        SERIES_GONE,
        Duration::from_secs(1),
        || ranks_published(&stack).then_some(()),
    )
    .expect("the containers' ranks");
    // ...and the ending job's groups solved from them (a series that must
    // go with the job).
    let layout = format!("skeletonhunter_localizer_job_layout{{tenant=\"{ending}\"}}");
    wait_until(
        "the ending job's groups solved",
        SERIES_GONE,
        Duration::from_secs(1),
        || (value(&stack, &layout) == Some(1.0)).then_some(()),
    )
    .expect("the job's layout series");
    println!("job end: covered/expected/unknown {:?}", coverage(&stack));
    let departures = roll_out(&mut stack);
    println!(
        "rollout: {departures} departures counted by the exporters (after their own restarts)"
    );
    // A pod of the job that stays is deleted and created again on its
    // host (its controller re-creates it): it leaves, comes back under its
    // name and connects to its peers again.
    let moved = "t0-h1-c0";
    let t1 = Instant::now();
    let host = stack
        .fabric
        .host_of(stack.fabric.node(moved).unwrap())
        .name
        .clone();
    let said = |stack: &Stack, what: &str| {
        let log = stack.exporter_log(&host).unwrap_or_default();
        let line = |l: &&str| l.contains(what) && l.contains(&format!("node={moved} "));
        log.lines().filter(line).count()
    };
    // logfmt: msg="containers: probing from this container" node=...
    let (probing, stopped) = (
        "\"containers: probing from",
        "\"containers: stopped probing",
    );
    let started = said(&stack, probing);
    stack.container(moved, false).expect("delete a container");
    let every = Duration::from_millis(200);
    wait_until("its prober stopped", Duration::from_secs(30), every, || {
        (said(&stack, stopped) > 0).then_some(())
    })
    .expect("the ended container's prober stops");
    stack.container(moved, true).expect("create it again");
    wait_until("a new prober", Duration::from_secs(30), every, || {
        (said(&stack, probing) > started).then_some(())
    })
    .expect("the new container probed from");
    stack
        .wait_healthy(Duration::from_secs(90))
        .expect("every pair probed again, without loss, after the container came back");
    println!(
        "reschedule: {moved} back and probed again in {:.1} s",
        t1.elapsed().as_secs_f64()
    );
    let t0 = Instant::now();
    let ended = stack.end_job(ending, POD_GAP).expect("end the job");
    println!(
        "job end: ended {ended:?} ({n_end} pairs) {POD_GAP:?} apart in {:.1} s, {n_stay} pairs of {staying} stay",
        t0.elapsed().as_secs_f64()
    );
    let ended_re = ended.join("|");
    let gone = wait_until(
        "the ended job's series gone",
        SERIES_GONE,
        Duration::from_secs(1),
        || {
            ended_series(&stack, ending, &ended_re)
                .ok()
                .filter(Vec::is_empty)
        },
    );
    if let Err(e) = gone {
        panic!(
            "{e}: {:?}\nthe localizer:\n{}",
            ended_series(&stack, ending, &ended_re).unwrap_or_default(),
            localizer_says(&stack)
        );
    }
    println!(
        "job end: +{:.1} s the ended job's series are gone",
        t0.elapsed().as_secs_f64()
    );
    hold_quiet(&mut stack, from, t0);

    let left = ended_series(&stack, ending, &ended_re).expect("query");
    assert!(left.is_empty(), "back after the hold: {left:?}");
    assert_eq!(overview_pairs(&stack, "fabric", ""), want(n_stay + n_under));
    assert_eq!(overview_pairs(&stack, "tenant", staying), want(n_stay));
    let unreachable = format!(
        "skeletonhunter_overview_pairs{{scope=\"tenant\",id=\"{staying}\",state=\"unreachable\"}}"
    );
    assert_eq!(value(&stack, &unreachable), Some(0.0), "{staying} intact");
    // One exporter serves a host's identity and each container's: every
    // query that joins on the scrape target still answers.
    let failed: Vec<String> = (localizer_says(&stack).lines())
        .filter(|l| l.contains("query failed"))
        .map(String::from)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let cov = coverage(&stack);
    assert_eq!(
        cov,
        (want(n_stay + n_under), want(n_stay + n_under), Some(0.0)),
        "every pair the localizer expects (covered, expected, unknown components) is the surviving job's or the underlay's"
    );
    println!(
        "watched {:.0} s from the healthy baseline to the hold's end: nothing notified, held or firing",
        watched.elapsed().as_secs_f64()
    );
}
