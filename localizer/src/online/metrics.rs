//! The localizer's own `/metrics`: blame per component and the health of the
//! online loop.
//!
//! Blame series are rebuilt every trusted cycle (components the engine no
//! longer considers disappear), under a lock that `/metrics` also takes, so
//! a scrape never sees a half-updated set. Health metrics are named
//! `skeletonhunter_localizer_*`; the shipped alerting rules watch them (a
//! stale `last_success_timestamp_seconds` means nobody is localizing).
//!
//! Here the families, registered under their names and help texts;
//! `labels` their label sets, `scrape` what a scrape and the endpoints
//! read (series replaced whole, the last report, readiness). A cycle
//! writes them through its record (`record.rs`), a reload in
//! `routes.rs`.

mod labels;
mod scrape;

pub use labels::*;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

type FloatGauge = Gauge<f64, AtomicU64>;

/// Seconds since the epoch of `t`, as the timestamp gauges take them.
pub(super) fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Seconds since the epoch, now.
pub(super) fn unix_now() -> f64 {
    unix_seconds(SystemTime::now())
}

/// A histogram of seconds from 1 ms to ~65 s: a query, a cycle.
fn seconds_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.001, 2.0, 17,
    ))
}

/// Every metric the online localizer serves.
pub struct Metrics {
    registry: Registry,
    /// Held while blame series are rebuilt and while encoding.
    update: Mutex<()>,
    /// `skeletonhunter_component_blame`.
    pub blame: Family<ComponentLabels, FloatGauge>,
    /// `skeletonhunter_component_faulty`.
    pub faulty: Family<ComponentLabels, Gauge>,
    /// `skeletonhunter_localizer_cycle_duration_seconds`.
    pub cycle_duration: Histogram,
    /// `skeletonhunter_localizer_cycles_total` by result.
    pub cycles: Family<ResultLabels, Counter>,
    /// `skeletonhunter_localizer_query_errors_total`.
    pub query_errors: Family<QueryLabels, Counter>,
    /// `skeletonhunter_localizer_query_duration_seconds`.
    pub query_duration: Family<QueryKindLabels, Histogram, fn() -> Histogram>,
    /// `skeletonhunter_localizer_histograms_info`.
    histograms: Family<HistogramsLabels, Gauge>,
    /// `skeletonhunter_localizer_pairs_with_rtt`.
    pub pairs_with_rtt: Gauge,
    /// `skeletonhunter_localizer_answer_bytes_peak`.
    pub answer_bytes_peak: Gauge,
    /// `skeletonhunter_localizer_alert_post_errors_total`.
    pub alert_post_errors: Family<AlertmanagerLabels, Counter>,
    /// `skeletonhunter_localizer_alerts_posted_total`.
    pub alerts_posted: Family<AlertmanagerLabels, Counter>,
    /// `skeletonhunter_localizer_alert_queue_length`.
    pub alert_queue: Family<AlertmanagerLabels, Gauge>,
    /// `skeletonhunter_localizer_alerts_dropped_total`.
    pub alerts_dropped: Family<AlertmanagerLabels, Counter>,
    /// `skeletonhunter_localizer_alerts_firing`.
    pub alerts_firing: Gauge,
    /// `skeletonhunter_localizer_last_success_timestamp_seconds`.
    pub last_success: FloatGauge,
    /// `skeletonhunter_localizer_last_alert_post_success_timestamp_seconds`.
    pub last_alert_post_success: Family<AlertmanagerLabels, FloatGauge>,
    /// `skeletonhunter_localizer_pairs_observed`.
    pub pairs_observed: Gauge,
    /// `skeletonhunter_localizer_pairs_anomalous`.
    pub pairs_anomalous: Gauge,
    /// `skeletonhunter_localizer_pairs_dropped`.
    pub pairs_dropped: Gauge,
    /// `skeletonhunter_localizer_nodes`.
    pub nodes_known: Gauge,
    /// `skeletonhunter_localizer_pair_shards`.
    pub pair_shards: Gauge,
    /// `skeletonhunter_localizer_pair_reads_total`.
    pub pair_reads: Family<PairReadLabels, Counter>,
    /// `skeletonhunter_localizer_pairs_covered`.
    pub pairs_covered: Gauge,
    /// `skeletonhunter_localizer_pairs_expected`.
    pub pairs_expected: Gauge,
    /// `skeletonhunter_localizer_components_unknown`.
    pub components_unknown: Gauge,
    /// `skeletonhunter_component_alerting`.
    pub alerting: Family<AlertLabels, Gauge>,
    /// `skeletonhunter_localizer_job_impact_ranks`.
    pub job_impact: Family<JobImpactLabels, Gauge>,
    /// `skeletonhunter_localizer_analysis_duration_seconds`.
    pub analysis_duration: FloatGauge,
    /// `skeletonhunter_config_last_reload_successful`.
    pub reload_successful: Gauge,
    /// `skeletonhunter_config_last_reload_success_timestamp_seconds`.
    pub reload_success_time: FloatGauge,
    /// The last report as JSON, for `/report`.
    report: Mutex<String>,
    /// When the last cycle analyzed complete data (for `/-/ready`).
    last_ok: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All families, registered under their documented names.
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            update: Mutex::new(()),
            blame: Family::default(),
            faulty: Family::default(),
            cycle_duration: seconds_histogram(),
            cycles: Family::default(),
            query_errors: Family::default(),
            query_duration: Family::new_with_constructor(seconds_histogram),
            histograms: Family::default(),
            pairs_with_rtt: Gauge::default(),
            answer_bytes_peak: Gauge::default(),
            alert_post_errors: Family::default(),
            alerts_posted: Family::default(),
            alert_queue: Family::default(),
            alerts_dropped: Family::default(),
            alerts_firing: Gauge::default(),
            last_success: FloatGauge::default(),
            last_alert_post_success: Family::default(),
            pairs_observed: Gauge::default(),
            pairs_anomalous: Gauge::default(),
            pairs_dropped: Gauge::default(),
            nodes_known: Gauge::default(),
            pair_shards: Gauge::default(),
            pair_reads: Family::default(),
            pairs_covered: Gauge::default(),
            pairs_expected: Gauge::default(),
            components_unknown: Gauge::default(),
            alerting: Family::default(),
            job_impact: Family::default(),
            analysis_duration: FloatGauge::default(),
            reload_successful: Gauge::default(),
            reload_success_time: FloatGauge::default(),
            report: Mutex::new("{}".to_string()),
            last_ok: Mutex::new(None),
        };
        register_all(&mut r, &m);
        Metrics { registry: r, ..m }
    }
}

