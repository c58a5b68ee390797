use super::*;
use crate::jobs::impact::tests::rank;

/// A job of 4 containers of 8 ranks, TP 8 inside each, DP 2 and 2
/// pipeline stages across: containers 0–1 and 2–3 are DP peers, 0–2
/// and 1–3 consecutive stages.
fn square(job: &str) -> (Vec<Identity>, HashMap<String, Ranks>) {
    let nodes: Vec<Identity> = (0..4).map(|c| rank(job, c, c / 2, c % 2)).collect();
    let ranks = nodes
        .iter()
        .enumerate()
        .map(|(c, n)| {
            (
                n.node.clone(),
                Ranks::new(8 * c as u32, 8, Some(32)).unwrap(),
            )
        })
        .collect();
    (nodes, ranks)
}

fn square_pairs(nodes: &[Identity]) -> Vec<(&Identity, &Identity)> {
    [(0, 1), (2, 3), (0, 2), (1, 3)]
        .iter()
        .map(|&(a, b)| (&nodes[a], &nodes[b]))
        .collect()
}

#[test]
fn a_job_is_solved_from_its_containers_pairs_and_ranks() {
    let (nodes, ranks) = square("llm");
    let graphs = block_graphs(square_pairs(&nodes), &ranks);
    let g = graphs["llm"].as_ref().expect("a skeleton");
    assert_eq!((g.ranks, g.per), (32, 8));
    let mut pairs = g.pairs.clone();
    pairs.sort_unstable();
    assert_eq!(pairs, [(0, 1), (0, 2), (1, 3), (2, 3)]);
    let states = Solver::default().solve(graphs, SOLVES_PER_CYCLE);
    let GroupState::Inferred(l) = &states["llm"] else {
        panic!("{states:?}");
    };
    let grid = l.layout.grid;
    assert_eq!((grid.tp, grid.dp * grid.pp), (8, 4), "{l:?}");
    assert_eq!(l.groups, [4, 16, 16]);
    assert!(l.determined && l.score > 0.99, "{l:?}");
    assert!(
        l.describe().starts_with("TP 8 × DP 2 × PP 2"),
        "{}",
        l.describe()
    );
}

#[test]
fn containers_without_ranks_or_with_uneven_ranks_say_why() {
    let (nodes, mut ranks) = square("llm");
    ranks.remove(&nodes[3].node);
    let graphs = block_graphs(square_pairs(&nodes), &ranks);
    assert_eq!(graphs["llm"].as_ref().err(), Some(&Unsolvable::Unranked));
    ranks.insert(nodes[2].node.clone(), Ranks::new(16, 4, Some(32)).unwrap());
    let graphs = block_graphs(square_pairs(&nodes), &ranks);
    assert_eq!(graphs["llm"].as_ref().err(), Some(&Unsolvable::Unranked));
    ranks.insert(nodes[3].node.clone(), Ranks::new(24, 8, Some(32)).unwrap());
    let graphs = block_graphs(square_pairs(&nodes), &ranks);
    assert_eq!(graphs["llm"].as_ref().err(), Some(&Unsolvable::Uneven));
    // The last container of a job may hold fewer.
    for (c, n) in nodes.iter().take(3).enumerate() {
        let r = Ranks::new(8 * c as u32, 8, Some(28)).unwrap();
        ranks.insert(n.node.clone(), r);
    }
    ranks.insert(nodes[3].node.clone(), Ranks::new(24, 4, Some(28)).unwrap());
    let graphs = block_graphs(square_pairs(&nodes), &ranks);
    let g = graphs["llm"].as_ref().expect("a skeleton");
    assert_eq!((g.ranks, g.per), (28, 8));
    // A first rank off the container size is not torchrun's placement.
    ranks.insert(nodes[3].node.clone(), Ranks::new(20, 8, Some(32)).unwrap());
    let graphs = block_graphs(square_pairs(&nodes), &ranks);
    assert_eq!(graphs["llm"].as_ref().err(), Some(&Unsolvable::Uneven));
    let states = Solver::default().solve(graphs, SOLVES_PER_CYCLE);
    assert_eq!(states["llm"], GroupState::Uneven);
}

