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
//! 3. **Hold beneath a faulty component**: at a fault's onset the pairs
//!    scraped first show it before the others, and on a loaded store the
//!    stagger can outlast the confirmation (a ToR's first pairs are one of
//!    its nodes'). A new component whose anomalous pairs all cross another
//!    component that is reported in the same cycle, alerting, or was
//!    alerting in the last `remember` (a flapping ToR's next outage) is held
//!    until it has been reported for `hold`; a fault of its own persists
//!    that long, onset evidence is absorbed by its parent by then. Beneath
//!    a component only remembered (neither reported nor alerting) it is held
//!    for `recent_hold` alone (a scrape interval and two cycles): were that
//!    component back, all its pairs would show it by then and the finding
//!    would be beneath a reported component, so an independent fault under
//!    a ToR that alerted minutes ago is not delayed by a whole window.
//!
//!    A link whose anomalous pairs all start or end at one NIC (a host's
//!    access link) is held the same way, beneath that NIC, even before the
//!    NIC is reported: at the onset of a host's outage the traces that
//!    caught it name its uplink while the pair counters name the NIC a
//!    cycle later; both are one incident, paged once, as the NIC.
//!
//!    Likewise a link all of whose anomalous pairs cross an *alerting*
//!    spine is held beneath it for as long as the spine alerts: a lossy
//!    spine drops only the flows hashed onto it, so while it stands (and
//!    while its leftovers leave the window) the link stage may name one
//!    or two of its links instead of the spine. One incident, paged once,
//!    as the spine. Before the spine is reported, any new finding all of
//!    whose anomalous pairs cross one spine (a link, a container, a ToR)
//!    is held beneath it for `recent_hold`: at the onset of a spine that
//!    drops only the flows hashed onto it, its first flows may name one
//!    link, or one container whose flows it happened to catch, a cycle
//!    or two before the spine shows on enough pairs; by then it is
//!    reported (and the finding held beneath it as above). A fault of its
//!    own pages `recent_hold` later; one that shows on a pair the spine
//!    does not carry (a same-ToR pair) is not delayed.
//!
//! 4. **No de-escalation**: a component alerting as `unreachable` that is
//!    then reported as `loss` keeps its `unreachable` alert until it
//!    resolves. A cut link coming back shows partial loss for up to a window
//!    (the window still holds the outage); re-labelling it would resolve the
//!    alert and start a new one, paging for the leftovers. Escalation (loss
//!    to unreachable) is news and changes the alert.
//!
//! 5. **Resolution needs covered, clean cycles**: an alerting component
//!    that is no longer reported keeps its alert (its last finding is
//!    re-admitted) until it has been *covered* and clean in
//!    `resolve_cycles` cycles since it was last reported (see
//!    `coverage.rs`). A cycle in which it is not covered — too few of its
//!    pairs have fresh data — is *unknown*: it neither counts towards the
//!    resolution nor resets it, and the alert stays as it was. A data gap
//!    therefore never resolves an alert. Nor does a cycle that reports
//!    its access link, or for a spine one of its links (rule 3): its pairs
//!    still show the fault under the link's name, so its count of clean
//!    cycles starts over. (A finding
//!    beneath a ToR does not keep the ToR's alert: it may be a new fault
//!    of its own.)
//!
//! 6. **One name per incident**: a finding the engine cannot tell apart
//!    from an alerting component (either lists the other as equivalent,
//!    as the two directions of a dead cable are) is reported under the
//!    alerting one's name, the other name among its equivalents. Which of
//!    indistinguishable components the engine names first is noise; were
//!    the name to follow it, the alert would resolve and a new one page
//!    for the same fault.
//!
//! Untrusted cycles (failed queries) do not call [`Confirmer::admit`], so
//! they neither advance nor break a streak.

