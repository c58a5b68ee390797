//! What one cycle read, decided and sent, as plain data. The cycle fills a
//! [`CycleRecord`] as it goes and [`CycleRecord::write`] writes it out —
//! the served metrics and the status page's history — in one place, so the
//! figures a cycle exports are tested without a store or an Alertmanager.
//! The cycle is counted last, after its other figures (tests wait for
//! the count, then read the rest).
//!
//! A figure is `None` where the cycle did not come to it (the queries
//! failed before pairs were assembled, say): its series keeps the value of
//! the last cycle that did.

#[cfg(test)]
mod tests;

use super::coverage::CycleCoverage;
use super::findings::blame_map;
use super::metrics::unix_seconds;
use super::metrics::{
    AlertLabels, AlertmanagerLabels, CycleResult, JobLayoutLabels, Metrics, PairReadLabels,
    QueryKindLabels, QueryLabels, ResultLabels,
};
use super::overview::Overview;
use super::queries::QueryErrors;
use super::shards::PairRead;
use super::status::{Board, CycleEntry, Event, EVENTS_CAP};
use crate::clients::prometheus::QueryFailure;
use crate::engine::model::Report;
use crate::input::histograms::RttForm;
use crate::input::promql::QueryKind;
use crate::jobs::impact::JobImpact;
use skeletonhunter_common::topology::Component;
use std::time::{Duration, SystemTime};

/// Why a cycle whose queries answered still had nothing to analyze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoData {
    NoProbeSeries,
    NoTopology,
    NoCompletePair,
    AnalysisFailed,
}

impl NoData {
    /// For the log.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            NoData::NoProbeSeries => "no probe series in the window",
            NoData::NoTopology => "no skeletonhunter_node_info topology",
            NoData::NoCompletePair => "no pair with complete data and topology",
            NoData::AnalysisFailed => "analysis failed",
        }
    }
}

/// What a cycle concluded.
#[derive(Debug)]
pub(super) enum Outcome {
    Ok(Box<Report>),
    QueryFailed,
    NoData(NoData),
}

impl Outcome {
    /// The `result` label it is counted under.
    pub(super) fn result(&self) -> CycleResult {
        match self {
            Outcome::Ok(_) => CycleResult::Ok,
            Outcome::QueryFailed => CycleResult::QueryFailed,
            Outcome::NoData(_) => CycleResult::NoData,
        }
    }
}

/// The report as served on `/report` and printed by `--once`.
pub(super) fn report_json(report: &Report) -> String {
    serde_json::to_string(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// What a read of the store did: a cycle's, or the node identities' read
/// between cycles.
#[derive(Debug, Default)]
pub(super) struct StoreReads {
    /// Every query sent, answered or not, and its wall time.
    pub(super) queries: Vec<(QueryKind, Duration)>,
    /// Every query that failed, and why.
    pub(super) errors: Vec<(QueryKind, QueryFailure)>,
    /// The RTT form, when it was decided (or given) since the last write.
    pub(super) form: Option<RttForm>,
    /// The node identities, when they were read.
    pub(super) identities: Option<Identities>,
}

/// The node identities in use after a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identities {
    /// Nodes with a known identity.
    pub(super) nodes: usize,
    /// Shards the per-pair queries are split into by them.
    pub(super) shards: usize,
}

impl StoreReads {
    /// What is known before the first read: the `--histograms` form when
    /// given, and no node, hence one shard.
    pub(super) fn at_start(form: Option<RttForm>) -> StoreReads {
        StoreReads {
            form,
            identities: Some(Identities {
                nodes: 0,
                shards: 1,
            }),
            ..StoreReads::default()
        }
    }

    /// Keep why each of `errors` failed.
    pub(super) fn failed(&mut self, errors: &QueryErrors) {
        self.errors
            .extend(errors.iter().map(|(query, e)| (*query, e.reason())));
    }

    /// Into the metrics: query times and errors, the RTT form, the node
    /// identities.
    pub(super) fn write(&self, m: &Metrics) {
        for &(query, took) in &self.queries {
            m.query_duration
                .get_or_create(&QueryKindLabels { query })
                .observe(took.as_secs_f64());
        }
        for &(query, reason) in &self.errors {
            m.query_errors
                .get_or_create(&QueryLabels { query, reason })
                .inc();
        }
        if let Some(form) = self.form {
            m.set_histograms(form);
        }
        if let Some(ids) = self.identities {
            m.nodes_known.set(ids.nodes as i64);
            m.pair_shards.set(ids.shards as i64);
        }
    }
}

/// Expected pairs with fresh data, and the components without enough.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Covered {
    pub(super) pairs_covered: usize,
    pub(super) pairs_expected: usize,
    pub(super) components_unknown: usize,
}

