//! Link-level localization from per-path evidence (multi-flow probing: a
//! pair's flows spread over its ECMP paths, and each traced path carries
//! the loss of the flows taking it).
//!
//! A link is a traced hop address: the directed link into the router that
//! answered from it (routers answer from their ingress interface on the
//! test fabric and by default on Linux). The stage runs before the
//! component tomography and only on pairs with path data:
//!
//! 1. every link crossed by some but not all of a pair's paths is a
//!    candidate; its evidence is the within-pair contrast of
//!    [`super::contrast`] (flows via the link against the same pair's other
//!    flows), which cancels every effect shared by a pair's flows —
//!    endpoint, ToR, and the reverse-path loss a dead link causes on pairs
//!    whose forward paths avoid it;
//! 2. a candidate passes with a significant pooled test (Bonferroni over
//!    the candidates), at least `min_pairs` pairs leaning its way, and
//!    evidence that survives dropping its `min_pairs` strongest pairs;
//! 3. the router rule: which links enter (or leave) the same router comes
//!    from alias resolution on the traces (when link `a` is followed by
//!    `b`, the router `a` enters is the one `b` leaves); if the other links
//!    into the same router, or out of it, pooled, show the symptom too
//!    (significant at the uncorrected level, at least half the candidate's
//!    extra loss, the pairs the candidate explains set aside: its reverse
//!    pairs would lend them its own evidence), the router is at fault, not
//!    the link: the stage blames none of the router's links and sets the
//!    cross-ToR pairs around it aside (the component tomography then blames
//!    the spine block from the pairs' labels); a link that would be the
//!    second accepted of one router (entering or leaving it, not the other
//!    direction of an accepted cable) finds the router too, and the
//!    accepted one is cleared: at a spine's onset the first link accepted
//!    takes its pairs' evidence from the siblings before they can show it;
//! 4. the shadow rule: a link adjacent to another passing link on the same
//!    paths may only see that link's loss (the uplink before a lossy
//!    downlink carries some of its flows); it is passed over when its
//!    evidence vanishes without the narrower neighbour's paths, or when a
//!    wider neighbour still passes without its paths and is about as lossy;
//! 5. greedy: the lossiest passing link (then the most significant) is
//!    accepted, with the reverse direction of its cable listed as
//!    equivalent when that passed too, and the pairs it
//!    explains (below) are taken out of the other candidates' evidence (so
//!    the links after it on its paths, and the links of the reverse pairs
//!    whose replies it hit, lose their evidence), then again; each round
//!    accepts a link or finds a router, so it ends.
//!
//! The pairs an accepted link explains — those whose forward flows can
//! cross it, their reverse pairs, whose replies can, and, when the link
//! hangs off one ToR (all its senders, or all its receivers, under it),
//! every cross-ToR pair of that ToR — are left out of the component
//! tomography, so a link fault is never also blamed on the ToR or the
//! spine above it. Latency is not localized to links (the path series
//! carry loss only).

use super::contrast::{contrast_test, extra_loss, without_strongest, Contrast};
use super::model::{Blame, Config, Fault, PairStats, Symptom};
use super::paths::{explain_routers, mark_explained, Paths};
use super::stats::one_sided_lr_p_value;
use skeletonhunter_common::topology::{Component, Kind};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One candidate link's test under the current explanation.
#[derive(Debug, Clone)]
struct Verdict {
    link: u32,
    stat: f64,
    p_value: f64,
    score: f64,
    /// Pairs leaning the link's way.
    leaning: Vec<usize>,
    /// Passes the pooled, count and robustness tests (router rule aside).
    passes: bool,
    /// The reverse direction of the same cable, when it passed too: both
    /// directions dropping look, once replies are accounted for, like
    /// either one (the pairs one explains are the other's evidence).
    reverse: Vec<u32>,
}

