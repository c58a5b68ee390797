use super::gate;
use crate::engine::model::Symptom;
use crate::online::alerts::Finding;
use crate::online::confirm::Confirmer;
use crate::online::fixtures::e2e_finding;
use crate::online::flapping::FlapDetector;
use skeletonhunter_common::topology::Kind;
use std::time::{Duration, SystemTime};

/// The e2e test's timing: a cycle every 2 s, confirmed in 2 cycles, held
/// 11 s after a clear (10 s window + 1 s scrapes), resolved after 3 clean
/// cycles, a flap window of 20 cycles (remembered that long).
fn gates() -> (Confirmer, FlapDetector) {
    let confirmer = Confirmer::new(2, Duration::from_secs(11))
        .resolve_after(3)
        .remember_for(Duration::from_secs(40))
        .hold_beneath_recent(Duration::from_secs(5));
    (confirmer, FlapDetector::new(3, 20))
}

fn tor() -> Finding {
    e2e_finding(Kind::Tor, "tor1", Symptom::Loss)
}

fn spine() -> Finding {
    e2e_finding(Kind::Spine, "spine0", Symptom::Loss)
}

/// Feed one cycle's findings per element of `cycles` (a cycle every 2 s),
/// every component covered; each cycle's alerting (component, symptom).
fn run(cycles: Vec<Vec<Finding>>) -> Vec<Vec<(String, Symptom)>> {
    let (mut confirmer, mut flaps) = gates();
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    cycles
        .into_iter()
        .enumerate()
        .map(|(i, found)| {
            let now = start + Duration::from_secs(2 * i as u64);
            let (alerting, _) = gate(&mut confirmer, &mut flaps, found, &|_| true, now);
            alerting
                .iter()
                .map(|f| (f.component.to_string(), f.symptom))
                .collect()
        })
        .collect()
}

/// `n` cycles of `f()` (or of nothing).
fn cycles(n: usize, f: impl Fn() -> Vec<Finding>) -> Vec<Vec<Finding>> {
    (0..n).map(|_| f()).collect()
}

#[test]
fn a_spine_held_at_both_edges_of_its_tors_fault_never_flaps() {
    // The spine is reported beside the ToR at the ToR's onset (its
    // cross-ToR pairs scraped first), then alone on the ToR's leftovers
    // after the clear: held both times, it must not count as a fault that
    // came, went and came back.
    let mut input = cycles(2, || vec![tor(), spine()]);
    input.extend(cycles(6, || vec![tor()]));
    input.extend(cycles(3, || vec![spine()]));
    input.extend(cycles(40, Vec::new));
    let out = run(input);
    for (i, o) in out.iter().enumerate() {
        assert!(
            o.iter()
                .all(|(c, s)| c == "tor/tor1" && *s == Symptom::Loss),
            "cycle {i}: {o:?}"
        );
    }
    assert!(out[1].contains(&("tor/tor1".to_string(), Symptom::Loss)));
    assert!(out.last().unwrap().is_empty(), "the ToR's alert resolves");
}

#[test]
fn a_detection_flickering_off_for_less_than_the_resolution_is_not_a_flap() {
    // Off for two cycles, fewer than the three that resolve: one alert.
    let out = run((0..60)
        .map(|i| if i % 4 < 2 { vec![tor()] } else { vec![] })
        .collect());
    assert!(
        out.iter().flatten().all(|(_, s)| *s == Symptom::Loss),
        "{out:?}"
    );
    // One-cycle blips never confirm: nothing alerts.
    let out = run((0..60)
        .map(|i| if i % 4 == 0 { vec![tor()] } else { vec![] })
        .collect());
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
}

#[test]
fn a_fault_that_alerts_resolves_and_alerts_again_is_flapping() {
    let outage = || cycles(3, || vec![tor()]);
    let mut input = outage();
    input.extend(cycles(5, Vec::new));
    input.extend(outage());
    let out = run(input);
    // Fires at cycle 1, resolves after three clean cycles (at 5), fires
    // again on its second outage's second cycle: flapping from then on.
    assert_eq!(out[1], [("tor/tor1".to_string(), Symptom::Loss)]);
    assert!(out[5].is_empty(), "{:?}", out[5]);
    assert_eq!(out[9], [("tor/tor1".to_string(), Symptom::Flapping)]);
}
