//! Disentangle, then localize: which network a verdict belongs to when the
//! probes measured both the overlay (container to container, through the
//! containers' virtual ports, the hosts' virtual switches and tunnels) and
//! the underlay (host or RNIC to host, through NICs, ToRs and spines).
//!
//! Overlay traffic rides on the underlay, so an underlay fault shows on
//! both planes, while an overlay fault shows on the overlay alone. Each
//! plane is analyzed on its own by the one engine; then every overlay
//! verdict is set against the underlay:
//!
//! - the underlay blames the same physical component (the verdict's NIC or
//!   host, its ToR, its spine): the fault is the underlay's, reported once
//!   with both planes as its evidence;
//! - the underlay measured that component and found it clean: the fault is
//!   the overlay's own, and a container or host verdict becomes its virtual
//!   port or virtual switch (the team that owns them is paged, not the
//!   network's). A ToR or spine that only the overlay sees failing is left
//!   as it is, undetermined: neither layer explains it alone (an MTU too
//!   small for the encapsulation does this), so the joint verdict stands;
//! - the underlay did not measure it: undetermined, the verdict as it is.
//!
//! Underlay verdicts the overlay does not share are the underlay's.

use super::model::{Config, Fault, HostStack, PairStats, Report, Symptom};
use super::pipeline::{analyze, analyze_with};
use serde::Serialize;
use skeletonhunter_common::topology::{Component, Identity, Kind, Plane};
use std::collections::{HashMap, HashSet};

skeletonhunter_common::labelled_enum! {
    /// Which network a verdict is on.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Layer {
        /// The containers' virtual network.
        Overlay,
        /// The physical network.
        Underlay,
        /// Neither plane explains it alone; the verdict is the joint one.
        Undetermined,
    }
}

skeletonhunter_common::labelled_enum! {
    /// Why a verdict got its layer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Basis {
        /// Both planes show it on the same physical component.
        BothPlanes,
        /// The overlay shows it; the underlay measured the component clean.
        UnderlayClean,
        /// The underlay shows it; the overlay does not.
        UnderlayOnly,
        /// The overlay shows it on a ToR or spine the underlay finds clean.
        FabricOnOverlayOnly,
        /// The overlay shows it; no underlay probe crosses the component.
        NoUnderlayCoverage,
    }
}

impl Basis {
    /// What it means, for an alert's description.
    pub fn explain(self) -> &'static str {
        match self {
            Basis::BothPlanes => "the container and the host probes both show it",
            Basis::UnderlayClean => {
                "the container probes show it, the host probes over the same hardware are clean"
            }
            Basis::UnderlayOnly => "the host probes show it",
            Basis::FabricOnOverlayOnly => {
                "only the container probes show it on a switch the host probes find clean; neither network explains it alone"
            }
            Basis::NoUnderlayCoverage => "no host probe crosses it, so the layer is unknown",
        }
    }
}

/// A verdict with its layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayeredFault {
    /// The verdict (a container or host renamed to its virtual port or
    /// virtual switch when the layer is the overlay). `hit_pairs` index
    /// the pairs of the plane it was found on (`planes[0]`).
    #[serde(flatten)]
    pub fault: Fault,
    /// The network it is on.
    pub layer: Layer,
    /// Why.
    pub basis: Basis,
    /// The planes whose probes show it.
    pub planes: Vec<Plane>,
}

/// Both planes analyzed and set against each other.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanesReport {
    /// Most-blamed first.
    pub faults: Vec<LayeredFault>,
    /// Pairs analyzed per plane.
    pub pairs_observed: usize,
    /// Pairs anomalous for at least one symptom, both planes.
    pub pairs_anomalous: usize,
}

/// Analyze each plane, then disentangle (see the module docs).
pub fn analyze_planes(
    overlay: &[PairStats],
    underlay: &[PairStats],
    config: &Config,
) -> PlanesReport {
    let o = analyze(overlay, config);
    let u = analyze(underlay, config);
    let mut faults = disentangle(&o.faults, &u.faults, overlay, underlay);
    faults.sort_by(|a, b| b.fault.score.total_cmp(&a.fault.score));
    PlanesReport {
        faults,
        pairs_observed: o.pairs_observed + u.pairs_observed,
        pairs_anomalous: o.pairs_anomalous + u.pairs_anomalous,
    }
}

/// The physical components an identity's endpoint sits on, for setting
/// the planes against each other: its NIC and host.
fn physical(ident: &Identity) -> impl Iterator<Item = (Kind, &str)> {
    [
        (Kind::Nic, ident.nic.as_str()),
        (Kind::Host, ident.host.as_str()),
    ]
    .into_iter()
    .filter(|(_, id)| !id.is_empty())
}

/// Endpoint identities by node id, from a plane's pairs.
fn endpoints(pairs: &[PairStats]) -> HashMap<&str, &Identity> {
    pairs
        .iter()
        .flat_map(|p| [&p.src, &p.dst])
        .map(|i| (i.node.as_str(), i))
        .collect()
}

