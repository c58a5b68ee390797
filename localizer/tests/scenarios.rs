//! End-to-end engine scenarios on small simulated fabrics: gray loss,
//! partial spines, simultaneous faults, equivalent components. They drive
//! the public API only (simulator in, `analyze` out), so they live outside
//! the engine, which must not depend on the simulator.

use skeletonhunter_common::topology::{Component, Kind};
use skeletonhunter_localizer::sim::{pair_stats, parse_fault, Fabric, FabricSpec, Scenario};
use skeletonhunter_localizer::{analyze, Config, Report, Symptom};

fn small() -> Fabric {
    Fabric::new(FabricSpec {
        hosts: 32,
        rails: 4,
        nodes_per_nic: 2,
        hosts_per_tor: 8,
        tors_per_spine: 2,
        ..Default::default()
    })
}

fn run(f: &Fabric, faults: &[&str], seed: u64, noisy: usize, blips: usize) -> Report {
    let mut sc = Scenario::healthy(seed);
    sc.noisy_pairs = noisy;
    sc.blips = blips;
    sc.faults = faults.iter().map(|s| parse_fault(f, s).unwrap()).collect();
    analyze(&pair_stats(f, &sc), &Config::default())
}

fn names(r: &Report) -> Vec<String> {
    r.faults
        .iter()
        .map(|f| format!("{}:{}", f.component(), f.symptom))
        .collect()
}

#[test]
fn healthy_fabric_with_noisy_pairs_and_blips_blames_nothing() {
    let f = small();
    for seed in 0..4 {
        let r = run(&f, &[], seed, 3, 8);
        assert!(r.faults.is_empty(), "seed {seed}: {:?}", names(&r));
    }
}

/// A ToR dropping 30% of packets, seen in a short window: most of its
/// pairs are lossy (and some of their dials time out), a few pairs lost
/// every probe and dial by chance and carry only failed dials. Both the
/// loss and the unreachable test blame the ToR; it is lossy, not
/// unreachable: plenty gets through.
#[test]
fn partial_loss_is_loss_even_when_dials_fail() {
    let f = small();
    let tor = f.components(Kind::Tor)[3].clone();
    let mut sc = Scenario::healthy(5);
    sc.faults = vec![parse_fault(&f, "tor=3:loss:0.3").unwrap()];
    let mut pairs = pair_stats(&f, &sc);
    let crossing: Vec<usize> = (0..pairs.len())
        .filter(|&i| {
            skeletonhunter_common::topology::path(&pairs[i].src, &pairs[i].dst).contains(&tor)
        })
        .collect();
    assert!(crossing.len() > 40, "{} pairs cross {tor}", crossing.len());
    for &i in crossing.iter().step_by(3) {
        let p = &mut pairs[i];
        (p.failed_dials, p.sent, p.lost, p.rtt_seconds, p.rtt_samples) =
            (p.rounds, 0.0, 0.0, None, 0.0);
    }
    let r = analyze(&pairs, &Config::default());
    let blamed: Vec<Symptom> = r
        .blame
        .iter()
        .filter(|b| b.faulty && b.component == tor)
        .map(|b| b.symptom)
        .collect();
    assert!(
        blamed.contains(&Symptom::Loss) && blamed.contains(&Symptom::Unreachable),
        "both tests should blame {tor}: {blamed:?}"
    );
    assert_eq!(names(&r), vec![format!("{tor}:loss")]);
    assert!((r.faults[0].score - 0.3).abs() < 0.05, "{:?}", r.faults[0]);

    // Nearly nothing gets through: unreachable.
    let mut sc = Scenario::healthy(5);
    sc.faults = vec![parse_fault(&f, "tor=3:loss:0.97").unwrap()];
    let mut pairs = pair_stats(&f, &sc);
    for &i in crossing.iter().step_by(3) {
        let p = &mut pairs[i];
        (p.failed_dials, p.sent, p.lost, p.rtt_seconds, p.rtt_samples) =
            (p.rounds, 0.0, 0.0, None, 0.0);
    }
    let r = analyze(&pairs, &Config::default());
    assert_eq!(names(&r), vec![format!("{tor}:unreachable")]);
    // The same when only the loss test sees it (no pair cut).
    let r = analyze(&pair_stats(&f, &sc), &Config::default());
    assert_eq!(names(&r), vec![format!("{tor}:unreachable")]);
    assert!(r.faults[0].score > 0.9, "{:?}", r.faults[0]);
}

#[test]
fn gray_tor_loss_is_localized() {
    let f = small();
    let tor = f.components(Kind::Tor)[3].clone();
    let r = run(&f, &["tor=3:loss:0.015"], 1, 2, 4);
    assert_eq!(names(&r), vec![format!("{tor}:loss")]);
    assert!(
        (r.faults[0].score - 0.015).abs() < 0.005,
        "{:?}",
        r.faults[0]
    );
    assert!(r.faults[0].p_value < 1e-9);
}

#[test]
fn partial_spine_fault_is_blamed_on_the_spine() {
    let f = Fabric::new(FabricSpec {
        hosts: 64,
        rails: 4,
        hosts_per_tor: 8,
        tors_per_spine: 4,
        ..Default::default()
    });
    let spine = f.components(Kind::Spine)[2].clone();
    let r = run(&f, &["spine=2:loss:0.3:0.3"], 2, 2, 4);
    assert_eq!(names(&r), vec![format!("{spine}:loss")]);
    // The score is the loss of the hit flows, not diluted by the others.
    assert!((r.faults[0].score - 0.3).abs() < 0.05, "{:?}", r.faults[0]);
}

#[test]
fn two_simultaneous_faults_of_different_symptoms() {
    let f = small();
    let host = f.components(Kind::Host)[5].clone();
    let node = f.components(Kind::Node)[40].clone();
    let r = run(
        &f,
        &["host=5:latency:15e-6", "node=40:unreachable"],
        3,
        1,
        2,
    );
    let mut got = names(&r);
    got.sort();
    let mut want = vec![format!("{host}:latency"), format!("{node}:unreachable")];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn indistinguishable_components_are_listed_as_equivalent() {
    // One container per NIC: node and nic cross the same pairs. The
    // smallest (the container) is blamed, the NIC listed.
    let f = Fabric::new(FabricSpec {
        hosts: 16,
        rails: 2,
        nodes_per_nic: 1,
        hosts_per_tor: 4,
        ..Default::default()
    });
    let node = f.nodes[7].clone();
    let idx = f
        .components(Kind::Node)
        .iter()
        .position(|c| c.id == node.node)
        .unwrap();
    let r = run(&f, &[&format!("node={idx}:loss:0.2")], 4, 0, 0);
    assert_eq!(r.faults.len(), 1, "{:?}", names(&r));
    let fault = &r.faults[0];
    assert_eq!(
        fault.component(),
        Component::new(Kind::Node, node.node.clone())
    );
    assert_eq!(fault.equivalent, vec![Component::new(Kind::Nic, node.nic)]);
}

#[test]
fn node_fault_is_not_blamed_on_its_shared_nic() {
    let f = small();
    let r = run(&f, &["node=10:unreachable:0.9"], 5, 3, 0);
    let node = f.components(Kind::Node)[10].clone();
    assert_eq!(names(&r), vec![format!("{node}:unreachable")]);
}
