//! A synthetic fleet (`skeletonhunter_tools::fleet`: 256 exporters in one
//! process, 896 probe pairs) scraped by real stores, and the localizer
//! finding the same injected faults in each:
//!
//! - (a) one Prometheus scraping every target from a file_sd file;
//! - (b) two vmagent shards (`-promscrape.cluster.membersCount=2`), each
//!   scraping a proper part of the targets and together all of them,
//!   remote-writing into one VictoriaMetrics.
//!
//! The fleet starts healthy (the control: the localizer blames nothing once
//! it sees every pair), then one ToR and one NIC lose packets and one spine
//! adds latency; `run --once` against each store must blame exactly those
//! three components. Prints the series, scrape bytes, server memory and the
//! localizer's run time, for orientation (no timed assertion).
//!
//! Against Prometheus the localizer also runs as a service with
//! `--pair-shards 3`: its cycles read one shard of the pairs each, and a
//! verdict made of shard reads must still see every pair and find the
//! faults injected after its split.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skeletonhunter_common::duration;
use skeletonhunter_exporter::model::HistogramMode;
use skeletonhunter_localizer::sim::FabricSpec;
use skeletonhunter_tests::localizer::{run_once, Localizer, OnceRun};
use skeletonhunter_tests::vmagent::{start_vmagent_shards, up_targets};
use skeletonhunter_tools::fleet::{
    blamed, injected as injected_set, node_path, sample_faults, scrape_config, write_file_sd,
    Fleet, FleetFault, FleetServer, FleetSpec,
};
use skeletonhunter_tools::process::status_kib;
use skeletonhunter_tools::servers::{
    free_loopback_addr, start_prometheus, start_victoria_metrics, Server, ServerOpts, TempDir,
};
use skeletonhunter_tools::wait_until;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Scrape interval of every scraper.
const SCRAPE: Duration = Duration::from_secs(2);
/// The localizer's window: ten scrapes.
const WINDOW: &str = "20s";

fn spec() -> FleetSpec {
    FleetSpec {
        fabric: FabricSpec {
            hosts: 16,
            rails: 8,
            // Two containers per NIC, so a NIC fault is told from a node's.
            nodes_per_nic: 2,
            hosts_per_tor: 4,
            tors_per_spine: 2,
            ..FabricSpec::default()
        },
        histograms: HistogramMode::Classic,
        probe_rate: 20.0,
        seed: 15,
    }
}

/// Run the localizer against `store` until `done` accepts a report (run
/// errors, e.g. no data yet, are retried); the last report or error on
/// failure.
fn poll_localizer(
    store: &Server,
    what: &str,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> Result<OnceRun> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match run_once(
            &store.url(),
            WINDOW,
            &["--scrape-interval", "2s", "--timeout", "20s"],
        ) {
            Ok(run) if done(&run.report) => return Ok(run),
            Ok(run) => format!("{}\nlog: {}", run.report, run.stderr),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() > deadline {
            bail!(
                "{what} against {:?} within {timeout:?}; last: {last}",
                store.kind
            );
        }
        std::thread::sleep(SCRAPE);
    }
}

/// The scrape URL of every node of `server`.
fn all_targets(server: &FleetServer) -> BTreeSet<String> {
    (0..server.fleet().nodes())
        .map(|i| format!("http://{}{}", server.addr_of(i), node_path(i)))
        .collect()
}

/// Both vmagent shards scrape a non-empty proper part of the targets, the
/// parts disjoint and together all of them.
fn shards_split_the_targets(shards: &[Server], all: &BTreeSet<String>) -> Result<()> {
    let parts = wait_until(
        "both vmagent shards scraping, together every target",
        Duration::from_secs(90),
        Duration::from_secs(1),
        || {
            let parts: Vec<BTreeSet<String>> = shards
                .iter()
                .map(|s| up_targets(s).unwrap_or_default())
                .collect();
            let union: BTreeSet<String> = parts.iter().flatten().cloned().collect();
            (union == *all).then_some(parts)
        },
    )?;
    for (i, p) in parts.iter().enumerate() {
        println!("vmagent shard {i}: {} of {} targets", p.len(), all.len());
        assert!(
            !p.is_empty() && p.len() < all.len(),
            "shard {i}: {} targets",
            p.len()
        );
    }
    assert!(parts[0].is_disjoint(&parts[1]), "shards overlap");
    Ok(())
}

/// Series, memory and scrape bytes, printed for orientation.
fn print_figures(store: &Server, fleet: &FleetServer, took: Duration, pids: &[u32]) {
    let series = store
        .query("count({__name__=~\"skeletonhunter_.+\"})")
        .ok()
        .and_then(|r| {
            r.first()
                .and_then(|s| s["value"][1].as_str().map(str::to_string))
        });
    let up = store.query("count(up == 1)").ok().and_then(|r| {
        r.first()
            .and_then(|s| s["value"][1].as_str().map(str::to_string))
    });
    let rss: Vec<String> = pids
        .iter()
        .map(|pid| format!("{} MiB", status_kib(*pid, "VmRSS").unwrap_or(0) / 1024))
        .collect();
    let stats = fleet.stats();
    println!(
        "{:?}: targets up {}, skeletonhunter series {}, RSS {}, fleet round {} bytes before gzip ({} scrapes, {} bytes in all), localizer run --once {took:.2?}",
        store.kind,
        up.unwrap_or_else(|| "?".into()),
        series.unwrap_or_else(|| "?".into()),
        rss.join(" + "),
        stats.round_bytes,
        stats.scrapes_total,
        stats.bytes_total
    );
}