use super::alerts::Finding;
use crate::engine::model::Symptom;
use skeletonhunter_common::topology::{path, Component, Kind};
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
    /// All its evidence lies on pairs of `parent` (reported now, alerting
    /// or alerting recently), and it has been reported for less than the
    /// hold: possibly that fault's onset.
    Beneath {
        /// The enclosing component.
        parent: Component,
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
    /// Not reported, but its access link `child` was (rule 3): its pairs
    /// are not clean, so its resolution starts over.
    Beneath {
        /// The finding reported beneath it.
        child: Component,
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
    /// When each streak began.
    since: BTreeMap<Component, SystemTime>,
    /// Components alerting within the last `remember`, with the last time.
    recent: BTreeMap<Component, SystemTime>,
    /// How long an alerting component is remembered after its alert.
    remember: Duration,
    /// How long a finding beneath a remembered (no longer alerting,
    /// not reported) component is held: until that one would be reported
    /// again if it were back.
    recent_hold: Duration,
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
            since: BTreeMap::new(),
            recent: BTreeMap::new(),
            remember: Duration::ZERO,
            recent_hold: hold,
        }
    }

    /// Remember an alerting component for `d` after its alert (rule 3).
    pub fn remember_for(mut self, d: Duration) -> Confirmer {
        self.remember = d;
        self
    }

    /// Hold a finding beneath a component that is only remembered (not
    /// reported, not alerting) for `d` instead of the whole hold (rule 3):
    /// that component's next outage shows on all its pairs within a scrape
    /// interval, after which the finding is beneath a reported component
    /// and held as long as ever.
    pub fn hold_beneath_recent(mut self, d: Duration) -> Confirmer {
        self.recent_hold = d;
        self
    }

    /// An alert resolves only after `cycles` (at least 1) covered, clean
    /// cycles.
    pub fn resolve_after(mut self, cycles: u32) -> Confirmer {
        self.resolve_cycles = cycles.max(1);
        self
    }

    /// New confirmation cycles and hold (the shards in use changed); the
    /// state kept so far stays.
    pub fn retime(&mut self, confirm_cycles: u32, hold: Duration, recent_hold: Duration) {
        self.confirm_cycles = confirm_cycles.max(1);
        self.hold = hold;
        self.recent_hold = recent_hold;
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
        self.keep_names(&mut findings);
        let reported: std::collections::BTreeSet<Component> =
            findings.iter().map(|f| f.component.clone()).collect();
        let again = self.pending_resolution(&reported, &findings, covered);
        findings.extend(again);
        let hold = self.hold;
        self.cleared.retain(|_, last| within(*last, now, hold));
        let remember = self.remember;
        self.recent.retain(|_, last| within(*last, now, remember));
        self.streak.retain(|c, _| reported.contains(c));
        self.since.retain(|c, _| reported.contains(c));
        // A component may be reported under several symptoms: count it once.
        for c in &reported {
            if !self.alerting.contains_key(c) {
                *self.streak.entry(c.clone()).or_insert(0) += 1;
                self.since.entry(c.clone()).or_insert(now);
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
            if let Some(why) = self.why_held(&f, &reported, now) {
                held.push((f, why));
                continue;
            }
            newly.push(c);
            admitted.push(f);
        }
        for c in reported {
            if self.alerting.contains_key(&c) || newly.contains(&c) {
                self.streak.remove(&c);
                self.since.remove(&c);
                self.cleared.remove(&c);
                self.clean.remove(&c);
                self.alerting.insert(c, now);
            }
        }
        for c in self.alerting.keys() {
            self.recent.insert(c.clone(), now);
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
        findings: &[Finding],
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
            let child = findings
                .iter()
                .find(|f| access_end(f).as_ref() == Some(&c) || spine_above(f, [&c]).is_some());
            let why = if let Some(child) = child {
                self.clean.remove(&c);
                Kept::Beneath {
                    child: child.component.clone(),
                }
            } else if covered(&c) {
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

    /// Rule 6: a finding equivalent to an alerting component that is not
    /// itself reported takes that component's name (and its context
    /// labels); its own name joins its equivalents.
    fn keep_names(&self, findings: &mut [Finding]) {
        let mut reported: Vec<Component> = findings.iter().map(|f| f.component.clone()).collect();
        for f in findings.iter_mut() {
            if self.alerting.contains_key(&f.component) {
                continue;
            }
            let twin = self.alerting.keys().find(|c| {
                !reported.contains(c)
                    && (f.equivalent.contains(c)
                        || self.last.get(*c).is_some_and(|last| {
                            last.iter().any(|l| l.equivalent.contains(&f.component))
                        }))
            });
            let Some(twin) = twin.cloned() else {
                continue;
            };
            let own = std::mem::replace(&mut f.component, twin.clone());
            f.equivalent.retain(|e| *e != twin);
            f.equivalent.push(own);
            if let Some(last) = self.last.get(&twin).and_then(|l| l.first()) {
                f.context = last.context.clone();
            }
            reported.push(twin);
        }
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

impl Confirmer {
    /// Why the new finding `f` may not fire yet (rules 1 to 3), if so.
    fn why_held(
        &self,
        f: &Finding,
        reported: &std::collections::BTreeSet<Component>,
        now: SystemTime,
    ) -> Option<Held> {
        let seen = self.streak.get(&f.component).copied().unwrap_or(0);
        if seen < self.confirm_cycles {
            return Some(Held::Unconfirmed { seen });
        }
        if let Some(cleared) = self.leftover_of(f) {
            return Some(Held::AfterClear { cleared });
        }
        if let Some(parent) = spine_above(f, self.alerting.keys()) {
            return Some(Held::Beneath { parent });
        }
        let began = self.since.get(&f.component).copied().unwrap_or(now);
        let now_or_alerting = reported.iter().chain(self.alerting.keys());
        if within(began, now, self.hold) {
            if let Some(parent) = beneath(f, now_or_alerting) {
                return Some(Held::Beneath { parent });
            }
        }
        if within(began, now, self.recent_hold) {
            if let Some(parent) = beneath(f, self.recent.keys()).or_else(|| spine_of(f)) {
                return Some(Held::Beneath { parent });
            }
        }
        if within(began, now, self.hold) {
            return access_end(f).map(|parent| Held::Beneath { parent });
        }
        None
    }
}

/// The NIC that every anomalous pair of a link finding starts or ends at,
/// if there is one: the link is that NIC's access link, and its evidence
/// may be the onset of the NIC's (or its host's) fault (rule 3).
fn access_end(f: &Finding) -> Option<Component> {
    if f.component.kind != Kind::Link {
        return None;
    }
    let ((a, b), rest) = f.hit_pairs.split_first()?;
    [&a.nic, &b.nic]
        .into_iter()
        .filter(|n| !n.is_empty())
        .find(|n| rest.iter().all(|(x, y)| x.nic == **n || y.nic == **n))
        .map(|n| Component::new(Kind::Nic, n.to_string()))
}

/// The spine among `alerting` that every anomalous pair of link finding
/// `f` crosses, if any: the link's loss is that spine's fault seen one flow
/// at a time (rule 3).
fn spine_above<'a>(
    f: &Finding,
    alerting: impl IntoIterator<Item = &'a Component>,
) -> Option<Component> {
    if f.component.kind != Kind::Link {
        return None;
    }
    beneath(f, alerting.into_iter().filter(|c| c.kind == Kind::Spine))
}

/// The spine that every anomalous pair of finding `f` (of any kind but a
/// spine) crosses, by the pairs' labels, if any: at a spine's onset its
/// first pairs may name one of its links, or a container or ToR whose
/// pairs it hashed onto its faulty member, before the spine shows on
/// enough of them (rule 3).
fn spine_of(f: &Finding) -> Option<Component> {
    if f.component.kind == Kind::Spine {
        return None;
    }
    let (a, b) = f.hit_pairs.first()?;
    beneath(f, path(a, b).iter().filter(|c| c.kind == Kind::Spine))
}

/// One of `parents` other than `f`'s own component that every one of `f`'s
/// anomalous pairs crosses (rule 3).
fn beneath<'a>(f: &Finding, parents: impl Iterator<Item = &'a Component>) -> Option<Component> {
    if f.hit_pairs.is_empty() {
        return None;
    }
    parents
        .filter(|r| **r != f.component)
        .find(|r| f.hit_pairs.iter().all(|(a, b)| path(a, b).contains(r)))
        .cloned()
}

/// `now` is less than `hold` after `last` (a clock step back counts as within).
fn within(last: SystemTime, now: SystemTime, hold: Duration) -> bool {
    now.duration_since(last).map_or(true, |d| d < hold)
}

#[cfg(test)]
mod tests;
