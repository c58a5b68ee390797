//! Which of a cycle's findings may page: confirmation over cycles, and a
//! hold on leftovers of a fault that just cleared.
//!
//! The online loop analyzes a sliding window of `increase()` aggregates, and
//! Prometheus scrapes exporters at staggered times. At the edges of a fault
//! the window therefore holds *partial* evidence: when a fault starts, some
//! of its pairs show it before the others; when it ends, some pairs still
//! carry leftover loss for up to a window while others are clean. Partial
//! evidence is best explained by a smaller component (a node or host of the
//! faulty ToR, a spine for a ToR's cross-rack pairs), which would page for a
//! fault that is not there. Two rules, pure logic so they are tested without
//! servers:
//!
//! 1. **Confirmation**: a component that is not alerting yet must be
//!    reported in `confirm_cycles` consecutive trusted cycles before it
//!    fires. Partial onset evidence lasts about one scrape interval, shorter
//!    than two cycles.
//! 2. **Hold after a clear**: when a component that was alerting stops being
//!    reported, its fault may have ended up to one window earlier and its
//!    leftover evidence stays in the window until `hold` (= window + a
//!    scrape interval) after it was last reported. A new component whose
//!    anomalous pairs all cross such a recently cleared component — its
//!    whole evidence may be that fault's leftovers — is held until that
//!    horizon has passed; if it still persists then, it fires. A new fault
//!    with evidence the cleared one cannot explain (a pair it does not
//!    cross) is not delayed.
//!
//! 3. **No de-escalation**: a component alerting as `unreachable` that is
//!    then reported as `loss` keeps its `unreachable` alert until it
//!    resolves. A cut link coming back shows partial loss for up to a window
//!    (the window still holds the outage); re-labelling it would resolve the
//!    alert and start a new one, paging for the leftovers. Escalation (loss
//!    to unreachable) is news and changes the alert.
//!
//! 4. **Resolution needs covered, clean cycles**: an alerting component
//!    that is no longer reported keeps its alert (its last finding is
//!    re-admitted) until it has been *covered* and clean in
//!    `resolve_cycles` cycles since it was last reported (see
//!    `coverage.rs`). A cycle in which it is not covered — too few of its
//!    pairs have fresh data — is *unknown*: it neither counts towards the
//!    resolution nor resets it, and the alert stays as it was. A data gap
//!    therefore never resolves an alert.
//!
//! Untrusted cycles (failed queries) do not call [`Confirmer::admit`], so
//! they neither advance nor break a streak.

use super::alerts::Finding;
use crate::engine::model::Symptom;
use skeletonhunter_common::topology::{path, Component};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Why a finding is not alerted (yet).
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// Reported in `seen` consecutive cycles, fewer than required.
    Unconfirmed {
        /// Consecutive cycles so far.
        seen: u32,
    },
    /// All its evidence lies on pairs of `cleared`, which stopped being
    /// reported less than the hold ago: possibly that fault's leftovers.
    AfterClear {
        /// The recently cleared component.
        cleared: Component,
    },
}

/// Why an alerting component that was not reported keeps its alert.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    /// Too few of its pairs had fresh data: its state is unknown.
    Unknown,
    /// Covered and clean in `clean` cycles, fewer than required.
    Clearing {
        /// Covered, clean cycles since it was last reported.
        clean: u32,
    },
}

/// The confirmation state machine (see the module docs).
#[derive(Debug)]
pub struct Confirmer {
    confirm_cycles: u32,
    resolve_cycles: u32,
    hold: Duration,
    /// Components alerting after the last trusted cycle, with the time they
    /// were last reported.
    alerting: BTreeMap<Component, SystemTime>,
    /// Components that were alerting and stopped being reported, with the
    /// time they were last reported; dropped once the hold has passed.
    cleared: BTreeMap<Component, SystemTime>,
    /// Alerting components whose alert says `unreachable`.
    unreachable: std::collections::BTreeSet<Component>,
    /// Consecutive trusted cycles each non-alerting component was reported in.
    streak: BTreeMap<Component, u32>,
    /// The last admitted findings of each alerting component, re-admitted
    /// while its resolution is pending.
    last: BTreeMap<Component, Vec<Finding>>,
    /// Covered, clean cycles of alerting components not reported any more.
    clean: BTreeMap<Component, u32>,
    /// What the last [`Confirmer::admit`] kept without a report, and why.
    kept: Vec<(Component, Kept)>,
}

