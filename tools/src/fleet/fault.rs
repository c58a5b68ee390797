//! The fleet's fault spec, `<kind>=<name>:<effect>=<value>`, and what the
//! faults do to one pair: pure functions, so the maths is unit-tested.
//!
//! `kind` is a path component kind (`node`, `nic`, `host`, `tor`, `spine`);
//! `name` is the component's id as `skeletonhunter_node_info` shows it, or
//! its index among the fabric's components of that kind (ids are hashed,
//! so an index is what a person types); `effect` is `loss` (a ratio in
//! [0, 1]) or `latency` (a duration added to every answered probe, e.g.
//! `200us`).

use skeletonhunter_common::duration;
use skeletonhunter_common::topology::{path, Component, Identity, Kind, UnknownKind};
use skeletonhunter_localizer::sim::Fabric;
use std::collections::BTreeSet;
use std::time::Duration;

/// Longest latency a fault may add: beyond it probes would time out in a
/// real exporter, which the fleet does not model.
pub const MAX_LATENCY: Duration = Duration::from_secs(10);

/// What a faulty component does to every pair whose path crosses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Effect {
    /// Extra packet loss, a ratio in [0, 1].
    Loss(f64),
    /// Extra round-trip time of every answered probe.
    Latency(Duration),
}

/// One injected fault.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetFault {
    /// The faulty component.
    pub component: Component,
    /// What it does.
    pub effect: Effect,
}

/// Why a fault spec was refused; each names the spec as given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// Not `kind=name:effect=value`.
    #[error(
        "fault {0:?}: expected <kind>=<name>:loss=<ratio> or <kind>=<name>:latency=<duration>"
    )]
    Syntax(String),
    /// Not a kind at all.
    #[error("fault {input:?}: {reason}")]
    Kind {
        /// As given.
        input: String,
        /// Why.
        reason: UnknownKind,
    },
    /// A kind no probe path of the fleet crosses (pods, tenants, hops, links).
    #[error("fault {input:?}: {kind} is not a component of the fleet's probe paths (node, nic, host, tor, spine)")]
    NotOnPath {
        /// As given.
        input: String,
        /// The kind.
        kind: Kind,
    },
    /// Neither an id nor an index of a component of that kind.
    #[error("fault {input:?}: no {kind} named {name:?} (ids as in skeletonhunter_node_info, or an index below {count})")]
    NoSuchComponent {
        /// As given.
        input: String,
        /// The kind.
        kind: Kind,
        /// The name as given.
        name: String,
        /// How many components of that kind the fabric has.
        count: usize,
    },
    /// An effect other than loss or latency.
    #[error("fault {input:?}: unknown effect {effect:?} (loss, latency)")]
    Effect {
        /// As given.
        input: String,
        /// The effect as written.
        effect: String,
    },
    /// A loss that is not a ratio in [0, 1].
    #[error("fault {input:?}: loss must be a ratio in [0, 1], got {value:?}")]
    Loss {
        /// As given.
        input: String,
        /// The value as written.
        value: String,
    },
    /// A latency that is not a duration in (0, 10s].
    #[error(
        "fault {input:?}: latency must be a duration in (0, 10s] such as 200us, got {value:?}"
    )]
    Latency {
        /// As given.
        input: String,
        /// The value as written.
        value: String,
    },
}