fn evaluate(
    paths: &Paths,
    l: u32,
    explained: &[bool],
    level: f64,
    config: &Config,
) -> Option<Verdict> {
    let rows = paths.contrasts(l, explained);
    if rows.len() < config.min_pairs.max(1) {
        return None;
    }
    let (_, stat) = contrast_test(&rows);
    let p_value = one_sided_lr_p_value(stat);
    let leaning: Vec<usize> = rows.iter().filter(|r| r.leans()).map(|r| r.pair).collect();
    let score = extra_loss(&rows);
    let passes = p_value < level && score > 0.0 && leaning.len() >= config.min_pairs.max(1) && {
        let (_, rest) = contrast_test(&without_strongest(&rows, config.min_pairs));
        one_sided_lr_p_value(rest) < config.alpha
    };
    Some(Verdict {
        link: l,
        stat,
        p_value,
        score,
        leaning,
        passes,
        reverse: Vec::new(),
    })
}

/// The router rule: the other links into (or out of) the same router,
/// pooled, show the symptom as well (significant at the uncorrected level,
/// at least half the candidate's extra loss), once the pairs `v`'s link
/// explains are set aside (they would lend its siblings its own evidence:
/// their replies cross it).
fn router_fault(
    pairs: &[&PairStats],
    paths: &Paths,
    routers: &[u32],
    v: &Verdict,
    explained: &[bool],
    config: &Config,
) -> Option<u32> {
    let mut own = vec![false; pairs.len()];
    mark_explained(pairs, paths, v.link, &mut own);
    let aside: Vec<bool> = paths
        .rows
        .iter()
        .enumerate()
        .map(|(r, row)| explained[r] || own[row.pair])
        .collect();
    let sides = paths.siblings(routers, v.link);
    (0..2)
        .find(|&side| {
            let side = &sides[side];
            let pooled: Vec<Contrast> = side
                .iter()
                .flat_map(|&m| paths.contrasts(m, &aside))
                .collect();
            let (_, stat) = contrast_test(&pooled);
            let leaning = pooled.iter().filter(|r| r.leans()).count();
            one_sided_lr_p_value(stat) < config.alpha
                && leaning >= config.min_pairs.max(1)
                && extra_loss(&pooled) >= 0.5 * v.score
        })
        .map(|side| routers[(2 * v.link + side as u32) as usize])
}

/// What the link stage concluded.
#[derive(Debug, Clone, Default)]
pub struct LinkReport {
    /// Blamed links (kind `link`), `hit_pairs` indexing the input.
    pub faults: Vec<Fault>,
    /// Tested links worth exporting: the blamed ones and those whose test
    /// passed but which the router rule cleared.
    pub blame: Vec<Blame>,
    /// Per input pair: explained by a blamed link (forward or reply).
    pub explained: Vec<bool>,
}

/// The greedy's state.
struct Greedy<'a> {
    pairs: &'a [&'a PairStats],
    paths: Paths,
    routers: Vec<u32>,
    config: &'a Config,
    level: f64,
    /// Path rows explained by accepted links or faulty routers.
    explained: Vec<bool>,
    /// Routers found at fault: their links are never blamed (a weaker
    /// link of the router may lack siblings with evidence of their own).
    faulty_routers: HashSet<u32>,
    accepted: Vec<Verdict>,
    cleared: HashMap<u32, Verdict>,
}

/// What one greedy round did.
enum Step {
    Accepted(Verdict),
    RouterFound,
    Done,
}

impl Greedy<'_> {
    /// Test the remaining candidates; accept the strongest passing link,
    /// unless a stronger one reveals a faulty router first.
    fn round(&mut self, candidates: &[u32]) -> Step {
        let verdicts: Vec<Verdict> = candidates
            .iter()
            .filter(|l| !self.accepted.iter().any(|a| a.link == **l))
            .filter_map(|&l| evaluate(&self.paths, l, &self.explained, self.level, self.config))
            .filter(|v| v.passes)
            .collect();
        let mut passing: Vec<&Verdict> = verdicts.iter().collect();
        // Lossiest first: a link next to a faulty one (or two faulty
        // links of one router) carries part of its loss over more flows,
        // and would win on significance alone.
        passing.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.stat.total_cmp(&a.stat))
                .then(a.link.cmp(&b.link))
        });
        for v in &passing {
            let v = *v;
            let l = 2 * v.link as usize;
            if self.faulty_routers.contains(&self.routers[l])
                || self.faulty_routers.contains(&self.routers[l + 1])
            {
                self.cleared.insert(v.link, v.clone());
                continue;
            }
            if self.shadowed(v, &passing) {
                continue;
            }
            if let Some(router) = self.shared_router(v) {
                self.router_found(router, v);
                return Step::RouterFound;
            }
            let router = router_fault(
                self.pairs,
                &self.paths,
                &self.routers,
                v,
                &self.explained,
                self.config,
            );
            if let Some(group) = router {
                self.faulty_routers.insert(group);
                self.cleared.insert(v.link, v.clone());
                return Step::RouterFound;
            }
            let mut best = v.clone();
            best.reverse = passing
                .iter()
                .map(|r| r.link)
                .filter(|&r| self.is_reverse(r, v.link))
                .collect();
            return Step::Accepted(best);
        }
        Step::Done
    }
}

