//! Multipath on a simulated fabric: every spine block has several member
//! switches, every pair is probed over K flows, and each flow hashes onto
//! a member — forward and reply independently, as ECMP hashes the two
//! directions' 5-tuples — so a pair's flows spread over its ECMP paths.
//!
//! Links, named like traced hops by the address of the interface they
//! enter: `in` (host into its ToR), `up` (ToR into a member of its block),
//! `core` (a member of one block into a member of another) and `down`
//! (member into the destination ToR). Faults: the base scenario's
//! component faults and noise (per pair, as in [`super::scenario`]), plus
//! lossy or dead member links and whole spine members. The output is the
//! engine's pairs with their per-path rows, as the online loop assembles
//! them from `skeletonhunter_path_*` (the CSV has no flow data).

use super::fabric::Fabric;
use super::rng::{hash_str, hashed, mix, Rng};
use super::scenario::{pair_effects, PairEffect, Scenario};
use crate::engine::model::{PairStats, PathObs};
use skeletonhunter_common::topology::{path_class, Identity, PathClass};

/// The multipath shape over a [`Fabric`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Multipath {
    /// Member switches per spine block.
    pub members: usize,
    /// Flows per pair.
    pub flows: usize,
}

/// A scenario with faults below the spine block.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MultipathScenario {
    /// Component faults, noise and background.
    pub base: Scenario,
    /// Faulty member links: (address, loss; 1 = dead).
    pub links: Vec<(String, f64)>,
    /// Faulty spine members: (block id, member, loss).
    pub members: Vec<(String, usize, f64)>,
}

/// The link from host `n`'s NIC into its ToR.
pub fn link_in(n: &Identity) -> String {
    hashed(&format!("in/{}/{}", n.host, n.tor))
}

/// The link from ToR `tor` up into member `m` of its block.
pub fn link_up(tor: &str, m: usize) -> String {
    hashed(&format!("up/{tor}/{m}"))
}

/// The link from member `m` of `block` down into ToR `tor`.
pub fn link_down(block: &str, m: usize, tor: &str) -> String {
    hashed(&format!("down/{block}/{m}/{tor}"))
}

fn link_core(a: &str, ma: usize, b: &str, mb: usize) -> String {
    hashed(&format!("core/{a}/{ma}/{b}/{mb}"))
}

