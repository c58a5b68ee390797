//! Gray loss: few lost probes a pair, effect sizes that matter.

use super::*;

/// A gray ToR (3% of its flows; 80 probes a pair over a 0.1% background)
/// under seven ToRs of three hosts: one or two lost probes are no sign, so
/// only two pairs show it, and both cross NIC nic-0. Its other pairs,
/// pooled, bear the loss out. Before the fix the ToR was set aside
/// because a smaller column crosses all its hit pairs, and the NIC was
/// blamed.
#[test]
fn a_gray_tor_whose_few_hit_pairs_share_a_nic_is_the_tor() {
    let f = Fabric {
        spine_of: vec![0; 7],
        hosts: 3,
    };
    let report = gray(&f, Kind::Tor, "tor-0", 0.03);
    assert_eq!(
        named(&report),
        vec!["tor:tor-0:loss"],
        "{}",
        detail(&report)
    );
}

/// Significance is not importance: on a large window (24 ToRs × 16 hosts,
/// 1,000 probes a pair) three ToRs add 0.2% loss, which is overwhelmingly
/// significant and not worth a page; a NIC adds 2%. Before the fix the
/// ToRs were reported.
#[test]
fn a_tiny_significant_excess_is_not_paged_and_a_gray_nic_is() {
    let f = Fabric {
        spine_of: (0..24).map(|t| t / 6).collect(),
        hosts: 16,
    };
    let pairs = window(&f, 1000.0, &|k, i| Effect {
        loss: match (k, i) {
            (Kind::Tor, "tor-3" | "tor-11" | "tor-20") => 0.002,
            (Kind::Nic, "nic-100") => 0.02,
            _ => 0.0,
        },
        ..Default::default()
    });
    let r = analyze(&pairs, &Config::default());
    assert_eq!(named(&r), vec!["nic:nic-100:loss"], "{}", detail(&r));
    // The floor is a setting: without it the 0.2% excess is significant
    // and paged (on the ToRs' hosts' NICs: below the floor the engine's
    // choice among them is not what this test is about).
    let no_floor = Config {
        min_loss_excess: 0.0,
        ..Config::default()
    };
    let r = analyze(&pairs, &no_floor);
    assert!(r.faults.len() > 1, "{}", detail(&r));
}

/// A container losing 2% of 100 probes a pair loses one or two on each:
/// here 5, 1, 1 and 1 (0.04% background). Only the pair with 5 passes
/// the lenient per-pair level, yet each of its pairs lost probes where
/// the background makes a loss unusual, and dropping its strongest pairs
/// still leaves more than the background. Before the fix it was not
/// tested at all (one pair showing the loss is fewer than `min_pairs`).
#[test]
fn a_gray_container_whose_pairs_each_lose_a_probe_or_more_is_found() {
    let f = Fabric {
        spine_of: vec![0, 0, 0, 0],
        hosts: 4,
    };
    let mut pairs = window_with(&f, 100.0, 4e-4, &|_, _| Effect::default());
    let node = "node-3";
    on_pairs_of(&mut pairs, node, &[5.0, 1.0, 1.0, 1.0], |p, lost| {
        p.lost = lost;
    });
    let report = analyze(&pairs, &Config::default());
    assert_eq!(named(&report), ["node:node-3:loss"], "{}", detail(&report));
}

/// A gray container: its four pairs lost 3, 3, 2 and 0 of 150 probes
/// (15 rounds of 10) over a 0.08% background, each probe in a round of
/// its own. Dropping its two strongest pairs leaves two lost probes of
/// 300: too few for the probe count alone; counted in rounds as well
/// they still lean its way, by an effect that matters (0.6%). The same
/// probes lost in bursts, all of a pair's in one round (a microburst over
/// a few pairs), are not the container; nor is it paged where the rounds
/// are unknown (counters over a window).
#[test]
fn a_gray_container_is_told_from_bursts_by_the_rounds_that_lost_probes() {
    let f = Fabric {
        spine_of: vec![0, 0, 0, 0],
        hosts: 4,
    };
    let node = "node-3";
    let with_rounds = |burst: bool| {
        let mut pairs = window_with(&f, 150.0, 6e-4, &|_, _| Effect::default());
        lost_one_by_one(&mut pairs);
        on_pairs_of(&mut pairs, node, &[3.0, 3.0, 2.0, 0.0], |p, lost| {
            p.lost = lost;
            p.lossy_rounds = Some(if burst { lost.min(1.0) } else { lost });
        });
        pairs
    };
    let spread = analyze(&with_rounds(false), &Config::default());
    assert_eq!(named(&spread), ["node:node-3:loss"], "{}", detail(&spread));
    let bursts = analyze(&with_rounds(true), &Config::default());
    assert_eq!(named(&bursts), Vec::<String>::new(), "{}", detail(&bursts));
    let mut unknown = with_rounds(false);
    for p in &mut unknown {
        p.lossy_rounds = None;
    }
    let unknown = analyze(&unknown, &Config::default());
    assert_eq!(
        named(&unknown),
        Vec::<String>::new(),
        "{}",
        detail(&unknown)
    );
}

