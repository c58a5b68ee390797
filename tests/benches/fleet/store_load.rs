//! The store's own load beside the localizer's cycles: its CPU, and its Go
//! runtime's allocations and garbage collections, read from the store's
//! `/metrics` once a second. At 100,000 pairs one collection of the
//! store's heap costs seconds of both cores, so which cycles a collection
//! overlapped tells the slow cycles from the fast ones.

use skeletonhunter_tests::exposition::metric_value;
use skeletonhunter_tools::servers::Server;
use std::time::{Duration, Instant};

/// One read of the store's counters; `None` where it does not export one.
struct Reading {
    at: Instant,
    cpu_seconds: Option<f64>,
    collections: Option<f64>,
    allocated_bytes: Option<f64>,
}

/// The store's counters, read once a second through the measured cycles.
#[derive(Default)]
pub struct StoreLoad {
    readings: Vec<Reading>,
}

/// What the readings say per measured cycle.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoadFigures {
    /// The store's CPU seconds per cycle (ingestion and the localizer's
    /// queries alike).
    pub cpu_per_cycle: Option<f64>,
    /// Garbage collections the store's Go runtime finished per cycle.
    pub collections_per_cycle: Option<f64>,
    /// Megabytes the store's Go runtime allocated per cycle.
    pub allocated_mb_per_cycle: Option<f64>,
}

/// A cycle is seen ending up to a second after it ended, and a collection
/// that slows one may finish a little after it: the slack each side.
const SLACK: Duration = Duration::from_secs(2);

impl StoreLoad {
    /// The first reading of `store`'s counters.
    pub fn from(store: &Server) -> StoreLoad {
        let mut load = StoreLoad::default();
        load.sample(store);
        load
    }

    /// Read the store's counters now; a failed read is skipped.
    pub fn sample(&mut self, store: &Server) {
        let Ok((200, text)) = store.get("/metrics") else {
            return;
        };
        self.readings.push(Reading {
            at: Instant::now(),
            cpu_seconds: metric_value(&text, "process_cpu_seconds_total"),
            collections: metric_value(&text, "go_gc_duration_seconds_count"),
            allocated_bytes: metric_value(&text, "go_memstats_alloc_bytes_total"),
        });
    }

    /// Go on reading once a second for `d` (after the last cycle, so the
    /// collections it overlapped are seen).
    pub fn sample_after(&mut self, store: &Server, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_secs(1));
            self.sample(store);
        }
    }

    /// The growth of one counter from the first reading to the last, per
    /// cycle of `cycles`.
    fn per_cycle(&self, cycles: usize, counter: fn(&Reading) -> Option<f64>) -> Option<f64> {
        let first = counter(self.readings.first()?)?;
        let last = counter(self.readings.last()?)?;
        (cycles > 0).then(|| (last - first) / cycles as f64)
    }

    /// Per-cycle figures for `cycles` cycles measured between the first and
    /// the last reading.
    pub fn figures(&self, cycles: usize) -> LoadFigures {
        LoadFigures {
            cpu_per_cycle: self.per_cycle(cycles, |r| r.cpu_seconds),
            collections_per_cycle: self.per_cycle(cycles, |r| r.collections),
            allocated_mb_per_cycle: self
                .per_cycle(cycles, |r| r.allocated_bytes)
                .map(|b| b / 1e6),
        }
    }

    /// `cycles` (seen ending at, seconds) marked as
    /// [`StoreLoad::collected_during`] says.
    pub fn mark(&self, cycles: &[(Instant, f64)]) -> Marked {
        Marked(
            cycles
                .iter()
                .map(|&(seen, d)| (d, self.collected_during(seen, d)))
                .collect(),
        )
    }

    /// Whether the store finished a garbage collection while a cycle of
    /// `seconds` seen ending at `seen` ran ([`SLACK`] each side); `None`
    /// without readings on both sides or without the counter.
    fn collected_during(&self, seen: Instant, seconds: f64) -> Option<bool> {
        let start = seen.checked_sub(Duration::from_secs_f64(seconds.max(0.0)) + SLACK)?;
        let end = seen + SLACK;
        let before = self.readings.iter().rev().find(|r| r.at <= start)?;
        let after = self.readings.iter().find(|r| r.at >= end)?;
        Some(after.collections? > before.collections?)
    }
}

/// Measured cycles, each marked by whether the store collected garbage
/// during it (`None`: not known).
pub struct Marked(Vec<(f64, Option<bool>)>);

impl Marked {
    /// The durations in order, `*` after those the store collected in.
    pub fn listed(&self) -> String {
        let each: Vec<String> = self
            .0
            .iter()
            .map(|(d, gc)| format!("{d:.2}{}", if *gc == Some(true) { "*" } else { "" }))
            .collect();
        each.join(" ")
    }

    /// The durations of the cycles the store collected in (`gc`) or not.
    pub fn durations(&self, gc: bool) -> Vec<f64> {
        self.0
            .iter()
            .filter(|(_, g)| *g == Some(gc))
            .map(|(d, _)| *d)
            .collect()
    }
}
