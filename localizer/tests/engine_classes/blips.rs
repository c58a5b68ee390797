//! Loss that comes in one moment: a blip (a microburst, a reroute) takes
//! a few probes of several pairs at once and leaves the rounds around it
//! clean. Where the log says when each lossy round ran, a verdict must
//! stand without its busiest moment.

use super::*;
use skeletonhunter_localizer::engine::model::LossyRow;

/// Rounds of 10 probes, 3 s apart, 8 a pair.
const ROUND_SECONDS: f64 = 3.0;

/// Four ToRs over two spines, 6 hosts, 80 probes a pair over a 0.1 %
/// background; each pair's lost probes one per round, in rounds drawn
/// from a hash of the pair.
fn timed_window() -> Vec<PairStats> {
    let f = Fabric {
        spine_of: vec![0, 0, 1, 1],
        hosts: 6,
    };
    let mut pairs = window_with(&f, 80.0, 1e-3, &|_, _| Effect::default());
    for p in &mut pairs {
        p.round_seconds = Some(ROUND_SECONDS);
        let key = format!("{}>{}", p.src.node, p.dst.node);
        p.lossy_rows = (0..p.lost as usize)
            .map(|k| LossyRow {
                at_seconds: (unit(&format!("at{k}{key}")) * 8.0).floor() * ROUND_SECONDS,
                sent: 10.0,
                lost: 1.0,
            })
            .collect();
        p.lossy_rounds = Some(p.lost);
    }
    pairs
}

/// `pairs` as a source that does not say when its rounds ran.
fn untimed(pairs: &[PairStats]) -> Vec<PairStats> {
    let mut out = pairs.to_vec();
    for p in &mut out {
        p.round_seconds = None;
    }
    out
}

/// The cross-ToR pairs over spine 1: indices into `pairs`.
fn over_spine_1(pairs: &[PairStats]) -> Vec<usize> {
    (0..pairs.len())
        .filter(|&i| {
            let p = &pairs[i];
            p.src.tor != p.dst.tor && (p.src.spine == "spine-1" || p.dst.spine == "spine-1")
        })
        .collect()
}

/// Adds `lost` probes to `p` in one round at `at` seconds.
fn blip(p: &mut PairStats, at: f64, lost: f64) {
    p.lost += lost;
    p.lossy_rows.push(LossyRow {
        at_seconds: at,
        sent: 10.0,
        lost,
    });
    p.lossy_rounds = Some(p.lossy_rounds.unwrap_or(0.0) + 1.0);
}

/// Four pairs over spine 1, from four hosts, each lose 3 of their 10
/// probes within half a second. Counted over the window, their spine is
/// paged; read by moment, nothing is left outside that half second.
#[test]
fn a_blip_on_pairs_sharing_a_spine_is_not_paged() {
    let mut pairs = timed_window();
    let over = over_spine_1(&pairs);
    for (n, &i) in over.iter().step_by(over.len() / 4).take(4).enumerate() {
        blip(&mut pairs[i], 12.0 + 0.1 * n as f64, 3.0);
    }
    let counted = analyze(&untimed(&pairs), &Config::default());
    assert!(!counted.faults.is_empty(), "counts alone page nothing");
    let report = analyze(&pairs, &Config::default());
    assert!(report.faults.is_empty(), "{}", detail(&report));
}

/// The same losses spread over the rounds are a gray fault: the spine
/// stands without its busiest moment.
#[test]
fn the_same_losses_round_after_round_are_still_paged() {
    let mut pairs = timed_window();
    let over = over_spine_1(&pairs);
    for (n, &i) in over.iter().step_by(over.len() / 4).take(4).enumerate() {
        for k in 0..3 {
            blip(&mut pairs[i], ROUND_SECONDS * (n + 2 * k) as f64 + 0.1, 1.0);
        }
    }
    let counted = named(&analyze(&untimed(&pairs), &Config::default()));
    assert!(!counted.is_empty(), "counts alone page nothing");
    let report = analyze(&pairs, &Config::default());
    assert_eq!(named(&report), counted, "{}", detail(&report));
}
