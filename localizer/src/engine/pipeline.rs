//! The whole engine in one call: path matrix, detection, tomography.
//!
//! This is the orchestrator of the `engine` layer (the folder's `mod.rs`
//! only declares and re-exports); `analyze` and the online loop both come
//! through here.

use super::detect;
use super::evenness;
use super::hoststack;
use super::links;
use super::model::{Config, Fault, HostStack, PairStats, Report, Symptom, Timings};
use super::persistence;
use super::tomography;
use super::topology;
use skeletonhunter_common::topology::{Component, Kind};

/// Run detection and localization over one window of pair aggregates.
///
/// Pairs with the same (src node, dst node) are expected at most once; pairs
/// with an empty src or dst node id, or without any round, are ignored.
pub fn analyze(pairs: &[PairStats], config: &Config) -> Report {
    analyze_timed(pairs, config).0
}

/// [`analyze`], also returning how long each stage took.
pub fn analyze_timed(pairs: &[PairStats], config: &Config) -> (Report, Timings) {
    let t0 = std::time::Instant::now();
    let (index, usable) = usable(pairs);
    analyze_usable(t0, index, usable, config)
}

/// The pairs the engine can use, with their index in `pairs`.
fn usable(pairs: &[PairStats]) -> (Vec<usize>, Vec<&PairStats>) {
    pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.src.node.is_empty() && !p.dst.node.is_empty() && p.rounds > 0.0)
        .unzip()
}

/// [`analyze`] with host-stack evidence: the pairs a node's own stack
/// explains ([`hoststack`]) are kept out of the link stage and the
/// tomography, and their hosts get `host_stack` verdicts. With no
/// evidence (`stack` empty) this is [`analyze`], to the byte.
pub fn analyze_with(pairs: &[PairStats], stack: &HostStack, config: &Config) -> Report {
    if stack.is_empty() {
        return analyze(pairs, config);
    }
    let t0 = std::time::Instant::now();
    let (index, usable) = usable(pairs);
    let busy = hoststack::busy_nodes(&usable, stack, config);
    if busy.is_empty() {
        // Nothing to screen: no second detection pass.
        return analyze_usable(t0, index, usable, config).0;
    }
    let anomalous = {
        let matrix = topology::PathMatrix::build(&usable);
        let e = detect::detect(&usable, &matrix, config);
        (0..usable.len())
            .map(|i| Symptom::ALL.iter().any(|&s| e.is_anomalous(s, i)))
            .collect::<Vec<bool>>()
    };
    let screen = hoststack::screen(&usable, &anomalous, &busy);
    let (rest_index, rest): (Vec<usize>, Vec<&PairStats>) = usable
        .iter()
        .zip(&index)
        .zip(&screen.explained)
        .filter(|(_, explained)| !**explained)
        .map(|((p, i), _)| (*i, *p))
        .unzip();
    let (mut report, _) = analyze_usable(t0, rest_index, rest, config);
    for mut f in screen.faults {
        for i in &mut f.hit_pairs {
            *i = index[*i];
        }
        report.faults.push(f);
    }
    report.faults.sort_by(tomography::localize::report_order);
    report.blame.extend(screen.blame);
    report.pairs_observed = usable.len();
    let explained_anomalous = anomalous
        .iter()
        .zip(&screen.explained)
        .filter(|(a, e)| **a && **e)
        .count();
    report.pairs_anomalous += explained_anomalous;
    report
}

