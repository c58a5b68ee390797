//! The cluster view at scale (issue "Scale", item 3), in one run: a
//! synthetic fleet (`skeletonhunter_tools::fleet`) of N probe pairs with a
//! ToR, a NIC and a spine fault, scraped and stored three ways, and the
//! localizer running its cycle against each store:
//!
//! - `classic-prometheus`: classic histograms, one Prometheus with the
//!   rules of `FLEET_RULES`: the baseline (today's default configuration);
//! - `native-prometheus`: native histograms, one Prometheus with
//!   `--enable-feature=native-histograms` and the same rules;
//! - `classic-vmagent`: classic histograms, two vmagent shards
//!   (`-promscrape.cluster.membersCount=2`) remote-writing into one
//!   VictoriaMetrics, the shipped rules in vmalert;
//! - `both-prometheus`: the exporters' default (`metrics.histograms:
//!   both`: native where the scraper negotiates them) scraped by a
//!   Prometheus with `--enable-feature=native-histograms`.
//!
//! Printed per configuration: series, scrape bytes per round, the store's
//! memory, rule evaluation time, the localizer's cycle time (median and
//! worst of the measured cycles), the mean time of each of its queries
//! in the cycles (sent at once) and then of each sent alone to the store
//! (`table.rs` prints them), the store's CPU, allocations and garbage
//! collections per cycle with the cycles split by whether it collected
//! (`store_load.rs`), the localizer's peak memory, and whether it blamed
//! exactly the injected faults. Run as root or not (no namespaces):
//!
//! ```text
//! cargo build --release --workspace   # the localizer binary the bench runs
//! FLEET_PAIRS=100000 cargo bench -p skeletonhunter-tests --bench fleet
//! ```
//!
//! Knobs: `FLEET_PAIRS` (default 2000), `FLEET_CONFIGS` (comma list, default
//! all three), `FLEET_SCRAPE` (10s), `FLEET_INTERVAL` (10s), `FLEET_WINDOW`
//! (1m), `FLEET_CYCLES` (cycles measured, 5), `FLEET_PROBE_RATE` (UDP probes
//! per pair per second, 1), `FLEET_RULES` (1, the default: the stores evaluate
//! the default rules, `rules/*.yml`; `pair-detail`: those and the opt-in
//! per-pair detail, `rules/pair-detail/*.yml`; 0: none, to see the
//! localizer's share alone),
//! `FLEET_PAIR_SHARDS` (the localizer's `--pair-shards`, a count or `auto`, 1),
//! `FLEET_LOCALIZER` (`bench`, the default: the flags above with a 60 s
//! query timeout and a 1 GiB answer limit; `shipped`: only the shipped
//! Deployment's `--scrape-interval`, every other flag at its default, so
//! `FLEET_INTERVAL`, `FLEET_WINDOW` and `FLEET_PAIR_SHARDS` are not passed). `GOMEMLIMIT`,
//! when set, is passed on to the Go servers (the stores, the shards,
//! vmalert) and printed. The localizer's own timeout is generous (60 s)
//! so a slow configuration shows its real cycle time instead of failing.

use anyhow::{bail, Context, Result};
use knobs::{Config, Knobs};
use rules::{start_vmalert, time_rules_alone, vmalert_round, RuleRounds};
use serde_json::Value;
use skeletonhunter_localizer::input::histograms::RttForm;
use skeletonhunter_localizer::sim::FabricSpec;
use skeletonhunter_tests::exposition::{metric_value, sum_count_by};
use skeletonhunter_tests::localizer::{time_queries_alone, Alone, Localizer};
use skeletonhunter_tests::vmagent::start_vmagent_shards;
use skeletonhunter_tools::fleet::{
    blamed, injected, sample_faults, scrape_config, shape_for_pairs, write_file_sd, Fleet,
    FleetFault, FleetServer, FleetSpec,
};
use skeletonhunter_tools::process::{status_kib, wait_until, ChildGuard};
use skeletonhunter_tools::servers::{
    free_loopback_addr, start_prometheus, start_victoria_metrics, Server, ServerOpts, TempDir,
};
use skeletonhunter_tools::sys::kill;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store_load::StoreLoad;
use table::{print_table, summary, Figures};

