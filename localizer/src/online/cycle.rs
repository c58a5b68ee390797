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
//!
//! Here the state between cycles and a cycle's course; `read` what it
//! reads of the store, `node_identities` the identities it places pairs
//! with, `decide` what it makes of the findings.

mod decide;
mod node_identities;
mod read;

use super::alerts::AlertBook;
use super::confirm::Confirmer;
use super::coverage::Coverage;
use super::delivery::Delivery;
use super::findings::findings;
use super::flapping::FlapDetector;
use super::metrics::{unix_now, AlertLabels, JobLayoutLabels, Metrics};
use super::overview::overview;
use super::queries::CycleQueries;
use super::record::{CycleRecord, Decided, NoData, Outcome, Read, StoreReads};
use super::settings::{ServiceError, Settings};
use super::shards::PairShards;
use super::status::{self, Board};
use crate::clients::alertmanager::PostableAlert;
use crate::clients::budget::ByteBudget;
use crate::clients::Endpoint;
use crate::engine::model::{HostStack, PairStats, Report};
use crate::engine::pipeline::analyze_with;
use crate::engine::planes::{analyze_joint, LayerNote};
use crate::jobs::groups::{block_graphs, touch, GroupState, Solver, Unsolvable, SOLVES_PER_CYCLE};
use crate::jobs::roster::roster;
use crate::jobs::BlockGraph;
use skeletonhunter_common::ranks::Ranks;
use skeletonhunter_common::topology::Identity;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// A cycle's report, the pairs it analyzed, and each verdict's layer.
type Analyzed = (Report, Vec<PairStats>, Vec<Option<LayerNote>>);