impl Greedy<'_> {
    /// The router that `v`'s link and an accepted link (not the other
    /// direction of its cable) both enter or leave, if any. Two faulty
    /// links of one router are far likelier one faulty router than two
    /// faults; and at a router fault's onset, before its other links
    /// carry enough evidence for the router rule, it is how the rule is
    /// met (the first link accepted takes its pairs' evidence away from
    /// the siblings, and the next passes as a link of its own).
    fn shared_router(&self, v: &Verdict) -> Option<u32> {
        let mine = self.ends(v.link);
        self.accepted
            .iter()
            .filter(|a| !self.is_reverse(a.link, v.link))
            .flat_map(|a| self.ends(a.link))
            .find(|r| mine.contains(r))
    }

    /// `router` is at fault: none of its links is blamed, those accepted
    /// before included, and `v` is cleared.
    fn router_found(&mut self, router: u32, v: &Verdict) {
        self.faulty_routers.insert(router);
        let accepted = std::mem::take(&mut self.accepted);
        let (kept, of_router): (Vec<Verdict>, Vec<Verdict>) = accepted
            .into_iter()
            .partition(|a| !self.ends(a.link).contains(&router));
        self.accepted = kept;
        for a in of_router {
            self.cleared.insert(a.link, a);
        }
        self.cleared.insert(v.link, v.clone());
    }

    /// The routers link `l` enters and leaves.
    fn ends(&self, l: u32) -> [u32; 2] {
        let i = 2 * l as usize;
        [self.routers[i], self.routers[i + 1]]
    }

    /// Whether `r` enters the router `l` leaves and leaves the one `l`
    /// enters: the other direction of `l`'s cable.
    fn is_reverse(&self, r: u32, l: u32) -> bool {
        let ([r_in, r_out], [l_in, l_out]) = (self.ends(r), self.ends(l));
        r != l && r_in == l_out && r_out == l_in
    }

    /// Explain anew, from the accepted links and the faulty routers: per
    /// input pair, whether an accepted link explains it (`by_links`), and
    /// per path row, that or a faulty router. Every flow of the pairs a
    /// link touches is explained, replies included: a reply-side loss is
    /// the same on all forward paths of a pair only on average over its
    /// flows, and a pair of few flows would otherwise lend a spurious
    /// contrast to its other links. Anew, not added to, since a router
    /// found clears the links of it accepted before.
    fn explain(&mut self, by_links: &mut [bool]) {
        by_links.fill(false);
        for v in &self.accepted {
            mark_explained(self.pairs, &self.paths, v.link, by_links);
        }
        for (r, row) in self.paths.rows.iter().enumerate() {
            self.explained[r] = by_links[row.pair];
        }
        explain_routers(
            self.pairs,
            &self.paths,
            &self.routers,
            &self.faulty_routers,
            &mut self.explained,
        );
    }

    /// Unexplained rows crossing `l`.
    fn rows(&self, l: u32) -> BTreeSet<usize> {
        self.paths.rows_of[l as usize]
            .iter()
            .copied()
            .filter(|&r| !self.explained[r])
            .collect()
    }

    /// `v` with the rows of `l` set aside.
    fn without(&self, v: u32, l: u32) -> Option<Verdict> {
        let mut aside = self.explained.clone();
        for &r in &self.paths.rows_of[l as usize] {
            aside[r] = true;
        }
        evaluate(&self.paths, v, &aside, self.level, self.config)
    }

    /// Whether `v` only shadows an adjacent passing link on the same
    /// paths: a link after (or before) a faulty one sees the loss of the
    /// flows it shares with it. Against a narrower neighbour (whose rows
    /// are a strict subset of `v`'s) `v` is a shadow when it no longer
    /// passes without them; against a wider one when the wider one still
    /// passes without `v`'s rows and `v` is not clearly lossier than it
    /// is there (then the wider link explains both).
    fn shadowed(&self, v: &Verdict, passing: &[&Verdict]) -> bool {
        let mine = self.rows(v.link);
        passing.iter().any(|n| {
            let adjacent = self.paths.adjacent.contains(&(v.link, n.link))
                || self.paths.adjacent.contains(&(n.link, v.link));
            if !adjacent {
                return false;
            }
            let theirs = self.rows(n.link);
            if theirs.len() < mine.len() && theirs.is_subset(&mine) {
                !self.without(v.link, n.link).is_some_and(|w| w.passes)
            } else if mine.len() < theirs.len() && mine.is_subset(&theirs) {
                self.without(n.link, v.link)
                    .is_some_and(|w| w.passes && v.score <= 1.5 * w.score)
            } else {
                false
            }
        })
    }
}