mod knobs;
mod rules;
mod store_load;
mod table;

/// The localizer's histogram of each query's duration, by `query`.
const QUERY_DURATION: &str = "skeletonhunter_localizer_query_duration_seconds";

/// The store of one configuration and every process behind it.
struct Store {
    query: Server,
    /// vmagent shards (empty for Prometheus).
    shards: Vec<Server>,
    /// vmalert, evaluating the rules against VictoriaMetrics.
    vmalert: Option<(ChildGuard, std::net::SocketAddr)>,
}

impl Store {
    /// Whether one Prometheus stores and evaluates everything (no vmagent
    /// shards, no vmalert).
    fn is_prometheus(&self) -> bool {
        self.shards.is_empty()
    }

    /// Record the rule groups' last evaluations (Prometheus only: vmalert
    /// keeps quantiles of its own).
    fn sample_rules(&self, rounds: &mut RuleRounds) {
        if self.is_prometheus() {
            rounds.sample(&self.query);
        }
    }

    fn pids(&self) -> Vec<u32> {
        let mut p = vec![self.query.pid()];
        p.extend(self.shards.iter().map(Server::pid));
        p.extend(self.vmalert.iter().map(|(c, _)| c.pid()));
        p
    }
}

fn start_store(config: Config, targets: &std::path::Path, k: &Knobs) -> Result<Store> {
    let scrape = scrape_config("skeletonhunter-exporter", targets, k.scrape);
    let secs = k.scrape.as_secs().max(1);
    match config {
        Config::ClassicPrometheus | Config::NativePrometheus | Config::BothPrometheus => {
            let yml = format!("{scrape}rule_files: ['rules-*.yml']\n").replace(
                "global:\n",
                &format!("global:\n  evaluation_interval: {secs}s\n"),
            );
            let mut opts = ServerOpts::new(free_loopback_addr()?, &yml)
                .ready_timeout(Duration::from_secs(300));
            for (name, from) in &k.rules.files {
                opts = opts.copy_file(name, from)?;
            }
            if config != Config::ClassicPrometheus {
                opts = opts.arg("--enable-feature=native-histograms");
            }
            Ok(Store {
                query: start_prometheus(opts)?,
                shards: Vec::new(),
                vmalert: None,
            })
        }
        Config::ClassicVmagent => {
            let vm = start_victoria_metrics(
                ServerOpts::new(free_loopback_addr()?, "")
                    .ready_timeout(Duration::from_secs(120))
                    // The default (300,000) refuses the classic RTT query
                    // above ~12,000 pairs (25 bucket series each).
                    .arg("-search.maxUniqueTimeseries=50000000"),
            )?;
            let shards = start_vmagent_shards(&scrape, &format!("{}/api/v1/write", vm.url()), 2)?;
            let vmalert = (!k.rules.files.is_empty())
                .then(|| start_vmalert(&vm, &k.rules, k.scrape))
                .transpose()?;
            Ok(Store {
                query: vm,
                shards,
                vmalert,
            })
        }
    }
}

fn first_value(store: &Server, promql: &str) -> Option<f64> {
    let r = store.query(promql).ok()?;
    r.first()?["value"][1].as_str()?.parse().ok()
}

fn main() -> Result<()> {
    let k = Knobs::from_env()?;
    let shape = shape_for_pairs(&base_fabric(), k.pairs);
    // The Go servers (Prometheus, VictoriaMetrics, vmagent, vmalert) inherit
    // the environment: a GOMEMLIMIT set for the bench bounds their heaps.
    println!(
        "GOMEMLIMIT for the stores: {}",
        std::env::var("GOMEMLIMIT").unwrap_or_else(|_| "unset (Go default: no limit)".into())
    );
    println!("localizer flags: {}", localizer_flags(&k).join(" "));
    println!("rule files: {}", k.rules.describe());
    let mut rows = Vec::new();
    for &config in &k.configs {
        println!("== {} ({} pairs wanted)", config.name(), k.pairs);
        let figures = measure(config, &shape, &k);
        if let Err(e) = &figures {
            println!("{}: failed: {e:#}", config.name());
        }
        rows.push((config, figures.ok()));
    }
    print_table(&rows);
    Ok(())
}

