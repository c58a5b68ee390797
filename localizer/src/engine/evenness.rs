//! Does a ToR verdict agree with the per-path data of its pairs?
//!
//! A ToR fault hits every flow of a pair alike, whatever ECMP path the
//! flow takes; a dead or lossy ToR–spine link hits only the flows over the
//! link (and the replies hashed onto it), so the pair-level loss of the
//! ToR's cross-ToR pairs looks like a ToR fault while the flows over the
//! other uplinks are clean. Before the link stage has the power to blame
//! the link (the per-path ratios span the exporter's `probe.flow_window`
//! and are refreshed every few seconds, so at a fault's onset they are
//! diluted by pre-fault probes and lag the pair counters), the ToR verdict
//! is therefore checked against the per-path rows of its pairs (those with
//! two or more routes: complete paths that differ at a TTL where both
//! answered) and held when:
//!
//! - **lagging**: pooled over the paths, fewer probes were lost than the
//!   ToR's fitted extra loss implies (binomial lower tail `< alpha`): the
//!   per-path data do not show the fault yet, so they can neither confirm
//!   nor refute it — a ToR fault shows there within a flow window;
//! - **uneven**: within pairs, the loss differs between paths (G-test of
//!   homogeneity, each pair conditioned on its own total, χ² with
//!   Σ (paths − 1) degrees of freedom, `< alpha`): the fault is on some
//!   paths, not on the ToR.
//!
//! Paths cut short (a trace that went silent where the pair's other
//! traces reached the destination) are left out: their flows are traced *because* they lost probes, so their
//! loss is selected, and where they go past the silence is unknown.

use super::model::{PairStats, PathObs};
use super::stats::binomial_upper_tail;
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// What the per-path rows say about a ToR verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PathCheck {
    /// No pair has two complete paths: nothing to check against.
    NoPaths,
    /// The paths show the loss, alike on every path of a pair.
    Agrees,
    /// The paths do not show the loss yet (p-value of the deficit).
    Lagging(f64),
    /// The loss differs between paths within pairs (p-value).
    Uneven(f64),
}

impl PathCheck {
    /// Whether the verdict is held (not reported this cycle): only when
    /// the paths disagree with it. A lag is reported, not held: the path
    /// ratios span the exporter's flow window and trail the pair counters
    /// at the onset of a real ToR fault just as at a link's (holding on it
    /// delayed the end-to-end ToR alert from about 5 s to about 20 s).
    pub fn holds_back(self) -> bool {
        matches!(self, PathCheck::Uneven(_))
    }
}

/// Two hop lists of one route: the same router wherever both answered (a
/// silent TTL is a lost reply, not another router; a flow re-traced
/// through a lossy ToR gets a new path id). Silent TTLs just before the
/// last hop may also be left out: when the destination's reply to the
/// probe of its own TTL is lost, it answers the next TTL's probe, one TTL
/// later. A silent TTL before the last hop may be either, so both readings are
/// tried.
fn same_route(a: &[String], b: &[String]) -> bool {
    agree(&as_is(a), &as_is(b)) || agree(&canonical(a), &canonical(b))
}

/// Same length, and the same router wherever both answered.
fn agree(a: &[&str], b: &[&str]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.is_empty() || y.is_empty() || x == y)
}

/// `hops` as they are.
fn as_is(hops: &[String]) -> Vec<&str> {
    hops.iter().map(String::as_str).collect()
}

/// `hops` without the silent TTLs directly before the last hop.
fn canonical(hops: &[String]) -> Vec<&str> {
    let Some((last, rest)) = hops.split_last() else {
        return Vec::new();
    };
    let keep = rest
        .iter()
        .rposition(|h| !h.is_empty())
        .map_or(0, |i| i + 1);
    rest[..keep]
        .iter()
        .chain(std::iter::once(last))
        .map(String::as_str)
        .collect()
}

/// (probes, lost) per route of a pair's complete paths with probes, when
/// it has two routes: only then do its flows take different links.
fn complete_paths(pair: &PairStats) -> Option<Vec<(f64, f64)>> {
    let mut routes: Vec<(&[String], f64, f64)> = Vec::new();
    for (p, c) in pair.paths.iter().zip(complete(&pair.paths)) {
        if !(c && p.probes.is_finite() && p.probes > 0.0) {
            continue;
        }
        let lost = if p.lost.is_finite() { p.lost } else { 0.0 };
        let lost = lost.clamp(0.0, p.probes);
        match routes.iter_mut().find(|r| same_route(r.0, &p.hops)) {
            Some(r) => {
                r.1 += p.probes;
                r.2 += lost;
            }
            None => routes.push((&p.hops, p.probes, lost)),
        }
    }
    (routes.len() >= 2).then(|| routes.iter().map(|r| (r.1, r.2)).collect())
}

