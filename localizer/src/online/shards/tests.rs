use super::*;
use crate::clients::prometheus::{Labels, Sample};
use skeletonhunter_common::topology::Identity;

fn sample(src: &str, value: f64) -> Sample {
    Sample {
        labels: [("src_node", src), ("dst_node", "z")]
            .into_iter()
            .collect::<Labels>(),
        timestamp: 0.0,
        value,
    }
}

fn answers(srcs: &[&str], value: f64) -> PairAnswers {
    PairAnswers::sent_lost(
        srcs.iter().map(|s| sample(s, value)).collect(),
        srcs.iter().map(|s| sample(s, 0.0)).collect(),
    )
}

/// A stand-in for `assemble_pairs`: a pair per sent sample, its source
/// the sample's, its `sent` the sample's value; counts the calls.
fn build(calls: &mut usize) -> impl FnMut(&QueryResults) -> Assembled + '_ {
    move |r| {
        *calls += 1;
        Assembled {
            pairs: r
                .sent
                .iter()
                .map(|s| PairStats {
                    src: Identity {
                        node: s.labels.get("src_node").unwrap_or("").to_string(),
                        ..Identity::default()
                    },
                    sent: s.value,
                    ..PairStats::default()
                })
                .collect(),
            no_topology: 1,
            host_stack: Default::default(),
            incomplete: 0,
        }
    }
}

fn sent_by_src(pairs: &[PairStats]) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = pairs.iter().map(|p| (p.src.node.clone(), p.sent)).collect();
    v.sort_by(|x, y| x.0.cmp(&y.0));
    v
}

const NODES: [&str; 6] = ["n1", "n2", "n3", "n4", "n5", "n6"];

/// Three shards over `NODES`, every pair read and assembled once.
fn three_shards() -> PairShards {
    let mut s = PairShards::new(3, 0);
    assert_eq!(s.plan(), PairRead::All);
    s.received(PairRead::All, answers(&NODES, 1.0));
    s.repartition(NODES);
    assert_eq!(s.shards(), 3);
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!((calls, cycle.assembled_shards), (3, 3));
    assert_eq!(cycle.assembled.no_topology, 3, "summed over the shards");
    s.give_back(cycle.assembled.pairs);
    s
}

#[test]
fn a_shard_read_assembles_only_its_shard_and_the_pairs_cover_every_pair() {
    let mut s = three_shards();
    let read = s.plan();
    assert_eq!(read, PairRead::Shard(0));
    let m = s.matcher(read).unwrap();
    assert!(m.starts_with("src_node=~"), "{m}");
    // Shard 0's nodes answer again with a new value.
    let mine: Vec<&str> = NODES
        .into_iter()
        .filter(|n| s.partition.shard_of(Some(n)) == 0)
        .collect();
    assert!(!mine.is_empty());
    s.received(read, answers(&mine, 2.0));
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!((calls, cycle.assembled_shards), (1, 1), "one shard anew");
    assert!(!cycle.no_probe_series);
    let got = sent_by_src(&cycle.assembled.pairs);
    assert_eq!(got.len(), NODES.len());
    for (node, v) in &got {
        let want = if mine.contains(&node.as_str()) {
            2.0
        } else {
            1.0
        };
        assert_eq!(*v, want, "{node}");
    }
    s.give_back(cycle.assembled.pairs);
    assert_eq!(s.plan(), PairRead::Shard(1));
    let mut calls = 0;
    let again = s.pairs(build(&mut calls));
    assert_eq!(calls, 0, "nothing read, nothing assembled");
    assert_eq!(
        sent_by_src(&again.assembled.pairs),
        got,
        "given back as lent"
    );
    s.give_back(again.assembled.pairs);
    // Shard 1 answers again without one of its nodes and with a 3:
    // its pairs shrink, the other shards' stay as they were.
    let read = s.plan();
    let theirs: Vec<&str> = NODES
        .into_iter()
        .filter(|n| s.partition.shard_of(Some(n)) == 1)
        .collect();
    assert!(!theirs.is_empty());
    s.received(read, answers(&theirs[1..], 3.0));
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!(calls, 1);
    let want: Vec<(String, f64)> = got
        .iter()
        .filter(|(n, _)| n != theirs[0])
        .map(|(n, v)| {
            (
                n.clone(),
                if theirs.contains(&n.as_str()) {
                    3.0
                } else {
                    *v
                },
            )
        })
        .collect();
    assert_eq!(sent_by_src(&cycle.assembled.pairs), want);
}

