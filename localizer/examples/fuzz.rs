//! Fuzz what the localizer reads from outside — the Prometheus answer, the
//! Alertmanager JSON, the ping-log CSV: `cargo run --release -p
//! skeletonhunter-localizer --example fuzz -- [INPUTS] [SEED]` (default
//! 1,000,000 inputs per target, seed 12). Prints the figures; any panic is
//! caught, counted, its input saved under /tmp, and the exit status is 1.

#[path = "../tests/fuzz/csv.rs"]
mod csv;
#[path = "../tests/fuzz/gen.rs"]
mod gen;

use csv::{check_csv, ping_log, CsvVerdict};
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
    let (mut ok, mut err, mut panics, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let started = Instant::now();
    for i in 0..n {
        let body = prom_answer(&mut r);
        bytes += body.len() as u64;
        match catch_unwind(AssertUnwindSafe(|| check_prom(&mut r, &body))) {
            Ok(Verdict::Ok) => ok += 1,
            Ok(Verdict::Err) => err += 1,
            Err(_) => {
                panics += 1;
                let _ = std::fs::write(format!("/tmp/fuzz-prom-{seed}-{i}.json"), &body);
            }
        }
    }
    println!(
        "prometheus decoder: {n} inputs ({:.1} MB) in {:.1?}: {ok} decoded, {err} refused, {panics} panics",
        bytes as f64 / 1e6,
        started.elapsed()
    );
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

/// The ping-log target: read (and, when accepted, analyze) `n` logs;
/// returns the panics.
fn fuzz_csv(r: &mut Rng, n: u64, seed: u64) -> u64 {
    let (mut ok, mut err, mut panics, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let started = Instant::now();
    for i in 0..n {
        let body = ping_log(r);
        bytes += body.len() as u64;
        match catch_unwind(AssertUnwindSafe(|| check_csv(r, &body))) {
            Ok(CsvVerdict::Accepted) => ok += 1,
            Ok(CsvVerdict::Refused) => err += 1,
            Err(_) => {
                panics += 1;
                let _ = std::fs::write(format!("/tmp/fuzz-csv-{seed}-{i}.csv"), &body);
            }
        }
    }
    println!(
        "ping-log CSV: {n} inputs ({:.1} MB) in {:.1?}: {ok} accepted and analyzed, {err} refused, {panics} panics or violated invariants",
        bytes as f64 / 1e6,
        started.elapsed()
    );
    panics
}