/// Rail-optimized hosts of 8 NICs, two containers each, 16 hosts per ToR.
fn base_fabric() -> FabricSpec {
    FabricSpec {
        hosts: 64,
        rails: 8,
        // Two containers per NIC, so a NIC fault is told from a node's.
        nodes_per_nic: 2,
        hosts_per_tor: 16,
        tors_per_spine: 4,
        ..FabricSpec::default()
    }
}

fn measure(config: Config, shape: &FabricSpec, k: &Knobs) -> Result<Figures> {
    let started = Instant::now();
    let fleet = Arc::new(Fleet::new(FleetSpec {
        fabric: shape.clone(),
        histograms: config.histograms(),
        probe_rate: k.probe_rate,
        seed: 15,
    }));
    let injected =
        sample_faults(fleet.fabric()).context("the fabric has fewer than three spine blocks")?;
    fleet.set_faults(&injected);
    let ports: Vec<_> = (0..4)
        .map(|_| free_loopback_addr())
        .collect::<Result<_>>()?;
    let server = FleetServer::start(fleet.clone(), &ports, Duration::from_secs(1))?;
    let dir = TempDir::new("fleet-bench")?;
    let targets = dir.path().join("targets.json");
    write_file_sd(&targets, server.addrs(), fleet.nodes())?;
    let store = start_store(config, &targets, k)?;
    println!(
        "{}: {} nodes, {} pairs; fleet and store up in {:.1?}",
        config.name(),
        fleet.nodes(),
        fleet.fabric().pairs.len(),
        started.elapsed()
    );
    let loc = Localizer::start_args(&store.query.url(), &localizer_flags(k))?;
    // The localizer's window must lie over scraped data only.
    let warm = k.window + 2 * k.scrape;
    wait_until(
        "the first full window",
        warm + Duration::from_secs(600),
        Duration::from_secs(1),
        || {
            (started.elapsed() > warm && server.stats().nodes_scraped == fleet.nodes())
                .then_some(())
        },
    )?;
    let (before, cpu_before) = query_times_and_cpu(&loc);
    let reads_before = loc.pair_reads();
    let mut rule_rounds = RuleRounds::default();
    let mut load = StoreLoad::from(&store.query);
    // Every 10 s: the rule groups keep only their last evaluation.
    let (cycles_seen, ok) = measure_cycles(&loc, k, |tick| {
        load.sample(&store.query);
        if tick % 10 == 0 {
            store.sample_rules(&mut rule_rounds);
        }
    })?;
    load.sample_after(&store.query, Duration::from_secs(3));
    let (after, cpu_after) = query_times_and_cpu(&loc);
    let reads_after = loc.pair_reads();
    let queries = query_means(&before, &after);
    let cycles = cycles_seen.len().max(1) as f64;
    let cpu_per_cycle = cpu_after.zip(cpu_before).map(|(a, b)| (a - b) / cycles);
    let mut f = Figures {
        pairs: fleet.fabric().pairs.len(),
        targets: fleet.nodes(),
        round_bytes: server.stats().round_bytes,
        cycles_ok: ok,
        cycles_measured: cycles_seen.len(),
        queries,
        localizer_cpu_per_cycle: cpu_per_cycle,
        pair_reads: (
            reads_after.0 - reads_before.0,
            reads_after.1 - reads_before.1,
        ),
        ..Figures::default()
    };
    cycle_figures(&mut f, config, &cycles_seen, &load);
    f.localizer_peak_mib = status_kib(loc.child.pid(), "VmHWM").unwrap_or(0) / 1024;
    f.found = found(&loc, &injected);
    (f.alone, f.rules_alone) = alone_times(&loc, &store, config, k);
    if f.cycles_ok < f.cycles_measured {
        print_warnings(&loc, config);
    }
    store_figures(&mut f, &store, &rule_rounds);
    println!("{}: {}", config.name(), summary(&f));
    Ok(f)
}

