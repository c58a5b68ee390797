//! The per-pair answers kept between cycles for `--pair-shards`: a cycle
//! reads one shard and reuses the others' latest answers, so each verdict
//! still covers every pair, with data at most `shards - 1` cycles older
//! than the cycle's own.
//!
//! The engine's pairs are kept too, in one vector shard after shard: a
//! pair's series all fall in its source node's shard, so a cycle
//! assembles only the shard it read and splices its pairs over that
//! shard's old ones. At 100,000 pairs assembling every pair was a third
//! of the localizer's CPU per cycle; with N shards a cycle pays for 1/N
//! of it, and no pair is copied to lend them all to the engine. Kept
//! pairs are assembled again when the node identities change, since a
//! pair carries both ends' identities, and every shard's after a full
//! read or a new partition. The engine's input is then ordered shard by
//! shard (each shard by source and destination), not by pair over all:
//! its verdicts do not depend on the order.
//!
//! Whatever might make the kept answers wrong starts a full read instead:
//! the first cycle, a failed query (the store may have been away for
//! longer than the answers are worth), or a change of partition the kept
//! answers cannot follow.

use crate::clients::prometheus::Sample;
use crate::engine::model::PairStats;
use crate::input::promql::shards::Partition;
use crate::input::promql::{Assembled, QueryResults};

/// The per-pair queries' answers, for some or all pairs.
#[derive(Debug, Default)]
pub(super) struct PairAnswers {
    sent: Vec<Sample>,
    lost: Vec<Sample>,
    dial_failures: Vec<Sample>,
    rtt_p50: Vec<Sample>,
    rtt_count: Vec<Sample>,
    /// Whether the cycle asked for `rtt_count` (one RTT form for all
    /// shards, so all or none did).
    counted: bool,
}

impl PairAnswers {
    /// The per-pair part of `r`, moved out of it.
    pub(super) fn take_from(r: &mut QueryResults) -> PairAnswers {
        PairAnswers {
            sent: std::mem::take(&mut r.sent),
            lost: std::mem::take(&mut r.lost),
            dial_failures: std::mem::take(&mut r.dial_failures),
            rtt_p50: std::mem::take(&mut r.rtt_p50),
            counted: r.rtt_count.is_some(),
            rtt_count: r.rtt_count.take().unwrap_or_default(),
        }
    }

    /// Moved into `r`'s per-pair part.
    fn put_into(self, r: &mut QueryResults) {
        r.sent = self.sent;
        r.lost = self.lost;
        r.dial_failures = self.dial_failures;
        r.rtt_p50 = self.rtt_p50;
        r.rtt_count = self.counted.then_some(self.rtt_count);
    }

    /// Every field's samples, in a fixed order.
    fn fields(&mut self) -> [&mut Vec<Sample>; 5] {
        [
            &mut self.sent,
            &mut self.lost,
            &mut self.dial_failures,
            &mut self.rtt_p50,
            &mut self.rtt_count,
        ]
    }

    /// `self` split by `partition` into its shards.
    fn split(mut self, partition: &Partition) -> Vec<PairAnswers> {
        let mut out: Vec<PairAnswers> = (0..partition.shards())
            .map(|_| PairAnswers {
                counted: self.counted,
                ..PairAnswers::default()
            })
            .collect();
        for field in 0..5 {
            for s in std::mem::take(self.fields()[field]) {
                let shard = partition.shard_of(s.labels.get("src_node"));
                out[shard].fields()[field].push(s);
            }
        }
        out
    }

    /// Whether no pair sent a probe or dialled (no probe series at all).
    fn no_probe_series(&self) -> bool {
        self.sent.is_empty() && self.dial_failures.is_empty()
    }

    /// The pairs `build` assembles from these answers (lent to it as a
    /// [`QueryResults`] and taken back).
    fn assemble(&mut self, build: &mut impl FnMut(&QueryResults) -> Assembled) -> Assembled {
        let mut r = QueryResults::default();
        std::mem::take(self).put_into(&mut r);
        let built = build(&r);
        *self = PairAnswers::take_from(&mut r);
        built
    }
}

