//! The per-pair queries' answers, moved out of a cycle's results, split
//! by shard, and lent back to the assembly.

use super::partition::Partition;
use crate::clients::prometheus::Sample;
use crate::input::promql::{Assembled, QueryResults};

/// The per-pair queries' answers, for some or all pairs.
#[derive(Debug, Default)]
pub(in crate::online) struct PairAnswers {
    sent: Vec<Sample>,
    lost: Vec<Sample>,
    dial_failures: Vec<Sample>,
    consecutive_lost: Vec<Sample>,
    rtt_p50: Vec<Sample>,
    rtt_count: Vec<Sample>,
    /// Whether the cycle asked for `rtt_count` (one RTT form for all
    /// shards, so all or none did).
    counted: bool,
}

impl PairAnswers {
    /// The per-pair part of `r`, moved out of it.
    pub(in crate::online) fn take_from(r: &mut QueryResults) -> PairAnswers {
        PairAnswers {
            sent: std::mem::take(&mut r.sent),
            lost: std::mem::take(&mut r.lost),
            dial_failures: std::mem::take(&mut r.dial_failures),
            consecutive_lost: std::mem::take(&mut r.consecutive_lost),
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
        r.consecutive_lost = self.consecutive_lost;
        r.rtt_p50 = self.rtt_p50;
        r.rtt_count = self.counted.then_some(self.rtt_count);
    }

    /// Every field's samples, in a fixed order.
    fn fields(&mut self) -> [&mut Vec<Sample>; 6] {
        [
            &mut self.sent,
            &mut self.lost,
            &mut self.dial_failures,
            &mut self.consecutive_lost,
            &mut self.rtt_p50,
            &mut self.rtt_count,
        ]
    }

    /// `self` split by `partition` into its shards.
    pub(in crate::online) fn split(mut self, partition: &Partition) -> Vec<PairAnswers> {
        let mut out: Vec<PairAnswers> = (0..partition.shards())
            .map(|_| PairAnswers {
                counted: self.counted,
                ..PairAnswers::default()
            })
            .collect();
        for field in 0..6 {
            for s in std::mem::take(self.fields()[field]) {
                let shard = partition.shard_of(s.labels.get("src_node"));
                out[shard].fields()[field].push(s);
            }
        }
        out
    }

    /// `parts` concatenated, field by field.
    pub(in crate::online) fn concat(parts: impl IntoIterator<Item = PairAnswers>) -> PairAnswers {
        let mut all = PairAnswers::default();
        for mut a in parts {
            all.counted |= a.counted;
            for (to, from) in all.fields().into_iter().zip(a.fields()) {
                to.append(from);
            }
        }
        all
    }

    /// Answers of `sent` and `lost` samples alone.
    #[cfg(test)]
    pub(in crate::online) fn sent_lost(sent: Vec<Sample>, lost: Vec<Sample>) -> PairAnswers {
        PairAnswers {
            sent,
            lost,
            ..PairAnswers::default()
        }
    }

    /// Whether no pair sent a probe or dialled (no probe series at all).
    pub(in crate::online) fn no_probe_series(&self) -> bool {
        self.sent.is_empty() && self.dial_failures.is_empty()
    }

    /// The pairs `build` assembles from these answers (lent to it as a
    /// [`QueryResults`] and taken back).
    pub(in crate::online) fn assemble(
        &mut self,
        build: &mut impl FnMut(&QueryResults) -> Assembled,
    ) -> Assembled {
        let mut r = QueryResults::default();
        std::mem::take(self).put_into(&mut r);
        let built = build(&r);
        *self = PairAnswers::take_from(&mut r);
        built
    }
}
