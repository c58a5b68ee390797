//! Accuracy regression on the benchmark's scenarios (the generator of
//! `skeletonhunter-localizer bench`), evaluated through the CSV path: each
//! scenario is written as a SkeletonHunter CSV (rows of 100 or of 10
//! probes, `loss_rate` printed as the shortest decimal) and read back at
//! default options, so the reader must infer the probes per row.
//!
//! The fast test runs 30 scenarios on a fixed seed and 30 on another (8
//! healthy, 22 faulty, 30 true faults each; debug build, about a minute on
//! two cores). With 30 faults the goal (>= 0.99 precision and recall, >=
//! 0.97 top-1) means no error at all, so one error is tolerated per seed
//! (precision, recall >= 0.96; top-1 >= 0.95); a fault on a healthy window
//! never is. The full goal is asserted on 240 scenarios per seed by the
//! ignored test on seed 7 (the one the engine was developed on) and seeds
//! 11, 23 and 42 (fresh when first run; their misses shaped later fixes,
//! so check a change on seeds never run before too) (release: `cargo test
//! --release -p skeletonhunter-localizer --test accuracy -- --ignored`).

use skeletonhunter_localizer::sim::bench::run_accuracy;
use skeletonhunter_localizer::Config;

fn check(n: usize, seed: u64, (p, r, t): (f64, f64, f64)) -> (usize, usize) {
    let a = run_accuracy(n, seed, &Config::default());
    println!("seed {seed}:\n{a}");
    let e = &a.engine;
    assert_eq!(
        e.healthy_with_fault, 0,
        "seed {seed}: fault reported on a healthy scenario"
    );
    assert!(
        e.precision() >= p,
        "seed {seed}: precision {}",
        e.precision()
    );
    assert!(e.recall() >= r, "seed {seed}: recall {}", e.recall());
    assert!(e.top1() >= t, "seed {seed}: top-1 {}", e.top1());
    // The greedy voting reference must not match it on recall (it misses
    // partial spines and gray failures).
    assert!(
        e.recall() > a.voting.recall(),
        "seed {seed}: engine {} vs voting {}",
        e.recall(),
        a.voting.recall()
    );
    (e.truths, e.faulty_scenarios)
}

#[test]
fn engine_accuracy_on_a_fixed_and_a_fresh_seed() {
    for seed in [5, 11] {
        let mix = check(30, seed, (0.96, 0.96, 0.95));
        assert_eq!(mix, (30, 22), "scenario mix changed");
    }
}

#[test]
#[ignore = "240 scenarios per seed: run in release"]
fn engine_meets_the_goal_on_the_full_benchmark() {
    for seed in [7, 11, 23, 42] {
        check(240, seed, (0.99, 0.99, 0.97));
    }
}
