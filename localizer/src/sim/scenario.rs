//! What happens on a simulated fabric: injected faults (any kind, any
//! symptom, partial on spines as ECMP would make them, applied along the
//! shared path model), noisy pairs and transient blips, and every probe
//! round that results.

use super::fabric::Fabric;
use super::rng::{hash_str, mix, unit, Rng};
use crate::engine::model::Symptom;
use serde::Serialize;
use skeletonhunter_common::topology::{path, path_class, Component, Kind, PathClass, UnknownKind};

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultSpec {
    /// The faulty component.
    pub component: Component,
    /// What it does.
    pub symptom: Symptom,
    /// Loss: extra packet loss rate; unreachable: share of failed dials;
    /// latency: extra RTT in seconds.
    pub severity: f64,
    /// Spines only: share of the flows (pairs) the fault hits (ECMP).
    pub ecmp_fraction: Option<f64>,
}

/// What to simulate on a fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Seed of every random draw.
    pub seed: u64,
    /// Injected faults.
    pub faults: Vec<FaultSpec>,
    /// Pairs with a persistent problem of their own (no component to blame).
    pub noisy_pairs: usize,
    /// Pairs with one bad round (transient).
    pub blips: usize,
    /// Packet loss rate of healthy paths.
    pub background_loss: f64,
    /// Dial failure rate of healthy paths.
    pub background_dial_failure: f64,
    /// Share of the pairs with no row at all in the window (partial
    /// coverage: a collector gap); chosen by hash, no RNG draw.
    pub missing_pairs: f64,
    /// Pairs with a persistent gray loss of their own (1–3%), no
    /// component to blame.
    pub gray_noisy_pairs: usize,
}

impl Scenario {
    /// No fault, default background.
    pub fn healthy(seed: u64) -> Scenario {
        Scenario {
            seed,
            faults: Vec::new(),
            noisy_pairs: 0,
            blips: 0,
            background_loss: 1e-4,
            background_dial_failure: 2e-4,
            missing_pairs: 0.0,
            gray_noisy_pairs: 0,
        }
    }

