//! The accuracy and speed benchmark (`skeletonhunter-localizer bench`), also
//! used in a small form by the test suite.
//!
//! Accuracy: simulated scenarios on several rail-optimized fabrics — healthy
//! (with noisy pairs and transient blips), one fault and two faults, every
//! kind and symptom, gray loss (1–5%) and ECMP-partial spines — each run
//! through the CSV writer and reader, then through the engine and through
//! the greedy voting reference ([`crate::engine::voting`]).
//!
//! Scoring: a reported fault is correct when the true component is its
//! component or one of its `equivalent`s. Precision = correct reports / all
//! reports; recall = true faults found / true faults; top-1 localization
//! accuracy = faulty scenarios whose first |truth| reported faults are
//! exactly the true faults, with the right symptoms.

use super::fabric::{Fabric, FabricSpec};
use super::pinglog::{pair_stats, write_csv};
use super::rng::Rng;
use super::scenario::{parse_fault, FaultError, FaultSpec, Scenario};
use crate::engine::model::{Config, Fault, PairStats, Report, Symptom, Timings};
use crate::engine::pipeline::{analyze, analyze_timed};
use crate::engine::voting;
use crate::input::csv::{read_pings_file_counted, CsvOptions, ReadError};
use skeletonhunter_common::topology::{Component, Kind};
use std::fmt;
use std::time::{Duration, Instant};

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Writing or sizing the speed-case CSV.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Reading it back.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A built-in fault spec did not fit the fabric.
    #[error(transparent)]
    Fault(#[from] FaultError),
    /// Rendering a report.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The fabrics the accuracy scenarios run on.
pub fn accuracy_fabrics() -> Vec<FabricSpec> {
    let base = FabricSpec::default();
    vec![
        // Rows of 10 probes (the reader must infer it), more rounds.
        FabricSpec {
            hosts: 32,
            rails: 4,
            nodes_per_nic: 1,
            hosts_per_tor: 8,
            tors_per_spine: 2,
            rounds: 20,
            packets_per_round: 10,
        },
        FabricSpec {
            hosts: 64,
            rails: 4,
            nodes_per_nic: 2,
            hosts_per_tor: 16,
            tors_per_spine: 2,
            ..base.clone()
        },
        FabricSpec {
            hosts: 128,
            rails: 8,
            nodes_per_nic: 1,
            hosts_per_tor: 16,
            tors_per_spine: 4,
            ..base.clone()
        },
        FabricSpec {
            hosts: 48,
            rails: 2,
            nodes_per_nic: 2,
            hosts_per_tor: 8,
            tors_per_spine: 3,
            rounds: 10,
            packets_per_round: 10,
        },
    ]
}

/// Category of a scenario, for the breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// No fault.
    Healthy,
    /// One fault.
    OneFault,
    /// Two faults on different components.
    TwoFaults,
}

/// Draw a fault on `fabric`.
pub fn random_fault(fabric: &Fabric, rng: &mut Rng) -> FaultSpec {
    let kinds = [Kind::Node, Kind::Nic, Kind::Host, Kind::Tor, Kind::Spine];
    let kind = kinds[rng.below(kinds.len())];
    let comps = fabric.components(kind);
    let component = comps[rng.below(comps.len())].clone();
    let symptom = Symptom::ALL[rng.below(3)];
    let large = matches!(kind, Kind::Tor | Kind::Spine);
    let severity = match symptom {
        // Half of the loss faults are gray (1-5%).
        Symptom::Loss if rng.f64() < 0.5 => rng.range(0.01, 0.05),
        Symptom::Loss => rng.range(0.1, 0.5),
        // A third of the unreachable faults are dead: nothing gets through.
        Symptom::Unreachable if rng.f64() < 0.33 => 1.0,
        Symptom::Unreachable => rng.range(0.7, 1.0),
        // ToR and spine shifts of 20-200 µs (they slow most pairs of a
        // path class), smaller components 5-50 µs.
        Symptom::Latency if large => rng.range(20e-6, 200e-6),
        Symptom::Latency => rng.range(5e-6, 50e-6),
        // Not in `Symptom::ALL`: never drawn.
        Symptom::Flapping | Symptom::HostStack => 0.0,
    };
    let ecmp_fraction = if kind == Kind::Spine && rng.f64() < 0.6 {
        Some(rng.range(0.25, 0.6))
    } else {
        None
    };
    FaultSpec {
        component,
        symptom,
        severity,
        ecmp_fraction,
    }
}

