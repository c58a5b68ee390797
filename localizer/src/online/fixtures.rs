//! Identities and faults the online modules' tests build their cases
//! from.

use crate::engine::model::{Fault, Symptom};
use crate::online::alerts::Finding;
use skeletonhunter_common::topology::{path, Component, Identity, Kind};
use std::collections::BTreeMap;

/// Node `node` under ToR `tor` and spine `s1`, on a NIC and a host named
/// after it.
pub(super) fn identity(node: &str, tor: &str) -> Identity {
    Identity {
        node: node.into(),
        nic: format!("nic-{node}"),
        host: format!("host-{node}"),
        tor: tor.into(),
        spine: "s1".into(),
        ..Default::default()
    }
}

/// Node `node` on host `t<T>-h<H>` under ToR `tor<T>` of the e2e fabric
/// shape (one spine, one pod), in `tenant`.
pub(super) fn fabric_node(node: String, t: u32, h: u32, tenant: String) -> Identity {
    Identity {
        node,
        nic: format!("nic-t{t}-h{h}"),
        host: format!("host-t{t}-h{h}"),
        tor: format!("tor{t}"),
        spine: "spine0".into(),
        pod: "pod0".into(),
        tenant,
    }
}

/// A loss fault of component `kind`/`id` (score 0.3, p 1e-9) explaining
/// the analyzed pairs `hit_pairs`.
pub(super) fn fault(kind: Kind, id: &str, hit_pairs: Vec<usize>) -> Fault {
    Fault {
        kind,
        id: id.into(),
        score: 0.3,
        p_value: 1e-9,
        symptom: Symptom::Loss,
        pairs: 2,
        equivalent: vec![],
        hit_pairs,
    }
}

/// A finding of `component` with `symptom` (score 0.3, p 1e-9) whose hit
/// pairs are `hit_pairs`, with no context, evidence or jobs.
pub(super) fn finding(
    component: Component,
    symptom: Symptom,
    hit_pairs: Vec<(Identity, Identity)>,
) -> Finding {
    Finding {
        component,
        symptom,
        score: 0.3,
        p_value: 1e-9,
        pairs: hit_pairs.len(),
        equivalent: Vec::new(),
        context: BTreeMap::new(),
        evidence: Vec::new(),
        jobs: Vec::new(),
        hit_pairs,
        layer: None,
    }
}

/// Container `t<T>-h<H>-c<C>` of the e2e fabric shape (2 ToRs x 3 hosts x
/// 2 containers under one spine), in job `job<C>`.
pub(super) fn e2e_node(t: u32, h: u32, c: u32) -> Identity {
    fabric_node(format!("t{t}-h{h}-c{c}"), t, h, format!("job{c}"))
}

/// Every directed same-rail pair of the e2e fabric shape.
pub(super) fn e2e_pairs() -> Vec<(Identity, Identity)> {
    let mut out = Vec::new();
    for c in 0..2 {
        let nodes: Vec<Identity> = (0..2)
            .flat_map(|t| (0..3).map(move |h| e2e_node(t, h, c)))
            .collect();
        for a in &nodes {
            for b in &nodes {
                if a.node != b.node {
                    out.push((a.clone(), b.clone()));
                }
            }
        }
    }
    out
}

/// A finding of `kind`/`id` with `symptom` on every e2e-shape pair that
/// crosses it.
pub(super) fn e2e_finding(kind: Kind, id: &str, symptom: Symptom) -> Finding {
    let component = Component::new(kind, id);
    let hit_pairs = e2e_pairs()
        .into_iter()
        .filter(|(a, b)| path(a, b).contains(&component))
        .collect();
    finding(component, symptom, hit_pairs)
}
