//! The loop: pick a corpus entry, mutate it, check it under
//! `catch_unwind`, keep accepted inputs in a bounded corpus, count.

use super::mutate::Rng;
use super::targets::Harness;
use super::Target;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// The corpus never holds more entries than this.
const MAX_CORPUS: usize = 512;

/// The figures of one run.
#[derive(Debug, Clone)]
pub struct Stats {
    /// The target.
    pub target: Target,
    /// Inputs checked.
    pub inputs: u64,
    /// Inputs the parser accepted.
    pub accepted: u64,
    /// Inputs that panicked (must be 0).
    pub panics: u64,
    /// Inputs that broke an invariant (must be 0).
    pub violations: u64,
    /// Largest reply/request length ratio (probe target; 0 elsewhere).
    pub max_ratio: f64,
    /// The first failing input and why, to reproduce it.
    pub first_failure: Option<(Vec<u8>, String)>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl Stats {
    /// Inputs per second.
    pub fn rate(&self) -> f64 {
        self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// No panic and no broken invariant.
    pub fn clean(&self) -> bool {
        self.panics == 0 && self.violations == 0
    }
}

/// Run `inputs` mutated inputs (the seeds first) through `target`,
/// deterministically for `seed`.
pub fn run(target: Target, inputs: u64, seed: u64) -> Stats {
    let mut harness = Harness::new(target);
    let mut corpus = harness.seeds();
    let mut rng = Rng::new(seed);
    let mut stats = Stats {
        target,
        inputs: 0,
        accepted: 0,
        panics: 0,
        violations: 0,
        max_ratio: 0.0,
        first_failure: None,
        elapsed: Duration::ZERO,
    };
    let start = Instant::now();
    let seeds = corpus.len() as u64;
    let mut input = Vec::new();
    while stats.inputs < inputs {
        input.clear();
        if stats.inputs < seeds {
            input.extend_from_slice(&corpus[stats.inputs as usize]);
        } else {
            input.extend_from_slice(&corpus[rng.below(corpus.len())]);
            let other = &corpus[rng.below(corpus.len())];
            harness.mutate(&mut rng, &mut input, other);
        }
        stats.inputs += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| harness.check(&input)));
        let failure = match outcome {
            Ok(o) => {
                stats.max_ratio = stats.max_ratio.max(o.ratio.unwrap_or(0.0));
                if o.accepted {
                    stats.accepted += 1;
                    keep(&mut corpus, &mut rng, &input);
                }
                o.violation.inspect(|_| stats.violations += 1)
            }
            Err(p) => {
                stats.panics += 1;
                Some(panic_message(p.as_ref()))
            }
        };
        if let (Some(why), None) = (failure, &stats.first_failure) {
            stats.first_failure = Some((input.clone(), why));
        }
    }
    stats.elapsed = start.elapsed();
    stats
}

/// Add an accepted input, replacing a random entry once full.
fn keep(corpus: &mut Vec<Vec<u8>>, rng: &mut Rng, input: &[u8]) {
    if corpus.len() < MAX_CORPUS {
        corpus.push(input.to_vec());
    } else if rng.one_in(16) {
        let i = rng.below(corpus.len());
        corpus[i] = input.to_vec();
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let text = p
        .downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into());
    format!("panic: {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_clean(target: Target, n: u64) -> Stats {
        let s = run(target, n, 0x5EED);
        assert!(s.clean(), "{}: {:?}", target.as_str(), s.first_failure);
        assert_eq!(s.inputs, n);
        assert!(s.accepted > 0, "{}: nothing accepted", target.as_str());
        assert!(s.accepted < n, "{}: nothing refused", target.as_str());
        s
    }

    #[test]
    fn probe_packets_never_panic_and_replies_never_grow() {
        let s = assert_clean(Target::Probe, 5_000);
        assert!(s.max_ratio > 0.5 && s.max_ratio <= 1.0, "{}", s.max_ratio);
    }

    #[test]
    fn ebpf_events_never_panic_and_round_trip() {
        assert_clean(Target::Event, 5_000);
    }

    #[test]
    fn config_files_never_panic() {
        assert_clean(Target::Config, 2_000);
    }

    #[test]
    fn a_run_is_deterministic_for_its_seed() {
        let a = run(Target::Probe, 500, 7);
        let b = run(Target::Probe, 500, 7);
        assert_eq!((a.accepted, a.max_ratio), (b.accepted, b.max_ratio));
    }

    #[test]
    fn a_padded_request_is_answered_within_its_size() {
        let mut h = Harness::new(Target::Probe);
        let mut req = Vec::new();
        crate::wire::probe::encode_request(&mut req, 1, 2, 3, &[], 256);
        let o = h.check(&req);
        assert!(o.accepted && o.violation.is_none());
        assert!(o.ratio.unwrap() <= 1.0);
    }
}