/// What a cycle reads of the per-pair series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PairRead {
    /// Every pair.
    All,
    /// The pairs of one shard.
    Shard(usize),
}

impl PairRead {
    /// The label value of `skeletonhunter_localizer_pair_reads_total`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            PairRead::All => "all",
            PairRead::Shard(_) => "shard",
        }
    }
}

/// A cycle's pairs over every shard, lent by [`PairShards::pairs`].
#[derive(Debug)]
pub(super) struct CyclePairs {
    /// Every shard's pairs, shard after shard.
    pub(super) assembled: Assembled,
    /// Whether no shard has any probe series.
    pub(super) no_probe_series: bool,
    /// Shards assembled anew this cycle (the others' pairs were kept).
    pub(super) assembled_shards: usize,
}

/// Where a shard's pairs are in the kept vector, and what assembling them
/// left out.
#[derive(Debug, Clone, Copy, Default)]
struct Part {
    /// Its pairs, after the earlier shards' in the vector.
    len: usize,
    /// Whether they are to be assembled again from the shard's answers
    /// (read this cycle, or the identities changed); their old pairs
    /// hold the place until then.
    stale: bool,
    no_topology: usize,
    incomplete: usize,
}

/// Per-shard answers and pairs kept between cycles.
pub(super) struct PairShards {
    /// `--pair-shards`, used from `min_nodes` node names on (`auto`).
    requested: usize,
    min_nodes: usize,
    partition: Partition,
    /// One per shard; `None` until read.
    kept: Vec<Option<PairAnswers>>,
    /// Every shard's pairs, shard after shard (`parts` says where);
    /// moved out while lent.
    pairs: Vec<PairStats>,
    /// One per shard.
    parts: Vec<Part>,
    /// The shard the next cycle reads.
    next: usize,
}

impl PairShards {
    /// Up to `requested` shards once `min_nodes` node names are known.
    pub(super) fn new(requested: usize, min_nodes: usize) -> PairShards {
        PairShards {
            requested: requested.max(1),
            min_nodes,
            partition: Partition::new([], 1),
            kept: vec![None],
            pairs: Vec::new(),
            parts: vec![Part::default()],
            next: 0,
        }
    }

    /// Shards in use.
    pub(super) fn shards(&self) -> usize {
        self.partition.shards()
    }

    /// What this cycle reads: one shard once every shard has answers.
    pub(super) fn plan(&self) -> PairRead {
        if self.shards() > 1 && self.kept.iter().all(Option::is_some) {
            PairRead::Shard(self.next)
        } else {
            PairRead::All
        }
    }

    /// The label matcher of `read` (`None`: every pair).
    pub(super) fn matcher(&self, read: PairRead) -> Option<String> {
        match read {
            PairRead::All => None,
            PairRead::Shard(i) => self.partition.matcher(i),
        }
    }

    /// A cycle's query failed: nothing kept is trusted any more.
    pub(super) fn failed(&mut self) {
        self.kept.iter_mut().for_each(|k| *k = None);
        self.drop_pairs();
    }

    /// The node identities changed: every kept pair is assembled again
    /// from its shard's answers.
    pub(super) fn forget_pairs(&mut self) {
        self.parts.iter_mut().for_each(|p| p.stale = true);
    }

    /// No pair kept: every shard to be assembled from its answers.
    fn drop_pairs(&mut self) {
        self.pairs = Vec::new();
        self.parts = vec![
            Part {
                stale: true,
                ..Part::default()
            };
            self.shards()
        ];
    }

    /// Keep what `read` answered.
    pub(super) fn received(&mut self, read: PairRead, answers: PairAnswers) {
        match read {
            PairRead::All => {
                let split = answers.split(&self.partition);
                self.kept = split.into_iter().map(Some).collect();
                self.drop_pairs();
                self.next = 0;
            }
            PairRead::Shard(i) => {
                if let Some(k) = self.kept.get_mut(i) {
                    *k = Some(answers);
                }
                if let Some(p) = self.parts.get_mut(i) {
                    p.stale = true;
                }
                self.next = (i + 1) % self.shards();
            }
        }
    }