/// The cycles' median and worst, and the store's load over them (printed
/// with each cycle's duration).
fn cycle_figures(f: &mut Figures, config: Config, cycles: &[(Instant, f64)], load: &StoreLoad) {
    let durations: Vec<f64> = cycles.iter().map(|&(_, d)| d).collect();
    let marked = load.mark(cycles);
    println!(
        "{}: cycles (s, * = the store collected garbage): {}",
        config.name(),
        marked.listed()
    );
    f.load = load.figures(durations.len());
    f.cycles_by_collection = [true, false].map(|gc| {
        let v = marked.durations(gc);
        (median(&v), v.len())
    });
    f.cycle_median = median(&durations);
    f.cycle_max = durations.iter().copied().reduce(f64::max);
}

/// The localizer's last five warnings and errors.
fn print_warnings(loc: &Localizer, config: Config) {
    let log = loc.child.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("WARN")
                || l.contains("ERROR")
                || l.contains("level=warn")
                || l.contains("level=error")
        })
        .collect();
    println!("{}: localizer warnings (last 5):", config.name());
    for l in warnings.iter().rev().take(5).rev() {
        println!("  {l}");
    }
}

/// The cycle's queries each sent alone, once the localizer is paused and
/// the store has finished the queries it was answering (rule evaluation
/// and ingestion go on), and (Prometheus) the rules' expressions sent
/// alone; empty and `None`, with the reason printed, when that fails.
fn alone_times(
    loc: &Localizer,
    store: &Store,
    config: Config,
    k: &Knobs,
) -> (Vec<Alone>, Option<f64>) {
    let form = match config {
        Config::NativePrometheus | Config::BothPrometheus => RttForm::NativeOrClassic,
        _ => RttForm::Classic,
    };
    let pid = loc.child.pid() as i32;
    let run = || -> Result<(Vec<Alone>, Option<f64>)> {
        kill(pid, libc::SIGSTOP)?;
        if store.is_prometheus() {
            wait_until(
                "Prometheus answering no query",
                Duration::from_secs(300),
                Duration::from_millis(200),
                || {
                    let m = store.query.get("/metrics").ok()?.1;
                    (metric_value(&m, "prometheus_engine_queries")? <= 1.0).then_some(())
                },
            )?;
        }
        let alone = time_queries_alone(&store.query, k.window, form)?;
        let prometheus = store.is_prometheus() && !k.rules.files.is_empty();
        // A rule past the client's timeout (the shipped per-pair rules at
        // scale) loses that figure only, not the queries' above.
        let rules = prometheus
            .then(|| time_rules_alone(&store.query, &k.rules))
            .and_then(|r| {
                r.map_err(|e| println!("{}: rules alone: {e:#}", config.name()))
                    .ok()
            });
        Ok((alone, rules))
    };
    let out = run();
    let _ = kill(pid, libc::SIGCONT);
    out.unwrap_or_else(|e| {
        println!("{}: queries alone: {e:#}", config.name());
        (Vec::new(), None)
    })
}

fn localizer_flags(k: &Knobs) -> Vec<String> {
    let d = |d: Duration| format!("{}ms", d.as_millis());
    if k.shipped_localizer {
        return vec!["--scrape-interval".to_string(), d(k.scrape)];
    }
    [
        ("--interval", d(k.interval)),
        ("--window", d(k.window)),
        ("--scrape-interval", d(k.scrape)),
        ("--query.timeout", "60s".to_string()),
        ("--max-response-size", "1GiB".to_string()),
        ("--pair-shards", k.pair_shards.clone()),
    ]
    .into_iter()
    .flat_map(|(f, v)| [f.to_string(), v])
    .collect()
}

