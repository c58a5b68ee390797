use super::layout::{DpShape, Layout, Order, TpShape};
use super::*;

/// A small deterministic generator (no dependency for tests).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The skeleton `l` predicts, with `missing` in 1,000 connections dropped
/// and `noise` random ones added.
fn skeleton(l: &Layout, missing: u64, noise: usize, seed: u64) -> JobGraph {
    let n = l.tp * l.dp * l.pp;
    let mut rng = Lcg(seed);
    let mut edges = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if l.predicts(a, b).is_some() && rng.below(1000) >= missing {
                edges.push((a, b));
            }
        }
    }
    for _ in 0..noise {
        let (a, b) = (rng.below(n.into()) as u32, rng.below(n.into()) as u32);
        if a != b {
            edges.push((a, b));
        }
    }
    JobGraph { ranks: n, edges }
}

fn layout(tp: u32, dp: u32, pp: u32, order: Order, tp_shape: TpShape, dp_shape: DpShape) -> Layout {
    Layout {
        tp,
        dp,
        pp,
        order,
        tp_shape,
        dp_shape,
    }
}

#[test]
fn a_megatron_grid_is_recovered_through_noise_and_missed_connections() {
    let truth = layout(4, 8, 4, Order::TpDpPp, TpShape::Hidden, DpShape::Ring);
    let inf = infer(&skeleton(&truth, 100, 10, 7));
    let g = inf.grid.expect("a grid");
    assert_eq!(
        (g.tp, g.dp, g.pp, g.order),
        (4, 8, 4, Order::TpDpPp),
        "{inf:?}"
    );
    assert!(inf.determined, "{inf:?}");
    assert_eq!(inf.groups.tp.len(), 32);
    assert_eq!(inf.groups.tp[0], vec![0, 1, 2, 3]);
    assert_eq!(inf.groups.dp[0], vec![0, 4, 8, 12, 16, 20, 24, 28]);
    assert_eq!(inf.groups.pp[0], vec![0, 32, 64, 96]);
}

#[test]
fn other_orders_and_shapes_are_told_apart() {
    for truth in [
        layout(2, 4, 4, Order::TpPpDp, TpShape::Ring, DpShape::Ring),
        layout(8, 16, 1, Order::TpDpPp, TpShape::Hidden, DpShape::RingTree),
        layout(1, 32, 1, Order::TpDpPp, TpShape::Hidden, DpShape::Tree),
        layout(4, 1, 8, Order::TpDpPp, TpShape::Clique, DpShape::Ring),
    ] {
        let inf = infer(&skeleton(&truth, 0, 0, 3));
        let g = inf.grid.expect("a grid");
        let want = truth.partition_key();
        assert_eq!(g.partition_key(), want, "{truth:?}: {inf:?}");
    }
}

#[test]
fn a_skeleton_without_structure_is_not_determined() {
    let mut rng = Lcg(11);
    let edges = (0..200)
        .map(|_| (rng.below(64) as u32, rng.below(64) as u32))
        .collect();
    let inf = infer(&JobGraph { ranks: 64, edges });
    assert!(!inf.determined, "{inf:?}");
}

#[test]
fn out_of_range_and_repeated_edges_count_once_or_not_at_all() {
    let truth = layout(1, 8, 1, Order::TpDpPp, TpShape::Hidden, DpShape::Ring);
    let mut job = skeleton(&truth, 0, 0, 1);
    let clean = infer(&job).score;
    job.edges.push((1, 0));
    job.edges.push((3, 3));
    job.edges.push((2, 99));
    assert_eq!(infer(&job).score, clean);
}

#[test]
fn a_job_without_ranks_has_no_grid() {
    let inf = infer(&JobGraph {
        ranks: 0,
        edges: vec![],
    });
    assert!(inf.grid.is_none() && !inf.determined);
}

#[test]
fn a_long_ring_is_data_parallel_but_not_determined() {
    // Only the ring's closing connection tells it from a 64-stage pipeline:
    // data parallel, the usual layout, but said to be a guess.
    let truth = layout(1, 64, 1, Order::TpDpPp, TpShape::Hidden, DpShape::Ring);
    let mut job = skeleton(&truth, 0, 0, 5);
    for closed in [true, false] {
        if !closed {
            job.edges.retain(|&(a, b)| (a, b) != (0, 63));
        }
        let inf = infer(&job);
        assert!(!inf.determined, "{inf:?}");
        assert_eq!(inf.groups.dp.len(), 1, "{inf:?}");
        assert!(inf.groups.tp.is_empty() && inf.groups.pp.is_empty());
    }
    // A short one is told apart.
    let truth = layout(1, 16, 1, Order::TpDpPp, TpShape::Hidden, DpShape::Ring);
    assert!(infer(&skeleton(&truth, 0, 0, 5)).determined);
}