/// The series of the jobs whose groups are solved, by job.
fn layout_labels(groups: &HashMap<String, GroupState>) -> Vec<JobLayoutLabels> {
    let mut out: Vec<JobLayoutLabels> = groups
        .iter()
        .filter_map(|(job, state)| match state {
            GroupState::Inferred(l) => Some(JobLayoutLabels {
                tenant: job.clone(),
                tp: l.layout.grid.tp,
                dp: l.layout.grid.dp,
                pp: l.layout.grid.pp,
                determined: if l.determined { "true" } else { "false" },
            }),
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| a.tenant.cmp(&b.tenant));
    out
}

/// The loop's state between cycles.
pub(super) struct Localizer {
    q: CycleQueries,
    delivery: Delivery,
    book: AlertBook,
    /// Which findings may alert (confirmation, hold after a clear).
    confirmer: Confirmer,
    /// Which components flap (after confirmation).
    flaps: FlapDetector,
    /// Which pairs are expected, and which each cycle covers.
    coverage: Coverage,
    metrics: Arc<Metrics>,
    failed_cycles: u64,
    /// (no topology, incomplete) pairs of the previous cycle, for logging.
    last_dropped: (usize, usize),
    /// Whether the hop query failed last cycle (warned once per outage).
    hops_failing: bool,
    /// Whether a per-path query failed last cycle (likewise).
    paths_failing: bool,
    /// Whether the host-stack query failed last cycle (likewise).
    host_stack_failing: bool,
    /// Node identities and when they were read (`--topology-refresh`).
    topology: Option<(Instant, Arc<HashMap<String, Identity>>)>,
    /// The containers' ranks in their jobs, read with the identities.
    ranks: HashMap<String, Ranks>,
    /// Whether the rank query failed last time (warned once per outage).
    ranks_failing: bool,
    /// The per-pair answers of `--pair-shards`.
    shards: PairShards,
    /// Each job's parallel groups, solved again when its skeleton changes.
    groups: Solver,
    /// As started: `--interval` (a longer cycle is reported with its
    /// slowest query), the protocols, the engine's configuration,
    /// `--topology-refresh`, and what the confirmation timing of the
    /// shards in use comes from.
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
            delivery,
            book: AlertBook::new(s.ttl(), s.alert_links()),
            // A component that alerted is remembered as long as a flap is
            // (its next outage's onset must not page its nodes).
            confirmer: Confirmer::new(s.confirm_after(1), s.clear_hold(1))
                .resolve_after(s.resolve_cycles)
                .remember_for((s.interval * s.flap_window_cycles).max(s.clear_hold(1)))
                .hold_beneath_recent(s.recent_hold(1)),
            flaps: FlapDetector::new(s.flap_transitions, s.flap_window_cycles),
            coverage: Coverage::new(s.min_coverage, s.topology_window),
            metrics,
            failed_cycles: 0,
            last_dropped: (0, 0),
            hops_failing: false,
            paths_failing: false,
            host_stack_failing: false,
            topology: None,
            ranks: HashMap::new(),
            ranks_failing: false,
            shards: PairShards::new(s.pair_shards, s.pair_shards_min_nodes),
            groups: Solver::default(),
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
        let (mut reads, mut decided) = (Read::default(), Decided::default());
        let (outcome, alerts) = self.evaluate(&mut reads, &mut decided).await;
        let sent = self.delivery.deliver(&alerts).await;
        reads.answer_bytes_peak = self.q.prom().answer_budget().map(ByteBudget::take_peak);
        reads.store.queries = self.q.take_timings();
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
        decided.jobs = self
            .book
            .active_findings()
            .map(|f| (f.component.clone(), f.jobs.clone()))
            .collect();
        self.log_outcome(&outcome);
        let record = CycleRecord {
            ended: SystemTime::now(),
            took: started.elapsed(),
            outcome,
            read: reads,
            decided,
            sent,
        };
        record.write(&self.metrics, &self.board);
        if record.took > self.settings.interval {
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
            self.settings.interval
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
        rec.overview = Some(overview(&assembled.pairs));
        let coverage = self.coverage.observe(&assembled.pairs, now);
        rec.coverage = (&coverage).into();
        let stack = assembled.host_stack;
        let Some((report, pairs, layers)) = self.analyze(assembled.pairs, stack, decided).await
        else {
            return (
                Outcome::NoData(NoData::AnalysisFailed),
                self.book.firing(now),
            );
        };
        let graphs = block_graphs(pairs.iter().map(|p| (&p.src, &p.dst)), &self.ranks);
        let groups = self.solve_groups(graphs).await;
        decided.layouts = Some(layout_labels(&groups));
        let mut found = findings(&report, &pairs, &topology, &self.ranks);
        for (f, layer) in found.iter_mut().zip(layers) {
            f.layer = layer;
            touch(&mut f.jobs, &groups);
        }
        let mut verdicts = status::verdicts(&report, &found, &pairs);
        let matrix = status::tor_matrix(&pairs, status::MATRIX_CAP);
        let hurt = found.iter().map(|f| (&f.component, f.jobs.as_slice()));
        let jobs = roster(
            pairs.iter().map(|p| (&p.src, &p.dst)),
            &self.ranks,
            hurt,
            &groups,
        );
        self.shards.give_back(pairs);
        let alerts = self.decide(found, &coverage, now, &mut decided.events);
        status::mark_states(&mut verdicts, self.book.active_alerts());
        self.board.publish(now, verdicts, matrix, jobs);
        (Outcome::Ok(Box::new(report)), alerts)
    }

    /// Each job's groups, the changed ones solved off the async threads
    /// (a large job takes up to a second); none if the task died.
    async fn solve_groups(
        &mut self,
        graphs: BTreeMap<String, Result<BlockGraph, Unsolvable>>,
    ) -> HashMap<String, GroupState> {
        let mut solver = std::mem::take(&mut self.groups);
        match tokio::task::spawn_blocking(move || {
            let states = solver.solve(graphs, SOLVES_PER_CYCLE);
            (solver, states)
        })
        .await
        {
            Ok((solver, states)) => {
                self.groups = solver;
                states
            }
            Err(e) => {
                tracing::error!("solving the jobs' groups failed: {e}");
                HashMap::new()
            }
        }
    }

    /// Run the engine off the async threads (screening the busy hosts of
    /// `stack`), its wall time noted; `None` if the task died. When the
    /// pairs measured both planes (host and container probers), each is
    /// analyzed apart and every verdict comes with its layer.
    async fn analyze(
        &self,
        pairs: Vec<PairStats>,
        stack: HostStack,
        decided: &mut Decided,
    ) -> Option<Analyzed> {
        let config = self.settings.engine.clone();
        let started = Instant::now();
        match tokio::task::spawn_blocking(move || {
            let (r, layers) = analyze_joint(&pairs, &stack, &config).unwrap_or_else(|| {
                let r = analyze_with(&pairs, &stack, &config);
                let none = vec![None; r.faults.len()];
                (r, none)
            });
            (r, pairs, layers)
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
}