/// Parse one fault spec against `fabric`.
pub fn parse_fault(fabric: &Fabric, s: &str) -> Result<FleetFault, FaultError> {
    let input = || s.to_string();
    let (target, effect) = s
        .split_once(':')
        .ok_or_else(|| FaultError::Syntax(input()))?;
    let (kind, name) = target
        .split_once('=')
        .ok_or_else(|| FaultError::Syntax(input()))?;
    let (effect, value) = effect
        .split_once('=')
        .ok_or_else(|| FaultError::Syntax(input()))?;
    let kind: Kind = kind.trim().parse().map_err(|reason| FaultError::Kind {
        input: input(),
        reason,
    })?;
    if !kind.is_path_component() || !Kind::ALL.contains(&kind) {
        return Err(FaultError::NotOnPath {
            input: input(),
            kind,
        });
    }
    let component =
        find_component(fabric, kind, name.trim()).ok_or_else(|| FaultError::NoSuchComponent {
            input: input(),
            kind,
            name: name.to_string(),
            count: fabric.components(kind).len(),
        })?;
    let effect = parse_effect(effect.trim(), value.trim()).map_err(|e| e.with_input(input()))?;
    Ok(FleetFault { component, effect })
}

/// The component of `kind` whose id is `name`, else the one at index `name`.
fn find_component(fabric: &Fabric, kind: Kind, name: &str) -> Option<Component> {
    let comps = fabric.components(kind);
    if let Some(c) = comps.iter().find(|c| c.id == name) {
        return Some(c.clone());
    }
    name.parse::<usize>()
        .ok()
        .and_then(|i| comps.get(i).cloned())
}

/// `effect=value` as an [`Effect`]; the error's input is filled in by the caller.
fn parse_effect(effect: &str, value: &str) -> Result<Effect, FaultError> {
    let v = || value.to_string();
    match effect {
        "loss" => match value.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(Effect::Loss(r)),
            _ => Err(FaultError::Loss {
                input: String::new(),
                value: v(),
            }),
        },
        "latency" => match duration::parse(value) {
            Ok(d) if !d.is_zero() && d <= MAX_LATENCY => Ok(Effect::Latency(d)),
            _ => Err(FaultError::Latency {
                input: String::new(),
                value: v(),
            }),
        },
        other => Err(FaultError::Effect {
            input: String::new(),
            effect: other.to_string(),
        }),
    }
}

impl FaultError {
    fn with_input(self, s: String) -> FaultError {
        match self {
            FaultError::Effect { effect, .. } => FaultError::Effect { input: s, effect },
            FaultError::Loss { value, .. } => FaultError::Loss { input: s, value },
            FaultError::Latency { value, .. } => FaultError::Latency { input: s, value },
            other => other,
        }
    }
}

/// What `faults` do to the pair `src -> dst`: (loss ratio, extra RTT in
/// seconds). Losses of the components on its path compound
/// (`1 - Π(1 - loss_c)`), latencies add.
pub fn pair_effect(src: &Identity, dst: &Identity, faults: &[FleetFault]) -> (f64, f64) {
    if faults.is_empty() {
        return (0.0, 0.0);
    }
    let on_path = path(src, dst);
    let (mut delivered, mut extra) = (1.0, 0.0);
    for f in faults.iter().filter(|f| on_path.contains(&f.component)) {
        match f.effect {
            Effect::Loss(r) => delivered *= 1.0 - r,
            Effect::Latency(d) => extra += d.as_secs_f64(),
        }
    }
    (1.0 - delivered, extra)
}

/// The fault set of the fleet test and benchmark: a ToR and a NIC losing
/// 5 %, a spine adding 200 µs, on disjoint parts of the fabric (the NIC and
/// the spine not under the ToR's spine block), so each has pairs of its
/// own. `None` when the fabric has fewer than three spine blocks.
pub fn sample_faults(f: &Fabric) -> Option<Vec<FleetFault>> {
    let tor_node = f.nodes.first()?;
    let far = f
        .nodes
        .iter()
        .find(|n| n.spine != tor_node.spine && n.tor != tor_node.tor)?;
    let spine = f
        .components(Kind::Spine)
        .into_iter()
        .find(|s| s.id != tor_node.spine && s.id != far.spine)?;
    let fault = |kind, id: &str, effect| FleetFault {
        component: Component::new(kind, id),
        effect,
    };
    Some(vec![
        fault(Kind::Tor, &tor_node.tor, Effect::Loss(0.05)),
        fault(Kind::Nic, &far.nic, Effect::Loss(0.05)),
        FleetFault {
            component: spine,
            effect: Effect::Latency(Duration::from_micros(200)),
        },
    ])
}