/// One direction of one flow: its hops and the spine members it crosses.
fn route(
    a: &Identity,
    b: &Identity,
    ma: usize,
    mb: usize,
) -> (Vec<String>, Vec<(&'static str, usize)>) {
    match path_class(a, b) {
        PathClass::SameHost => (Vec::new(), Vec::new()),
        PathClass::SameTor => (vec![link_in(a)], Vec::new()),
        PathClass::CrossTor if a.spine == b.spine => (
            vec![
                link_in(a),
                link_up(&a.tor, ma),
                link_down(&a.spine, ma, &b.tor),
            ],
            vec![("a", ma)],
        ),
        PathClass::CrossTor => (
            vec![
                link_in(a),
                link_up(&a.tor, ma),
                link_core(&a.spine, ma, &b.spine, mb),
                link_down(&b.spine, mb, &b.tor),
            ],
            vec![("a", ma), ("b", mb)],
        ),
    }
}

/// Survival of one direction through the faulty links and members.
fn survival(
    sc: &MultipathScenario,
    hops: &[String],
    members: &[(&str, usize)],
    ends: [&Identity; 2],
) -> f64 {
    let mut s = 1.0;
    for h in hops {
        for (addr, q) in &sc.links {
            if addr == h {
                s *= 1.0 - q;
            }
        }
    }
    for &(side, m) in members {
        let block = if side == "a" {
            &ends[0].spine
        } else {
            &ends[1].spine
        };
        for (b, mm, q) in &sc.members {
            if b == block && *mm == m {
                s *= 1.0 - q;
            }
        }
    }
    s
}

/// Member choices of flow `f` of pair `i`: (forward src-side, forward
/// dst-side, reply dst-side, reply src-side).
fn hashes(seed: u64, i: usize, f: usize, members: usize) -> [usize; 4] {
    let base = mix(seed ^ 0x4d50_4154 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        ^ (f as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    [1u64, 2, 3, 4]
        .map(|k| (mix(base ^ k.wrapping_mul(0x1656_67b1)) % members.max(1) as u64) as usize)
}

/// Per-flow forward path and loss of pair (`a`, `b`), pair index `i`.
fn flows(
    sc: &MultipathScenario,
    mp: Multipath,
    i: usize,
    a: &Identity,
    b: &Identity,
) -> Vec<(Vec<String>, f64)> {
    (0..mp.flows.max(1))
        .map(|f| {
            let [fa, fb, rb, ra] = hashes(sc.base.seed, i, f, mp.members);
            let (fwd, fwd_m) = route(a, b, fa, fb);
            let (rev, rev_m) = route(b, a, rb, ra);
            let s = survival(sc, &fwd, &fwd_m, [a, b]) * survival(sc, &rev, &rev_m, [b, a]);
            (fwd, 1.0 - s)
        })
        .collect()
}

/// The pairs of `sc` on `fabric` with `mp`, per-path rows included.
pub fn pair_stats(fabric: &Fabric, mp: Multipath, sc: &MultipathScenario) -> Vec<PairStats> {
    let effects = pair_effects(fabric, &sc.base);
    let mut rng = Rng::new(sc.base.seed ^ 0x6d75_6c74);
    let mut out = Vec::with_capacity(fabric.pairs.len());
    for (i, &(a, b)) in fabric.pairs.iter().enumerate() {
        if sc.base.pair_missing(i) {
            continue;
        }
        let (na, nb) = (&fabric.nodes[a as usize], &fabric.nodes[b as usize]);
        let flows = flows(sc, mp, i, na, nb);
        out.push(probe_pair(
            fabric,
            sc,
            &effects[i],
            &flows,
            na,
            nb,
            &mut rng,
        ));
    }
    out
}

/// Probe one pair for the fabric's rounds: each round dials over one flow
/// and, when connected, sends its packets spread over every flow.
fn probe_pair(
    fabric: &Fabric,
    sc: &MultipathScenario,
    e: &PairEffect,
    flows: &[(Vec<String>, f64)],
    a: &Identity,
    b: &Identity,
    rng: &mut Rng,
) -> PairStats {
    let k = flows.len().max(1);
    let per_flow = (fabric.spec.packets_per_round as usize / k).max(1) as u32;
    let mut paths: Vec<PathObs> = Vec::new();
    let (mut failed, mut delays) = (0.0, Vec::new());
    for round in 0..fabric.spec.rounds {
        let (loss, unreach, delay_us) = e.in_round(round);
        let dial_flow = flows[round % k].1;
        let dial_fail = 1.0
            - (1.0 - sc.base.background_dial_failure)
                * (1.0 - unreach)
                * (1.0 - (1.0 - (1.0 - loss) * (1.0 - dial_flow)).powi(3));
        if rng.f64() < dial_fail {
            failed += 1.0;
            continue;
        }
        for (hops, flow_loss) in flows {
            let p = 1.0 - (1.0 - sc.base.background_loss) * (1.0 - loss) * (1.0 - flow_loss);
            let lost = f64::from(rng.binomial(per_flow, p));
            let row = match paths.iter().position(|x| &x.hops == hops) {
                Some(j) => &mut paths[j],
                None => {
                    paths.push(PathObs {
                        id: format!("{:08x}", hash_str(&hops.join(",")) as u32),
                        hops: hops.clone(),
                        ..PathObs::default()
                    });
                    paths.last_mut().expect("just pushed")
                }
            };
            row.probes += f64::from(per_flow);
            row.lost += lost;
        }
        delays.push(delay_us);
    }
    let base_us = match path_class(a, b) {
        PathClass::SameHost => 4.0,
        PathClass::SameTor => 9.0,
        PathClass::CrossTor => 14.0,
    };
    let (sent, lost) = paths
        .iter()
        .fold((0.0, 0.0), |(s, l), p| (s + p.probes, l + p.lost));
    delays.sort_by(f64::total_cmp);
    let rtt = (sent > lost && !delays.is_empty())
        .then(|| (base_us * (0.05 * rng.normal()).exp() + delays[delays.len() / 2]) * 1e-6);
    paths.retain(|p| !p.hops.is_empty());
    PairStats {
        src: a.clone(),
        dst: b.clone(),
        rounds: fabric.spec.rounds as f64,
        failed_dials: failed,
        sent,
        lost,
        rtt_seconds: rtt,
        rtt_samples: if rtt.is_some() { sent - lost } else { 0.0 },
        rtt_spread_seconds: None,
        lossy_rounds: None,
        lossy_rows: Vec::new(),
        round_seconds: None,
        hops: Vec::new(),
        paths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fabric::FabricSpec;

    #[test]
    fn flows_spread_over_members_and_a_dead_link_kills_its_flows() {
        let fabric = Fabric::new(FabricSpec {
            hosts: 16,
            rails: 1,
            hosts_per_tor: 4,
            tors_per_spine: 2,
            ..Default::default()
        });
        let mp = Multipath {
            members: 2,
            flows: 8,
        };
        let mut sc = MultipathScenario {
            base: Scenario::healthy(3),
            links: Vec::new(),
            members: Vec::new(),
        };
        let healthy = pair_stats(&fabric, mp, &sc);
        assert_eq!(healthy.len(), fabric.pairs.len());
        let cross: Vec<&PairStats> = healthy.iter().filter(|p| p.src.tor != p.dst.tor).collect();
        assert!(cross.iter().any(|p| p.paths.len() == 2));
        for p in &healthy {
            let sum: f64 = p.paths.iter().map(|x| x.probes).sum();
            assert!(p.paths.is_empty() || (sum - p.sent).abs() < 1e-9);
        }
        let victim = cross[0];
        let dead = link_up(&victim.src.tor, 0);
        sc.links.push((dead.clone(), 1.0));
        for p in pair_stats(&fabric, mp, &sc) {
            for x in &p.paths {
                if x.hops.contains(&dead) {
                    assert_eq!(x.lost, x.probes, "{x:?}");
                }
            }
        }
    }
}