    /// Whether pair `i` of the fabric has no row ([`Scenario::missing_pairs`]);
    /// the same pairs in every simulator of this scenario.
    pub(crate) fn pair_missing(&self, i: usize) -> bool {
        self.missing_pairs > 0.0
            && unit(mix(self.seed
                ^ 0x6d15_5146
                ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
                < self.missing_pairs
    }
}

/// Why a `--fault` was refused; names the text given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// Not `kind=index:...`.
    #[error("fault {0:?}: expected kind=index:symptom[:severity[:ecmp_fraction]]")]
    Syntax(String),
    /// Unknown component kind.
    #[error("fault {input:?}: {reason}")]
    Kind {
        /// As given.
        input: String,
        /// Why.
        reason: UnknownKind,
    },
    /// A kind no probe path crosses.
    #[error("fault {input:?}: {kind} is not on probe paths")]
    NotOnPath {
        /// As given.
        input: String,
        /// The kind.
        kind: Kind,
    },
    /// A kind the CSV simulator has no components of (traced hops, links).
    #[error("fault {input:?}: the CSV simulator has no {kind} components (link faults run in `bench --link-scenarios`)")]
    NotSimulated {
        /// As given.
        input: String,
        /// The kind.
        kind: Kind,
    },
    /// The index is not a number.
    #[error("fault {input:?}: bad index: {reason}")]
    Index {
        /// As given.
        input: String,
        /// Why.
        reason: std::num::ParseIntError,
    },
    /// The index is beyond the fabric's components of that kind.
    #[error("fault {input:?}: only {count} {kind} components")]
    NoSuchComponent {
        /// As given.
        input: String,
        /// How many there are.
        count: usize,
        /// Of which kind.
        kind: Kind,
    },
    /// Not loss, unreachable or latency.
    #[error("fault {input:?}: unknown symptom {symptom:?} (loss, unreachable, latency)")]
    Symptom {
        /// As given.
        input: String,
        /// The symptom as written.
        symptom: String,
    },
    /// Severity or ECMP fraction is not a number.
    #[error("fault {input:?}: bad {what}: {reason}")]
    Number {
        /// As given.
        input: String,
        /// `severity` or `ecmp fraction`.
        what: &'static str,
        /// Why.
        reason: std::num::ParseFloatError,
    },
}

/// Parse a `kind=index:symptom[:severity[:ecmp_fraction]]` fault for a fabric.
pub fn parse_fault(fabric: &Fabric, s: &str) -> Result<FaultSpec, FaultError> {
    let input = || s.to_string();
    let (kind, rest) = s
        .split_once('=')
        .ok_or_else(|| FaultError::Syntax(input()))?;
    let kind: Kind = kind.parse().map_err(|reason| FaultError::Kind {
        input: input(),
        reason,
    })?;
    if !kind.is_path_component() {
        return Err(FaultError::NotOnPath {
            input: input(),
            kind,
        });
    }
    if !Kind::ALL.contains(&kind) {
        return Err(FaultError::NotSimulated {
            input: input(),
            kind,
        });
    }
    let mut parts = rest.split(':');
    let index: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|reason| FaultError::Index {
            input: input(),
            reason,
        })?;
    let comps = fabric.components(kind);
    let component = comps
        .get(index)
        .cloned()
        .ok_or_else(|| FaultError::NoSuchComponent {
            input: input(),
            count: comps.len(),
            kind,
        })?;
    let symptom = match parts.next().unwrap_or("") {
        "loss" => Symptom::Loss,
        "unreachable" => Symptom::Unreachable,
        "latency" => Symptom::Latency,
        other => {
            return Err(FaultError::Symptom {
                input: input(),
                symptom: other.to_string(),
            })
        }
    };
    let number = |v: &str, what: &'static str| {
        v.parse::<f64>().map_err(|reason| FaultError::Number {
            input: input(),
            what,
            reason,
        })
    };
    let severity = match parts.next() {
        Some(v) => number(v, "severity")?,
        None => match symptom {
            Symptom::Loss => 0.2,
            Symptom::Unreachable => 1.0,
            Symptom::Latency => 20e-6,
            Symptom::Flapping | Symptom::HostStack => 0.0,
        },
    };
    let ecmp_fraction = match parts.next() {
        Some(v) => Some(number(v, "ecmp fraction")?),
        None => None,
    };
    Ok(FaultSpec {
        component,
        symptom,
        severity,
        ecmp_fraction,
    })
}

/// One probe round.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// Prober (index into the fabric's nodes).
    pub src: u32,
    /// Responder.
    pub dst: u32,
    /// Whether the dial succeeded.
    pub connected: bool,
    /// RTT in µs, when anything came back.
    pub latency_us: Option<f64>,
    /// Share of the round's packets lost.
    pub loss_rate: f64,
    /// Probe time, ns since the epoch.
    pub ping_time: u64,
}

/// What the faults, noise and blips do to one pair.
#[derive(Clone, Copy, Default)]
pub(crate) struct PairEffect {
    pub(crate) loss: f64,
    pub(crate) unreachable: f64,
    pub(crate) delay_s: f64,
    /// Transient: one round goes bad.
    pub(crate) blip: Option<(usize, Symptom)>,
}

impl PairEffect {
    /// Loss, unreachability and added delay (µs) of `round`: the lasting
    /// effect, worse in the round of a blip.
    pub(crate) fn in_round(&self, round: usize) -> (f64, f64, f64) {
        let (mut loss, mut unreach, mut delay_us) =
            (self.loss, self.unreachable, self.delay_s * 1e6);
        if let Some((_, s)) = self.blip.filter(|(r, _)| *r == round) {
            match s {
                Symptom::Loss => loss = 1.0 - (1.0 - loss) * 0.5,
                Symptom::Unreachable => unreach = 1.0,
                Symptom::Latency => delay_us += 200.0,
                Symptom::Flapping | Symptom::HostStack => {}
            }
        }
        (loss, unreach, delay_us)
    }
}