    /// Split by the names now known (one shard below `min_nodes`), when that
    /// changes the partition; the kept answers are split again (or dropped
    /// if incomplete), and their pairs assembled again.
    pub(super) fn repartition<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        if self.requested == 1 {
            return;
        }
        let names: Vec<&str> = names.into_iter().collect();
        let few = names.len() < self.min_nodes;
        let partition = Partition::new(names, if few { 1 } else { self.requested });
        if partition == self.partition {
            return;
        }
        let complete = self.kept.iter().all(Option::is_some);
        let all = complete.then(|| self.take_all());
        self.partition = partition;
        self.next = 0;
        self.kept = match all {
            Some(all) => all.split(&self.partition).into_iter().map(Some).collect(),
            None => (0..self.shards()).map(|_| None).collect(),
        };
        self.drop_pairs();
    }

    /// Every kept answer, concatenated and taken out.
    fn take_all(&mut self) -> PairAnswers {
        let mut all = PairAnswers::default();
        for k in &mut self.kept {
            let mut a = k.take().unwrap_or_default();
            all.counted |= a.counted;
            for (to, from) in all.fields().into_iter().zip(a.fields()) {
                to.append(from);
            }
        }
        all
    }

    /// This cycle's pairs, shard after shard, lent until
    /// [`PairShards::give_back`]: the kept pairs, with every stale
    /// shard's replaced by the pairs `build` assembles from its answers.
    /// With one shard nothing is kept between cycles: the answers are
    /// dropped once assembled.
    pub(super) fn pairs(
        &mut self,
        mut build: impl FnMut(&QueryResults) -> Assembled,
    ) -> CyclePairs {
        // Pairs lent and never given back (a cycle that died): none kept.
        if self.whole() != self.pairs.len() {
            self.drop_pairs();
        }
        let mut out = CyclePairs {
            assembled: Assembled::default(),
            no_probe_series: true,
            assembled_shards: 0,
        };
        let mut start = 0;
        for (kept, part) in self.kept.iter_mut().zip(&mut self.parts) {
            if let Some(answers) = kept {
                out.no_probe_series &= answers.no_probe_series();
                if part.stale {
                    let built = answers.assemble(&mut build);
                    let old = start..start + part.len;
                    *part = Part {
                        len: built.pairs.len(),
                        stale: false,
                        no_topology: built.no_topology,
                        incomplete: built.incomplete,
                    };
                    self.pairs.splice(old, built.pairs);
                    out.assembled_shards += 1;
                }
            } else {
                // A shard without answers has no pairs, nor counts.
                self.pairs.drain(start..start + part.len);
                *part = Part::default();
            }
            out.assembled.no_topology += part.no_topology;
            out.assembled.incomplete += part.incomplete;
            start += part.len;
        }
        out.assembled.pairs = std::mem::take(&mut self.pairs);
        if self.shards() == 1 {
            self.kept.iter_mut().for_each(|k| *k = None);
        }
        out
    }

    /// The pairs lent by [`PairShards::pairs`] back, as lent. Pairs not
    /// given back, or given back in another number, are assembled again
    /// next cycle; with one shard they are not kept.
    pub(super) fn give_back(&mut self, pairs: Vec<PairStats>) {
        if self.shards() > 1 && pairs.len() == self.whole() {
            self.pairs = pairs;
        }
    }

    /// How many pairs the parts hold together.
    fn whole(&self) -> usize {
        self.parts.iter().map(|p| p.len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::prometheus::Labels;
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
        PairAnswers {
            sent: srcs.iter().map(|s| sample(s, value)).collect(),
            lost: srcs.iter().map(|s| sample(s, 0.0)).collect(),
            ..PairAnswers::default()
        }
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
                incomplete: 0,
            }
        }
    }

    fn sent_by_src(pairs: &[PairStats]) -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> =
            pairs.iter().map(|p| (p.src.node.clone(), p.sent)).collect();
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
}