impl Confirmer {
    /// `confirm_cycles` (at least 1; 1 disables confirmation) and the hold
    /// after a clear (the analysis window plus one scrape interval); an
    /// alert resolves after one clean cycle unless [`Confirmer::resolve_after`]
    /// says otherwise.
    pub fn new(confirm_cycles: u32, hold: Duration) -> Confirmer {
        Confirmer {
            confirm_cycles: confirm_cycles.max(1),
            resolve_cycles: 1,
            last: BTreeMap::new(),
            clean: BTreeMap::new(),
            kept: Vec::new(),
            hold,
            alerting: BTreeMap::new(),
            unreachable: Default::default(),
            cleared: BTreeMap::new(),
            streak: BTreeMap::new(),
        }
    }

    /// An alert resolves only after `cycles` (at least 1) covered, clean
    /// cycles.
    pub fn resolve_after(mut self, cycles: u32) -> Confirmer {
        self.resolve_cycles = cycles.max(1);
        self
    }

    /// New confirmation cycles and hold (the shards in use changed); the
    /// state kept so far stays.
    pub fn retime(&mut self, confirm_cycles: u32, hold: Duration) {
        self.confirm_cycles = confirm_cycles.max(1);
        self.hold = hold;
    }

    /// What the last [`Confirmer::admit`] kept alerting without a report.
    pub fn kept(&self) -> &[(Component, Kept)] {
        &self.kept
    }

    /// [`Confirmer::admit_covered`] for a cycle that covers every component.
    pub fn admit(
        &mut self,
        findings: Vec<Finding>,
        now: SystemTime,
    ) -> (Vec<Finding>, Vec<(Finding, Held)>) {
        self.admit_covered(findings, &|_| true, now)
    }

    /// Apply one trusted cycle's findings at `now`, with `covered` telling
    /// which components had enough fresh pairs; returns the findings that
    /// may alert (including those kept while their resolution is pending),
    /// and those held back with the reason.
    pub fn admit_covered(
        &mut self,
        mut findings: Vec<Finding>,
        covered: &dyn Fn(&Component) -> bool,
        now: SystemTime,
    ) -> (Vec<Finding>, Vec<(Finding, Held)>) {
        let reported: std::collections::BTreeSet<Component> =
            findings.iter().map(|f| f.component.clone()).collect();
        findings.extend(self.pending_resolution(&reported, covered));
        let hold = self.hold;
        self.cleared.retain(|_, last| within(*last, now, hold));
        self.streak.retain(|c, _| reported.contains(c));
        // A component may be reported under several symptoms: count it once.
        for c in &reported {
            if !self.alerting.contains_key(c) {
                *self.streak.entry(c.clone()).or_insert(0) += 1;
            }
        }

        let mut admitted = Vec::new();
        let mut held = Vec::new();
        let mut newly: Vec<Component> = Vec::new();
        for mut f in findings {
            let c = f.component.clone();
            if self.alerting.contains_key(&c) || newly.contains(&c) {
                if f.symptom == Symptom::Loss && self.unreachable.contains(&c) {
                    f.symptom = Symptom::Unreachable;
                }
                admitted.push(f);
                continue;
            }
            let seen = self.streak.get(&c).copied().unwrap_or(0);
            if seen < self.confirm_cycles {
                held.push((f, Held::Unconfirmed { seen }));
                continue;
            }
            if let Some(r) = self.leftover_of(&f) {
                held.push((f, Held::AfterClear { cleared: r }));
                continue;
            }
            newly.push(c);
            admitted.push(f);
        }
        for c in reported {
            if self.alerting.contains_key(&c) || newly.contains(&c) {
                self.streak.remove(&c);
                self.cleared.remove(&c);
                self.clean.remove(&c);
                self.alerting.insert(c, now);
            }
        }
        self.last.clear();
        for f in &admitted {
            self.last
                .entry(f.component.clone())
                .or_default()
                .push(f.clone());
        }
        self.unreachable = admitted
            .iter()
            .filter(|f| f.symptom == Symptom::Unreachable)
            .map(|f| f.component.clone())
            .collect();
        (admitted, held)
    }

