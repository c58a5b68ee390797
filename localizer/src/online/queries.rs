//! The cycle's queries as the store sees them: which RTT histogram form
//! they read (`--histograms`, decided once for `auto` by a probe the store
//! answers at no cost), each one timed and bounded by `--query.timeout`,
//! and all of them sent at once.

use super::settings::Settings;
use crate::clients::prometheus::{QueryError, Sample};
use crate::clients::Endpoint;
use crate::input::histograms::{store_knows_native, RttForm, NATIVE_PROBE};
use crate::input::promql::{PathSamples, Queries, QueryKind, QueryResults};
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The queries of a cycle and what they are sent to.
pub(super) struct CycleQueries {
    prom: Endpoint,
    queries: Queries,
    /// `--histograms`: `None` is `auto`.
    requested: Option<RttForm>,
    /// The form in use once decided.
    form: Option<RttForm>,
    /// What [`Queries::new`] needs besides the form.
    window: Duration,
    topology_window: Duration,
    matchers: Option<String>,
    /// Every query sent since [`CycleQueries::take_timings`], and its
    /// wall time.
    timings: Mutex<Vec<(QueryKind, Duration)>>,
}

/// Every failed query of a cycle, by query.
pub(super) type QueryErrors = Vec<(QueryKind, QueryError)>;

/// What [`CycleQueries::topology`] reads.
pub(super) struct NodeAnswers {
    /// Node identities exported now.
    pub now: Vec<Sample>,
    /// Node identities seen within the topology window.
    pub recent: Vec<Sample>,
    /// The containers' ranks, or why they could not be read.
    pub ranks: Result<Vec<Sample>, QueryError>,
}

impl CycleQueries {
    /// The queries of `s` sent to `prom`; a fixed `--histograms` form is
    /// logged at once.
    pub(super) fn new(s: &Settings, prom: Endpoint) -> CycleQueries {
        let mut q = CycleQueries {
            queries: Queries::new(
                s.window,
                s.topology_window,
                s.matchers.as_deref(),
                RttForm::Classic,
            ),
            prom,
            requested: s.histograms,
            form: None,
            window: s.window,
            topology_window: s.topology_window,
            matchers: s.matchers.clone(),
            timings: Mutex::new(Vec::new()),
        };
        if let Some(form) = s.histograms {
            tracing::info!("RTT read from {} histograms (--histograms)", form.as_str());
            q.set_form(form);
        }
        q
    }

    /// The store queried.
    pub(super) fn prom(&self) -> &Endpoint {
        &self.prom
    }

    fn set_form(&mut self, form: RttForm) {
        self.queries = Queries::new(
            self.window,
            self.topology_window,
            self.matchers.as_deref(),
            form,
        );
        self.form = Some(form);
    }

    /// For `auto`, until the store has said: ask whether it evaluates
    /// native-histogram functions; the form when decided now. Until it
    /// answers, the cycle reads the classic form, which every store
    /// evaluates.
    pub(super) async fn decide_form(&mut self) -> Option<RttForm> {
        if self.form.is_some() || self.requested.is_some() {
            return None;
        }
        let answer = self.prom.instant(NATIVE_PROBE, None).await;
        let form = match store_knows_native(&answer) {
            Some(true) => RttForm::NativeOrClassic,
            Some(false) => RttForm::Classic,
            None => {
                if let Err(e) = answer {
                    tracing::debug!("--histograms auto: no answer yet ({e}); reading classic");
                }
                return None;
            }
        };
        let why = match &answer {
            Ok(_) => "it evaluates histogram_count".to_string(),
            Err(e) => format!("it rejects histogram_count: {e}"),
        };
        tracing::info!(
            "--histograms auto: RTT read in the {} form ({} answered {NATIVE_PROBE:?}: {why})",
            form.as_str(),
            self.prom.shown_url()
        );
        self.set_form(form);
        Some(form)
    }

    /// `fut`, timed into the timings.
    async fn timed<T>(&self, kind: QueryKind, fut: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = fut.await;
        let took = started.elapsed();
        self.lock_timings().push((kind, took));
        out
    }