impl From<&CycleCoverage> for Covered {
    fn from(c: &CycleCoverage) -> Covered {
        Covered {
            pairs_covered: c.pairs_covered,
            pairs_expected: c.pairs_expected,
            components_unknown: c.unknown(),
        }
    }
}

/// What a cycle read.
#[derive(Debug, Default)]
pub(super) struct Read {
    /// The queries.
    pub(super) store: StoreReads,
    /// Which per-pair series were read, when the queries answered.
    pub(super) pairs: Option<PairRead>,
    /// Pairs assembly left out (an end without identity, or incomplete
    /// series), when the queries answered.
    pub(super) pairs_dropped: Option<usize>,
    /// Pairs with a median RTT, when any pair was assembled.
    pub(super) pairs_with_rtt: Option<usize>,
    /// The pairs with fresh data (none covered when the queries failed).
    pub(super) coverage: Covered,
    /// Most answer bytes held at once, when a budget holds them.
    pub(super) answer_bytes_peak: Option<usize>,
    /// The fabric at a glance, when pairs were assembled.
    pub(super) overview: Option<Overview>,
}

/// What a cycle decided besides its report (in [`Outcome::Ok`]).
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// Wall time of the engine, when it ran to the end.
    pub(super) analysis: Option<Duration>,
    /// The alerts held firing after the cycle.
    pub(super) firing: Vec<AlertLabels>,
    /// The alerting components and the jobs each touches.
    pub(super) jobs: Vec<(Component, Vec<JobImpact>)>,
    /// The jobs whose groups a trusted cycle solved (`None`: the cycle
    /// did not get that far, the last ones stand).
    pub(super) layouts: Option<Vec<JobLayoutLabels>>,
    /// Alerts that fired or resolved in the cycle.
    pub(super) events: Vec<Event>,
}

/// How a post to an Alertmanager went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Post {
    /// It took `alerts` alerts at `at`.
    Accepted { alerts: usize, at: SystemTime },
    /// It did not (they are retried next cycle).
    Failed,
}

/// What a cycle sent to one Alertmanager.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sent {
    /// Which one.
    pub(super) alertmanager: AlertmanagerLabels,
    /// The post, when there was something to post.
    pub(super) post: Option<Post>,
    /// Resolutions waiting in its outbox after the cycle.
    pub(super) queued: usize,
    /// Resolutions its outbox dropped since start.
    pub(super) dropped: u64,
}

