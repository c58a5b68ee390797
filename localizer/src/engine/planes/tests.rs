//! A fabric measured on both planes: four hosts under two ToRs and one
//! spine, two containers on each, one NIC each. Overlay pairs join every
//! two containers on different hosts; underlay pairs every two hosts.

use super::*;
use crate::engine::model::Symptom;

const HOSTS: usize = 4;
const CONTAINERS: usize = 2;

fn ident(node: String, host: usize) -> Identity {
    Identity {
        node,
        nic: format!("h{host}-nic"),
        host: format!("h{host}"),
        tor: format!("t{}", host / 2),
        spine: "s0".into(),
        ..Identity::default()
    }
}

fn pair(src: Identity, dst: Identity, loss: f64) -> PairStats {
    PairStats {
        src,
        dst,
        rounds: 10.0,
        failed_dials: 0.0,
        sent: 1000.0,
        lost: (1000.0 * loss).round(),
        rtt_seconds: Some(10e-6),
        rtt_samples: 10.0,
        ..PairStats::default()
    }
}

/// Overlay pairs, `loss(src, dst)` by container name.
pub fn overlay(loss: impl Fn(&Identity, &Identity) -> f64) -> Vec<PairStats> {
    let ends: Vec<Identity> = (0..HOSTS)
        .flat_map(|h| (0..CONTAINERS).map(move |c| ident(format!("h{h}-c{c}"), h)))
        .collect();
    let mut out = Vec::new();
    for a in &ends {
        for b in &ends {
            if a.host != b.host {
                out.push(pair(a.clone(), b.clone(), loss(a, b)));
            }
        }
    }
    out
}

/// Underlay pairs between the hosts' RNICs.
pub fn underlay(loss: impl Fn(&Identity, &Identity) -> f64) -> Vec<PairStats> {
    let ends: Vec<Identity> = (0..HOSTS).map(|h| ident(format!("h{h}-rnic"), h)).collect();
    let mut out = Vec::new();
    for a in &ends {
        for b in &ends {
            if a != b {
                out.push(pair(a.clone(), b.clone(), loss(a, b)));
            }
        }
    }
    out
}

pub fn on_host(h: &str) -> impl Fn(&Identity, &Identity) -> f64 + '_ {
    move |a, b| if a.host == h || b.host == h { 0.1 } else { 0.0 }
}

fn clean(_: &Identity, _: &Identity) -> f64 {
    0.0
}

fn verdicts(r: &PlanesReport) -> Vec<(Kind, &str, Layer, Basis)> {
    r.faults
        .iter()
        .map(|f| (f.fault.kind, f.fault.id.as_str(), f.layer, f.basis))
        .collect()
}

#[test]
fn a_host_failing_only_on_the_overlay_is_its_virtual_switch() {
    let r = analyze_planes(
        &overlay(on_host("h1")),
        &underlay(clean),
        &Config::default(),
    );
    assert_eq!(
        verdicts(&r),
        [(Kind::Vswitch, "h1", Layer::Overlay, Basis::UnderlayClean)]
    );
    assert_eq!(r.faults[0].fault.symptom, Symptom::Loss);
    assert_eq!(r.faults[0].planes, [Plane::Overlay]);
}

#[test]
fn a_host_failing_on_both_planes_is_the_underlays() {
    let r = analyze_planes(
        &overlay(on_host("h1")),
        &underlay(on_host("h1")),
        &Config::default(),
    );
    let v = verdicts(&r);
    assert_eq!(v.len(), 1, "{v:?}");
    let (kind, id, layer, basis) = v[0];
    assert!(
        [(Kind::Nic, "h1-nic"), (Kind::Host, "h1")].contains(&(kind, id)),
        "{v:?}"
    );
    assert_eq!((layer, basis), (Layer::Underlay, Basis::BothPlanes));
    assert_eq!(r.faults[0].planes, [Plane::Underlay, Plane::Overlay]);
}

#[test]
fn one_container_failing_over_a_clean_underlay_is_its_virtual_port() {
    let lossy = |a: &Identity, b: &Identity| {
        if a.node == "h1-c0" || b.node == "h1-c0" {
            0.1
        } else {
            0.0
        }
    };
    let r = analyze_planes(&overlay(lossy), &underlay(clean), &Config::default());
    assert_eq!(
        verdicts(&r),
        [(Kind::Vport, "h1-c0", Layer::Overlay, Basis::UnderlayClean)]
    );
    // Its NIC, which only it uses on the overlay, is clean on the underlay.
    assert!(
        r.faults[0]
            .fault
            .equivalent
            .iter()
            .all(|c| c.kind != Kind::Nic),
        "{:?}",
        r.faults[0].fault.equivalent
    );
}

