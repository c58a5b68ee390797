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
//!
//! All of `--pair-shards` is here: `partition` (which shard a node's
//! series fall in, and the matcher that reads them), `answers` (the
//! per-pair answers, split by shard), this file (what is kept between
//! cycles and which shard a cycle reads).

mod answers;
mod partition;
#[cfg(test)]
mod tests;

pub(super) use answers::PairAnswers;

use crate::engine::model::PairStats;
use crate::input::promql::{Assembled, QueryResults};
use partition::Partition;

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
        PairAnswers::concat(self.kept.iter_mut().map(|k| k.take().unwrap_or_default()))
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