/// The (kind, id) of every fault of a localizer report (`/report`, `run
/// --once`): what to hold against [`injected`].
pub fn blamed(report: &serde_json::Value) -> BTreeSet<(String, String)> {
    report["faults"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| {
                    let s = |k: &str| f[k].as_str().unwrap_or("").to_string();
                    (s("kind"), s("id"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The (kind, id) of every fault of `faults`.
pub fn injected(faults: &[FleetFault]) -> BTreeSet<(String, String)> {
    faults
        .iter()
        .map(|f| {
            let c = &f.component;
            (c.kind.as_str().to_string(), c.id.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use skeletonhunter_localizer::sim::FabricSpec;

    fn fabric() -> Fabric {
        Fabric::new(FabricSpec {
            hosts: 8,
            rails: 2,
            hosts_per_tor: 2,
            tors_per_spine: 2,
            ..Default::default()
        })
    }

    #[test]
    fn parses_index_and_id_and_effects() {
        let f = fabric();
        let tor = parse_fault(&f, "tor=1:loss=0.05").unwrap();
        assert_eq!(tor.component, f.components(Kind::Tor)[1]);
        assert_eq!(tor.effect, Effect::Loss(0.05));
        let id = f.components(Kind::Spine)[0].id.clone();
        let spine = parse_fault(&f, &format!("spine={id}:latency=200us")).unwrap();
        assert_eq!(spine.component.id, id);
        assert_eq!(spine.effect, Effect::Latency(Duration::from_micros(200)));
    }

    #[test]
    fn refusals_name_the_problem() {
        let f = fabric();
        let err = |s: &str| parse_fault(&f, s).unwrap_err();
        assert!(matches!(err("tor=1"), FaultError::Syntax(_)));
        assert!(matches!(err("rack=1:loss=0.1"), FaultError::Kind { .. }));
        assert!(matches!(
            err("pod=0:loss=0.1"),
            FaultError::NotOnPath { .. }
        ));
        assert!(matches!(
            err("tor=99:loss=0.1"),
            FaultError::NoSuchComponent { count: 8, .. }
        ));
        assert!(matches!(err("tor=0:jitter=1"), FaultError::Effect { .. }));
        assert!(matches!(err("tor=0:loss=1.5"), FaultError::Loss { .. }));
        assert!(matches!(
            err("tor=0:latency=0s"),
            FaultError::Latency { .. }
        ));
        assert!(matches!(
            err("tor=0:latency=1h"),
            FaultError::Latency { .. }
        ));
        let msg = err("tor=0:loss=x").to_string();
        assert!(
            msg.contains("\"tor=0:loss=x\"") && msg.contains("[0, 1]"),
            "{msg}"
        );
    }

    #[test]
    fn effects_compound_on_the_path_only() {
        let f = fabric();
        let (a, b) = f.pairs[0];
        let (src, dst) = (&f.nodes[a as usize], &f.nodes[b as usize]);
        let on = |kind: Kind, id: &str, effect| FleetFault {
            component: Component::new(kind, id.to_string()),
            effect,
        };
        let faults = [
            on(Kind::Host, &src.host, Effect::Loss(0.5)),
            on(Kind::Nic, &dst.nic, Effect::Loss(0.5)),
            on(Kind::Host, "elsewhere", Effect::Loss(0.9)),
            on(
                Kind::Nic,
                &src.nic,
                Effect::Latency(Duration::from_micros(100)),
            ),
        ];
        let (loss, extra) = pair_effect(src, dst, &faults);
        assert!((loss - 0.75).abs() < 1e-12, "{loss}");
        assert!((extra - 100e-6).abs() < 1e-12, "{extra}");
        assert_eq!(pair_effect(src, dst, &[]), (0.0, 0.0));
    }
}