    fn lock_timings(&self) -> std::sync::MutexGuard<'_, Vec<(QueryKind, Duration)>> {
        self.timings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every query sent since the last call, and its wall time (for
    /// `skeletonhunter_localizer_query_duration_seconds`).
    pub(super) fn take_timings(&self) -> Vec<(QueryKind, Duration)> {
        std::mem::take(&mut *self.lock_timings())
    }

    /// A query the cycle may leave out, timed when sent: `None` when it is
    /// left out.
    async fn optional(
        &self,
        kind: QueryKind,
        query: Option<&str>,
        time: Option<f64>,
    ) -> Option<Result<Vec<Sample>, QueryError>> {
        match query {
            Some(query) => Some(self.timed(kind, self.prom.instant(query, time)).await),
            None => None,
        }
    }

    /// The node identities alone at `time` (now, recent) and the
    /// containers' ranks, all timed; the ranks are optional.
    pub(super) async fn topology(&self, time: f64) -> Result<NodeAnswers, QueryErrors> {
        let (q, p, t) = (&self.queries, &self.prom, Some(time));
        let (now, recent, ranks) = tokio::join!(
            self.timed(QueryKind::TopologyNow, p.instant(&q.topology_now, t)),
            self.timed(QueryKind::TopologyRecent, p.instant(&q.topology_recent, t)),
            self.timed(QueryKind::Ranks, p.instant(&q.ranks, t)),
        );
        match (now, recent) {
            (Ok(now), Ok(recent)) => Ok(NodeAnswers { now, recent, ranks }),
            (now, recent) => Err([
                (QueryKind::TopologyNow, now.err()),
                (QueryKind::TopologyRecent, recent.err()),
            ]
            .into_iter()
            .filter_map(|(k, e)| Some((k, e?)))
            .collect()),
        }
    }

    /// The per-pair queries narrowed by `shard`'s matcher as well.
    fn for_shard(&self, shard: &str) -> Queries {
        let matchers = match self.matchers.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => format!("{m}, {shard}"),
            _ => shard.to_string(),
        };
        Queries::new(
            self.window,
            self.topology_window,
            Some(&matchers),
            self.form.unwrap_or(RttForm::Classic),
        )
    }

    /// Every query of a cycle at `time` but the node identities
    /// ([`CycleQueries::topology`]), concurrently; the per-pair series only
    /// of `shard` when given (a label matcher). The hop, per-path and
    /// host-stack queries are optional: their failure is kept in the
    /// results.
    pub(super) async fn query_all(
        &self,
        time: f64,
        shard: Option<&str>,
    ) -> Result<QueryResults, QueryErrors> {
        let sharded = shard.map(|m| self.for_shard(m));
        let pq = sharded.as_ref().unwrap_or(&self.queries);
        let (q, p, t) = (&self.queries, &self.prom, Some(time));
        let one = |kind, query| self.timed(kind, p.instant(query, t));
        let (sent, lost, dial, streak, p50, cnt, hops, paths, stack) = tokio::join!(
            one(QueryKind::Sent, &pq.sent),
            one(QueryKind::Lost, &pq.lost),
            one(QueryKind::DialFailures, &pq.dial_failures),
            one(QueryKind::ConsecutiveLost, &pq.consecutive_lost),
            one(QueryKind::RttP50, &pq.rtt_p50),
            self.optional(QueryKind::RttCount, pq.rtt_count.as_deref(), t),
            one(QueryKind::Hops, &q.hops),
            self.timed(QueryKind::Paths, async {
                let (h, l, n) = tokio::join!(
                    p.instant(&q.paths, t),
                    p.instant(&q.path_loss, t),
                    p.instant(&q.path_probes, t)
                );
                Ok::<_, QueryError>(PathSamples {
                    hops: h?,
                    loss: l?,
                    probes: n?,
                })
            }),
            one(QueryKind::HostStack, &q.host_stack),
        );
        let mut errors = Vec::new();
        let mut take = |name: QueryKind, r: Result<Vec<Sample>, QueryError>| match r {
            Ok(v) => v,
            Err(e) => {
                errors.push((name, e));
                Vec::new()
            }
        };
        let out = QueryResults {
            sent: take(QueryKind::Sent, sent),
            lost: take(QueryKind::Lost, lost),
            dial_failures: take(QueryKind::DialFailures, dial),
            consecutive_lost: take(QueryKind::ConsecutiveLost, streak),
            rtt_p50: take(QueryKind::RttP50, p50),
            rtt_count: cnt.map(|r| take(QueryKind::RttCount, r)),
            // Optional: without hops paths come from labels alone, without
            // the per-path series no link is localized, without the
            // host-stack evidence no pair is screened.
            hops,
            paths,
            host_stack: stack,
        };
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }
}