/// Per path of one pair: not cut short. A path whose trace went silent
/// before its end is cut short when another path of the pair reached an
/// answering last hop (where none did, the destination does not answer
/// traces, and every path is taken as it is).
pub fn complete(paths: &[PathObs]) -> Vec<bool> {
    let answers = |p: &PathObs| p.hops.last().is_some_and(|h| !h.is_empty());
    let any = paths.iter().any(answers);
    paths.iter().map(|p| !any || answers(p)).collect()
}

/// `k ln(k / e)`, 0 at `k = 0`.
fn xlogx(k: f64, e: f64) -> f64 {
    if k <= 0.0 || e <= 0.0 {
        0.0
    } else {
        k * (k / e).ln()
    }
}

/// G statistic and degrees of freedom of the within-pair homogeneity test.
fn homogeneity(pairs: &[Vec<(f64, f64)>]) -> (f64, f64) {
    let (mut g, mut df) = (0.0, 0.0);
    for rows in pairs {
        let (n, k) = rows.iter().fold((0.0, 0.0), |(n, k), r| (n + r.0, k + r.1));
        if k <= 0.0 || k >= n {
            continue;
        }
        for &(ni, ki) in rows {
            let e = ni * k / n;
            g += 2.0 * (xlogx(ki, e) + xlogx(ni - ki, ni - e));
        }
        df += (rows.len() - 1) as f64;
    }
    (g.max(0.0), df)
}