    /// Alerting components not reported this cycle: those covered and clean
    /// long enough clear (into the hold); the others keep their last
    /// findings, returned to be admitted again.
    fn pending_resolution(
        &mut self,
        reported: &std::collections::BTreeSet<Component>,
        covered: &dyn Fn(&Component) -> bool,
    ) -> Vec<Finding> {
        self.kept.clear();
        let quiet: Vec<Component> = self
            .alerting
            .keys()
            .filter(|c| !reported.contains(*c))
            .cloned()
            .collect();
        let mut again = Vec::new();
        for c in quiet {
            let why = if covered(&c) {
                let clean = self.clean.entry(c.clone()).or_insert(0);
                *clean += 1;
                if *clean >= self.resolve_cycles {
                    self.clean.remove(&c);
                    self.last.remove(&c);
                    if let Some(last) = self.alerting.remove(&c) {
                        self.cleared.insert(c, last);
                    }
                    continue;
                }
                Kept::Clearing { clean: *clean }
            } else {
                Kept::Unknown
            };
            again.extend(self.last.get(&c).cloned().unwrap_or_default());
            self.kept.push((c, why));
        }
        again
    }

    /// A recently cleared component that every one of `f`'s anomalous
    /// pairs crosses, if any: then `f`'s evidence may be its leftovers.
    fn leftover_of(&self, f: &Finding) -> Option<Component> {
        if f.hit_pairs.is_empty() {
            return None;
        }
        self.cleared
            .keys()
            .find(|r| **r != f.component && f.hit_pairs.iter().all(|(a, b)| path(a, b).contains(r)))
            .cloned()
    }
}

