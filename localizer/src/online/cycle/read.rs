//! What a cycle reads: the RTT form once decided, the per-pair series
//! (every pair or one shard, `--pair-shards`), the node identities when
//! not yet read, the hop and per-path rows; assembled into the engine's
//! pairs. What failed or was left out is logged once per change and noted
//! in the cycle's record.

use super::Localizer;
use crate::clients::prometheus::{QueryError, QueryFailure};
use crate::input::hoststack::host_stack_from;
use crate::input::promql::{assemble_pairs, attach_traces, Assembled, QueryResults};
use crate::online::queries::QueryErrors;
use crate::online::record::Read;
use crate::online::shards::PairAnswers;
use skeletonhunter_common::topology::Identity;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

impl Localizer {
    /// This cycle's pairs: the per-pair series (every pair, or one shard
    /// and the others' answers kept from the cycles before) assembled over
    /// the node identities, and whether there were no probe series at all;
    /// `None` when a query failed (noted in `rec` and logged).
    pub(super) async fn read(
        &mut self,
        time: f64,
        rec: &mut Read,
    ) -> Option<(Assembled, Arc<HashMap<String, Identity>>, bool)> {
        rec.store.form = self.q.decide_form().await;
        // After the first cycle the identities are read between cycles
        // (`refresh_topology`), so no cycle waits for them.
        let read_topology = self.topology.is_none();
        let read = self.shards.plan();
        let shard = self.shards.matcher(read);
        let q = &self.q;
        let (results, identities) = tokio::join!(q.query_all(time, shard.as_deref()), async {
            match read_topology {
                true => Some(q.topology(time).await),
                false => None,
            }
        });
        let answered = match (results, identities.transpose()) {
            (Ok(r), Ok(ids)) => Ok((r, ids)),
            (r, ids) => Err([r.err(), ids.err()]
                .into_iter()
                .flatten()
                .flatten()
                .collect()),
        };
        let (mut results, identities) = match answered {
            Ok(r) => r,
            Err(errors) => {
                rec.store.failed(&errors);
                log_query_errors(&errors);
                if self.shards.shards() > 1 {
                    tracing::info!("--pair-shards: the next answered cycle reads every pair");
                }
                self.shards.failed();
                return None;
            }
        };
        self.log_hops(&results);
        rec.pairs = Some(read);
        self.shards
            .received(read, PairAnswers::take_from(&mut results));
        let topology = match (&self.topology, identities) {
            (_, Some(answers)) => self.set_topology(&answers, &mut rec.store),
            (Some((_, cached)), None) => cached.clone(),
            (None, None) => Arc::default(),
        };
        let protocols = &self.settings.protocols;
        let cycle = self
            .shards
            .pairs(|r| assemble_pairs(r, &topology, protocols));
        let mut assembled = cycle.assembled;
        // The hop and path queries are not sharded: every pair's are set
        // anew, kept pairs included.
        attach_traces(&mut assembled.pairs, &results);
        assembled.host_stack = host_stack_from(results.host_stack.as_deref().unwrap_or_default());
        tracing::debug!(
            "assembled {} pair(s), {} of {} shard(s) anew",
            assembled.pairs.len(),
            cycle.assembled_shards,
            self.shards.shards()
        );
        rec.pairs_dropped = Some(self.note_dropped(&assembled));
        Some((assembled, topology, cycle.no_probe_series))
    }

    /// Log the hop, path and host-stack queries' failures once per outage.
    fn log_hops(&mut self, results: &QueryResults) {
        let (hops, paths) = (results.hops.as_ref().err(), results.paths.as_ref().err());
        self.hops_failing = Optional::Hops.log(hops, self.hops_failing);
        self.paths_failing = Optional::Paths.log(paths, self.paths_failing);
        let stack = results.host_stack.as_ref().err();
        self.host_stack_failing = Optional::HostStack.log(stack, self.host_stack_failing);
    }

    /// What assembling the engine's pairs left out, logged when it
    /// changes.
    fn note_dropped(&mut self, assembled: &Assembled) -> usize {
        let dropped = (assembled.no_topology, assembled.incomplete);
        if dropped != self.last_dropped && dropped != (0, 0) {
            tracing::warn!(
                "left out {} pair(s) without skeletonhunter_node_info for an endpoint and {} with incomplete series",
                assembled.no_topology,
                assembled.incomplete
            );
        }
        self.last_dropped = dropped;
        assembled.no_topology + assembled.incomplete
    }
}

/// Log failed queries, one line per distinct problem (all queries usually
/// fail alike).
fn log_query_errors(errors: &QueryErrors) {
    let mut seen = BTreeSet::new();
    for (name, e) in errors {
        let mut msg = e.to_string();
        if e.reason() == QueryFailure::Timeout {
            msg.push_str("; raise --query.timeout or narrow the queries with --matchers");
        }
        if seen.insert(msg.clone()) {
            tracing::warn!(
                "query {} failed: {msg}; this cycle raises and clears no alert",
                name.as_str()
            );
        }
    }
}

/// A query a cycle can do without, its failure logged once per outage.
#[derive(Debug, Clone, Copy)]
enum Optional {
    Hops,
    Paths,
    HostStack,
}

impl Optional {
    /// What failed, what the cycle does without it, and what answers again.
    fn texts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Optional::Hops => (
                "hop query failed",
                "localizing from topology labels only until it answers",
                "hop query answers again",
            ),
            Optional::Paths => (
                "per-path queries failed",
                "localizing without ECMP links until they answer",
                "per-path queries answer again",
            ),
            Optional::HostStack => (
                "host-stack query failed",
                "localizing without screening busy hosts until it answers",
                "host-stack query answers again",
            ),
        }
    }

    /// Log `error`, given whether the query was `failing` the cycle
    /// before; whether it is failing now.
    fn log(self, error: Option<&QueryError>, failing: bool) -> bool {
        let (failed, without, again) = self.texts();
        match (error, failing) {
            (Some(e), false) => tracing::warn!("{failed}: {e}; {without}"),
            (Some(e), true) => tracing::debug!("{failed}: {e}"),
            (None, true) => tracing::info!("{again}"),
            (None, false) => {}
        }
        error.is_some()
    }
}