/// Labels of `skeletonhunter_localizer_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

/// Register every series of `m` in `r`.
pub(super) fn register_all(r: &mut Registry, m: &Metrics) {
    register_verdicts(r, m);
    register_alerting(r, m);
    register_pairs(r, m);
    register_coverage(r, m);
    register_reload(r, m);
}

/// Blame series, cycles and query errors.
fn register_verdicts(r: &mut Registry, m: &Metrics) {
    r.register(
        "skeletonhunter_component_blame",
        "Estimated failure probability of a component the localizer considered this cycle (max over symptoms)",
        m.blame.clone(),
    );
    r.register(
        "skeletonhunter_component_faulty",
        "1 when the localizer blames the component for a fault, 0 when it considered and cleared it",
        m.faulty.clone(),
    );
    r.register(
        "skeletonhunter_localizer_cycle_duration_seconds",
        "Wall time of one localization cycle (queries, analysis, alert posting)",
        m.cycle_duration.clone(),
    );
    r.register(
        "skeletonhunter_localizer_cycles",
        "Localization cycles by result (ok, query_failed, no_data)",
        m.cycles.clone(),
    );
    r.register(
        "skeletonhunter_localizer_query_errors",
        "Prometheus queries that failed or returned partial data, by query and reason",
        m.query_errors.clone(),
    );
    r.register(
        "skeletonhunter_localizer_query_duration_seconds",
        "Wall time of each of the cycle's queries, answered or not (the three per-path queries count as paths)",
        m.query_duration.clone(),
    );
    r.register(
        "skeletonhunter_localizer_answer_bytes_peak",
        "Most bytes of Prometheus answers held at once during the last cycle (at most --max-cycle-response-size)",
        m.answer_bytes_peak.clone(),
    );
    r.register(
        "skeletonhunter_localizer_histograms_info",
        "1 for the form the RTT queries read (mode classic, native, native_or_classic; absent until --histograms auto has asked the store)",
        m.histograms.clone(),
    );
}