/// Everything after choosing the pairs: `usable[i]` is `pairs[index[i]]`
/// of the caller, whose indices the faults' `hit_pairs` use.
fn analyze_usable(
    t0: std::time::Instant,
    index: Vec<usize>,
    usable: Vec<&PairStats>,
    config: &Config,
) -> (Report, Timings) {
    // Blamed ECMP links first; the pairs they explain stay out of the
    // component tomography (no-op without per-path data).
    let links = links::localize(&usable, config);
    let (kept, rows): (Vec<usize>, Vec<&PairStats>) = usable
        .iter()
        .enumerate()
        .filter(|(i, _)| !links.explained[*i])
        .map(|(i, p)| (index[i], *p))
        .unzip();
    let matrix = topology::PathMatrix::build(&rows);
    let t1 = std::time::Instant::now();
    let mut evidence = detect::detect(&rows, &matrix, config);
    let t2 = std::time::Instant::now();
    let mut report = tomography::localize(&matrix, &evidence, config);
    let mut faulty = loss_fault_columns(&matrix, &report);
    if faulty.is_empty() {
        faulty = loss_suspect_columns(&matrix, &report, config);
    }
    if let Some(loss) = detect::rebased_loss(&evidence.loss, &matrix, &faulty, config) {
        evidence.loss = loss;
        report = tomography::localize(&matrix, &evidence, config);
    }
    hold_tor_verdicts(&mut report, &rows, config);
    drop_departed_containers(&mut report, &rows);
    drop_blips(&mut report, &rows, evidence.loss.background, config);
    for f in &mut report.faults {
        for i in &mut f.hit_pairs {
            *i = kept[*i];
        }
    }
    let mut link_hits = std::collections::BTreeSet::new();
    for mut f in links.faults {
        for i in &mut f.hit_pairs {
            *i = index[*i];
            link_hits.insert(*i);
        }
        report.faults.push(f);
    }
    report.faults.sort_by(tomography::localize::report_order);
    report.blame.extend(links.blame);
    report.pairs_observed = usable.len();
    report.pairs_anomalous = evidence.anomalous_pairs() + link_hits.len();
    let t3 = std::time::Instant::now();
    (
        report,
        Timings {
            matrix: t1 - t0,
            detect: t2 - t1,
            localize: t3 - t2,
        },
    )
}

/// The matrix columns of the report's loss and unreachable faults.
fn loss_fault_columns(m: &topology::PathMatrix, report: &Report) -> Vec<usize> {
    report
        .faults
        .iter()
        .filter(|f| matches!(f.symptom, Symptom::Loss | Symptom::Unreachable))
        .filter_map(|f| {
            m.columns
                .iter()
                .position(|c| c.kind == f.kind && c.id == f.id)
        })
        .collect()
}

/// With no loss fault paged, the switches (ToR, spine) among the loss
/// candidates significant at `alpha` that did not pass. A gray spine over
/// a third of a small fabric's pairs (a probe or two lost on each, none
/// significant alone) lifts the background it is tested against
/// several-fold, and then neither it nor a gray container beside it
/// passes. The background is re-read without their pairs, and only when
/// that halves it ([`detect::rebased_loss`]). Containers are left out:
/// their few pairs lift it less, and read again without them, a
/// container whose pairs lost their probes in microbursts passed.
fn loss_suspect_columns(m: &topology::PathMatrix, report: &Report, config: &Config) -> Vec<usize> {
    let suspects: std::collections::HashSet<&Component> = report
        .blame
        .iter()
        .filter(|b| matches!(b.component.kind, Kind::Spine | Kind::Tor))
        .filter(|b| b.symptom == Symptom::Loss && !b.faulty && b.p_value < config.alpha)
        .map(|b| &b.component)
        .collect();
    (0..m.columns.len())
        .filter(|&j| suspects.contains(&m.columns[j]))
        .collect()
}

/// Drop the ToR loss verdicts that the per-path rows of their pairs do
/// not bear out (see [`evenness`]): a link fault, or one whose per-path
/// evidence has not arrived yet. `hit_pairs` still index `rows`.
fn hold_tor_verdicts(report: &mut Report, rows: &[&PairStats], config: &Config) {
    withdraw(report, |f| {
        f.kind == Kind::Tor
            && f.symptom != Symptom::Latency
            && evenness::check_tor(&hit(f, rows), f.score, config.alpha).holds_back()
    });
}

/// Drop the loss verdicts whose pairs lose less than `min_loss_excess`
/// above the background outside their busiest moment ([`persistence`]): a
/// blip that happened to take probes of pairs sharing a component.
/// `hit_pairs` index `rows`.
fn drop_blips(report: &mut Report, rows: &[&PairStats], background: f64, config: &Config) {
    withdraw(report, |f| {
        if f.symptom != Symptom::Loss {
            return false;
        }
        let outside = persistence::outside_busiest_moment(&hit(f, rows));
        outside.is_some_and(|o| o.excess_rate(background) < config.min_loss_excess)
    });
}

/// The pairs a fault explains, from its `hit_pairs` into `rows`.
fn hit<'p>(f: &Fault, rows: &[&'p PairStats]) -> Vec<&'p PairStats> {
    f.hit_pairs
        .iter()
        .filter_map(|&i| rows.get(i).copied())
        .collect()
}

