//! A few thousand structure-aware fuzz inputs per target on every `cargo
//! test`: the Prometheus decoder, the Alertmanager JSON and the ping-log
//! CSV reader; `cargo run --release -p skeletonhunter-localizer --example
//! fuzz -- 1000000` runs millions. Zero panics, no error larger than its
//! input.

#[path = "fuzz/csv.rs"]
mod csv;
#[path = "fuzz/gen.rs"]
mod gen;

use csv::{check_csv, ping_log};
use gen::{check_alertmanager, check_prom, prom_answer, Rng, Verdict};
use skeletonhunter_localizer::clients::alertmanager::Outbox;

/// Accepted and refused counts of 5000 inputs of seed 12, each made by
/// `make` and checked by `check` (which panics on a failure).
fn tally(make: fn(&mut Rng) -> Vec<u8>, check: fn(&mut Rng, &[u8]) -> Verdict) -> (u32, u32) {
    let mut r = Rng::new(12);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..5000 {
        let body = make(&mut r);
        match check(&mut r, &body) {
            Verdict::Accepted => ok += 1,
            Verdict::Refused => err += 1,
        }
    }
    (ok, err)
}

#[test]
fn prometheus_answers_never_panic_the_decoder() {
    let (ok, err) = tally(prom_answer, check_prom);
    // The generator reaches both sides of the decoder.
    assert!(ok > 100 && err > 100, "ok {ok}, err {err}");
}

#[test]
fn alertmanager_json_round_trips_hostile_text() {
    let mut r = Rng::new(12);
    let mut outbox = Outbox::new(16);
    for _ in 0..3000 {
        check_alertmanager(&mut r, &mut outbox, 16);
    }
}

#[test]
fn ping_logs_never_panic_the_reader_or_the_engine() {
    let (ok, err) = tally(ping_log, check_csv);
    // The generator reaches both sides of the reader.
    eprintln!("ping logs: accepted {ok}, refused {err}");
    assert!(ok > 100 && err > 100, "accepted {ok}, refused {err}");
}