/// On a store that scrapes the healthy fleet, every target up since
/// `scraping`: the control (a full window of data, every pair seen, nothing
/// blamed), then `injected` blamed exactly; `pids` are the processes whose
/// memory is printed (the store and its scrapers).
fn faults_are_found(
    server: &FleetServer,
    store: &Server,
    scraping: Instant,
    injected: &[FleetFault],
    pids: &[u32],
) -> Result<()> {
    let pairs = server.fleet().fabric().pairs.len();
    // A window that reaches back before the first scrape would count the
    // counters' history (VictoriaMetrics' increase() takes a new series'
    // first value as its increase), not the healthy fleet.
    let full = duration::parse(WINDOW)? + 2 * SCRAPE;
    let control = poll_localizer(
        store,
        "a full window with every pair observed",
        Duration::from_secs(120),
        |r| scraping.elapsed() > full && r["pairs_observed"] == pairs,
    )?;
    assert!(
        blamed(&control.report).is_empty(),
        "{:?}: healthy fleet blamed: {}",
        store.kind,
        control.report
    );
    server.fleet().set_faults(injected);
    let want = injected_set(injected);
    let run = poll_localizer(
        store,
        "exactly the injected faults",
        Duration::from_secs(120),
        |r| blamed(r) == want && r["pairs_observed"] == pairs,
    )?;
    println!(
        "{:?}: {} faults found, {} of {pairs} pairs anomalous",
        store.kind,
        want.len(),
        run.report["pairs_anomalous"]
    );
    print_figures(store, server, run.took, pids);
    server.fleet().set_faults(&[]);
    Ok(())
}

/// The localizer service with `--pair-shards 3` against `store` (scraping
/// the healthy fleet): once it has split the pairs and reads one shard a
/// cycle, its verdict covers every pair and blames nothing; after
/// `injected`, and a full rotation of shard reads, it blames exactly them.
fn sharded_cycles_find_the_faults(
    server: &FleetServer,
    store: &Server,
    injected: &[FleetFault],
) -> Result<()> {
    let pairs = server.fleet().fabric().pairs.len();
    let args = [
        "--interval",
        "1s",
        "--window",
        WINDOW,
        "--scrape-interval",
        "2s",
        "--timeout",
        "20s",
        "--pair-shards",
        "3",
    ];
    let loc = Localizer::start_args(&store.url(), &args.map(String::from))?;
    let shard_reads = || loc.pair_reads().1;
    let seen = |r: &Value| r["pairs_observed"] == pairs;
    wait_until(
        "the sharded localizer in 3 shards, reading shards, every pair seen, nothing blamed",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let split = loc.metric("skeletonhunter_localizer_pair_shards")? == 3.0;
            let r = loc.report()?;
            (split && shard_reads() >= 3.0 && seen(&r) && blamed(&r).is_empty()).then_some(())
        },
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    server.fleet().set_faults(injected);
    let (all_from, from) = loc.pair_reads();
    let want = injected_set(injected);
    wait_until(
        "the injected faults, every pair seen, after a rotation of shard reads",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let rotated = shard_reads() >= from + 3.0;
            let r = loc.report()?;
            (rotated && blamed(&r) == want && seen(&r)).then_some(())
        },
    )
    .with_context(|| {
        format!(
            "last report: {:?}\nlocalizer log:\n{}",
            loc.report(),
            loc.child.log()
        )
    })?;
    let (all, shard) = loc.pair_reads();
    println!(
        "--pair-shards 3: faults found after {} shard reads and {} full reads",
        shard - from,
        all - all_from
    );
    server.fleet().set_faults(&[]);
    Ok(())
}

#[test]
fn fleet_faults_are_found_through_prometheus_and_vmagent_shards() -> Result<()> {
    let fleet = Arc::new(Fleet::new(spec()));
    let injected =
        sample_faults(fleet.fabric()).context("the fabric has no three disjoint faults")?;
    let loopback = free_loopback_addr()?.ip();
    let listen = [std::net::SocketAddr::new(loopback, 0); 2];
    let server = FleetServer::start(fleet.clone(), &listen, Duration::from_millis(500))?;
    let dir = TempDir::new("fleet")?;
    let targets = dir.path().join("targets.json");
    write_file_sd(&targets, server.addrs(), fleet.nodes())?;
    let config = scrape_config("skeletonhunter", &targets, SCRAPE);
    let all = all_targets(&server);

    // (a) One Prometheus scraping every target. The stores run one after
    // the other: together they would double the scrape load of a 2-core box.
    let prom = start_prometheus(ServerOpts::new(free_loopback_addr()?, &config))?;
    wait_until(
        "Prometheus scraping every target",
        Duration::from_secs(90),
        Duration::from_secs(1),
        || (up_targets(&prom).ok()? == all).then_some(()),
    )
    .with_context(|| format!("Prometheus log:\n{}", prom.log()))?;
    faults_are_found(&server, &prom, Instant::now(), &injected, &[prom.pid()])?;
    sharded_cycles_find_the_faults(&server, &prom, &injected)?;
    drop(prom);

    // (b) Two vmagent shards remote-writing into one VictoriaMetrics.
    let vm = start_victoria_metrics(ServerOpts::new(free_loopback_addr()?, ""))?;
    let shards = start_vmagent_shards(&config, &format!("{}/api/v1/write", vm.url()), 2)?;
    shards_split_the_targets(&shards, &all)?;
    let scraping = Instant::now();
    let mut pids = vec![vm.pid()];
    pids.extend(shards.iter().map(Server::pid));
    faults_are_found(&server, &vm, scraping, &injected, &pids)
}
