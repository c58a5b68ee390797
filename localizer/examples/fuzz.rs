//! Fuzz what the localizer reads from outside — the Prometheus answer, the
//! Alertmanager JSON, the ping-log CSV: `cargo run --release -p
//! skeletonhunter-localizer --example fuzz -- [INPUTS] [SEED]` (default
//! 1,000,000 inputs per target, seed 12). Prints the figures; any panic is
//! caught, counted, its input saved under /tmp, and the exit status is 1.

#[path = "../tests/fuzz/csv.rs"]
mod csv;
#[path = "../tests/fuzz/gen.rs"]
mod gen;

use csv::{check_csv, ping_log};
use gen::{check_alertmanager, check_prom, prom_answer, Rng, Verdict};
use skeletonhunter_localizer::clients::alertmanager::Outbox;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("INPUTS: a number"));
    let seed: u64 = args
        .next()
        .map_or(12, |a| a.parse().expect("SEED: a number"));
    std::panic::set_hook(Box::new(|_| {}));
    let mut r = Rng::new(seed);
    let started = Instant::now();
    let t = run(&mut r, n, prom_answer, check_prom, |i| {
        format!("/tmp/fuzz-prom-{seed}-{i}.json")
    });
    println!(
        "prometheus decoder: {n} inputs ({:.1} MB) in {:.1?}: {} decoded, {} refused, {} panics",
        t.bytes as f64 / 1e6,
        started.elapsed(),
        t.accepted,
        t.refused,
        t.panics
    );
    let panics = t.panics;
    let mut am_panics = 0u64;
    let capacity = 64;
    let mut outbox = Outbox::new(capacity);
    let started = Instant::now();
    for _ in 0..n {
        if catch_unwind(AssertUnwindSafe(|| {
            check_alertmanager(&mut r, &mut outbox, capacity);
        }))
        .is_err()
        {
            am_panics += 1;
            outbox = Outbox::new(capacity);
        }
    }
    println!(
        "alertmanager JSON: {n} batches in {:.1?}: {am_panics} panics or violated invariants",
        started.elapsed()
    );
    let csv_panics = fuzz_csv(&mut r, n, seed);
    if panics + am_panics + csv_panics > 0 {
        std::process::exit(1);
    }
}

/// What `run` counted.
#[derive(Default)]
struct Tally {
    accepted: u64,
    refused: u64,
    panics: u64,
    bytes: u64,
}

/// Check `n` inputs made by `make` with `check`, catching and counting its
/// panics; each panicking input is saved at `saved_as(i)`.
fn run(
    r: &mut Rng,
    n: u64,
    make: fn(&mut Rng) -> Vec<u8>,
    check: fn(&mut Rng, &[u8]) -> Verdict,
    saved_as: impl Fn(u64) -> String,
) -> Tally {
    let mut t = Tally::default();
    for i in 0..n {
        let body = make(r);
        t.bytes += body.len() as u64;
        match catch_unwind(AssertUnwindSafe(|| check(r, &body))) {
            Ok(Verdict::Accepted) => t.accepted += 1,
            Ok(Verdict::Refused) => t.refused += 1,
            Err(_) => {
                t.panics += 1;
                let _ = std::fs::write(saved_as(i), &body);
            }
        }
    }
    t
}

/// The ping-log target: read (and, when accepted, analyze) `n` logs;
/// returns the panics.
fn fuzz_csv(r: &mut Rng, n: u64, seed: u64) -> u64 {
    let started = Instant::now();
    let t = run(r, n, ping_log, check_csv, |i| {
        format!("/tmp/fuzz-csv-{seed}-{i}.csv")
    });
    println!(
        "ping-log CSV: {n} inputs ({:.1} MB) in {:.1?}: {} accepted and analyzed, {} refused, {} panics or violated invariants",
        t.bytes as f64 / 1e6,
        started.elapsed(),
        t.accepted,
        t.refused,
        t.panics
    );
    t.panics
}