#[test]
fn a_job_is_solved_again_only_when_its_skeleton_changes_and_within_the_budget() {
    let jobs: Vec<(Vec<Identity>, HashMap<String, Ranks>)> =
        ["a", "b", "c"].iter().map(|j| square(j)).collect();
    let ranks: HashMap<String, Ranks> = jobs.iter().flat_map(|(_, r)| r.clone()).collect();
    let all = || jobs.iter().flat_map(|(n, _)| square_pairs(n));
    let mut solver = Solver::default();
    // One solve a cycle: one job inferred, two pending.
    let s = solver.solve(block_graphs(all(), &ranks), 1);
    let inferred = |s: &HashMap<String, GroupState>| {
        let mut v: Vec<String> = s
            .iter()
            .filter(|(_, st)| matches!(st, GroupState::Inferred(_)))
            .map(|(j, _)| j.clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(inferred(&s), ["a"]);
    assert_eq!(s["b"], GroupState::Pending);
    let s = solver.solve(block_graphs(all(), &ranks), 1);
    assert_eq!(inferred(&s), ["a", "b"]);
    let s = solver.solve(block_graphs(all(), &ranks), 1);
    assert_eq!(inferred(&s), ["a", "b", "c"]);
    // Nothing changed: no budget needed to keep the answers.
    let s = solver.solve(block_graphs(all(), &ranks), 0);
    assert_eq!(inferred(&s), ["a", "b", "c"]);
    // Job a loses a pair: its old answer stands until it is solved anew.
    let fewer = jobs[0].0.clone();
    let changed = square_pairs(&fewer)[..3].to_vec();
    let rest = jobs[1..].iter().flat_map(|(n, _)| square_pairs(n));
    let s = solver.solve(block_graphs(changed.into_iter().chain(rest), &ranks), 0);
    assert_eq!(inferred(&s), ["a", "b", "c"]);
    // Job c ends: forgotten.
    let s = solver.solve(block_graphs(square_pairs(&jobs[0].0), &ranks), 0);
    assert_eq!(s.len(), 1);
    assert_eq!(solver.known.len(), 1);
}

#[test]
fn a_component_touches_the_groups_of_the_ranks_under_it() {
    let (nodes, ranks) = square("llm");
    let mut states = Solver::default().solve(block_graphs(square_pairs(&nodes), &ranks), 1);
    let GroupState::Inferred(l) = &states["llm"] else {
        panic!("{states:?}");
    };
    // Container 0 (ranks 0-7): one TP group, and 8 of the DP and PP
    // groups of 2 (each of its ranks in one of each).
    let under = [ranks[&nodes[0].node]];
    let t = l.touched(&under);
    assert_eq!(t.of, [4, 16, 16]);
    assert_eq!(t.touched, [1, 8, 8]);
    // Containers 0 and 1: DP peers (or stages) of one another.
    let t = l.touched(&[ranks[&nodes[0].node], ranks[&nodes[1].node]]);
    assert_eq!(t.touched[0], 2);
    assert_eq!(t.touched[1] + t.touched[2], 16 + 8, "{t:?}");
    // The impact of a ToR over containers 0 and 1 gets them; a job
    // whose groups are unknown gets none.
    let tor0 = skeletonhunter_common::topology::Component::new(
        skeletonhunter_common::topology::Kind::Tor,
        "tor0",
    );
    let mut hit = crate::jobs::impact::impact(square_pairs(&nodes), &ranks, tor0.kind, &tor0.id);
    touch(&mut hit, &states);
    assert_eq!(hit[0].groups_under, Some(t));
    assert!(
        hit[0].groups_note().contains("groups under it: TP 2 of 4"),
        "{}",
        hit[0].groups_note()
    );
    states.clear();
    hit[0].groups_under = None;
    touch(&mut hit, &states);
    assert_eq!(
        (hit[0].groups_under, hit[0].groups_note()),
        (None, String::new())
    );
}
