//! Accuracy regression: a small run of the benchmark's scenarios (the same
//! generator as `skeletonhunter-localizer bench`), fast enough for a debug
//! build.
//!
//! 30 scenarios = 8 healthy, 14 with one fault, 8 with two: 30 true faults
//! in 22 faulty scenarios. The full benchmark scores >= 0.99 on all three
//! metrics, so at most one error is expected here; the thresholds allow one
//! wrong report or missed fault (1/30 ≈ 0.033 -> 0.96) and one wrong top-1
//! scenario (1/22 ≈ 0.045 -> 0.95), and no fault at all on healthy
//! scenarios. Two errors would be a regression.

use skeletonhunter_localizer::sim::bench::run_accuracy;
use skeletonhunter_localizer::Config;

#[test]
fn engine_accuracy_does_not_regress_and_beats_voting() {
    let a = run_accuracy(30, 7, &Config::default());
    println!("{a}");
    let e = &a.engine;
    assert_eq!(
        (e.truths, e.faulty_scenarios, e.healthy_scenarios),
        (30, 22, 8)
    );
    assert_eq!(
        e.healthy_with_fault, 0,
        "fault reported on a healthy scenario"
    );
    assert!(e.precision() >= 0.96, "precision {}", e.precision());
    assert!(e.recall() >= 0.96, "recall {}", e.recall());
    assert!(e.top1() >= 0.95, "top-1 {}", e.top1());
    // The greedy voting reference must not match it on recall (it misses
    // partial spines and gray failures).
    assert!(
        e.recall() > a.voting.recall(),
        "engine {} vs voting {}",
        e.recall(),
        a.voting.recall()
    );
}