/// A blip (one round in which a few pairs each lose a few probes) on all
/// three pairs of one container: each lost 3 of 110 probes (11 rounds of
/// 10), all in one round, over a 0.01% background. Dropping its two
/// strongest pairs leaves a pair beyond chance on its own, so before the
/// fix the container was paged on a healthy window. The same probes lost
/// in three rounds a pair are a gray container.
#[test]
fn a_blip_on_every_pair_of_a_container_is_not_the_container() {
    let f = Fabric {
        spine_of: vec![0, 0, 1],
        hosts: 6,
    };
    let with_rounds = |rounds: f64| {
        let mut pairs = window(&f, 110.0, &|_, _| Effect::default());
        lost_one_by_one(&mut pairs);
        on_pairs_of(&mut pairs, "node-2", &[3.0, 3.0, 3.0], |p, lost| {
            (p.lost, p.lossy_rounds) = (lost, Some(rounds));
        });
        pairs
    };
    assert_names(&with_rounds(1.0), &[]);
    assert_names(&with_rounds(3.0), &["node:node-2:loss"]);
}

/// A container whose only two pairs each lost 3 of 170 probes (17 rounds
/// of 10) over a 0.05% background: one lost them in three rounds, the
/// other all in one (a microburst beside a noisy pair). Two pairs cannot
/// be thinned, so they were judged on agreeing in rate alone, and before
/// the fix the container was paged. A burst is not a gray component; the
/// same pair losing its three in three rounds is.
#[test]
fn a_burst_on_one_of_a_container_s_two_pairs_is_not_the_container() {
    let burst = three_lost_on_each_of_two_pairs(170.0, [3.0, 1.0]);
    assert_eq!(named(&burst), Vec::<String>::new(), "{}", detail(&burst));
    let spread = three_lost_on_each_of_two_pairs(170.0, [3.0, 3.0]);
    assert_eq!(named(&spread), ["node:node-1:loss"], "{}", detail(&spread));
}

/// node-1 of a three-ToR fabric cut down to its two pairs, each losing 3
/// of `probes` in `rounds` of its rounds, over a 0.05% background; every
/// pair says how many rounds lost probes.
fn three_lost_on_each_of_two_pairs(probes: f64, rounds: [f64; 2]) -> Report {
    let f = Fabric {
        spine_of: vec![0, 0, 0],
        hosts: 3,
    };
    let node = "node-1";
    let mut pairs = window_with(&f, probes, 5e-4, &|_, _| Effect::default());
    lost_one_by_one(&mut pairs);
    keep_pairs_of(&mut pairs, node, 2);
    on_pairs_of(&mut pairs, node, &rounds, |p, rounds| {
        p.lost = 3.0;
        p.lossy_rounds = Some(rounds);
    });
    analyze(&pairs, &Config::default())
}

/// A container whose only two pairs each lost 3 of 80 probes (8 rounds of
/// 10), all three in one round: each pair alone is barely more clustered
/// than chance (p 0.012 against a 0.01 bar), both together are a blip
/// (p 0.0014), paged as the container before the fix. Lost in three
/// rounds each, the same counts are a gray container.
#[test]
fn two_pairs_that_each_lost_their_probes_in_one_round_are_not_the_container() {
    let blip = three_lost_on_each_of_two_pairs(80.0, [1.0, 1.0]);
    assert_eq!(named(&blip), Vec::<String>::new(), "{}", detail(&blip));
    let gray = three_lost_on_each_of_two_pairs(80.0, [3.0, 3.0]);
    assert_eq!(named(&gray), ["node:node-1:loss"], "{}", detail(&gray));
}