/// Alertmanager delivery.
fn register_alerting(r: &mut Registry, m: &Metrics) {
    r.register(
        "skeletonhunter_localizer_alert_post_errors",
        "Failed posts to an Alertmanager (the alerts are retried next cycle)",
        m.alert_post_errors.clone(),
    );
    r.register(
        "skeletonhunter_localizer_alerts_posted",
        "Alerts (firing and resolved) accepted by an Alertmanager",
        m.alerts_posted.clone(),
    );
    r.register(
        "skeletonhunter_localizer_alert_queue_length",
        "Resolved alerts waiting for an Alertmanager to accept them",
        m.alert_queue.clone(),
    );
    r.register(
        "skeletonhunter_localizer_alerts_dropped",
        "Resolved alerts dropped because an Alertmanager's queue was full",
        m.alerts_dropped.clone(),
    );
    r.register(
        "skeletonhunter_localizer_alerts_firing",
        "Component alerts the localizer currently holds as firing",
        m.alerts_firing.clone(),
    );
    r.register(
        "skeletonhunter_localizer_last_success_timestamp_seconds",
        "Unix time of the last cycle that analyzed complete data",
        m.last_success.clone(),
    );
    r.register(
        "skeletonhunter_localizer_last_alert_post_success_timestamp_seconds",
        "Unix time of the last post an Alertmanager accepted",
        m.last_alert_post_success.clone(),
    );
}

/// Input size, analysis time and the build.
fn register_pairs(r: &mut Registry, m: &Metrics) {
    r.register(
        "skeletonhunter_localizer_pairs_observed",
        "Probe pairs analyzed in the last trusted cycle",
        m.pairs_observed.clone(),
    );
    r.register(
        "skeletonhunter_localizer_pairs_anomalous",
        "Probe pairs found anomalous in the last trusted cycle",
        m.pairs_anomalous.clone(),
    );
    r.register(
        "skeletonhunter_localizer_pairs_dropped",
        "Probe pairs left out of the last cycle (no topology for an endpoint, or incomplete series)",
        m.pairs_dropped.clone(),
    );
    r.register(
        "skeletonhunter_localizer_pairs_with_rtt",
        "Probe pairs of the last trusted cycle with a median RTT (0 when the RTT queries read a histogram form the fleet does not export)",
        m.pairs_with_rtt.clone(),
    );
    r.register(
        "skeletonhunter_localizer_nodes",
        "Nodes with a known topology identity (skeletonhunter_node_info)",
        m.nodes_known.clone(),
    );
    r.register(
        "skeletonhunter_localizer_pair_shards",
        "Shards the per-pair queries are split into (--pair-shards; fewer while node names allow no more)",
        m.pair_shards.clone(),
    );
    r.register(
        "skeletonhunter_localizer_pair_reads",
        "Reads of the per-pair series by cycles that answered: all pairs, or one shard",
        m.pair_reads.clone(),
    );
    r.register(
        "skeletonhunter_localizer_analysis_duration_seconds",
        "Wall time of the last detection and localization step alone",
        m.analysis_duration.clone(),
    );
    let build = Family::<BuildLabels, Gauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION").to_string(),
        })
        .set(1);
    r.register(
        "skeletonhunter_localizer_build_info",
        "Deprecated, removed in the next release: use skeletonhunter_build_info",
        build,
    );
    skeletonhunter_common::build::register(r);
    r.register_collector(Box::new(skeletonhunter_common::process::ProcessCollector));
}

