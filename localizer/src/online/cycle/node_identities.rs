//! The node identities a cycle places its pairs with: read by the first
//! cycle itself, then between cycles (`refresh_topology`), so that no
//! cycle waits for them. Identities equal to the ones in use keep the
//! pairs `--pair-shards` assembled with them.

use super::Localizer;
use crate::clients::prometheus::{QueryError, Sample};
use crate::input::promql::{ranks_from, topology_from};
use crate::online::metrics::unix_now;
use crate::online::queries::NodeAnswers;
use crate::online::record::{Identities, StoreReads};
use skeletonhunter_common::topology::{Identity, Kind};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

impl Localizer {
    /// Between cycles: read the node identities again when older than
    /// `--topology-refresh` or when the last cycle left out a pair for an
    /// endpoint missing from them (a new node, most likely), so that no
    /// cycle waits for them (at 100,000 pairs they cost as much as a shard
    /// of the per-pair queries). On failure the ones in use stay, and the
    /// next gap between cycles tries again. Written out at once: no cycle
    /// record is in progress.
    pub(in crate::online) async fn refresh_topology(&mut self) {
        let due = match &self.topology {
            // The next cycle reads them itself.
            None => false,
            Some((read, _)) => {
                read.elapsed() >= self.settings.topology_refresh || self.last_dropped.0 > 0
            }
        };
        if !due {
            return;
        }
        let mut reads = StoreReads::default();
        match self.q.topology(unix_now()).await {
            Ok(answers) => {
                self.set_topology(&answers, &mut reads);
            }
            Err(errors) => {
                reads.failed(&errors);
                if let Some((name, e)) = errors.first() {
                    tracing::warn!(
                        "query {} failed: {e}; the node identities read before stay in use",
                        name.as_str()
                    );
                }
            }
        }
        reads.queries = self.q.take_timings();
        reads.write(&self.metrics);
    }

    /// The node identities of these answers in use from now on (conflicts
    /// logged, nodes and shards noted in `reads`), and the pairs split by
    /// them (`--pair-shards`).
    pub(super) fn set_topology(
        &mut self,
        answers: &NodeAnswers,
        reads: &mut StoreReads,
    ) -> Arc<HashMap<String, Identity>> {
        let (now, recent) = (&answers.now, &answers.recent);
        self.set_ranks(&answers.ranks);
        let (read, conflicts) = topology_from(now, recent);
        // The nodes reporting now: the pairs of those that left go from
        // the expected ones (a job ended), see `coverage.rs`.
        let node = Kind::Node.label_name();
        self.coverage.set_reporting(
            now.iter()
                .filter_map(|s| s.labels.get(node))
                .map(str::to_string)
                .collect(),
        );
        let unchanged = match &self.topology {
            Some((_, kept)) if **kept == read => Some(kept.clone()),
            _ => None,
        };
        if !conflicts.is_empty() {
            tracing::warn!(
                "{} node(s) report several identities in skeletonhunter_node_info (e.g. {}); using one deterministically",
                conflicts.len(),
                conflicts[0]
            );
        }
        let nodes = read.len();
        // The same identities keep the pairs assembled with them.
        let read = match unchanged {
            Some(kept) => kept,
            None => {
                self.shards.forget_pairs();
                Arc::new(read)
            }
        };
        self.topology = Some((Instant::now(), read.clone()));
        let before = self.shards.shards();
        self.shards.repartition(read.keys().map(String::as_str));
        let after = self.shards.shards();
        if after != before {
            tracing::info!("--pair-shards: per-pair queries split into {after} shard(s) by source node, one read per cycle");
            let s = &self.settings;
            self.confirmer.retime(
                s.confirm_after(after),
                s.clear_hold(after),
                s.recent_hold(after),
            );
        }
        reads.identities = Some(Identities {
            nodes,
            shards: after,
        });
        read
    }

    /// The containers' ranks from now on; on failure the ones read before
    /// stay (logged once per outage).
    fn set_ranks(&mut self, answer: &Result<Vec<Sample>, QueryError>) {
        match answer {
            Ok(samples) => {
                if self.ranks_failing {
                    tracing::info!("query ranks answers again");
                }
                self.ranks_failing = false;
                self.ranks = ranks_from(samples);
            }
            Err(e) if !self.ranks_failing => {
                self.ranks_failing = true;
                tracing::warn!(
                    "query ranks failed: {e}; jobs are counted by the ranks read before"
                );
            }
            Err(_) => {}
        }
    }
}