/// Wait for `k.cycles` cycles after now; each one's duration (from the
/// localizer's cycle histogram: sum and count before and after) with when
/// it was seen ended, and how many ended `ok`. `each_second` runs once a second with a count.
fn measure_cycles(
    loc: &Localizer,
    k: &Knobs,
    mut each_second: impl FnMut(u64),
) -> Result<(Vec<(Instant, f64)>, usize)> {
    let read = |m: &str| {
        let sum = metric_value(m, "skeletonhunter_localizer_cycle_duration_seconds_sum")?;
        let count = metric_value(m, "skeletonhunter_localizer_cycle_duration_seconds_count")?;
        Some((sum, count))
    };
    let ok_cycles = |m: &str| {
        m.lines()
            .filter(|l| {
                l.starts_with("skeletonhunter_localizer_cycles_total{")
                    && l.contains("result=\"ok\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let first = loc.metrics();
    let (mut sum, mut count) = read(&first).unwrap_or((0.0, 0.0));
    let ok0 = ok_cycles(&first);
    let mut out = Vec::new();
    let per_cycle = k.interval.max(Duration::from_secs(1)) + Duration::from_secs(120);
    let deadline = Instant::now() + per_cycle * k.cycles as u32;
    let mut tick = 0;
    while out.len() < k.cycles {
        if Instant::now() > deadline {
            bail!(
                "{} of {} cycles within {:?}",
                out.len(),
                k.cycles,
                per_cycle * k.cycles as u32
            );
        }
        // Once a second: each read renders the localizer's /metrics,
        // whose CPU counts in the localizer's figure.
        std::thread::sleep(Duration::from_secs(1));
        each_second(tick);
        tick += 1;
        let m = loc.metrics();
        if let Some((s, c)) = read(&m) {
            if c > count {
                let n = c - count;
                for _ in 0..n as usize {
                    out.push((Instant::now(), (s - sum) / n));
                }
                (sum, count) = (s, c);
            }
        }
    }
    let ok = (ok_cycles(&loc.metrics()) - ok0).max(0.0) as usize;
    Ok((out, ok.min(k.cycles)))
}

/// The localizer's query durations (sum, count by query) and its CPU
/// seconds, from one read of its /metrics.
fn query_times_and_cpu(loc: &Localizer) -> (BTreeMap<String, (f64, f64)>, Option<f64>) {
    let m = loc.metrics();
    let cpu = metric_value(&m, "process_cpu_seconds_total");
    (sum_count_by(&m, QUERY_DURATION, "query"), cpu)
}

/// Mean seconds per query between two readings of the localizer's query
/// duration histogram (`sum_count_by`), slowest first.
fn query_means(
    before: &BTreeMap<String, (f64, f64)>,
    after: &BTreeMap<String, (f64, f64)>,
) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = after
        .iter()
        .filter_map(|(q, &(sum, count))| {
            let (s0, c0) = before.get(q).copied().unwrap_or((0.0, 0.0));
            (count > c0).then(|| (q.clone(), (sum - s0) / (count - c0)))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied()
}

/// "exact" when the last report blames exactly the injected components,
/// else what it blamed.
fn found(loc: &Localizer, faults: &[FleetFault]) -> String {
    let report = loc.report().unwrap_or(Value::Null);
    let (got, want) = (blamed(&report), injected(faults));
    if got == want {
        return format!("exact ({}/{})", got.len(), want.len());
    }
    let shown: Vec<String> = got.iter().map(|(k, id)| format!("{k}={id}")).collect();
    let hits = got.intersection(&want).count();
    format!("{hits}/{} ({})", want.len(), shown.join(" "))
}

fn store_figures(f: &mut Figures, store: &Store, rules: &RuleRounds) {
    f.probe_series = first_value(
        &store.query,
        "count({__name__=~\"skeletonhunter_probe_.+\"})",
    );
    f.head_series = if store.is_prometheus() {
        store
            .query
            .get("/metrics")
            .ok()
            .and_then(|(_, m)| metric_value(&m, "prometheus_tsdb_head_series"))
    } else {
        first_value(&store.query, "count({__name__=~\".+\"})")
    };
    if let Some((_, addr)) = &store.vmalert {
        f.rules_seconds = vmalert_round(*addr);
    } else if store.is_prometheus() {
        rules.print();
        let rounds = rules.rounds();
        f.rules_seconds = median(&rounds);
        f.rules_worst = rounds.iter().copied().reduce(f64::max);
        f.rule_rounds = rounds.len();
    }
    for pid in store.pids() {
        f.store_rss_mib += status_kib(pid, "VmRSS").unwrap_or(0) / 1024;
        f.store_peak_mib += status_kib(pid, "VmHWM").unwrap_or(0) / 1024;
    }
}
