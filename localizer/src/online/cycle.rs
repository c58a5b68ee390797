//! One cycle of the online loop: query Prometheus, assemble pairs, run the
//! engine, decide which findings alert, post, then write the cycle's
//! record (`record.rs`).
//!
//! A cycle whose data cannot be trusted — a failed query, a partial answer,
//! no topology — changes nothing: no new alert, no resolution, only the
//! alerts already firing are kept alive. It is logged and counted in
//! `skeletonhunter_localizer_query_errors_total` and the loop goes on. A
//! trusted cycle knows which pairs it has fresh data for (`coverage.rs`):
//! an alerting component without enough of them keeps its alert.

mod node_identities;

use super::alerts::{AlertBook, AlertKey, Finding};
use super::confirm::{Confirmer, Held, Kept};
use super::coverage::{Coverage, CycleCoverage};
use super::delivery::Delivery;
use super::findings::findings;
use super::flapping::FlapDetector;
use super::metrics::{unix_now, AlertLabels, Metrics};
use super::queries::{CycleQueries, QueryErrors};
use super::record::{CycleRecord, Decided, NoData, Outcome, Read, StoreReads};
use super::settings::{ServiceError, Settings};
use super::shards::{PairAnswers, PairShards};
use super::status::{self, Board, Event};
use crate::clients::alertmanager::PostableAlert;
use crate::clients::budget::ByteBudget;
use crate::clients::prometheus::{QueryError, QueryFailure};
use crate::clients::Endpoint;
use crate::engine::model::{Config, PairStats, Report};
use crate::engine::pipeline::analyze;
use crate::input::promql::{assemble_pairs, attach_traces, Assembled, QueryResults};
use skeletonhunter_common::topology::{Component, Identity};
use skeletonhunter_common::Protocol;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The loop's state between cycles.
pub(super) struct Localizer {
    q: CycleQueries,
    /// `--interval`: a longer cycle is reported with its slowest query.
    interval: Duration,
    protocols: Vec<Protocol>,
    delivery: Delivery,
    book: AlertBook,
    /// Which findings may alert (confirmation, hold after a clear).
    confirmer: Confirmer,
    /// Which components flap (before confirmation).
    flaps: FlapDetector,
    /// Which pairs are expected, and which each cycle covers.
    coverage: Coverage,
    metrics: Arc<Metrics>,
    config: Config,
    failed_cycles: u64,
    /// (no topology, incomplete) pairs of the previous cycle, for logging.
    last_dropped: (usize, usize),
    /// Whether the hop query failed last cycle (warned once per outage).
    hops_failing: bool,
    /// Whether a per-path query failed last cycle (likewise).
    paths_failing: bool,
    /// Node identities and when they were read (`--topology-refresh`).
    topology: Option<(Instant, Arc<HashMap<String, Identity>>)>,
    topology_refresh: Duration,
    /// The per-pair answers of `--pair-shards`.
    shards: PairShards,
    /// What the confirmation timing of the shards in use comes from.
    settings: Settings,
    /// The status page's state.
    board: Arc<Board>,
}

impl Localizer {
    /// Clients and state for `s`, recording into `metrics`.
    pub(super) fn new(
        s: &Settings,
        metrics: Arc<Metrics>,
        board: Arc<Board>,
    ) -> Result<Localizer, ServiceError> {
        let prom = Endpoint::new(&s.prometheus, s.timeout, &s.prometheus_http)
            .map_err(ServiceError::Prometheus)?
            .max_response(s.max_response)
            .with_answer_budget(ByteBudget::new(s.max_cycle_response))
            .query_timeout(s.query_timeout());
        let delivery = Delivery::new(
            &s.alertmanagers,
            &s.alertmanager_http,
            s.timeout,
            s.queue_capacity,
        )?;
        StoreReads::at_start(s.histograms).write(&metrics);
        Ok(Localizer {
            q: CycleQueries::new(s, prom),
            interval: s.interval,
            protocols: s.protocols.clone(),
            delivery,
            book: AlertBook::new(s.ttl(), s.alert_links()),
            confirmer: Confirmer::new(s.confirm_after(1), s.clear_hold(1))
                .resolve_after(s.resolve_cycles),
            flaps: FlapDetector::new(s.flap_transitions, s.flap_window_cycles)
                .debounce(s.confirm_after(1), s.resolve_cycles),
            coverage: Coverage::new(s.min_coverage, s.topology_window),
            metrics,
            config: s.engine.clone(),
            failed_cycles: 0,
            last_dropped: (0, 0),
            hops_failing: false,
            paths_failing: false,
            topology: None,
            topology_refresh: s.topology_refresh,
            shards: PairShards::new(s.pair_shards, s.pair_shards_min_nodes),
            settings: s.clone(),
            board,
        })
    }

