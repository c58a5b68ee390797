//! The per-pair answers kept between cycles for `--pair-shards`: a cycle
//! reads one shard and reuses the others' latest answers, so each verdict
//! still covers every pair, with data at most `shards - 1` cycles older
//! than the cycle's own.
//!
//! Whatever might make the kept answers wrong starts a full read instead:
//! the first cycle, a failed query (the store may have been away for
//! longer than the answers are worth), or a change of partition the kept
//! answers cannot follow.

use crate::clients::prometheus::Sample;
use crate::input::promql::shards::Partition;
use crate::input::promql::QueryResults;

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
    pub(super) fn put_into(self, r: &mut QueryResults) {
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

    /// Field lengths, to split a concatenation back.
    fn lens(&mut self) -> [usize; 5] {
        self.fields().map(|f| f.len())
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

/// Per-shard answers kept between cycles.
pub(super) struct PairShards {
    /// `--pair-shards`.
    requested: usize,
    partition: Partition,
    /// One per shard; `None` until read.
    kept: Vec<Option<PairAnswers>>,
    /// The shard the next cycle reads.
    next: usize,
    /// Each shard's field lengths while its answers are lent out.
    lent: Vec<[usize; 5]>,
}

impl PairShards {
    /// Up to `requested` shards; one until the node names are known.
    pub(super) fn new(requested: usize) -> PairShards {
        PairShards {
            requested: requested.max(1),
            partition: Partition::new([], 1),
            kept: vec![None],
            next: 0,
            lent: Vec::new(),
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
    }

    /// Keep what `read` answered.
    pub(super) fn received(&mut self, read: PairRead, answers: PairAnswers) {
        match read {
            PairRead::All => {
                let split = answers.split(&self.partition);
                self.kept = split.into_iter().map(Some).collect();
                self.next = 0;
            }
            PairRead::Shard(i) => {
                if let Some(k) = self.kept.get_mut(i) {
                    *k = Some(answers);
                }
                self.next = (i + 1) % self.shards();
            }
        }
    }

    /// Split by the names now known, when that changes the partition; the
    /// kept answers are split again (or dropped if incomplete).
    pub(super) fn repartition<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        if self.requested == 1 {
            return;
        }
        let partition = Partition::new(names, self.requested);
        if partition == self.partition {
            return;
        }
        let complete = self.kept.iter().all(Option::is_some);
        let all = complete.then(|| self.lend());
        self.partition = partition;
        self.next = 0;
        self.kept = match all {
            Some(all) => all.split(&self.partition).into_iter().map(Some).collect(),
            None => (0..self.shards()).map(|_| None).collect(),
        };
    }

    /// Every kept answer, concatenated, lent until [`PairShards::give_back`].
    /// With one shard nothing is kept between cycles.
    pub(super) fn lend(&mut self) -> PairAnswers {
        let mut all = PairAnswers::default();
        self.lent.clear();
        for k in &mut self.kept {
            let mut a = k.take().unwrap_or_default();
            all.counted |= a.counted;
            self.lent.push(a.lens());
            for (to, from) in all.fields().into_iter().zip(a.fields()) {
                to.append(from);
            }
        }
        all
    }

    /// The answers lent by [`PairShards::lend`] back, split as they came.
    pub(super) fn give_back(&mut self, mut all: PairAnswers) {
        if self.shards() == 1 || self.lent.len() != self.kept.len() {
            self.kept.iter_mut().for_each(|k| *k = None);
            return;
        }
        // Split from the back so each `split_off` leaves the earlier shards.
        for (i, lens) in self.lent.iter().enumerate().rev() {
            let mut part = PairAnswers {
                counted: all.counted,
                ..PairAnswers::default()
            };
            for ((to, from), n) in part.fields().into_iter().zip(all.fields()).zip(lens) {
                *to = from.split_off(from.len().saturating_sub(*n));
            }
            self.kept[i] = Some(part);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::prometheus::Labels;

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

    fn sent_by_src(a: &PairAnswers) -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = a
            .sent
            .iter()
            .map(|s| (s.labels.get("src_node").unwrap_or("").to_string(), s.value))
            .collect();
        v.sort_by(|x, y| x.0.cmp(&y.0));
        v
    }

    const NODES: [&str; 6] = ["n1", "n2", "n3", "n4", "n5", "n6"];

    #[test]
    fn a_shard_read_replaces_only_its_shard_and_the_lent_answers_cover_every_pair() {
        let mut s = PairShards::new(3);
        assert_eq!(s.plan(), PairRead::All);
        s.received(PairRead::All, answers(&NODES, 1.0));
        s.repartition(NODES);
        assert_eq!(s.shards(), 3);
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
        let all = s.lend();
        let got = sent_by_src(&all);
        assert_eq!(got.len(), NODES.len());
        for (node, v) in &got {
            let want = if mine.contains(&node.as_str()) {
                2.0
            } else {
                1.0
            };
            assert_eq!(*v, want, "{node}");
        }
        assert_eq!(all.lost.len(), NODES.len());
        s.give_back(all);
        assert_eq!(s.plan(), PairRead::Shard(1));
        assert_eq!(sent_by_src(&s.lend()), got, "given back as lent");
    }

    #[test]
    fn a_failed_query_or_a_lost_answer_makes_the_next_read_a_full_one() {
        let mut s = PairShards::new(2);
        s.received(PairRead::All, answers(&NODES, 1.0));
        s.repartition(NODES);
        assert!(matches!(s.plan(), PairRead::Shard(_)));
        s.failed();
        assert_eq!(s.plan(), PairRead::All);
        s.received(PairRead::All, answers(&NODES, 1.0));
        assert!(matches!(s.plan(), PairRead::Shard(_)));
        // Lent and never given back (a cycle that returned early).
        let _ = s.lend();
        assert_eq!(s.plan(), PairRead::All);
    }

    #[test]
    fn whether_the_cycle_counted_answers_survives_the_shards() {
        for counted in [false, true] {
            let mut s = PairShards::new(3);
            let mut r = QueryResults {
                sent: NODES.iter().map(|n| sample(n, 1.0)).collect(),
                rtt_count: counted.then(|| NODES.iter().map(|n| sample(n, 9.0)).collect()),
                ..QueryResults::default()
            };
            s.received(PairRead::All, PairAnswers::take_from(&mut r));
            s.repartition(NODES);
            s.lend().put_into(&mut r);
            let n = r.rtt_count.as_ref().map(Vec::len);
            assert_eq!(n, counted.then_some(NODES.len()), "counted {counted}");
            s.give_back(PairAnswers::take_from(&mut r));
            s.lend().put_into(&mut r);
            assert_eq!(r.rtt_count.is_some(), counted, "after a give-back");
        }
    }

    #[test]
    fn one_shard_keeps_nothing_between_cycles() {
        let mut s = PairShards::new(1);
        s.repartition(NODES);
        assert_eq!(s.shards(), 1);
        s.received(PairRead::All, answers(&NODES, 1.0));
        let all = s.lend();
        assert_eq!(all.sent.len(), NODES.len());
        s.give_back(all);
        assert_eq!(s.plan(), PairRead::All);
        assert!(s.kept.iter().all(Option::is_none));
    }

    #[test]
    fn a_new_partition_splits_the_kept_answers_again() {
        let mut s = PairShards::new(3);
        s.received(PairRead::All, answers(&NODES[..3], 1.0));
        s.repartition(NODES[..3].iter().copied());
        let before = s.shards();
        s.repartition(NODES);
        assert!(s.shards() >= before);
        assert!(matches!(s.plan(), PairRead::Shard(0)));
        assert_eq!(s.lend().sent.len(), 3);
    }
}