/// The physical components one component of a verdict names: a NIC,
/// host, ToR or spine as itself; an endpoint (node) as its NIC and host; a
/// NIC with its host.
fn physical_of<'a>(
    kind: Kind,
    id: &'a str,
    ends: &HashMap<&str, &'a Identity>,
) -> Vec<(Kind, &'a str)> {
    match kind {
        Kind::Node => ends
            .get(id)
            .map(|i| physical(i).collect())
            .unwrap_or_default(),
        Kind::Nic => {
            // A NIC's host, where the pairs say it.
            let host = ends
                .values()
                .find(|i| i.nic == id && !i.host.is_empty())
                .map(|i| (Kind::Host, i.host.as_str()));
            std::iter::once((Kind::Nic, id)).chain(host).collect()
        }
        _ => vec![(kind, id)],
    }
}

/// The physical components a verdict names, its equivalents' included:
/// it stands for any of them.
fn named<'a>(f: &'a Fault, ends: &HashMap<&str, &'a Identity>) -> Vec<(Kind, &'a str)> {
    let mut out: Vec<(Kind, &str)> = std::iter::once((f.kind, f.id.as_str()))
        .chain(f.equivalent.iter().map(|c| (c.kind, c.id.as_str())))
        .flat_map(|(kind, id)| physical_of(kind, id, ends))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// An underlay verdict as the physical component it names: an underlay
/// endpoint (a host's RNIC probing) is its NIC, or its host when the
/// pairs name no NIC.
fn physical_fault(f: &Fault, ends: &HashMap<&str, &Identity>) -> Fault {
    let as_physical = |c: Component| -> Component {
        let found = (c.kind == Kind::Node)
            .then(|| ends.get(c.id.as_str()).and_then(|i| physical(i).next()))
            .flatten();
        match found {
            Some((kind, id)) => Component::new(kind, id.to_string()),
            None => c,
        }
    };
    let mut f = f.clone();
    let me = as_physical(f.component());
    (f.kind, f.id) = (me.kind, me.id.clone());
    // An endpoint's equivalents renamed the same way; never itself.
    let mut seen = HashSet::from([me]);
    f.equivalent = std::mem::take(&mut f.equivalent)
        .into_iter()
        .map(as_physical)
        .filter(|c| seen.insert(c.clone()))
        .collect();
    f
}

/// An overlay verdict no underlay verdict shares: the overlay's own when
/// the underlay measured its physical components clean (a container or
/// host becomes its virtual port or switch), else undetermined.
/// `mine` are the physical components of the verdict's own component.
fn overlay_only(f: &Fault, mine: &[(Kind, &str)], covered: &HashSet<(Kind, &str)>) -> LayeredFault {
    let layered = |fault, layer, basis| LayeredFault {
        fault,
        layer,
        basis,
        planes: vec![Plane::Overlay],
    };
    if mine.is_empty() || !mine.iter().all(|c| covered.contains(c)) {
        return layered(f.clone(), Layer::Undetermined, Basis::NoUnderlayCoverage);
    }
    let Some(kind) = Plane::overlay_side(f.kind) else {
        return layered(f.clone(), Layer::Undetermined, Basis::FabricOnOverlayOnly);
    };
    let mut v = f.clone();
    // A virtual switch is named by its host; a NIC's by the host the NIC
    // is on.
    if kind == Kind::Vswitch {
        if let Some((_, host)) = mine.iter().find(|(k, _)| *k == Kind::Host) {
            v.id = host.to_string();
        }
    }
    v.kind = kind;
    // The clean underlay tells the physical components apart from it.
    v.equivalent
        .retain(|c| !covered.contains(&(c.kind, c.id.as_str())));
    layered(v, Layer::Overlay, Basis::UnderlayClean)
}

/// Set each plane's verdicts against the other's (see the module docs).
pub fn disentangle(
    overlay_faults: &[Fault],
    underlay_faults: &[Fault],
    overlay: &[PairStats],
    underlay: &[PairStats],
) -> Vec<LayeredFault> {
    let (o_ends, u_ends) = (endpoints(overlay), endpoints(underlay));
    // What the underlay measured: every physical component its probes cross.
    let covered: HashSet<(Kind, &str)> = underlay
        .iter()
        .flat_map(|p| [&p.src, &p.dst])
        .flat_map(|i| {
            physical(i).chain(
                [(Kind::Tor, i.tor.as_str()), (Kind::Spine, i.spine.as_str())]
                    .into_iter()
                    .filter(|(_, id)| !id.is_empty()),
            )
        })
        .collect();
    let u_named: Vec<Vec<(Kind, &str)>> =
        underlay_faults.iter().map(|f| named(f, &u_ends)).collect();
    let mut shared = vec![false; underlay_faults.len()];
    let mut out = Vec::new();
    for f in overlay_faults {
        let mine = named(f, &o_ends);
        let hit = u_named
            .iter()
            .position(|u| u.iter().any(|c| mine.contains(c)));
        out.push(match hit {
            Some(i) => {
                shared[i] = true;
                LayeredFault {
                    fault: physical_fault(&underlay_faults[i], &u_ends),
                    layer: Layer::Underlay,
                    basis: Basis::BothPlanes,
                    planes: vec![Plane::Underlay, Plane::Overlay],
                }
            }
            None => overlay_only(f, &physical_of(f.kind, &f.id, &o_ends), &covered),
        });
    }
    for (u, shown) in underlay_faults.iter().zip(shared) {
        if !shown {
            out.push(LayeredFault {
                fault: physical_fault(u, &u_ends),
                layer: Layer::Underlay,
                basis: Basis::UnderlayOnly,
                planes: vec![Plane::Underlay],
            });
        }
    }
    // One underlay fault several overlay verdicts point at is reported once.
    let mut seen = HashSet::new();
    out.retain(|l| seen.insert((l.fault.kind, l.fault.id.clone(), l.layer)));
    out
}

// Both planes in one list of pairs, as the online loop reads them: each
// pair's plane is its prober's (`Plane::of` its identity), each plane is
// analyzed apart (busy hosts screened on both), the verdicts set against
// each other, and the result is one report over the whole list.

/// Which network a verdict of a joint report is on, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerNote {
    /// The network.
    pub layer: Layer,
    /// Why.
    pub basis: Basis,
    /// The planes whose probes show it.
    pub planes: Vec<Plane>,
}