/// `now` is less than `hold` after `last` (a clock step back counts as within).
fn within(last: SystemTime, now: SystemTime, hold: Duration) -> bool {
    now.duration_since(last).map_or(true, |d| d < hold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skeletonhunter_common::topology::{Identity, Kind};

    /// Node `t<T>-h<H>-c<C>` of the e2e fabric shape.
    fn id(t: u32, h: u32, c: u32) -> Identity {
        Identity {
            node: format!("t{t}-h{h}-c{c}"),
            nic: format!("nic-t{t}-h{h}"),
            host: format!("host-t{t}-h{h}"),
            tor: format!("tor{t}"),
            spine: "spine0".into(),
            pod: "pod0".into(),
            tenant: format!("job{c}"),
        }
    }

    /// Every directed same-rail pair of 2 ToRs x 3 hosts.
    fn all_pairs() -> Vec<(Identity, Identity)> {
        let mut out = Vec::new();
        for c in 0..2 {
            let nodes: Vec<Identity> = (0..2)
                .flat_map(|t| (0..3).map(move |h| id(t, h, c)))
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

    fn finding(kind: Kind, cid: &str, symptom: &str) -> Finding {
        let component = Component::new(kind, cid);
        let hit_pairs = all_pairs()
            .into_iter()
            .filter(|(a, b)| path(a, b).contains(&component))
            .collect();
        Finding {
            component,
            symptom: match symptom {
                "loss" => Symptom::Loss,
                "unreachable" => Symptom::Unreachable,
                _ => Symptom::Latency,
            },
            score: 0.3,
            p_value: 1e-9,
            pairs: 0,
            equivalent: Vec::new(),
            context: BTreeMap::new(),
            evidence: Vec::new(),
            hit_pairs,
        }
    }

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    fn names(v: &[Finding]) -> Vec<String> {
        v.iter().map(|f| f.component.to_string()).collect()
    }

    /// 2 cycles to confirm, hold 11 s (10 s window + 1 s scrapes), a cycle
    /// every 2 s as in the e2e test.
    fn confirmer() -> Confirmer {
        Confirmer::new(2, Duration::from_secs(11))
    }

    #[test]
    fn a_new_fault_fires_on_its_second_consecutive_cycle() {
        let mut c = confirmer();
        let tor = || finding(Kind::Tor, "tor1", "loss");
        let (a, h) = c.admit(vec![tor()], at(0));
        assert!(a.is_empty());
        assert_eq!(h[0].1, Held::Unconfirmed { seen: 1 });
        let (a, _) = c.admit(vec![tor()], at(2));
        assert_eq!(names(&a), ["tor/tor1"]);
        // Stays without delay; a symptom change of an alerting component is
        // not a new fault.
        let (a, _) = c.admit(vec![finding(Kind::Tor, "tor1", "unreachable")], at(4));
        assert_eq!(names(&a), ["tor/tor1"]);
    }

    #[test]
    fn an_unreachable_alert_does_not_turn_into_a_loss_alert_while_clearing() {
        let mut c = confirmer();
        let host = |s: &str| finding(Kind::Host, "host-t0-h1", s);
        let symptoms =
            |v: &[Finding]| -> Vec<&str> { v.iter().map(|f| f.symptom.as_str()).collect() };
        c.admit(vec![host("loss")], at(0));
        // Onset: partial loss first, then the window holds only the outage.
        assert_eq!(symptoms(&c.admit(vec![host("loss")], at(2)).0), ["loss"]);
        assert_eq!(
            symptoms(&c.admit(vec![host("unreachable")], at(4)).0),
            ["unreachable"]
        );
        // The link is back: leftover partial loss keeps the unreachable alert.
        assert_eq!(
            symptoms(&c.admit(vec![host("loss")], at(6)).0),
            ["unreachable"]
        );
        assert_eq!(
            symptoms(&c.admit(vec![host("loss")], at(8)).0),
            ["unreachable"]
        );
        assert!(c.admit(vec![], at(10)).0.is_empty());
        // A later fault on it starts afresh.
        c.admit(vec![], at(30));
        c.admit(vec![host("loss")], at(32));
        assert_eq!(symptoms(&c.admit(vec![host("loss")], at(34)).0), ["loss"]);
    }

    #[test]
    fn a_one_cycle_blip_never_fires_and_a_gap_restarts_the_count() {
        let mut c = confirmer();
        let node = || finding(Kind::Node, "t0-h0-c0", "loss");
        assert!(c.admit(vec![node()], at(0)).0.is_empty());
        assert!(c.admit(vec![], at(2)).0.is_empty());
        assert!(c.admit(vec![node()], at(4)).0.is_empty());
        assert_eq!(names(&c.admit(vec![node()], at(6)).0), ["node/t0-h0-c0"]);
    }

    #[test]
    fn confirm_cycles_of_one_fires_at_once() {
        let mut c = Confirmer::new(1, Duration::from_secs(11));
        let (a, _) = c.admit(vec![finding(Kind::Tor, "tor1", "loss")], at(0));
        assert_eq!(names(&a), ["tor/tor1"]);
    }

    #[test]
    fn onset_blames_a_node_first_then_the_tor_without_delay() {
        // Partial evidence at onset: one cycle points at a node under the
        // ToR, then the ToR's evidence is complete.
        let mut c = confirmer();
        let node = finding(Kind::Node, "t1-h0-c0", "loss");
        let tor = || finding(Kind::Tor, "tor1", "loss");
        assert!(c.admit(vec![node], at(0)).0.is_empty());
        assert!(c.admit(vec![tor()], at(2)).0.is_empty());
        assert_eq!(names(&c.admit(vec![tor()], at(4)).0), ["tor/tor1"]);
    }

    #[test]
    fn resolution_is_immediate() {
        let mut c = confirmer();
        let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
        c.admit(vec![host()], at(0));
        assert_eq!(names(&c.admit(vec![host()], at(2)).0), ["host/host-t0-h1"]);
        let (a, h) = c.admit(vec![], at(4));
        assert!(a.is_empty() && h.is_empty());
    }

    #[test]
    fn leftovers_of_a_cleared_fault_do_not_page() {
        let mut c = confirmer();
        let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
        c.admit(vec![host()], at(0));
        c.admit(vec![host()], at(2));
        // Last reported at 4 s; the link came back at some point before.
        c.admit(vec![host()], at(4));
        // Staggered scrapes: only one container's pairs still show loss,
        // for three cycles.
        let node = || finding(Kind::Node, "t0-h1-c0", "loss");
        let (a, h) = c.admit(vec![node()], at(6));
        assert!(a.is_empty(), "{:?}", names(&a));
        assert_eq!(h[0].1, Held::Unconfirmed { seen: 1 });
        for t in [8, 10, 12, 14] {
            let (a, h) = c.admit(vec![node()], at(t));
            assert!(a.is_empty(), "at {t}: {:?}", names(&a));
            assert_eq!(
                h[0].1,
                Held::AfterClear {
                    cleared: Component::new(Kind::Host, "host-t0-h1")
                }
            );
        }
        // The same after a ToR fault: the spine explains its cross-ToR pairs.
        let mut c = confirmer();
        let tor = || finding(Kind::Tor, "tor1", "loss");
        c.admit(vec![tor()], at(0));
        c.admit(vec![tor()], at(2));
        let spine = || finding(Kind::Spine, "spine0", "unreachable");
        c.admit(vec![spine()], at(4));
        assert!(c.admit(vec![spine()], at(6)).0.is_empty());
    }

    #[test]
    fn a_held_finding_that_persists_past_the_hold_fires() {
        let mut c = confirmer();
        let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
        c.admit(vec![host()], at(0));
        c.admit(vec![host()], at(2));
        let node = || finding(Kind::Node, "t0-h1-c0", "unreachable");
        for t in (4..=12).step_by(2) {
            assert!(c.admit(vec![node()], at(t)).0.is_empty(), "at {t}");
        }
        // 2 s + 11 s: the host's leftovers are out of the window.
        assert_eq!(names(&c.admit(vec![node()], at(14)).0), ["node/t0-h1-c0"]);
    }

    #[test]
    fn a_new_fault_elsewhere_is_not_held() {
        let mut c = confirmer();
        let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
        c.admit(vec![host()], at(0));
        c.admit(vec![host()], at(2));
        // A container on another host of the other rail: none of its pairs
        // cross host-t0-h1.
        let other = || finding(Kind::Node, "t1-h2-c1", "unreachable");
        assert!(c.admit(vec![other()], at(4)).0.is_empty());
        assert_eq!(names(&c.admit(vec![other()], at(6)).0), ["node/t1-h2-c1"]);
    }

    #[test]
    fn a_fault_with_evidence_the_cleared_one_cannot_explain_is_not_held() {
        // tor1 clears, tor0 fails at once: most of tor0's pairs cross tor1
        // too, but its pairs inside tor0 do not.
        let mut c = confirmer();
        let tor1 = finding(Kind::Tor, "tor1", "loss");
        c.admit(vec![tor1.clone()], at(0));
        c.admit(vec![tor1], at(2));
        let tor0 = || finding(Kind::Tor, "tor0", "loss");
        assert!(c.admit(vec![tor0()], at(4)).0.is_empty());
        assert_eq!(names(&c.admit(vec![tor0()], at(6)).0), ["tor/tor0"]);
    }

    #[test]
    fn a_second_fault_while_the_first_stands_is_only_confirmed() {
        let mut c = confirmer();
        let tor = || finding(Kind::Tor, "tor1", "loss");
        c.admit(vec![tor()], at(0));
        c.admit(vec![tor()], at(2));
        // Most of this node's pairs cross tor1, which still stands.
        let node = || finding(Kind::Node, "t0-h0-c0", "unreachable");
        assert!(c.admit(vec![tor(), node()], at(4)).0.len() == 1);
        let (a, _) = c.admit(vec![tor(), node()], at(6));
        assert_eq!(names(&a), ["tor/tor1", "node/t0-h0-c0"]);
    }

    #[test]
    fn the_same_component_coming_back_is_confirmed_again_not_held() {
        let mut c = confirmer();
        let tor = || finding(Kind::Tor, "tor1", "loss");
        c.admit(vec![tor()], at(0));
        c.admit(vec![tor()], at(2));
        c.admit(vec![], at(4));
        assert!(c.admit(vec![tor()], at(6)).0.is_empty());
        assert_eq!(names(&c.admit(vec![tor()], at(8)).0), ["tor/tor1"]);
    }

    #[test]
    fn resolution_needs_several_covered_clean_cycles() {
        let mut c = confirmer().resolve_after(3);
        let tor = || finding(Kind::Tor, "tor1", "loss");
        c.admit(vec![tor()], at(0));
        assert_eq!(names(&c.admit(vec![tor()], at(2)).0), ["tor/tor1"]);
        assert_eq!(names(&c.admit(vec![], at(4)).0), ["tor/tor1"]);
        assert_eq!(c.kept(), [(tor().component, Kept::Clearing { clean: 1 })]);
        assert_eq!(names(&c.admit(vec![], at(6)).0), ["tor/tor1"]);
        assert!(c.admit(vec![], at(8)).0.is_empty());
        assert!(c.kept().is_empty());
    }

    #[test]
    fn a_report_during_clearing_starts_the_count_again() {
        let mut c = confirmer().resolve_after(2);
        let tor = || finding(Kind::Tor, "tor1", "unreachable");
        c.admit(vec![tor()], at(0));
        c.admit(vec![tor()], at(2));
        assert_eq!(names(&c.admit(vec![], at(4)).0), ["tor/tor1"]);
        // Back again: no new confirmation, the alert just stays.
        assert_eq!(names(&c.admit(vec![tor()], at(6)).0), ["tor/tor1"]);
        assert_eq!(names(&c.admit(vec![], at(8)).0), ["tor/tor1"]);
        assert!(c.admit(vec![], at(10)).0.is_empty());
    }

    #[test]
    fn an_unknown_component_keeps_its_alert_and_symptom() {
        let mut c = confirmer().resolve_after(2);
        let host = || finding(Kind::Host, "host-t0-h1", "unreachable");
        let blind = |_: &Component| false;
        c.admit(vec![host()], at(0));
        c.admit(vec![host()], at(2));
        // A data gap: five cycles without fresh pairs for the host.
        for t in (4..=12).step_by(2) {
            let (a, _) = c.admit_covered(vec![], &blind, at(t));
            assert_eq!(names(&a), ["host/host-t0-h1"], "at {t}");
            assert_eq!(a[0].symptom, Symptom::Unreachable);
            assert_eq!(c.kept(), [(host().component, Kept::Unknown)]);
        }
        // Data again, still faulty: the same alert, no confirmation needed.
        assert_eq!(names(&c.admit(vec![host()], at(14)).0), ["host/host-t0-h1"]);
        // Unknown cycles neither count nor reset: clean, unknown, clean.
        assert_eq!(names(&c.admit(vec![], at(16)).0), ["host/host-t0-h1"]);
        assert_eq!(names(&c.admit_covered(vec![], &blind, at(18)).0).len(), 1);
        assert!(c.admit(vec![], at(20)).0.is_empty());
    }
}