/// The `k`-th scenario of a run: fabric index, category and scenario.
pub fn scenario(k: usize, seed: u64, fabrics: &[Fabric]) -> (usize, Category, Scenario) {
    let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(k as u64));
    let fi = k % fabrics.len();
    let fabric = &fabrics[fi];
    let category = match (k / fabrics.len()) % 5 {
        0 => Category::Healthy,
        1 | 2 => Category::OneFault,
        _ => Category::TwoFaults,
    };
    let mut sc = Scenario::healthy(rng.next_u64());
    sc.noisy_pairs = rng.below(4);
    sc.blips = rng.below(8);
    let n = match category {
        Category::Healthy => 0,
        Category::OneFault => 1,
        Category::TwoFaults => 2,
    };
    while sc.faults.len() < n {
        let f = random_fault(fabric, &mut rng);
        if sc.faults.iter().all(|g| g.component != f.component) {
            sc.faults.push(f);
        }
    }
    // Drawn last, so the draws above are those of earlier versions.
    if rng.f64() < 0.3 {
        sc.missing_pairs = rng.range(0.05, 0.3);
    }
    sc.gray_noisy_pairs = rng.below(4);
    (fi, category, sc)
}

fn matches(f: &Fault, c: &Component) -> bool {
    (f.kind == c.kind && f.id == c.id) || f.equivalent.contains(c)
}

/// Counts for one localizer over a run.
#[derive(Debug, Clone, Default)]
pub struct Score {
    /// Faults reported.
    pub reported: usize,
    /// Reports naming a true fault.
    pub correct_reports: usize,
    /// True faults.
    pub truths: usize,
    /// True faults reported.
    pub found: usize,
    /// Scenarios with a fault.
    pub faulty_scenarios: usize,
    /// Faulty scenarios whose top reports are exactly the truth.
    pub top1: usize,
    /// Scenarios without a fault.
    pub healthy_scenarios: usize,
    /// Healthy scenarios with a report.
    pub healthy_with_fault: usize,
    /// (label, found, total) recall per kind / symptom / gray / ECMP.
    pub breakdown: Vec<(String, usize, usize)>,
    /// Total analysis time.
    pub time: Duration,
    /// Slowest analysis.
    pub max_time: Duration,
    /// Analyses timed.
    pub runs: usize,
    /// Scenario numbers where something went wrong (for debugging).
    pub misses: Vec<usize>,
}

/// `hits / of`, 1 when there was nothing to get wrong (`of` is 0).
fn share(hits: usize, of: usize) -> f64 {
    if of == 0 {
        1.0
    } else {
        hits as f64 / of as f64
    }
}

impl Score {
    /// Correct reports / all reports.
    pub fn precision(&self) -> f64 {
        share(self.correct_reports, self.reported)
    }
    /// True faults found / true faults.
    pub fn recall(&self) -> f64 {
        share(self.found, self.truths)
    }
    /// Share of faulty scenarios localized exactly.
    pub fn top1(&self) -> f64 {
        share(self.top1, self.faulty_scenarios)
    }

    fn bump(&mut self, label: String, found: bool) {
        match self.breakdown.iter_mut().find(|(l, _, _)| *l == label) {
            Some(e) => {
                e.1 += found as usize;
                e.2 += 1;
            }
            None => self.breakdown.push((label, found as usize, 1)),
        }
    }