/// A container left with two pairs drops about 30 % on both, unevenly
/// (156 and 204 of 600 probes: more apart than one rate makes, at p
/// 0.003), each far beyond chance on its own. Read as a noisy pair beside
/// a lossy one, nothing was reported before the fix. Two pairs that lose
/// a few probes each, as unevenly, are still not the container.
#[test]
fn a_container_losing_heavily_but_unevenly_on_its_two_pairs_is_the_container() {
    let f = Fabric {
        spine_of: vec![0, 0, 0],
        hosts: 3,
    };
    let node = "node-1";
    let with = |lost: [f64; 2]| -> Report {
        let mut pairs = window_with(&f, 600.0, 5e-4, &|_, _| Effect::default());
        keep_pairs_of(&mut pairs, node, 2);
        on_pairs_of(&mut pairs, node, &lost, |p, lost| {
            p.lost = lost;
            p.lossy_rounds = Some(lost.min(p.rounds));
        });
        analyze(&pairs, &Config::default())
    };
    let heavy = with([156.0, 204.0]);
    assert_eq!(named(&heavy), ["node:node-1:loss"], "{}", detail(&heavy));
    let light = with([1.0, 7.0]);
    assert_eq!(named(&light), Vec::<String>::new(), "{}", detail(&light));
}

/// A gray container (3%) alone on its NIC, under a gray spine (2% of every
/// flow) and a ToR with four noisy pairs elsewhere (3, 3, 2 and 2 lost of
/// 170 over a 0.1% background). With the spine explained, the ToR's
/// statistic (the container's losses and the noisy pairs', pooled at 0.8%)
/// beat the container's own; accepted first, the ToR took the container's
/// loss at its rate and the container no longer passed. The ToR's other
/// pairs carry no fault worth a page, and the container's pairs lose far
/// more than the ToR's rate: the container is the fault. Before the fix
/// the ToR was paged instead.
#[test]
fn a_tor_over_a_gray_container_and_noisy_pairs_yields_to_the_container() {
    let f = Fabric {
        spine_of: vec![0, 0, 0, 0, 1, 1, 1],
        hosts: 4,
    };
    let node = "node-3";
    let mut pairs: Vec<PairStats> = window_with(&f, 170.0, 1e-3, &|k, i| Effect {
        loss: match (k, i) {
            (Kind::Node, n) if n == node => 0.03,
            (Kind::Spine, "spine-1") => 0.02,
            _ => 0.0,
        },
        ..Default::default()
    })
    .into_iter()
    // node-3 alone on its NIC: no pair of its sibling, none inside the host.
    .filter(|p| {
        let on = |n: &str| p.src.node == n || p.dst.node == n;
        let inside_host = on(node) && p.src.host == p.dst.host;
        !(on("node-2") || inside_host)
    })
    .collect();
    let mut noisy = [3.0, 3.0, 2.0, 2.0].into_iter();
    let mut used = std::collections::HashSet::new();
    for p in pairs.iter_mut().filter(|p| {
        p.src.tor == "tor-0"
            && p.src.nic != "nic-1"
            && p.dst.nic != "nic-1"
            && p.src.host != p.dst.host
    }) {
        if used.insert(p.src.node.clone()) && used.insert(p.dst.node.clone()) {
            if let Some(lost) = noisy.next() {
                p.lost = lost;
            }
        }
    }
    assert_eq!(noisy.next(), None, "four noisy pairs placed");
    let report = analyze(&pairs, &Config::default());
    assert_eq!(
        named(&report),
        ["spine:spine-1:loss", "node:node-3:loss"],
        "{}",
        detail(&report)
    );
}