    /// The Prometheus root queried.
    pub(super) fn prometheus(&self) -> &str {
        self.q.prom().shown_url()
    }

    /// Number of Alertmanagers posted to.
    pub(super) fn alertmanagers(&self) -> usize {
        self.delivery.len()
    }

    /// One full cycle, written out; returns the report when the data was
    /// usable.
    pub(super) async fn cycle(&mut self) -> Option<Report> {
        let started = Instant::now();
        let (mut read, mut decided) = (Read::default(), Decided::default());
        let (outcome, alerts) = self.evaluate(&mut read, &mut decided).await;
        let sent = self.delivery.deliver(&alerts).await;
        read.answer_bytes_peak = self.q.prom().answer_budget().map(ByteBudget::take_peak);
        read.store.queries = self.q.take_timings();
        decided.firing = self
            .book
            .active_alerts()
            .map(|(k, symptom)| AlertLabels {
                kind: k.kind.as_str().to_string(),
                id: k.id.clone(),
                symptom: symptom.as_str().to_string(),
                severity: k.severity.as_str().to_string(),
            })
            .collect();
        self.log_outcome(&outcome);
        let record = CycleRecord {
            ended: SystemTime::now(),
            took: started.elapsed(),
            outcome,
            read,
            decided,
            sent,
        };
        record.write(&self.metrics, &self.board);
        if record.took > self.interval {
            self.warn_overrun(&record);
        }
        record.into_report()
    }

    /// A cycle longer than `--interval`: say which query took the time.
    fn warn_overrun(&self, record: &CycleRecord) {
        let slowest = match record.slowest_query() {
            Some((kind, d)) => format!("slowest query {} took {d:.1?}", kind.as_str()),
            None => "no query was sent".to_string(),
        };
        tracing::warn!(
            "cycle took {:.1?}, longer than --interval {:?} ({slowest}); the next cycle waits a full interval so the store is not queried without pause",
            record.took,
            self.interval
        );
    }