/// The pairs of both planes analyzed apart and set against each other:
/// one report whose `hit_pairs` index `pairs`, and beside each of its
/// faults its layer (`None` for a busy host's own delays, which are no
/// network's). `None` when every pair is of one plane: then the caller
/// analyzes them as one network, as ever.
pub fn analyze_joint(
    pairs: &[PairStats],
    stack: &HostStack,
    config: &Config,
) -> Option<(Report, Vec<Option<LayerNote>>)> {
    let planes: Vec<Plane> = pairs.iter().map(|p| Plane::of(&p.src)).collect();
    if !planes.contains(&Plane::Overlay) || !planes.contains(&Plane::Underlay) {
        return None;
    }
    let of =
        |want: Plane| -> Vec<usize> { (0..pairs.len()).filter(|&i| planes[i] == want).collect() };
    let (o_index, u_index) = (of(Plane::Overlay), of(Plane::Underlay));
    let pick =
        |index: &[usize]| -> Vec<PairStats> { index.iter().map(|&i| pairs[i].clone()).collect() };
    let (overlay, underlay) = (pick(&o_index), pick(&u_index));
    let (o, u) = (
        analyze_with(&overlay, stack, config),
        analyze_with(&underlay, stack, config),
    );
    let network = |f: &Fault| f.symptom != Symptom::HostStack;
    let (o_net, o_busy): (Vec<Fault>, Vec<Fault>) = o.faults.into_iter().partition(network);
    let (u_net, u_busy): (Vec<Fault>, Vec<Fault>) = u.faults.into_iter().partition(network);
    let mut out: Vec<(Fault, Option<LayerNote>)> = Vec::new();
    for l in disentangle(&o_net, &u_net, &overlay, &underlay) {
        let index = if l.planes.first() == Some(&Plane::Overlay) {
            &o_index
        } else {
            &u_index
        };
        let note = LayerNote {
            layer: l.layer,
            basis: l.basis,
            planes: l.planes,
        };
        out.push((reindexed(l.fault, index), Some(note)));
    }
    // A busy host is busy for both planes: reported once.
    let busy = o_busy.into_iter().map(|f| reindexed(f, &o_index));
    for f in busy.chain(u_busy.into_iter().map(|f| reindexed(f, &u_index))) {
        if !out
            .iter()
            .any(|(g, _)| g.component() == f.component() && g.symptom == f.symptom)
        {
            out.push((f, None));
        }
    }
    out.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
    let (faults, notes) = out.into_iter().unzip();
    let mut blame = o.blame;
    blame.extend(u.blame);
    let report = Report {
        faults,
        pairs_observed: o.pairs_observed + u.pairs_observed,
        pairs_anomalous: o.pairs_anomalous + u.pairs_anomalous,
        blame,
    };
    Some((report, notes))
}

/// `f` with its hit pairs indexing the whole list, not its plane's.
fn reindexed(mut f: Fault, index: &[usize]) -> Fault {
    f.hit_pairs = f
        .hit_pairs
        .iter()
        .filter_map(|&i| index.get(i).copied())
        .collect();
    f
}

#[cfg(test)]
mod joint_tests;
#[cfg(test)]
pub(crate) mod tests;