/// Host-1 of four ToRs over two spines (four hosts each, 200 probes a
/// pair over a 0.1 % background) with its two containers on two NICs:
/// node-2 on nic-1, node-3 on nic-1b. `kind` `id` loses `loss`; when
/// `away` is not empty, node-3's three pairs outside the host lose those
/// counts instead, one a round.
fn two_nic_host(kind: Kind, id: &str, loss: f64, away: &[f64]) -> Report {
    let f = Fabric {
        spine_of: vec![0, 0, 1, 1],
        hosts: 4,
    };
    let mut pairs = window_with(&f, 200.0, 1e-3, &|k, i| Effect {
        loss: if k == kind && i == id { loss } else { 0.0 },
        ..Default::default()
    });
    on_own_nic(&mut pairs, "node-3", "nic-1b");
    if !away.is_empty() {
        let outside: Vec<&mut PairStats> = pairs
            .iter_mut()
            .filter(|p| (p.src.node == "node-3") != (p.dst.node == "node-3"))
            .filter(|p| p.src.host != p.dst.host)
            .collect();
        assert_eq!(outside.len(), away.len(), "node-3's pairs outside host-1");
        for (p, &lost) in outside.into_iter().zip(away) {
            (p.lost, p.lossy_rounds) = (lost, Some(lost));
        }
    }
    analyze(&pairs, &Config::default())
}

/// A gray NIC (6 %) whose one container is alone on it, on a host whose
/// other NIC carries a noisy pair (5 lost of 200, one a round) beside two
/// quiet ones. The host's rate over all its pairs is lower than the NIC's,
/// and its pairs away from the NIC are significant only by that one noisy
/// pair: what a host fault must show is loss on all of them, as any
/// component's evidence must survive dropping its strongest pairs. The NIC
/// (and its container) is the fault. Blind seed 461914090760 window 75
/// paged the host instead.
#[test]
fn a_gray_nic_beside_a_noisy_pair_of_its_host_is_not_the_host() {
    let report = two_nic_host(Kind::Node, "node-2", 0.06, &[5.0, 1.0, 0.0]);
    assert_eq!(named(&report), ["node:node-2:loss"], "{}", detail(&report));
}

/// A gray container (4 %) alone on its NIC, on a host whose other NIC's
/// container lost a few probes (3, 2 and 1 of 200) on its three pairs
/// outside the host. Pooled over all its pairs the host had the larger
/// statistic; the container's own pairs lose more than that pooled rate,
/// but on three pairs of 200 probes not by 1 % on their own. The other
/// pairs losing less than it count against the host too (both sides, two
/// degrees of freedom). Blind seed 440048950359 window 150 paged the host
/// instead (there one of the container's pairs also crossed a lossy
/// spine).
#[test]
fn a_gray_container_beside_a_quiet_nic_of_its_host_is_not_the_host() {
    let report = two_nic_host(Kind::Node, "node-2", 0.04, &[3.0, 2.0, 1.0]);
    assert_eq!(named(&report), ["node:node-2:loss"], "{}", detail(&report));
}

/// The counterpart: a gray host (3 %) whose two NICs each carry one
/// container stays the host, whichever container happened to lose more.
#[test]
fn a_gray_host_over_two_nics_stays_the_host() {
    let report = two_nic_host(Kind::Host, "host-1", 0.03, &[]);
    assert_eq!(named(&report), ["host:host-1:loss"], "{}", detail(&report));
}

/// Two ToRs of four hosts, each under a spine of its own; the spines lose
/// 3 % of every flow between them (85 probes a pair over a 0.1 %
/// background), a probe or two on each cross-ToR pair, none significant
/// alone. Those pairs are a third of the window: pooled into the
/// background they lift it several-fold, and tested against that the
/// spines did not pass; nothing was paged (blind seed 385850387884 window
/// 96, a gray spine beside a gray container). With no loss fault paged,
/// the background is re-read without the pairs of the candidates
/// significant at `alpha`.
#[test]
fn a_gray_spine_that_lifts_the_background_is_still_found() {
    let f = Fabric {
        spine_of: vec![0, 1],
        hosts: 4,
    };
    let pairs = window_with(&f, 85.0, 1e-3, &|k, i| Effect {
        loss: if k == Kind::Spine && i == "spine-0" {
            0.03
        } else {
            0.0
        },
        ..Default::default()
    });
    assert_names(&pairs, &["spine:spine-0:loss"]);
}