/// Take the faults `drop` picks out of the report, their blame no longer
/// faulty.
fn withdraw(report: &mut Report, mut drop: impl FnMut(&Fault) -> bool) {
    let mut dropped = Vec::new();
    report.faults.retain(|f| {
        let d = drop(f);
        if d {
            dropped.push(f.component());
        }
        !d
    });
    for b in &mut report.blame {
        if dropped.contains(&b.component) {
            b.faulty = false;
        }
    }
}

/// A container that left (or joined) the job mid-window is not
/// unreachable: the dials towards it fail in the rounds it was gone, and
/// in those rounds it probed nobody, so its own pairs have fewer rounds
/// (at most) than its most-probed inbound pair, and no failed dial. An unreachable container fails dials both ways
/// (a dial needs the round trip) in every round it is probed. Such a
/// `node` unreachable verdict is dropped, its blame not faulty.
fn drop_departed_containers(report: &mut Report, rows: &[&PairStats]) {
    let departed = |id: &str| {
        let (mut out_rounds, mut out_failed, mut in_rounds) = (None::<f64>, 0.0, None::<f64>);
        for p in rows {
            if p.src.node == id {
                out_rounds = Some(out_rounds.unwrap_or(0.0).max(p.rounds));
                out_failed += p.failed_dials;
            } else if p.dst.node == id {
                in_rounds = Some(in_rounds.unwrap_or(0.0).max(p.rounds));
            }
        }
        matches!((out_rounds, in_rounds), (Some(o), Some(i)) if out_failed == 0.0 && o < i)
    };
    withdraw(report, |f| {
        f.kind == Kind::Node && f.symptom == Symptom::Unreachable && departed(&f.id)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{Blame, Fault, Symptom};
    use skeletonhunter_common::topology::{Component, Identity, Kind};

    #[test]
    fn report_serializes_to_the_design_json() {
        let report = Report {
            faults: vec![Fault {
                kind: Kind::Tor,
                id: "asw-1".into(),
                score: 0.5,
                p_value: 1e-9,
                symptom: Symptom::Loss,
                pairs: 17,
                equivalent: vec![Component::new(Kind::Nic, "10.0.3.1")],
                hit_pairs: vec![3, 4],
            }],
            pairs_observed: 1234,
            pairs_anomalous: 40,
            blame: vec![Blame {
                component: Component::new(Kind::Tor, "asw-1"),
                symptom: Symptom::Loss,
                score: 0.5,
                p_value: 1e-9,
                faulty: true,
            }],
        };
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "faults": [{"kind": "tor", "id": "asw-1", "score": 0.5, "p_value": 1e-9,
                            "symptom": "loss", "pairs": 17,
                            "equivalent": [{"kind": "nic", "id": "10.0.3.1"}]}],
                "pairs_observed": 1234, "pairs_anomalous": 40
            })
        );
        // No equivalent: the key is left out.
        let mut r = report.clone();
        r.faults[0].equivalent.clear();
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["faults"][0].get("equivalent").is_none());
    }

    #[test]
    fn unusable_pairs_are_ignored() {
        let good = PairStats {
            src: Identity {
                node: "a".into(),
                ..Default::default()
            },
            dst: Identity {
                node: "b".into(),
                ..Default::default()
            },
            rounds: 3.0,
            sent: 300.0,
            ..Default::default()
        };
        let no_rounds = PairStats {
            rounds: 0.0,
            ..good.clone()
        };
        let no_id = PairStats {
            src: Identity::default(),
            ..good.clone()
        };
        let r = analyze(&[good, no_rounds, no_id], &Config::default());
        assert_eq!(r.pairs_observed, 1);
        assert!(r.faults.is_empty());
    }

    fn endpoint(node: &str, tor: &str, spine: &str) -> Identity {
        Identity {
            node: node.into(),
            nic: format!("nic-{node}"),
            host: format!("host-{node}"),
            tor: tor.into(),
            spine: spine.into(),
            ..Default::default()
        }
    }

    fn probed(src: &Identity, dst: &Identity, lost: f64, hops: &[&str]) -> PairStats {
        PairStats {
            src: src.clone(),
            dst: dst.clone(),
            rounds: 10.0,
            sent: 1000.0,
            lost,
            hops: hops.iter().map(std::string::ToString::to_string).collect(),
            ..Default::default()
        }
    }

    fn named(r: &Report) -> Vec<String> {
        r.faults
            .iter()
            .map(|f| format!("{}:{}", f.component(), f.symptom.as_str()))
            .collect()
    }

    /// ToR t1 under spine s1 and t2 under s2: every cross pair crosses both
    /// spines, so labels cannot tell them apart. The traces show two routers
    /// (ECMP) and only the pairs through 10.0.0.1 lose packets: that router
    /// is blamed, not a spine.
    #[test]
    fn traced_hops_single_out_the_router_the_lossy_pairs_cross() {
        let a: Vec<Identity> = (0..4)
            .map(|i| endpoint(&format!("a{i}"), "t1", "s1"))
            .collect();
        let b: Vec<Identity> = (0..4)
            .map(|i| endpoint(&format!("b{i}"), "t2", "s2"))
            .collect();
        let mut pairs = Vec::new();
        for i in 0..4 {
            pairs.push(probed(&a[i], &a[(i + 1) % 4], 0.0, &[]));
            pairs.push(probed(&b[i], &b[(i + 1) % 4], 0.0, &[]));
            for (j, bj) in b.iter().enumerate() {
                let (router, lost) = if (i + j) % 2 == 0 {
                    ("10.0.0.1", 200.0)
                } else {
                    ("10.0.0.2", 0.0)
                };
                pairs.push(probed(&a[i], bj, lost, &["10.0.1.1", router]));
            }
        }
        let r = analyze(&pairs, &Config::default());
        assert_eq!(named(&r), vec!["hop/10.0.0.1:loss"]);
        let f = &r.faults[0];
        assert!((f.score - 0.2).abs() < 0.05, "{}", f.score);
        assert_eq!(f.pairs, 8);
        assert!(f.equivalent.is_empty(), "{:?}", f.equivalent);

        // Without the traces the spines are one column (s1 reported, s2
        // equivalent) and no hop can be named.
        for p in &mut pairs {
            p.hops.clear();
        }
        let r = analyze(&pairs, &Config::default());
        assert!(r.faults.iter().all(|f| f.kind != Kind::Hop));
        let m = topology::PathMatrix::build(&pairs.iter().collect::<Vec<_>>());
        let j = m.find(&Component::new(Kind::Spine, "s2")).unwrap();
        assert_eq!(m.columns[j], Component::new(Kind::Spine, "s1"));
    }

    /// A hop seen on exactly the pairs crossing a ToR (its own address) is
    /// indistinguishable from it: the ToR is reported, the hop listed.
    #[test]
    fn a_hop_that_always_goes_with_a_tor_is_listed_as_its_equivalent() {
        let tors = ["t1", "t2", "t3"];
        let nodes: Vec<Identity> = (0..9)
            .map(|i| endpoint(&format!("n{i}"), tors[i / 3], "s1"))
            .collect();
        let tor_hop = |t: &str| format!("10.1.0.{}", &t[1..]);
        let mut pairs = Vec::new();
        for i in 0..9 {
            for j in i + 1..9 {
                let (x, y) = (&nodes[i], &nodes[j]);
                let mut hops = vec![tor_hop(&x.tor)];
                if y.tor != x.tor {
                    hops.push(tor_hop(&y.tor));
                }
                let lost = if x.tor == "t1" || y.tor == "t1" {
                    150.0
                } else {
                    0.0
                };
                let hops: Vec<&str> = hops.iter().map(String::as_str).collect();
                pairs.push(probed(x, y, lost, &hops));
            }
        }
        let r = analyze(&pairs, &Config::default());
        assert_eq!(named(&r), vec!["tor/t1:loss"]);
        assert_eq!(
            r.faults[0].equivalent,
            vec![Component::new(Kind::Hop, "10.1.0.1")]
        );
    }

    /// A dead ToR-spine link on a 3-ToR, 2-spine fabric: the link is the
    /// one fault, not the ToR above whose pairs all lose flows nor the
    /// spine block; its hit pairs index the input.
    #[test]
    fn a_dead_link_is_the_only_fault() {
        let pairs = crate::engine::links::tests::fabric(3, &[("u10", 1.0)]);
        let r = analyze(&pairs, &Config::default());
        assert_eq!(named(&r), vec!["link/u10:unreachable"]);
        let f = &r.faults[0];
        assert!(f.hit_pairs.iter().all(|&i| pairs[i].src.tor == "t1"));
        assert!(r
            .blame
            .iter()
            .any(|b| b.faulty && b.component.kind == Kind::Link));
        // A ToR fault with the same paths is still the ToR's.
        let mut tor = crate::engine::links::tests::fabric(3, &[]);
        for p in &mut tor {
            if p.src.tor == "t1" || p.dst.tor == "t1" {
                p.lost = (p.sent * 0.3).round();
                for path in &mut p.paths {
                    path.lost = (path.probes * 0.3).round();
                }
            }
        }
        let r = analyze(&tor, &Config::default());
        assert_eq!(named(&r), vec!["tor/t1:loss"]);
    }

    /// The onset of the same dead link: the pair counters already show a
    /// third or more of t1's cross-ToR flows failing, and the per-path
    /// ratios (a few probes per path so far) show the loss on the paths
    /// over the link only: the link stage names the link and takes the
    /// ToR's cross-ToR pairs away, so neither the ToR nor the spine is
    /// blamed.
    #[test]
    fn early_uneven_per_path_loss_blames_no_tor() {
        let mut pairs = crate::engine::links::tests::fabric(3, &[("u10", 1.0)]);
        for (i, p) in pairs.iter_mut().enumerate() {
            for path in &mut p.paths {
                let dead = path.lost >= path.probes;
                path.probes = 3.0;
                path.lost = if dead && i % 3 != 0 { 2.0 } else { 0.0 };
            }
        }
        let r = analyze(&pairs, &Config::default());
        assert!(
            !r.faults
                .iter()
                .any(|f| matches!(f.kind, Kind::Tor | Kind::Spine)),
            "{:?}",
            named(&r)
        );
        assert!(!r
            .blame
            .iter()
            .any(|b| b.faulty && b.component.kind == Kind::Tor));
        // Without the per-path rows the same counters are the ToR's.
        for p in &mut pairs {
            p.paths.clear();
        }
        let r = analyze(&pairs, &Config::default());
        assert!(
            named(&r).iter().any(|n| n.starts_with("tor/t1")),
            "{:?}",
            named(&r)
        );
    }

    /// Three ToRs of two hosts of three containers (a ring in each host,
    /// a ring over the hosts per container slot). ToR t1 is dead, and
    /// container n100 under it loses 30%: of its pairs only the two inside
    /// its host still carry packets, and both show the loss (the fault
    /// shows there only). Two pairs cannot survive the drop of the two
    /// strongest, yet they are all the container has left: it is blamed
    /// beside the ToR. With t1 healthy the same two lossy pairs are two of
    /// its four, noise of their own: nothing is blamed.
    #[test]
    fn a_container_cut_down_to_two_pairs_by_a_dead_tor_is_still_blamed() {
        let id = |t: usize, h: usize, c: usize| Identity {
            node: format!("n{t}{h}{c}"),
            nic: format!("nic-n{t}{h}{c}"),
            host: format!("h{t}{h}"),
            tor: format!("t{t}"),
            spine: "s1".into(),
            ..Default::default()
        };
        let hosts: Vec<(usize, usize)> =
            (1..=3).flat_map(|t| (0..2).map(move |h| (t, h))).collect();
        let mut links = Vec::new();
        for &(t, h) in &hosts {
            for c in 0..3 {
                links.push((id(t, h, c), id(t, h, (c + 1) % 3)));
            }
        }
        for c in 0..3 {
            for k in 0..hosts.len() {
                let ((t, h), (u, g)) = (hosts[k], hosts[(k + 1) % hosts.len()]);
                links.push((id(t, h, c), id(u, g, c)));
            }
        }
        let window = |tor_dead: bool| -> Vec<PairStats> {
            links
                .iter()
                .map(|(a, b)| {
                    let inside = a.host == b.host && (a.node == "n100" || b.node == "n100");
                    let lost = if inside { 300.0 } else { 0.0 };
                    let mut p = probed(a, b, lost, &[]);
                    if tor_dead && a.host != b.host && (a.tor == "t1" || b.tor == "t1") {
                        (p.failed_dials, p.sent, p.lost) = (p.rounds, 0.0, 0.0);
                    }
                    p
                })
                .collect()
        };
        let r = analyze(&window(true), &Config::default());
        let node = Component::new(Kind::Node, "n100");
        assert_eq!(r.faults.len(), 2, "{:?}", named(&r));
        assert!(named(&r).contains(&"tor/t1:unreachable".to_string()));
        assert!(r.faults.iter().any(|f| f.symptom == Symptom::Loss
            && (f.component() == node || f.equivalent.contains(&node))));
        let r = analyze(&window(false), &Config::default());
        assert!(r.faults.is_empty(), "{:?}", named(&r));
    }
}
