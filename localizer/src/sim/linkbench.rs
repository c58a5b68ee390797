//! The multipath part of the benchmark: fabrics whose spine blocks have
//! several members and whose pairs are probed over several flows
//! ([`super::multipath`]), with faults on one ECMP member link (lossy,
//! gray or dead), on a whole member switch, and on the usual components
//! beside a link fault. Scored like the rest ([`super::bench::Score`]): a
//! link fault is found when its link is reported; a member fault when its
//! spine block is (the labels name blocks, not members).

use super::bench::{random_fault, Accuracy, Score};
use super::fabric::{Fabric, FabricSpec};
use super::multipath::{link_down, link_up, pair_stats, Multipath, MultipathScenario};
use super::rng::Rng;
use super::scenario::{FaultSpec, Scenario};
use crate::engine::model::{Config, PairStats, Symptom};
use crate::engine::pipeline::{analyze, analyze_timed};
use crate::engine::voting;
use skeletonhunter_common::topology::{Component, Kind};
use std::time::Instant;

/// The multipath fabrics the link scenarios run on.
pub fn link_fabrics() -> Vec<(FabricSpec, Multipath)> {
    let spec = |hosts, rails, nodes_per_nic, hosts_per_tor, tors_per_spine| FabricSpec {
        hosts,
        rails,
        nodes_per_nic,
        hosts_per_tor,
        tors_per_spine,
        rounds: 6,
        packets_per_round: 100,
    };
    vec![
        (
            spec(32, 2, 1, 8, 2),
            Multipath {
                members: 2,
                flows: 8,
            },
        ),
        (
            spec(48, 2, 2, 8, 3),
            Multipath {
                members: 4,
                flows: 16,
            },
        ),
        (
            spec(64, 4, 1, 16, 2),
            Multipath {
                members: 4,
                flows: 8,
            },
        ),
    ]
}

/// A faulty member link of `fabric`: up from a ToR or down into it.
fn random_link(fabric: &Fabric, mp: Multipath, rng: &mut Rng) -> FaultSpec {
    let n = &fabric.nodes[rng.below(fabric.nodes.len())];
    let m = rng.below(mp.members);
    let addr = if rng.f64() < 0.5 {
        link_up(&n.tor, m)
    } else {
        link_down(&n.spine, m, &n.tor)
    };
    let r = rng.f64();
    let (symptom, severity) = if r < 1.0 / 3.0 {
        (Symptom::Unreachable, 1.0)
    } else if r < 2.0 / 3.0 {
        (Symptom::Loss, rng.range(0.1, 0.5))
    } else {
        (Symptom::Loss, rng.range(0.02, 0.05))
    };
    FaultSpec {
        component: Component::new(Kind::Link, addr),
        symptom,
        severity,
        ecmp_fraction: None,
    }
}

/// The `k`-th link scenario: fabric index, scenario and its truth.
pub fn link_scenario(
    k: usize,
    seed: u64,
    fabrics: &[(Fabric, Multipath)],
) -> (usize, MultipathScenario, Vec<FaultSpec>) {
    let mut rng = Rng::new(seed.wrapping_mul(2_000_003).wrapping_add(k as u64) ^ 0x6c69_6e6b);
    let fi = k % fabrics.len();
    let (fabric, mp) = (&fabrics[fi].0, fabrics[fi].1);
    let mut base = Scenario::healthy(rng.next_u64());
    base.noisy_pairs = rng.below(4);
    base.blips = rng.below(8);
    base.gray_noisy_pairs = rng.below(4);
    if rng.f64() < 0.3 {
        base.missing_pairs = rng.range(0.05, 0.3);
    }
    let mut sc = MultipathScenario {
        base,
        links: Vec::new(),
        members: Vec::new(),
    };
    let mut truth = Vec::new();
    match (k / fabrics.len()) % 5 {
        0 => {}
        1 | 2 => truth.push(random_link(fabric, mp, &mut rng)),
        3 => {
            truth.push(random_link(fabric, mp, &mut rng));
            let other = random_fault(fabric, &mut rng);
            sc.base.faults.push(other.clone());
            truth.push(other);
        }
        _ => {
            let spines = fabric.components(Kind::Spine);
            let block = spines[rng.below(spines.len())].clone();
            let m = rng.below(mp.members);
            let q = if rng.f64() < 0.5 {
                1.0
            } else {
                rng.range(0.1, 0.5)
            };
            sc.members.push((block.id.clone(), m, q));
            truth.push(FaultSpec {
                component: block,
                symptom: Symptom::Loss,
                severity: q,
                ecmp_fraction: Some(1.0 / mp.members as f64),
            });
        }
    }
    for t in &truth {
        if t.component.kind == Kind::Link {
            sc.links.push((t.component.id.clone(), t.severity));
        }
    }
    (fi, sc, truth)
}

