//! Identities and faults the online modules' tests build their cases
//! from.

use crate::engine::model::{Fault, Symptom};
use crate::online::alerts::Finding;
use skeletonhunter_common::topology::{Component, Identity, Kind};
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