    /// Score one scenario's report against its truth.
    pub(crate) fn add(&mut self, k: usize, truth: &[FaultSpec], report: &Report, took: Duration) {
        self.runs += 1;
        self.time += took;
        self.max_time = self.max_time.max(took);
        self.reported += report.faults.len();
        let correct = report
            .faults
            .iter()
            .filter(|f| truth.iter().any(|t| matches(f, &t.component)))
            .count();
        self.correct_reports += correct;
        let mut ok = correct == report.faults.len();
        self.truths += truth.len();
        for t in truth {
            let found = report.faults.iter().any(|f| matches(f, &t.component));
            self.found += found as usize;
            ok &= found;
            self.bump(format!("kind={}", t.component.kind), found);
            self.bump(format!("symptom={}", t.symptom), found);
            self.bump(format!("{}/{}", t.component.kind, t.symptom), found);
            if t.symptom == Symptom::Loss && t.severity <= 0.05 {
                self.bump("gray loss (1-5%)".into(), found);
            }
            if t.ecmp_fraction.is_some() {
                self.bump("ECMP-partial spine".into(), found);
            }
        }
        if truth.is_empty() {
            self.healthy_scenarios += 1;
            if !report.faults.is_empty() {
                self.healthy_with_fault += 1;
            }
        } else {
            self.faulty_scenarios += 1;
            let head = &report.faults[..truth.len().min(report.faults.len())];
            let exact = head.len() == truth.len()
                && truth.iter().all(|t| {
                    head.iter()
                        .any(|f| matches(f, &t.component) && f.symptom == t.symptom)
                });
            self.top1 += exact as usize;
            ok &= exact;
        }
        if !ok {
            self.misses.push(k);
        }
    }
}

/// Result of an accuracy run: the engine and the voting reference.
#[derive(Debug, Clone)]
pub struct Accuracy {
    /// Scenarios run.
    pub scenarios: usize,
    /// The engine's score.
    pub engine: Score,
    /// The voting baseline's score.
    pub voting: Score,
}

/// Run `n` scenarios.
pub fn run_accuracy(n: usize, seed: u64, config: &Config) -> Accuracy {
    let fabrics: Vec<Fabric> = accuracy_fabrics().into_iter().map(Fabric::new).collect();
    let mut engine = Score::default();
    let mut vote = Score::default();
    for k in 0..n {
        let (fi, _cat, sc) = scenario(k, seed, &fabrics);
        let pairs: Vec<PairStats> = pair_stats(&fabrics[fi], &sc);
        let t = Instant::now();
        let (report, _) = analyze_timed(&pairs, config);
        engine.add(k, &sc.faults, &report, t.elapsed());
        let t = Instant::now();
        let vr = voting::analyze(&pairs);
        vote.add(k, &sc.faults, &vr, t.elapsed());
    }
    Accuracy {
        scenarios: n,
        engine,
        voting: vote,
    }
}

/// Truth, engine report and voting report of scenario `k`, as JSON lines.
pub fn show(k: usize, seed: u64, config: &Config) -> Result<String, BenchError> {
    let fabrics: Vec<Fabric> = accuracy_fabrics().into_iter().map(Fabric::new).collect();
    let (fi, cat, sc) = scenario(k, seed, &fabrics);
    let pairs = pair_stats(&fabrics[fi], &sc);
    let report = analyze(&pairs, config);
    let vr = voting::analyze(&pairs);
    Ok(format!(
        "fabric: {}\ncategory: {cat:?}, noisy pairs {}, blips {}\ntruth: {}\nengine: {}\nvoting: {}",
        serde_json::to_string(&fabrics[fi].spec)?,
        sc.noisy_pairs,
        sc.blips,
        serde_json::to_string(&sc.faults)?,
        serde_json::to_string(&report)?,
        serde_json::to_string(&vr)?
    ))
}