#[test]
fn new_identities_or_pairs_not_given_back_are_assembled_again() {
    let mut s = three_shards();
    s.forget_pairs();
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!(cycle.assembled_shards, 3, "identities changed");
    // Lent and dropped (a cycle whose analysis died).
    drop(cycle);
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!(cycle.assembled_shards, 3, "not given back");
    // Given back short: not trusted.
    let mut pairs = cycle.assembled.pairs;
    pairs.pop();
    s.give_back(pairs);
    assert!(s.pairs.is_empty(), "a short vector is refused");
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!(cycle.assembled_shards, 3, "given back short");
    assert_eq!(cycle.assembled.pairs.len(), NODES.len());
}

#[test]
fn a_failed_query_makes_the_next_read_a_full_one() {
    let mut s = three_shards();
    assert!(matches!(s.plan(), PairRead::Shard(_)));
    s.failed();
    assert_eq!(s.plan(), PairRead::All);
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert!(cycle.assembled.pairs.is_empty(), "nothing kept");
    assert!(cycle.no_probe_series);
    s.received(PairRead::All, answers(&NODES, 1.0));
    assert!(matches!(s.plan(), PairRead::Shard(_)));
}

#[test]
fn whether_the_cycle_counted_answers_survives_the_shards() {
    for counted in [false, true] {
        let mut s = PairShards::new(3, 0);
        let mut r = QueryResults {
            sent: NODES.iter().map(|n| sample(n, 1.0)).collect(),
            rtt_count: counted.then(|| NODES.iter().map(|n| sample(n, 9.0)).collect()),
            ..QueryResults::default()
        };
        s.received(PairRead::All, PairAnswers::take_from(&mut r));
        s.repartition(NODES);
        let mut seen = Vec::new();
        s.pairs(|r| {
            seen.push(r.rtt_count.is_some());
            Assembled::default()
        });
        assert_eq!(seen, vec![counted; 3], "counted {counted}");
        s.forget_pairs();
        let mut lens = Vec::new();
        s.pairs(|r| {
            lens.push(r.rtt_count.as_ref().map(Vec::len));
            Assembled::default()
        });
        let whole: usize = lens.iter().flatten().sum();
        assert_eq!(whole, if counted { NODES.len() } else { 0 });
        assert_eq!(lens.iter().all(Option::is_some), counted, "a second time");
    }
}

#[test]
fn one_shard_keeps_nothing_between_cycles() {
    let mut s = PairShards::new(1, 0);
    s.repartition(NODES);
    assert_eq!(s.shards(), 1);
    s.received(PairRead::All, answers(&NODES, 1.0));
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!(cycle.assembled.pairs.len(), NODES.len());
    s.give_back(cycle.assembled.pairs);
    assert_eq!(s.plan(), PairRead::All);
    assert!(s.kept.iter().all(Option::is_none));
    assert!(s.pairs.is_empty(), "no pair kept");
}

#[test]
fn auto_shards_only_fleets_of_min_nodes() {
    let mut s = PairShards::new(3, 6);
    s.repartition(NODES);
    assert_eq!(s.shards(), 3);
    s.repartition(NODES[..5].iter().copied());
    assert_eq!(s.shards(), 1, "fewer names than min_nodes: one shard");
}

#[test]
fn a_new_partition_splits_the_kept_answers_again() {
    let mut s = PairShards::new(3, 0);
    s.received(PairRead::All, answers(&NODES[..3], 1.0));
    s.repartition(NODES[..3].iter().copied());
    let before = s.shards();
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    s.give_back(cycle.assembled.pairs);
    s.repartition(NODES);
    assert!(s.shards() >= before);
    assert!(matches!(s.plan(), PairRead::Shard(0)));
    let mut calls = 0;
    let cycle = s.pairs(build(&mut calls));
    assert_eq!(cycle.assembled_shards, s.shards(), "split anew, built anew");
    assert_eq!(cycle.assembled.pairs.len(), 3);
}
