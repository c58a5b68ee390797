//! Flapping: a component whose fault comes and goes repeatedly (a port or
//! link bouncing every few seconds) is one `flapping` incident, not a string
//! of short pages and resolutions.
//!
//! Pure logic, between the confirmation (`confirm.rs`) and the alert book,
//! so it is tested without servers. It watches what the confirmation lets
//! through, that is the alerts themselves: per component it counts
//! *transitions* over trusted cycles, down when its finding is admitted
//! (the alert fires or stands), up at the first covered cycle without one
//! (the confirmation resolved it after `--resolve-cycles` clean cycles; see
//! `coverage.rs`). A cycle in which the component is not covered is
//! unknown: it neither counts towards nor resets a clean spell. Why after
//! the confirmation: a finding it holds (a spine reported beside its ToR at
//! that ToR's onset, then again on the ToR's leftovers after a clear) never
//! pages, so its comings and goings are no flap; counted before the
//! confirmation, they made a `flapping` spine that paged once the hold had
//! passed. A detection flickering off for fewer than `--resolve-cycles`
//! cycles never resolved, so it makes no transition either.
//!
//! - **Flapping**: `transitions` (e.g. 3: a fault, its end, its return)
//!   within the last `window` cycles make the component flapping. From then
//!   on every cycle carries one finding for it with symptom
//!   [`Symptom::Flapping`] (its latest evidence), reported or not, so the
//!   incident stays open through the healthy spells.
//! - **Absorbed**: while a component flaps, a finding whose anomalous pairs
//!   all cross it is that flap's edge (partial evidence at onset, leftovers
//!   after it) and is dropped; a flapping component whose pairs all cross
//!   another flapping one (and not the other way round) is dropped too.
//! - **Quiet**: flapping ends after `window` consecutive covered cycles
//!   without a finding; the incident then resolves.
//!
//! A busy host (`host_stack`) is not tracked: its own load coming and
//! going is not a component flapping, and never pages as one.
//!
//! Memory is bounded: a component is tracked while it is reported,
//! flapping, or has a transition inside the window (at most `transitions`
//! of them are kept), and at most [`MAX_TRACKED`] components at once.

use super::alerts::{symptom_rank, Finding};
use crate::engine::model::Symptom;
use skeletonhunter_common::topology::{crosses, Component};
use std::collections::{BTreeMap, VecDeque};

/// Most components tracked at once; beyond it new ones are not tracked
/// (their findings pass through unchanged).
pub const MAX_TRACKED: usize = 10_000;

/// One component's recent history.
#[derive(Debug)]
struct Track {
    /// Whether it is down (alerting).
    down: bool,
    /// Consecutive covered cycles without a finding (unknown cycles skipped).
    clean: u32,
    /// Cycle numbers of its latest transitions (at most `transitions`).
    transitions: VecDeque<u64>,
    /// Whether it is flapping.
    flapping: bool,
    /// Its latest finding (the worst symptom of its latest report).
    last: Option<Finding>,
}

/// The flap detector (see the module docs).
#[derive(Debug)]
pub struct FlapDetector {
    transitions: u32,
    window: u32,
    cycle: u64,
    tracks: BTreeMap<Component, Track>,
}

impl FlapDetector {
    /// `transitions` within `window` cycles make a component flapping
    /// (0 disables the detector); `window` quiet cycles end it.
    pub fn new(transitions: u32, window: u32) -> FlapDetector {
        FlapDetector {
            transitions,
            window: window.max(1),
            cycle: 0,
            tracks: BTreeMap::new(),
        }
    }

    /// Components tracked now.
    pub fn tracked(&self) -> usize {
        self.tracks.len()
    }

    /// Components flapping now.
    pub fn flapping(&self) -> impl Iterator<Item = &Component> {
        self.tracks
            .iter()
            .filter(|(_, t)| t.flapping)
            .map(|(c, _)| c)
    }