/// Printable accuracy figures (the `bench` command).
pub fn accuracy(n: usize, seed: u64, config: &Config) -> Accuracy {
    run_accuracy(n, seed, config)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

impl fmt::Display for Accuracy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (e, v) = (&self.engine, &self.voting);
        writeln!(
            f,
            "accuracy: {} scenarios ({} healthy, {} faulty, {} true faults)",
            self.scenarios, e.healthy_scenarios, e.faulty_scenarios, e.truths
        )?;
        writeln!(
            f,
            "{:<28} {:>10} {:>10} {:>8}",
            "metric", "engine", "voting", "ratio"
        )?;
        for (name, a, b) in [
            ("precision", e.precision(), v.precision()),
            ("recall", e.recall(), v.recall()),
            ("top-1 localization", e.top1(), v.top1()),
        ] {
            writeln!(f, "{name:<28} {a:>10.4} {b:>10.4} {:>8}", ratio(a, b))?;
        }
        writeln!(
            f,
            "{:<28} {:>10} {:>10}",
            "healthy with a fault",
            format!("{}/{}", e.healthy_with_fault, e.healthy_scenarios),
            format!("{}/{}", v.healthy_with_fault, v.healthy_scenarios)
        )?;
        for (label, found, total) in &e.breakdown {
            let vf = v
                .breakdown
                .iter()
                .find(|(l, _, _)| l == label)
                .map(|x| x.1)
                .unwrap_or(0);
            writeln!(
                f,
                "{:<28} {:>10} {:>10}",
                format!("recall {label}"),
                format!("{found}/{total}"),
                format!("{vf}/{total}")
            )?;
        }
        let mean = |s: &Score| s.time.as_secs_f64() * 1e3 / s.runs.max(1) as f64;
        writeln!(
            f,
            "{:<28} {:>10.2} {:>10.2} {:>8}",
            "analyze ms/scenario (mean)",
            mean(e),
            mean(v),
            ratio(mean(e), mean(v))
        )?;
        writeln!(
            f,
            "{:<28} {:>10.2} {:>10.2}",
            "analyze ms/scenario (max)",
            e.max_time.as_secs_f64() * 1e3,
            v.max_time.as_secs_f64() * 1e3
        )?;
        if !e.misses.is_empty() {
            write!(f, "engine misses (scenario numbers): {:?}", e.misses)?;
        }
        Ok(())
    }
}

/// Result of the speed case.
#[derive(Debug, Clone)]
pub struct Speed {
    /// Hosts of the fabric.
    pub hosts: usize,
    /// Containers.
    pub containers: usize,
    /// Probe pairs.
    pub pairs: usize,
    /// CSV rows.
    pub rows: usize,
    /// CSV size.
    pub csv_bytes: u64,
    /// Time to write the CSV.
    pub generate: Duration,
    /// Time to parse it.
    pub parse: Duration,
    /// Engine stage times.
    pub timings: Timings,
    /// Voting baseline time.
    pub voting: Duration,
    /// Peak RSS, if known.
    pub peak_rss_bytes: Option<u64>,
    /// What was localized, and whether it was right.
    pub found: String,
}