/// Coverage of the last cycle and the alerts held firing.
fn register_coverage(r: &mut Registry, m: &Metrics) {
    r.register(
        "skeletonhunter_localizer_pairs_covered",
        "Expected probe pairs with fresh data in the last cycle (0 when its queries failed)",
        m.pairs_covered.clone(),
    );
    r.register(
        "skeletonhunter_localizer_pairs_expected",
        "Probe pairs the localizer expects data for (seen within the topology window)",
        m.pairs_expected.clone(),
    );
    r.register(
        "skeletonhunter_localizer_components_unknown",
        "Components with too few covered pairs in the last cycle: their alerts neither fire nor resolve",
        m.components_unknown.clone(),
    );
    r.register(
        "skeletonhunter_component_alerting",
        "1 for each component alert the localizer holds firing (labels: its identity as posted to Alertmanager)",
        m.alerting.clone(),
    );
    r.register(
        "skeletonhunter_localizer_job_impact_ranks",
        "Ranks of a job (its tenant) an alerting component touches: placed beneath it (scope=under), with skeleton pairs crossing it (hit), and the job's ranks (all)",
        m.job_impact.clone(),
    );
}

/// Configuration reloads (Prometheus' own names).
fn register_reload(r: &mut Registry, m: &Metrics) {
    r.register(
        "skeletonhunter_config_last_reload_successful",
        "1 if the last configuration reload (SIGHUP, POST /-/reload) succeeded",
        m.reload_successful.clone(),
    );
    r.register(
        "skeletonhunter_config_last_reload_success_timestamp_seconds",
        "Unix time of the last successful configuration load",
        m.reload_success_time.clone(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::prometheus::QueryFailure;
    use crate::input::histograms::RttForm;
    use crate::input::promql::QueryKind;
    use skeletonhunter_common::topology::{Component, Kind};
    use std::collections::BTreeMap;

    fn text(m: &Metrics) -> String {
        String::from_utf8(m.encode(None).body.to_vec()).unwrap()
    }

    #[test]
    fn blame_series_are_replaced_each_cycle() {
        let m = Metrics::new();
        let mut b = BTreeMap::new();
        b.insert(Component::new(Kind::Tor, "t1"), (0.3, true));
        b.insert(Component::new(Kind::Node, "n1"), (0.01, false));
        m.set_blame(&b);
        let t = text(&m);
        assert!(
            t.contains(r#"skeletonhunter_component_blame{kind="tor",id="t1"} 0.3"#),
            "{t}"
        );
        assert!(t.contains(r#"skeletonhunter_component_faulty{kind="tor",id="t1"} 1"#));
        assert!(t.contains(r#"skeletonhunter_component_faulty{kind="node",id="n1"} 0"#));
        m.set_blame(&BTreeMap::new());
        let t = text(&m);
        assert!(!t.contains(r#"id="t1""#), "{t}");
    }

    #[test]
    fn health_metrics_have_design_names() {
        let m = Metrics::new();
        m.query_errors
            .get_or_create(&QueryLabels {
                query: QueryKind::Sent,
                reason: QueryFailure::Unreachable,
            })
            .inc();
        m.cycle_duration.observe(0.1);
        m.last_success.set(1.5e9);
        m.query_duration
            .get_or_create(&QueryKindLabels {
                query: QueryKind::RttP50,
            })
            .observe(0.2);
        m.set_histograms(RttForm::Native);
        m.set_histograms(RttForm::NativeOrClassic);
        let t = text(&m);
        for name in [
            "skeletonhunter_localizer_query_errors_total{query=\"sent\",reason=\"unreachable\"} 1",
            "skeletonhunter_localizer_cycle_duration_seconds_bucket",
            "skeletonhunter_localizer_last_success_timestamp_seconds 1500000000",
            "skeletonhunter_localizer_build_info{version=",
            "skeletonhunter_localizer_query_duration_seconds_count{query=\"rtt_p50\"} 1",
            "skeletonhunter_localizer_histograms_info{mode=\"native_or_classic\"} 1",
        ] {
            assert!(t.contains(name), "{name} missing from:\n{t}");
        }
        assert!(!t.contains("mode=\"native\""), "one mode at a time:\n{t}");
    }
}