/// A container left with two pairs, losing 5 and 4 of 110 probes one by
/// one, in a window where `blips` pairs of other containers each lost 3
/// probes in one round (a blip). Pairs as lossy elsewhere make the
/// container's two common only if they lost theirs the same way: before
/// the fix the blip's pairs counted, and the container went unreported
/// (a gray container on a blind window). Four pairs elsewhere that lost
/// theirs one by one still make it noise.
#[test]
fn a_gray_container_of_two_pairs_is_not_made_common_by_a_blip() {
    let window_where = |others: usize, rounds: f64| {
        let f = Fabric {
            spine_of: vec![0, 0, 0, 0],
            hosts: 3,
        };
        let node = "node-7";
        let mut pairs = window_with(&f, 110.0, 5e-4, &|_, _| Effect::default());
        lost_one_by_one(&mut pairs);
        keep_pairs_of(&mut pairs, node, 2);
        on_pairs_of(&mut pairs, node, &[5.0, 4.0], |p, lost| {
            (p.lost, p.lossy_rounds) = (lost, Some(lost));
        });
        let elsewhere = pairs
            .iter_mut()
            .filter(|p| p.src.node != node && p.dst.node != node);
        for p in elsewhere.step_by(9).take(others) {
            (p.lost, p.lossy_rounds) = (3.0, Some(rounds));
        }
        pairs
    };
    assert_names(&window_where(0, 1.0), &["node:node-7:loss"]);
    assert_names(&window_where(4, 1.0), &["node:node-7:loss"]);
    assert_names(&window_where(4, 3.0), &[]);
}

/// A gray NIC (host-0's only one) in a window of fifteen pairs: its four
/// pairs each lose 3 to 5 of 170 probes (17 rounds of 10, one probe a
/// round), nearly all the window's losses, so the background read from
/// the window is 0.5 %
/// and a pair of 170 probes is expected to lose about one. Counting only
/// the pairs that lost a probe where fewer than even odds expect one, none
/// of them showed anything and the NIC went unreported; three to five
/// lost where one is expected is above the odds.
#[test]
fn a_gray_nic_that_lifts_a_tiny_window_s_background_is_found() {
    let f = Fabric {
        spine_of: vec![0, 0],
        hosts: 3,
    };
    let mut pairs = window(&f, 170.0, &|_, _| Effect::default());
    let mut lost = [5.0, 3.0, 3.0, 3.0].into_iter();
    for p in &mut pairs {
        if p.src.host == "host-0" || p.dst.host == "host-0" {
            p.lost = lost.next().expect("host-0 has four pairs");
        }
        p.lossy_rounds = Some(p.lost);
    }
    assert_eq!(lost.next(), None, "host-0 has four pairs");
    assert_names(&pairs, &["nic:nic-0:loss"]);
}

/// A gray container (node-1 on a NIC of its own, its four pairs losing 4,
/// 5, 4 and 3 of 130 probes one by one) whose host's other container's
/// two ring pairs each
/// lost 3 probes in the one round of a blip, as did two pairs elsewhere.
/// Fitted over both containers' pairs, the host outweighed the container,
/// and the blip's two pairs, read as the host's evidence away from it,
/// kept the host from yielding to it: the host was paged (a blind
/// window). A pair that lost its probes in a burst says nothing of the
/// component over it.
#[test]
fn a_gray_container_beside_a_blip_on_its_host_s_other_container_is_the_container() {
    let f = Fabric {
        spine_of: vec![0, 0, 0, 0],
        hosts: 3,
    };
    let mut pairs = window_with(&f, 130.0, 1e-4, &|_, _| Effect::default());
    lost_one_by_one(&mut pairs);
    on_own_nic(&mut pairs, "node-1", "nic-0b");
    on_pairs_of(&mut pairs, "node-1", &[4.0, 5.0, 4.0, 3.0], |p, lost| {
        (p.lost, p.lossy_rounds) = (lost, Some(lost));
    });
    let blip = |p: &PairStats| {
        let ends = [p.src.node.as_str(), p.dst.node.as_str()];
        (ends.contains(&"node-0") && !ends.contains(&"node-1"))
            || ends == ["node-8", "node-10"]
            || ends == ["node-18", "node-20"]
    };
    let mut blipped = 0;
    for p in pairs.iter_mut().filter(|p| blip(p)) {
        (p.lost, p.lossy_rounds) = (3.0, Some(1.0));
        blipped += 1;
    }
    assert_eq!(blipped, 4, "blip pairs");
    assert_names(&pairs, &["node:node-1:loss"]);
}
