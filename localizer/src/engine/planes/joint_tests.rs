//! Both planes in one list, the planes read from the probers' identities
//! (a host's own endpoint is named by its host).

use super::*;
use crate::engine::model::HostStack;
use crate::engine::planes::tests::{on_host, overlay, underlay};
use skeletonhunter_common::topology::{Identity, Kind};

/// The overlay and the underlay pairs interleaved (so a plane's index is
/// never the list's), each RNIC endpoint named by its host (as a per-host
/// exporter names itself).
fn both(
    o: impl Fn(&Identity, &Identity) -> f64,
    u: impl Fn(&Identity, &Identity) -> f64,
) -> Vec<PairStats> {
    let mut hosts = underlay(u);
    for p in &mut hosts {
        p.src.node = p.src.host.clone();
        p.dst.node = p.dst.host.clone();
    }
    let mut containers = overlay(o).into_iter();
    let mut pairs = Vec::new();
    for h in hosts {
        pairs.push(h);
        pairs.extend(containers.next());
    }
    pairs.extend(containers);
    pairs
}

fn clean(_: &Identity, _: &Identity) -> f64 {
    0.0
}

fn joint(pairs: &[PairStats]) -> (Report, Vec<Option<LayerNote>>) {
    analyze_joint(pairs, &HostStack::default(), &Config::default()).expect("two planes")
}

#[test]
fn one_plane_is_left_to_the_plain_analysis() {
    let pairs = overlay(on_host("h1"));
    assert!(analyze_joint(&pairs, &HostStack::default(), &Config::default()).is_none());
    let hosts: Vec<PairStats> = both(clean, clean)
        .into_iter()
        .filter(|p| Plane::of(&p.src) == Plane::Underlay)
        .collect();
    assert!(!hosts.is_empty());
    assert!(analyze_joint(&hosts, &HostStack::default(), &Config::default()).is_none());
}

#[test]
fn an_overlay_fault_over_a_clean_underlay_indexes_the_whole_list() {
    let pairs = both(on_host("h1"), clean);
    let (r, notes) = joint(&pairs);
    let named: Vec<(Kind, &str)> = r.faults.iter().map(|f| (f.kind, f.id.as_str())).collect();
    assert_eq!(named, [(Kind::Vswitch, "h1")]);
    let note = notes[0].as_ref().expect("a network verdict has a layer");
    assert_eq!(
        (note.layer, note.basis),
        (Layer::Overlay, Basis::UnderlayClean)
    );
    let hit = &r.faults[0].hit_pairs;
    assert!(!hit.is_empty());
    for &i in hit {
        let p = &pairs[i];
        assert_eq!(Plane::of(&p.src), Plane::Overlay, "pair {i}");
        assert!(p.src.host == "h1" || p.dst.host == "h1", "pair {i}");
    }
    assert_eq!(r.pairs_observed, pairs.len());
}

#[test]
fn a_fault_on_both_planes_is_the_underlays_with_underlay_pairs() {
    let pairs = both(on_host("h1"), on_host("h1"));
    let (r, notes) = joint(&pairs);
    assert_eq!(r.faults.len(), 1, "{:?}", r.faults);
    let f = &r.faults[0];
    assert!([Kind::Nic, Kind::Host].contains(&f.kind), "{f:?}");
    let note = notes[0].as_ref().expect("layer");
    assert_eq!(
        (note.layer, note.basis),
        (Layer::Underlay, Basis::BothPlanes)
    );
    assert!(f
        .hit_pairs
        .iter()
        .all(|&i| Plane::of(&pairs[i].src) == Plane::Underlay));
    assert!(!f.hit_pairs.is_empty());
}