impl Sent {
    fn write(&self, m: &Metrics) {
        let l = &self.alertmanager;
        match self.post {
            Some(Post::Accepted { alerts, at }) => {
                m.alerts_posted.get_or_create(l).inc_by(alerts as u64);
                m.last_alert_post_success
                    .get_or_create(l)
                    .set(unix_seconds(at));
            }
            Some(Post::Failed) => {
                m.alert_post_errors.get_or_create(l).inc();
            }
            None => {}
        }
        m.alert_queue.get_or_create(l).set(self.queued as i64);
        // The outbox keeps the total: stored, not added to.
        m.alerts_dropped
            .get_or_create(l)
            .inner()
            .store(self.dropped, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One cycle: what it read, decided and sent, and how it ended.
#[derive(Debug)]
pub(super) struct CycleRecord {
    /// When it ended.
    pub(super) ended: SystemTime,
    /// Its wall time.
    pub(super) took: Duration,
    /// What it concluded (the report, when the data was usable).
    pub(super) outcome: Outcome,
    pub(super) read: Read,
    pub(super) decided: Decided,
    /// One per Alertmanager.
    pub(super) sent: Vec<Sent>,
}

impl CycleRecord {
    /// Write the cycle into the metrics and the page's history: what it
    /// read, then decided, then sent, the cycle counted last.
    pub(super) fn write(&self, m: &Metrics, board: &Board) {
        self.write_read(m);
        if let Some(d) = self.decided.analysis {
            m.analysis_duration.set(d.as_secs_f64());
        }
        for s in &self.sent {
            s.write(m);
        }
        m.alerts_firing.set(self.decided.firing.len() as i64);
        m.set_alerting(self.decided.firing.iter().cloned());
        m.set_job_impact(&self.decided.jobs);
        if let Some(l) = &self.decided.layouts {
            m.set_job_layouts(l);
        }
        if let Outcome::Ok(report) = &self.outcome {
            m.last_success.set(unix_seconds(self.ended));
            m.mark_cycle_ok();
            m.pairs_observed.set(report.pairs_observed as i64);
            m.pairs_anomalous.set(report.pairs_anomalous as i64);
            m.set_blame(&blame_map(report));
            m.set_report(report_json(report));
        }
        board.record(self.history_entry());
        let result = self.outcome.result();
        m.cycles.get_or_create(&ResultLabels { result }).inc();
        m.cycle_duration.observe(self.took.as_secs_f64());
    }

    fn write_read(&self, m: &Metrics) {
        let r = &self.read;
        r.store.write(m);
        if let Some(read) = r.pairs {
            let labels = PairReadLabels {
                read: read.as_str(),
            };
            m.pair_reads.get_or_create(&labels).inc();
        }
        if let Some(n) = r.pairs_dropped {
            m.pairs_dropped.set(n as i64);
        }
        if let Some(n) = r.pairs_with_rtt {
            m.pairs_with_rtt.set(n as i64);
        }
        m.pairs_covered.set(r.coverage.pairs_covered as i64);
        m.pairs_expected.set(r.coverage.pairs_expected as i64);
        m.components_unknown
            .set(r.coverage.components_unknown as i64);
        if let Some(peak) = r.answer_bytes_peak {
            m.answer_bytes_peak.set(peak as i64);
        }
        if let Some(o) = &r.overview {
            m.set_overview(o);
        }
    }

    /// The status page's line for the cycle (at most [`EVENTS_CAP`]
    /// events, the rest counted).
    fn history_entry(&self) -> CycleEntry {
        let events = &self.decided.events;
        let report = match &self.outcome {
            Outcome::Ok(r) => Some((r.pairs_observed, r.pairs_anomalous)),
            _ => None,
        };
        let c = self.read.coverage;
        CycleEntry {
            at: self.ended,
            result: self.outcome.result(),
            pairs: report,
            covered: (c.pairs_covered, c.pairs_expected),
            firing: self.decided.firing.len(),
            events: events.iter().take(EVENTS_CAP).cloned().collect(),
            events_dropped: events.len().saturating_sub(EVENTS_CAP),
        }
    }

    /// The slowest query sent, for the log of a cycle that overran.
    pub(super) fn slowest_query(&self) -> Option<(QueryKind, Duration)> {
        self.read
            .store
            .queries
            .iter()
            .copied()
            .max_by_key(|&(_, took)| took)
    }

    /// The report, when the data was usable.
    pub(super) fn into_report(self) -> Option<Report> {
        match self.outcome {
            Outcome::Ok(r) => Some(*r),
            _ => None,
        }
    }
}