/// Per-pair effects of the faults, noisy pairs and blips.
pub(crate) fn pair_effects(fabric: &Fabric, scenario: &Scenario) -> Vec<PairEffect> {
    let np = fabric.pairs.len();
    let mut effects = vec![PairEffect::default(); np];
    for (i, &(a, b)) in fabric.pairs.iter().enumerate() {
        if scenario.faults.is_empty() {
            break;
        }
        let p = path(&fabric.nodes[a as usize], &fabric.nodes[b as usize]);
        for f in &scenario.faults {
            if !p.contains(&f.component) {
                continue;
            }
            if let Some(frac) = f.ecmp_fraction {
                let h = mix(scenario.seed
                    ^ hash_str(&f.component.id)
                    ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
                if unit(h) >= frac {
                    continue;
                }
            }
            let e = &mut effects[i];
            match f.symptom {
                Symptom::Loss => e.loss = 1.0 - (1.0 - e.loss) * (1.0 - f.severity),
                Symptom::Unreachable => {
                    e.unreachable = 1.0 - (1.0 - e.unreachable) * (1.0 - f.severity);
                }
                Symptom::Latency => e.delay_s += f.severity,
                // Online only: never parsed into a scenario.
                Symptom::Flapping | Symptom::HostStack => {}
            }
        }
    }
    let mut noise_rng = Rng::new(scenario.seed ^ 0xdead_beef);
    for _ in 0..scenario.noisy_pairs.min(np) {
        let e = &mut effects[noise_rng.below(np)];
        match noise_rng.below(3) {
            0 => e.loss = noise_rng.range(0.05, 0.3),
            1 => e.unreachable = 1.0,
            _ => e.delay_s += noise_rng.range(20e-6, 80e-6),
        }
    }
    for _ in 0..scenario.blips.min(np) {
        let i = noise_rng.below(np);
        let round = noise_rng.below(fabric.spec.rounds);
        let s = Symptom::ALL[noise_rng.below(3)];
        effects[i].blip = Some((round, s));
    }
    for _ in 0..scenario.gray_noisy_pairs.min(np) {
        let e = &mut effects[noise_rng.below(np)];
        e.loss = e.loss.max(noise_rng.range(0.01, 0.03));
    }
    effects
}

/// Generate every probe round of the scenario, in pair order.
pub fn rows(fabric: &Fabric, scenario: &Scenario, mut emit: impl FnMut(&Row)) {
    let mut rng = Rng::new(scenario.seed);
    let effects = pair_effects(fabric, scenario);

    let ppr = fabric.spec.packets_per_round;
    let t0: u64 = 1_733_989_087_000_000_000;
    for (i, &(a, b)) in fabric.pairs.iter().enumerate() {
        let (na, nb) = (&fabric.nodes[a as usize], &fabric.nodes[b as usize]);
        if scenario.pair_missing(i) {
            continue;
        }
        let base_us = match path_class(na, nb) {
            PathClass::SameHost => 4.0,
            PathClass::SameTor => 9.0,
            PathClass::CrossTor => 14.0,
        } + 0.4 * rng.normal();
        let e = effects[i];
        for round in 0..fabric.spec.rounds {
            let (loss, unreach, delay_us) = e.in_round(round);
            // A TCP-style dial survives loss unless its retries are lost too.
            let dial_fail = 1.0
                - (1.0 - scenario.background_dial_failure) * (1.0 - unreach) * (1.0 - loss.powi(3));
            let ping_time = t0 + round as u64 * 10_000_000_000 + (i as u64 % 10_000) * 997_123;
            if rng.f64() < dial_fail {
                emit(&Row {
                    src: a,
                    dst: b,
                    connected: false,
                    latency_us: None,
                    loss_rate: 1.0,
                    ping_time,
                });
                continue;
            }
            let p_lost = 1.0 - (1.0 - scenario.background_loss) * (1.0 - loss);
            let lost = rng.binomial(ppr, p_lost);
            let latency_us = if lost >= ppr {
                None
            } else {
                let mut l = base_us * (0.05 * rng.normal()).exp() + delay_us;
                if rng.f64() < 0.02 {
                    l += rng.range(20.0, 100.0);
                }
                Some(l.max(0.5))
            };
            emit(&Row {
                src: a,
                dst: b,
                connected: true,
                latency_us,
                loss_rate: lost as f64 / ppr as f64,
                ping_time,
            });
        }
    }
}