/// Check a ToR verdict of extra loss `q` over its evidence `pairs` (see
/// the module docs).
pub fn check_tor(pairs: &[&PairStats], q: f64, alpha: f64) -> PathCheck {
    let rows: Vec<Vec<(f64, f64)>> = pairs.iter().filter_map(|p| complete_paths(p)).collect();
    if rows.is_empty() {
        return PathCheck::NoPaths;
    }
    let (n, k) = rows
        .iter()
        .flatten()
        .fold((0.0, 0.0), |(n, k), r| (n + r.0, k + r.1));
    // P(X <= k) for X ~ Binomial(n, q).
    let deficit = if k >= n {
        1.0
    } else {
        1.0 - binomial_upper_tail(k.floor() + 1.0, n, q.clamp(0.0, 1.0))
    };
    if deficit < alpha {
        return PathCheck::Lagging(deficit);
    }
    let (g, df) = homogeneity(&rows);
    if df > 0.0 {
        let p = ChiSquared::new(df).map_or(1.0, |c| c.sf(g));
        if p < alpha {
            return PathCheck::Uneven(p);
        }
    }
    PathCheck::Agrees
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(hops: &[&str], probes: f64, lost: f64) -> PathObs {
        PathObs {
            id: hops.join(">"),
            hops: hops.iter().map(|h| (*h).to_string()).collect(),
            probes,
            lost,
        }
    }

    fn pair(paths: Vec<PathObs>) -> PairStats {
        let (sent, lost) = paths
            .iter()
            .fold((0.0, 0.0), |(s, l), p| (s + p.probes, l + p.lost));
        PairStats {
            sent,
            lost,
            rounds: 10.0,
            paths,
            ..Default::default()
        }
    }

    /// `n` pairs, pair `i` over the paths `paths(i)`.
    fn pairs_over(n: usize, paths: impl Fn(usize) -> Vec<PathObs>) -> Vec<PairStats> {
        (0..n).map(|i| pair(paths(i))).collect()
    }

    fn check(pairs: &[PairStats], q: f64) -> PathCheck {
        check_tor(&pairs.iter().collect::<Vec<_>>(), q, 1e-3)
    }

    /// The end-to-end onset of a dead ToR0–spine1 link: the pair counters
    /// show a third of each pair's flows failing (the ToR is fitted ~0.3),
    /// while the per-path ratios, over a flow window still mostly
    /// pre-fault, show a few losses on the spine-1 path and none on the
    /// others, and the flows traced since the fault went silent after the
    /// ToR (incomplete path, all lost). No ToR verdict.
    #[test]
    fn early_diluted_per_path_loss_lags_but_is_not_held() {
        let pairs = pairs_over(16, |i| {
            vec![
                path(&["tor", "s0", "dst"], 6.0, 0.0),
                path(&["tor", "s1", "dst"], 3.0, (i % 2) as f64),
                path(&["tor", "s2", "dst"], 4.0, 0.0),
                path(&["tor", "", ""], 6.0, 6.0),
            ]
        });
        assert!(matches!(check(&pairs, 0.3), PathCheck::Lagging(_)));
        // A lag alone is not held: a real ToR fault lags there too.
        assert!(!check(&pairs, 0.3).holds_back());
    }

    /// Later, the flow window is all post-fault: the spine-1 path loses
    /// everything, the others only the replies hashed onto the dead link
    /// (a third): the pooled loss matches, the evenness does not.
    #[test]
    fn loss_on_one_path_of_each_pair_holds_the_tor() {
        let pairs = pairs_over(16, |_| {
            vec![
                path(&["tor", "s0", "dst"], 9.0, 3.0),
                path(&["tor", "s1", "dst"], 9.0, 9.0),
                path(&["tor", "s2", "dst"], 9.0, 3.0),
            ]
        });
        assert!(matches!(check(&pairs, 0.55), PathCheck::Uneven(_)));
    }

    /// A lossy ToR: every path of a pair loses alike (binomial scatter
    /// around 30%), and a gray one loses a probe here and there.
    #[test]
    fn a_tor_fault_on_every_path_agrees() {
        let lost = [[3.0, 2.0, 4.0], [2.0, 3.0, 3.0], [4.0, 3.0, 2.0]];
        let pairs = pairs_over(16, |i| {
            let l = lost[i % 3];
            vec![
                path(&["tor", "s0", "dst"], 10.0, l[0]),
                path(&["tor", "s1", "dst"], 10.0, l[1]),
                path(&["tor", "s2", "dst"], 10.0, l[2]),
            ]
        });
        assert_eq!(check(&pairs, 0.3), PathCheck::Agrees);
        let gray = pairs_over(16, |i| {
            vec![
                path(&["tor", "s0", "dst"], 20.0, (i % 3 == 0) as u8 as f64),
                path(&["tor", "s1", "dst"], 20.0, (i % 4 == 1) as u8 as f64),
            ]
        });
        assert_eq!(check(&gray, 0.02), PathCheck::Agrees);
        // A dead ToR: everything lost, on every path.
        let dead = pairs_over(4, |_| {
            vec![
                path(&["tor", "s0", "dst"], 10.0, 10.0),
                path(&["tor", "s1", "dst"], 10.0, 10.0),
            ]
        });
        assert_eq!(check(&dead, 1.0), PathCheck::Agrees);
    }

    #[test]
    fn a_destination_answering_one_ttl_late_is_the_same_route() {
        let h = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        let direct = h(&["t0", "s0", "t1", "b"]);
        assert!(same_route(&direct, &h(&["t0", "s0", "t1", "", "b"])));
        assert!(same_route(&direct, &h(&["t0", "", "t1", "b"])));
        assert!(!same_route(&direct, &h(&["t0", "s1", "t1", "b"])));
        assert!(!same_route(&direct, &h(&["t0", "s1", "t1", "", "b"])));
    }

    #[test]
    fn without_two_complete_paths_there_is_nothing_to_check() {
        let single = vec![pair(vec![path(&["tor", "dst"], 10.0, 0.0)])];
        assert_eq!(check(&single, 0.5), PathCheck::NoPaths);
        let cut = vec![pair(vec![
            path(&["tor", "s0", "dst"], 10.0, 0.0),
            path(&["tor", ""], 10.0, 10.0),
        ])];
        assert_eq!(check(&cut, 0.5), PathCheck::NoPaths);
        // A destination that never answers traces: every path ends silent,
        // none is cut short.
        let mute = vec![pair(vec![
            path(&["tor", "s0", ""], 10.0, 5.0),
            path(&["tor", "s1", ""], 10.0, 5.0),
        ])];
        assert_eq!(check(&mute, 0.5), PathCheck::Agrees);
        // One flow re-traced through a lossy ToR: a silent TTL gives the
        // same route a new path id (its old series still in the window,
        // with other counts). One route, nothing to check.
        let moved = vec![pair(vec![
            path(&["tor", "s0", "dst"], 10.0, 0.0),
            path(&["tor", "", "dst"], 3.0, 3.0),
            path(&["", "s0", "dst"], 2.0, 2.0),
        ])];
        assert_eq!(check(&moved, 0.3), PathCheck::NoPaths);
        assert_eq!(check(&[], 0.5), PathCheck::NoPaths);
        assert!(!PathCheck::NoPaths.holds_back() && !PathCheck::Agrees.holds_back());
    }
}