    /// Apply one trusted cycle's admitted findings (those the confirmation
    /// lets alert), with `covered` telling which components had enough
    /// fresh pairs; returns the findings to alert: those of components that
    /// do not flap, and one `flapping` finding per flapping component.
    pub fn observe(
        &mut self,
        findings: Vec<Finding>,
        covered: &dyn Fn(&Component) -> bool,
    ) -> Vec<Finding> {
        if self.transitions == 0 {
            return findings;
        }
        self.cycle += 1;
        let mut worst: BTreeMap<Component, Finding> = BTreeMap::new();
        // A busy host's load comes and goes: that is not a port bouncing.
        for f in findings.iter().filter(|f| f.symptom != Symptom::HostStack) {
            if worst
                .get(&f.component)
                .is_none_or(|w| symptom_rank(f.symptom) > symptom_rank(w.symptom))
            {
                worst.insert(f.component.clone(), f.clone());
            }
        }
        self.step(&worst, covered);
        self.output(findings)
    }

    /// Transitions, flapping and quiet counts of one cycle.
    fn step(&mut self, worst: &BTreeMap<Component, Finding>, covered: &dyn Fn(&Component) -> bool) {
        let (cycle, cap) = (self.cycle, self.transitions as usize);
        for (c, f) in worst {
            if !self.tracks.contains_key(c) && self.tracks.len() >= MAX_TRACKED {
                continue;
            }
            let t = self.tracks.entry(c.clone()).or_insert_with(|| Track {
                down: false,
                clean: 0,
                transitions: VecDeque::new(),
                flapping: false,
                last: None,
            });
            t.clean = 0;
            if !t.down {
                t.down = true;
                push_capped(&mut t.transitions, cycle, cap);
            }
            t.last = Some(f.clone());
        }
        let oldest = cycle.saturating_sub(u64::from(self.window));
        let window = self.window;
        self.tracks.retain(|c, t| {
            if !worst.contains_key(c) && covered(c) {
                t.clean = t.clean.saturating_add(1);
                if t.down {
                    t.down = false;
                    push_capped(&mut t.transitions, cycle, cap);
                }
            }
            while t.transitions.front().is_some_and(|at| *at <= oldest) {
                t.transitions.pop_front();
            }
            if t.transitions.len() >= cap {
                t.flapping = true;
            } else if t.flapping && t.clean >= window {
                t.flapping = false;
            }
            t.down || t.flapping || !t.transitions.is_empty()
        });
    }

    /// This cycle's findings after flapping and absorption.
    fn output(&self, findings: Vec<Finding>) -> Vec<Finding> {
        let flapping: Vec<&Finding> = self
            .tracks
            .values()
            .filter(|t| t.flapping)
            .filter_map(|t| t.last.as_ref())
            .collect();
        let mut out: Vec<Finding> = findings
            .into_iter()
            .filter(|f| !self.tracks.get(&f.component).is_some_and(|t| t.flapping))
            .filter(|f| !flapping.iter().any(|by| explains(by, f)))
            .collect();
        for f in &flapping {
            if flapping
                .iter()
                .any(|by| explains(by, f) && !explains(f, by))
            {
                continue;
            }
            let mut f = (*f).clone();
            f.symptom = Symptom::Flapping;
            out.push(f);
        }
        out
    }
}

/// Keep the newest `cap` cycle numbers.
fn push_capped(q: &mut VecDeque<u64>, cycle: u64, cap: usize) {
    q.push_back(cycle);
    while q.len() > cap {
        q.pop_front();
    }
}

/// Whether every anomalous pair of `f` crosses `by`'s component (and `f` is
/// another component with such pairs).
fn explains(by: &Finding, f: &Finding) -> bool {
    by.component != f.component
        && !f.hit_pairs.is_empty()
        && f.hit_pairs
            .iter()
            .all(|(a, b)| crosses(a, b, by.component.kind, &by.component.id))
}

#[cfg(test)]
mod tests;