/// Localize faulty ECMP links over `pairs` (see the module docs).
pub fn localize(pairs: &[&PairStats], config: &Config) -> LinkReport {
    let mut out = LinkReport {
        explained: vec![false; pairs.len()],
        ..LinkReport::default()
    };
    if pairs.iter().all(|p| p.paths.is_empty()) {
        return out;
    }
    let paths = Paths::build(pairs);
    let none = vec![false; paths.rows.len()];
    let candidates: Vec<u32> = (0..paths.names.len() as u32)
        .filter(|&l| !paths.contrasts(l, &none).is_empty())
        .collect();
    let mut g = Greedy {
        pairs,
        routers: paths.routers(),
        explained: none,
        paths,
        config,
        level: config.alpha / candidates.len().max(1) as f64,
        faulty_routers: HashSet::new(),
        accepted: Vec::new(),
        cleared: HashMap::new(),
    };
    // Each round accepts a link or finds a router: bounded by both counts.
    for _ in 0..2 * candidates.len() {
        match g.round(&candidates) {
            Step::Done => break,
            Step::RouterFound => g.explain(&mut out.explained),
            Step::Accepted(best) => {
                g.cleared.remove(&best.link);
                g.accepted.push(best);
                g.explain(&mut out.explained);
            }
        }
    }
    for v in &g.accepted {
        out.faults.push(fault_of(&g.paths, v, config));
    }
    out.blame = blame_of(&g.paths, &g.accepted, g.cleared.values(), config);
    out
}

fn symptom_of(score: f64, config: &Config) -> Symptom {
    if score >= config.unreachable_min_loss {
        Symptom::Unreachable
    } else {
        Symptom::Loss
    }
}

fn fault_of(paths: &Paths, v: &Verdict, config: &Config) -> Fault {
    // Links crossed by exactly the same path rows cannot be told apart.
    let own = &paths.rows_of[v.link as usize];
    let equivalent = (0..paths.names.len())
        .filter(|&m| m != v.link as usize && &paths.rows_of[m] == own)
        .chain(v.reverse.iter().map(|&r| r as usize))
        .map(|m| Component::new(Kind::Link, paths.names[m].clone()))
        .collect();
    Fault {
        kind: Kind::Link,
        id: paths.names[v.link as usize].clone(),
        score: v.score,
        p_value: v.p_value,
        symptom: symptom_of(v.score, config),
        pairs: v.leaning.len(),
        equivalent,
        hit_pairs: v.leaning.clone(),
    }
}

fn blame_of<'a>(
    paths: &Paths,
    accepted: &[Verdict],
    cleared: impl Iterator<Item = &'a Verdict>,
    config: &Config,
) -> Vec<Blame> {
    let mut cleared: Vec<&Verdict> = cleared.collect();
    cleared.sort_by_key(|v| v.link);
    accepted
        .iter()
        .map(|v| (v, true))
        .chain(cleared.into_iter().map(|v| (v, false)))
        .map(|(v, faulty)| Blame {
            component: Component::new(Kind::Link, paths.names[v.link as usize].clone()),
            symptom: symptom_of(v.score, config),
            score: v.score,
            p_value: v.p_value,
            faulty,
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
