//! A few thousand structure-aware fuzz inputs per target on every `cargo
//! test`: the Prometheus decoder, the Alertmanager JSON and the ping-log
//! CSV reader; `cargo run --release -p skeletonhunter-localizer --example
//! fuzz -- 1000000` runs millions. Zero panics, no error larger than its
//! input.

#[path = "fuzz/csv.rs"]
mod csv;
#[path = "fuzz/gen.rs"]
mod gen;

use csv::{check_csv, ping_log, CsvVerdict};
use gen::{check_alertmanager, check_prom, prom_answer, Rng, Verdict};
use skeletonhunter_localizer::clients::alertmanager::Outbox;

#[test]
fn prometheus_answers_never_panic_the_decoder() {
    let mut r = Rng::new(12);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..5000 {
        let body = prom_answer(&mut r);
        match check_prom(&mut r, &body) {
            Verdict::Ok => ok += 1,
            Verdict::Err => err += 1,
        }
    }
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
    let mut r = Rng::new(12);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..5000 {
        let body = ping_log(&mut r);
        match check_csv(&mut r, &body) {
            CsvVerdict::Accepted => ok += 1,
            CsvVerdict::Refused => err += 1,
        }
    }
    // The generator reaches both sides of the reader.
    eprintln!("ping logs: accepted {ok}, refused {err}");
    assert!(ok > 100 && err > 100, "accepted {ok}, refused {err}");
}