/// The fabrics, each with ToR-mesh peers added to the skeleton (one pair
/// per ordered pair of ToRs of a rail, as the exporter's `tor_mesh`
/// source probes): they let the traces reveal which links enter the same
/// spine member.
fn fabrics() -> Vec<(Fabric, Multipath)> {
    link_fabrics()
        .into_iter()
        .map(|(spec, mp)| {
            let mut f = Fabric::new(spec);
            add_tor_mesh(&mut f);
            (f, mp)
        })
        .collect()
}

fn add_tor_mesh(f: &mut Fabric) {
    let s = f.spec.clone();
    let segments = s.hosts / s.hosts_per_tor.max(1);
    let node = |h: usize, r: usize| ((h * s.rails + r) * s.nodes_per_nic) as u32;
    for r in 0..s.rails {
        for gi in 0..segments {
            for gj in (0..segments).filter(|&g| g != gi) {
                let hi = gi * s.hosts_per_tor + gj % s.hosts_per_tor;
                let hj = gj * s.hosts_per_tor + gi % s.hosts_per_tor;
                f.pairs.push((node(hi, r), node(hj, r)));
            }
        }
    }
    f.pairs.sort_unstable();
    f.pairs.dedup();
}

fn pairs_of(
    k: usize,
    seed: u64,
    fabrics: &[(Fabric, Multipath)],
) -> (Vec<PairStats>, Vec<FaultSpec>) {
    let (fi, sc, truth) = link_scenario(k, seed, fabrics);
    (pair_stats(&fabrics[fi].0, fabrics[fi].1, &sc), truth)
}

/// Run `n` link scenarios through the engine and the voting reference.
pub fn run_links(n: usize, seed: u64, config: &Config) -> Accuracy {
    let fabrics = fabrics();
    let (mut engine, mut vote) = (Score::default(), Score::default());
    for k in 0..n {
        let (pairs, truth) = pairs_of(k, seed, &fabrics);
        let t = Instant::now();
        let (report, _) = analyze_timed(&pairs, config);
        engine.add(k, &truth, &report, t.elapsed());
        let t = Instant::now();
        let vr = voting::analyze(&pairs);
        vote.add(k, &truth, &vr, t.elapsed());
    }
    Accuracy {
        scenarios: n,
        engine,
        voting: vote,
    }
}

/// Truth and engine report of link scenario `k`, as JSON lines.
pub fn show_link(k: usize, seed: u64, config: &Config) -> Result<String, serde_json::Error> {
    let fabrics = fabrics();
    let (fi, sc, truth) = link_scenario(k, seed, &fabrics);
    let pairs = pair_stats(&fabrics[fi].0, fabrics[fi].1, &sc);
    let report = analyze(&pairs, config);
    Ok(format!(
        "fabric: {} {}\ntruth: {}\nengine: {}",
        serde_json::to_string(&fabrics[fi].0.spec)?,
        serde_json::to_string(&fabrics[fi].1)?,
        serde_json::to_string(&truth)?,
        serde_json::to_string(&report)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run: link faults are found, and the ToR above a faulty link
    /// is not blamed.
    #[test]
    fn link_faults_are_localized_to_the_link() {
        let acc = run_links(20, 5, &Config::default());
        let e = &acc.engine;
        let link = e
            .breakdown
            .iter()
            .find(|(l, _, _)| l == "kind=link")
            .expect("link faults in the run");
        assert!(link.1 * 10 >= link.2 * 8, "{acc}");
        assert!(e.precision() >= 0.9, "{acc}");
        assert_eq!(e.healthy_with_fault, 0, "{acc}");
    }
}