/// Peak resident set size of this process (VmHWM), if the kernel reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The speed case: a `hosts` × 8-rail fabric with a gray ToR fault, a
/// partial spine fault and a gray (2%) NIC fault, written as CSV to a file, then parsed and analyzed
/// end to end on one thread.
pub fn speed(
    hosts: usize,
    csv_path: Option<&std::path::Path>,
    seed: u64,
) -> Result<Speed, BenchError> {
    let spec = FabricSpec {
        hosts,
        rails: 8,
        nodes_per_nic: 1,
        hosts_per_tor: 32.min(hosts.max(1)),
        tors_per_spine: 4,
        rounds: 6,
        packets_per_round: 100,
    };
    let fabric = Fabric::new(spec);
    let mut sc = Scenario::healthy(seed);
    sc.noisy_pairs = 3;
    sc.blips = 10;
    sc.faults.push(parse_fault(&fabric, "tor=5:loss:0.02")?);
    sc.faults
        .push(parse_fault(&fabric, "spine=3:loss:0.2:0.3")?);
    let nic = fabric.components(Kind::Nic).len() / 3;
    sc.faults
        .push(parse_fault(&fabric, &format!("nic={nic}:loss:0.02"))?);
    let (path, remove) = match csv_path {
        Some(p) => (p.to_path_buf(), false),
        None => (
            std::env::temp_dir().join(format!("skeletonhunter-bench-{}.csv", std::process::id())),
            true,
        ),
    };
    let t = Instant::now();
    {
        let file = std::fs::File::create(&path)?;
        write_csv(
            &fabric,
            &sc,
            std::io::BufWriter::with_capacity(1 << 20, file),
        )?;
    }
    let generate = t.elapsed();
    let csv_bytes = std::fs::metadata(&path)?.len();
    let t = Instant::now();
    let (pairs, _) = read_pings_file_counted(&path, &CsvOptions::default())?;
    let parse = t.elapsed();
    let rows = pairs.iter().map(|p| p.rounds as usize).sum();
    let (report, timings) = analyze_timed(&pairs, &Config::default());
    let t = Instant::now();
    let _ = voting::analyze(&pairs);
    let voting_time = t.elapsed();
    let peak = peak_rss_bytes();
    if remove {
        let _ = std::fs::remove_file(&path);
    }
    let found = report
        .faults
        .iter()
        .map(|f| format!("{}/{} {}", f.kind, &f.id[..8.min(f.id.len())], f.symptom))
        .collect::<Vec<_>>()
        .join(", ");
    let truth_ok = sc
        .faults
        .iter()
        .all(|t| report.faults.iter().any(|f| matches(f, &t.component)))
        && report.faults.len() == sc.faults.len();
    Ok(Speed {
        hosts,
        containers: fabric.nodes.len(),
        pairs: pairs.len(),
        rows,
        csv_bytes,
        generate,
        parse,
        timings,
        voting: voting_time,
        peak_rss_bytes: peak,
        found: format!("{found} ({})", if truth_ok { "correct" } else { "WRONG" }),
    })
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.timings;
        let solve = t.matrix + t.detect + t.localize;
        writeln!(
            f,
            "speed: {} hosts x 8 rails, {} containers, {} pairs, {} rows, {:.1} MB CSV (generated in {:.2} s)",
            self.hosts,
            self.containers,
            self.pairs,
            self.rows,
            self.csv_bytes as f64 / 1e6,
            self.generate.as_secs_f64()
        )?;
        writeln!(
            f,
            "  parse CSV           {:>8.3} s",
            self.parse.as_secs_f64()
        )?;
        writeln!(f, "  path matrix         {:>8.3} s", t.matrix.as_secs_f64())?;
        writeln!(f, "  detection           {:>8.3} s", t.detect.as_secs_f64())?;
        writeln!(
            f,
            "  lasso + tests       {:>8.3} s",
            t.localize.as_secs_f64()
        )?;
        writeln!(
            f,
            "  solve (all but CSV) {:>8.3} s   (target <= 0.3 s)",
            solve.as_secs_f64()
        )?;
        writeln!(
            f,
            "  end to end          {:>8.3} s   (target <= 2 s)",
            (self.parse + solve).as_secs_f64()
        )?;
        writeln!(
            f,
            "  voting reference    {:>8.3} s   (engine solve / voting = {})",
            self.voting.as_secs_f64(),
            ratio(solve.as_secs_f64(), self.voting.as_secs_f64())
        )?;
        match self.peak_rss_bytes {
            Some(b) => writeln!(
                f,
                "  peak RSS (VmHWM)    {:>8.1} MB  (target <= 300 MB)",
                b as f64 / 1e6
            )?,
            None => writeln!(f, "  peak RSS            unavailable")?,
        }
        write!(f, "  localized: {}", self.found)
    }
}