    /// Log a concluded cycle's health: data usable again, or why not.
    fn log_outcome(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Ok(_) => {
                if self.failed_cycles > 0 {
                    tracing::info!(
                        "Prometheus data usable again after {} cycle(s)",
                        self.failed_cycles
                    );
                }
                self.failed_cycles = 0;
            }
            Outcome::QueryFailed => self.failed_cycles += 1,
            Outcome::NoData(why) => {
                self.failed_cycles += 1;
                tracing::warn!(
                    "{} at {}; this cycle raises and clears no alert",
                    why.as_str(),
                    self.q.prom().shown_url()
                );
            }
        }
    }

    /// Query, analyze and decide, noting what was read and decided;
    /// returns the outcome and the alerts to post.
    async fn evaluate(
        &mut self,
        rec: &mut Read,
        decided: &mut Decided,
    ) -> (Outcome, Vec<PostableAlert>) {
        let now = SystemTime::now();
        let Some((assembled, topology, no_probe_series)) = self.read(unix_now(), rec).await else {
            rec.coverage = (&self.coverage.blind(now)).into();
            return (Outcome::QueryFailed, self.book.firing(now));
        };
        if assembled.pairs.is_empty() {
            let why = if no_probe_series {
                NoData::NoProbeSeries
            } else if topology.is_empty() {
                NoData::NoTopology
            } else {
                NoData::NoCompletePair
            };
            rec.coverage = (&self.coverage.blind(now)).into();
            return (Outcome::NoData(why), self.book.firing(now));
        }
        let with_rtt = assembled.pairs.iter().filter(|p| p.rtt_seconds.is_some());
        rec.pairs_with_rtt = Some(with_rtt.count());
        let coverage = self.coverage.observe(&assembled.pairs, now);
        rec.coverage = (&coverage).into();
        let Some((report, pairs)) = self.analyze(assembled.pairs, decided).await else {
            return (
                Outcome::NoData(NoData::AnalysisFailed),
                self.book.firing(now),
            );
        };
        let found = findings(&report, &pairs, &topology);
        let mut verdicts = status::verdicts(&report, &found, &pairs);
        let matrix = status::tor_matrix(&pairs, status::MATRIX_CAP);
        self.shards.give_back(pairs);
        let alerts = self.decide(found, &coverage, now, &mut decided.events);
        status::mark_states(&mut verdicts, self.book.active_alerts());
        self.board.publish(now, verdicts, matrix);
        (Outcome::Ok(Box::new(report)), alerts)
    }

    /// This cycle's pairs: the per-pair series (every pair, or one shard
    /// and the others' answers kept from the cycles before) assembled over
    /// the node identities, and whether there were no probe series at all;
    /// `None` when a query failed (noted in `rec` and logged).
    async fn read(
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
            (_, Some((now, recent))) => self.set_topology(&now, &recent, &mut rec.store),
            (Some((_, cached)), None) => cached.clone(),
            (None, None) => Arc::default(),
        };
        let protocols = &self.protocols;
        let cycle = self
            .shards
            .pairs(|r| assemble_pairs(r, &topology, protocols));
        let mut assembled = cycle.assembled;
        // The hop and path queries are not sharded: every pair's are set
        // anew, kept pairs included.
        attach_traces(&mut assembled.pairs, &results);
        tracing::debug!(
            "assembled {} pair(s), {} of {} shard(s) anew",
            assembled.pairs.len(),
            cycle.assembled_shards,
            self.shards.shards()
        );
        rec.pairs_dropped = Some(self.note_dropped(&assembled));
        Some((assembled, topology, cycle.no_probe_series))
    }

    /// Log the hop and path queries' failures once per outage.
    fn log_hops(&mut self, results: &QueryResults) {
        let (hops, paths) = (results.hops_error.as_ref(), results.paths_error.as_ref());
        self.hops_failing = Optional::Hops.log(hops, self.hops_failing);
        self.paths_failing = Optional::Paths.log(paths, self.paths_failing);
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

    /// Run the engine off the async threads, its wall time noted; `None`
    /// if the task died.
    async fn analyze(
        &self,
        pairs: Vec<PairStats>,
        decided: &mut Decided,
    ) -> Option<(Report, Vec<PairStats>)> {
        let config = self.config.clone();
        let started = Instant::now();
        match tokio::task::spawn_blocking(move || {
            let r = analyze(&pairs, &config);
            (r, pairs)
        })
        .await
        {
            Ok(x) => {
                decided.analysis = Some(started.elapsed());
                Some(x)
            }
            Err(e) => {
                tracing::error!("analysis failed: {e}");
                None
            }
        }
    }

    /// Flapping, confirmation, then the alert book; logs what fires and
    /// resolves, and notes it in `events` for the page.
    fn decide(
        &mut self,
        found: Vec<Finding>,
        coverage: &CycleCoverage,
        now: SystemTime,
        events: &mut Vec<Event>,
    ) -> Vec<PostableAlert> {
        let covered = |c: &Component| coverage.is_covered(c);
        let found = self.flaps.observe(found, &covered);
        let (found, held) = self.confirmer.admit_covered(found, &covered, now);
        log_held(&held);
        for (c, why) in self.confirmer.kept() {
            match why {
                Kept::Unknown => tracing::info!(
                    "unknown: {c} has too few pairs with fresh data; its alert stays as it was"
                ),
                Kept::Clearing { clean } => {
                    tracing::debug!("clearing: {c} clean in {clean} covered cycle(s)");
                }
            }
        }
        let before: BTreeSet<AlertKey> = self.book.active_keys().cloned().collect();
        let after: HashMap<AlertKey, Finding> =
            found.iter().map(|f| (f.key(), f.clone())).collect();
        let alerts = self.book.update(found, now);
        for key in self.book.active_keys().filter(|k| !before.contains(k)) {
            events.push(Event {
                fired: true,
                kind: key.kind.as_str().to_string(),
                id: key.id.clone(),
                severity: key.severity.as_str().to_string(),
            });
            if let Some(f) = after.get(key) {
                tracing::warn!(
                    "fault: {} {} ({}, {})",
                    f.component.kind,
                    f.component.id,
                    f.symptom,
                    key.severity.as_str()
                );
            }
        }
        for a in alerts.iter().filter(|a| a.resolved) {
            let label = |k: &str| a.labels.get(k).cloned().unwrap_or_default();
            events.push(Event {
                fired: false,
                kind: label("kind"),
                id: label("component"),
                severity: label("severity"),
            });
            tracing::info!(
                "resolved: {} {} ({})",
                label("kind"),
                label("component"),
                label("severity")
            );
        }
        alerts
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

/// Log why findings did not alert.
fn log_held(held: &[(Finding, Held)]) {
    for (f, why) in held {
        match why {
            Held::Unconfirmed { seen } => tracing::debug!(
                "unconfirmed: {} ({}) seen in {seen} consecutive cycle(s)",
                f.component,
                f.symptom
            ),
            Held::AfterClear { cleared } => tracing::info!(
                "held: {} ({}) until leftovers of the cleared {cleared} are out of the window",
                f.component,
                f.symptom
            ),
        }
    }
}
