use super::*;

#[test]
fn coordinates_follow_the_order_and_back() {
    let g = Grid::new(2, 3, 4, Order::TpDpPp, None);
    assert_eq!(g.coord(3), [1, 1, 0]);
    assert_eq!(g.coord(6), [0, 0, 1]);
    let h = Grid::new(2, 3, 4, Order::TpPpDp, None);
    assert_eq!(h.coord(3), [1, 0, 1]);
    assert_eq!(h.coord(8), [0, 1, 0]);
    for r in 0..24 {
        assert_eq!(g.rank(g.coord(r)), r);
        assert_eq!(h.rank(h.coord(r)), r);
    }
}

/// Every pair counted the slow way against the hits and expected counts.
#[test]
fn the_counts_are_what_the_shapes_predict() {
    for (tp, dp, pp) in [
        (1, 8, 1),
        (2, 3, 4),
        (4, 2, 2),
        (2, 12, 3),
        (1, 1, 5),
        (3, 1, 1),
        (1, 20, 2),
        (1, 40, 1),
        (2, 24, 2),
    ] {
        for order in [Order::TpDpPp, Order::TpPpDp] {
            for gph in [None, Some(2), Some(4), Some(8)] {
                let g = Grid::new(tp, dp, pp, order, gph);
                let n = tp * dp * pp;
                let all: Vec<(u32, u32)> = (0..n)
                    .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
                    .collect();
                let (hits, expected) = (g.hits(&all), g.expected());
                let mut want = [[0u64; MAX_SHAPES]; 3];
                for &(a, b) in &all {
                    if let (true, Some((k, i, j))) = (g.visible(a, b), g.shared(a, b)) {
                        for (s, shape) in SHAPES[k].iter().enumerate() {
                            want[k][s] += u64::from(shape.links(i, j, g.dims(k)));
                        }
                    }
                }
                assert_eq!(expected, want, "{g:?}");
                // Every pair observed: every predicted one is a hit.
                assert_eq!(hits, want, "{g:?}");
            }
        }
    }
}

#[test]
fn connections_inside_a_host_are_not_predicted() {
    // TP 8 in a host of 8: nothing of TP on the network.
    let expected = Grid::new(8, 2, 1, Order::TpDpPp, Some(8)).expected();
    assert_eq!(expected[0], [0; MAX_SHAPES]);
    // DP pairs 0-8, 1-9, ...: eight visible ring connections.
    assert_eq!(expected[1][0], 8);
}

#[test]
fn groups_partition_the_ranks_by_the_other_coordinates() {
    let g = Grid::new(2, 2, 2, Order::TpDpPp, None);
    assert_eq!(g.group_of(0, GroupKind::Tp), g.group_of(1, GroupKind::Tp));
    assert_ne!(g.group_of(0, GroupKind::Tp), g.group_of(2, GroupKind::Tp));
    assert_eq!(g.group_of(0, GroupKind::Dp), g.group_of(2, GroupKind::Dp));
    assert_eq!(g.group_of(0, GroupKind::Pp), g.group_of(4, GroupKind::Pp));
    assert_eq!(g.shared(0, 4), Some((2, 0, 1)));
    assert_eq!(g.shared(0, 3), None);
    // TP, PP, DP with DP and PP swapped stands for the same groups.
    assert_eq!(
        Grid::new(2, 3, 4, Order::TpPpDp, None).partition_key(),
        Grid::new(2, 4, 3, Order::TpDpPp, None).partition_key()
    );
}

#[test]
fn visible_pairs_are_those_across_hosts() {
    for (g, want) in [
        (Grid::new(1, 10, 1, Order::TpDpPp, Some(4)), 45 - 2 * 6 - 1),
        (Grid::new(2, 2, 2, Order::TpDpPp, None), 28),
        (Grid::new(8, 2, 1, Order::TpDpPp, Some(8)), 64),
    ] {
        let n = g.tp * g.dp * g.pp;
        let slow = (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| g.visible(a, b))
            .count() as u64;
        assert_eq!((g.visible_pairs(), slow), (want, want), "{g:?}");
    }
}

#[test]
fn members_of_a_group_on_one_host_are_counted_by_the_stride() {
    // TP 2 in hosts of 8: 4 members of a DP group on each host; a
    // pipeline's stages are a DP degree apart, on other hosts.
    let g = Grid::new(2, 16, 4, Order::TpDpPp, Some(8));
    assert_eq!(g.dims(0), Dims { n: 2, m: 2 });
    assert_eq!(g.dims(1), Dims { n: 16, m: 4 });
    assert_eq!(g.dims(2), Dims { n: 4, m: 1 });
    // TP, PP, DP: consecutive stages share a host instead.
    let h = Grid::new(2, 16, 4, Order::TpPpDp, Some(8));
    assert_eq!((h.dims(1).m, h.dims(2).m), (1, 4));
    // No hosts: every member apart.
    assert_eq!(Grid::new(1, 8, 1, Order::TpDpPp, None).dims(1).m, 1);
}

#[test]
fn rails_join_blocks_at_the_same_place() {
    // 16 members, 4 a host: blocks 0-3, 4-7, ...
    let d = Dims { n: 16, m: 4 };
    let all = rails(Form::Ring, None);
    assert!(
        all.links(1, 5, d) && all.links(3, 15, d),
        "next block; last with first"
    );
    assert!(!all.links(1, 6, d) && !all.links(1, 2, d) && !all.links(1, 9, d));
    let one = rails(Form::Ring, Some(1));
    assert!(one.links(0, 4, d) && !one.links(1, 5, d));
    let tree = rails(Form::Tree, Some(2));
    assert!(tree.links(1, 9, d) && tree.links(4, 12, d) && !tree.links(0, 12, d));
    assert!(!tree.links(2, 10, d), "place 2 carries no channel");
}

/// Why no method reaches an adjusted Rand index of 0.95 on every job: TP 8
/// in hosts of 8 with DP rings over a channel per GPU, and TP 4 with two
/// DP peers in each host over the same channels, predict exactly the same
/// connections (GPU i of each host to GPU i of the next), yet their groups
/// differ (a TP group of 8 against two of 4). Whatever is answered for
/// that skeleton, one of the two jobs scores below 0.95.
#[test]
fn two_grids_with_other_groups_predict_the_same_connections() {
    let eight = Grid::new(8, 4, 1, Order::TpDpPp, Some(8));
    let four = Grid::new(4, 8, 1, Order::TpDpPp, Some(8));
    let shapes = [Shape::Silent, rails(Form::Ring, None), Shape::Chain];
    let predicted = |g: &Grid| -> Vec<(u32, u32)> {
        (0..32)
            .flat_map(|a| (a + 1..32).map(move |b| (a, b)))
            .filter(|&(a, b)| g.predicts(shapes, a, b))
            .collect()
    };
    let seen = predicted(&eight);
    assert_eq!(seen.len(), 8 * 4, "a ring of four hosts on each of 8 rails");
    assert!(seen.iter().all(|&(a, b)| a % 8 == b % 8), "{seen:?}");
    assert_eq!(predicted(&four), seen);
    let together = |g: &Grid| g.group_of(0, GroupKind::Tp) == g.group_of(4, GroupKind::Tp);
    assert!(together(&eight) && !together(&four));
}