#[test]
fn without_underlay_probes_the_layer_is_undetermined_and_the_verdict_stands() {
    let r = analyze_planes(&overlay(on_host("h1")), &[], &Config::default());
    let v = verdicts(&r);
    assert_eq!(v.len(), 1, "{v:?}");
    // One NIC a host: the NIC and the host cannot be told apart.
    assert!(["h1", "h1-nic"].contains(&v[0].1), "{v:?}");
    assert_eq!(
        (v[0].2, v[0].3),
        (Layer::Undetermined, Basis::NoUnderlayCoverage)
    );
}

#[test]
fn an_underlay_fault_the_overlay_does_not_show_is_the_underlays() {
    let r = analyze_planes(
        &overlay(clean),
        &underlay(on_host("h2")),
        &Config::default(),
    );
    let v = verdicts(&r);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].2, v[0].3), (Layer::Underlay, Basis::UnderlayOnly));
    assert_ne!(
        v[0].0,
        Kind::Node,
        "an underlay endpoint is named as its NIC or host"
    );
}

#[test]
fn a_tor_failing_only_on_the_overlay_is_left_undetermined() {
    let tor = |a: &Identity, b: &Identity| {
        if a.tor == "t0" || b.tor == "t0" {
            0.1
        } else {
            0.0
        }
    };
    let r = analyze_planes(&overlay(tor), &underlay(clean), &Config::default());
    assert_eq!(
        verdicts(&r),
        [(
            Kind::Tor,
            "t0",
            Layer::Undetermined,
            Basis::FabricOnOverlayOnly
        )]
    );
}

#[test]
fn healthy_planes_give_nothing() {
    let r = analyze_planes(&overlay(clean), &underlay(clean), &Config::default());
    assert!(r.faults.is_empty(), "{:?}", verdicts(&r));
    assert_eq!(r.pairs_observed, 48 + 12);
}

/// A verdict as the engine gives it, with its equivalents.
fn fault(kind: Kind, id: &str, equivalent: &[(Kind, &str)]) -> Fault {
    Fault {
        kind,
        id: id.into(),
        score: 0.1,
        p_value: 1e-9,
        symptom: Symptom::Loss,
        pairs: 3,
        equivalent: equivalent
            .iter()
            .map(|(k, i)| Component::new(*k, i.to_string()))
            .collect(),
        hit_pairs: Vec::new(),
    }
}

#[test]
fn equivalents_the_other_plane_tells_apart_are_dropped() {
    let (o, u) = (overlay(clean), underlay(clean));
    // A container with its own NIC: the overlay cannot tell them apart,
    // the clean underlay can.
    let c = fault(Kind::Node, "h1-c0", &[(Kind::Nic, "h1-nic")]);
    let out = disentangle(&[c], &[], &o, &u);
    assert_eq!(out[0].fault.kind, Kind::Vport);
    assert!(out[0].fault.equivalent.is_empty(), "{:?}", out[0].fault);
    // An underlay endpoint named as its NIC does not list that NIC again.
    let e = fault(Kind::Node, "h2-rnic", &[(Kind::Nic, "h2-nic")]);
    let out = disentangle(&[], &[e], &o, &u);
    assert_eq!(
        (out[0].fault.kind, out[0].fault.id.as_str()),
        (Kind::Nic, "h2-nic")
    );
    assert!(out[0].fault.equivalent.is_empty(), "{:?}", out[0].fault);
}

/// The overlay cannot tell two containers apart (one's verdict lists the
/// other as equivalent); the underlay blames the NIC of the other: one
/// underlay fault, seen on both planes.
#[test]
fn an_overlay_verdict_stands_for_its_equivalents() {
    let (o, u) = (overlay(clean), underlay(clean));
    let c = fault(Kind::Node, "h1-c0", &[(Kind::Node, "h2-c0")]);
    let e = fault(Kind::Node, "h2-rnic", &[]);
    let out = disentangle(&[c], &[e], &o, &u);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        (out[0].fault.kind, out[0].fault.id.as_str(), out[0].basis),
        (Kind::Nic, "h2-nic", Basis::BothPlanes)
    );
}
