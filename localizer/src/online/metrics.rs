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

skeletonhunter_common::metric_families! {
    /// Every metric the online localizer serves.
    pub struct Metrics() {
        registry: Registry = Registry::default();
        /// Held while blame series are rebuilt and while encoding.
        update: Mutex<()> = Mutex::new(());
        /// Estimated failure probability of a component the localizer considered this cycle (max
        /// over symptoms)
        pub blame: Family<ComponentLabels, FloatGauge> => "skeletonhunter_component_blame";
        /// 1 when the localizer blames the component for a fault, 0 when it considered and cleared
        /// it
        pub faulty: Family<ComponentLabels, Gauge> => "skeletonhunter_component_faulty";
        /// Wall time of one localization cycle (queries, analysis, alert posting)
        pub cycle_duration: Histogram = seconds_histogram()
            => "skeletonhunter_localizer_cycle_duration_seconds";
        /// Localization cycles by result (ok, query_failed, no_data)
        pub cycles: Family<ResultLabels, Counter> => "skeletonhunter_localizer_cycles";
        /// Prometheus queries that failed or returned partial data, by query and reason
        pub query_errors: Family<QueryLabels, Counter> => "skeletonhunter_localizer_query_errors";
        /// Wall time of each of the cycle's queries, answered or not (the three per-path queries
        /// count as paths)
        pub query_duration: Family<QueryKindLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(seconds_histogram)
            => "skeletonhunter_localizer_query_duration_seconds";
        /// Most bytes of Prometheus answers held at once during the last cycle (at most
        /// --max-cycle-response-size)
        pub answer_bytes_peak: Gauge => "skeletonhunter_localizer_answer_bytes_peak";
        /// 1 for the form the RTT queries read (mode classic, native, native_or_classic; absent
        /// until --histograms auto has asked the store)
        histograms: Family<HistogramsLabels, Gauge> => "skeletonhunter_localizer_histograms_info";
        /// Failed posts to an Alertmanager (the alerts are retried next cycle)
        pub alert_post_errors: Family<AlertmanagerLabels, Counter>
            => "skeletonhunter_localizer_alert_post_errors";
        /// Alerts (firing and resolved) accepted by an Alertmanager
        pub alerts_posted: Family<AlertmanagerLabels, Counter>
            => "skeletonhunter_localizer_alerts_posted";
        /// Resolved alerts waiting for an Alertmanager to accept them
        pub alert_queue: Family<AlertmanagerLabels, Gauge>
            => "skeletonhunter_localizer_alert_queue_length";
        /// Resolved alerts dropped because an Alertmanager's queue was full
        pub alerts_dropped: Family<AlertmanagerLabels, Counter>
            => "skeletonhunter_localizer_alerts_dropped";
        /// Component alerts the localizer currently holds as firing
        pub alerts_firing: Gauge => "skeletonhunter_localizer_alerts_firing";
        /// Unix time of the last cycle that analyzed complete data
        pub last_success: FloatGauge => "skeletonhunter_localizer_last_success_timestamp_seconds";
        /// Unix time of the last post an Alertmanager accepted
        pub last_alert_post_success: Family<AlertmanagerLabels, FloatGauge>
            => "skeletonhunter_localizer_last_alert_post_success_timestamp_seconds";
        /// Probe pairs analyzed in the last trusted cycle
        pub pairs_observed: Gauge => "skeletonhunter_localizer_pairs_observed";
        /// Probe pairs found anomalous in the last trusted cycle
        pub pairs_anomalous: Gauge => "skeletonhunter_localizer_pairs_anomalous";
        /// Probe pairs left out of the last cycle (no topology for an endpoint, or incomplete
        /// series)
        pub pairs_dropped: Gauge => "skeletonhunter_localizer_pairs_dropped";
        /// Probe pairs of the last trusted cycle with a median RTT (0 when the RTT queries read a
        /// histogram form the fleet does not export)
        pub pairs_with_rtt: Gauge => "skeletonhunter_localizer_pairs_with_rtt";
        /// Nodes with a known topology identity (skeletonhunter_node_info)
        pub nodes_known: Gauge => "skeletonhunter_localizer_nodes";
        /// Shards the per-pair queries are split into (--pair-shards; fewer while node names allow
        /// no more)
        pub pair_shards: Gauge => "skeletonhunter_localizer_pair_shards";
        /// Reads of the per-pair series by cycles that answered: all pairs, or one shard
        pub pair_reads: Family<PairReadLabels, Counter> => "skeletonhunter_localizer_pair_reads";
        /// Wall time of the last detection and localization step alone
        pub analysis_duration: FloatGauge => "skeletonhunter_localizer_analysis_duration_seconds";
        /// Deprecated, removed in the next release: use skeletonhunter_build_info
        build_info: Family<BuildLabels, Gauge> = build_info()
            => "skeletonhunter_localizer_build_info";
        /// Expected probe pairs with fresh data in the last cycle (0 when its queries failed)
        pub pairs_covered: Gauge => "skeletonhunter_localizer_pairs_covered";
        /// Probe pairs the localizer expects data for (seen within the topology window)
        pub pairs_expected: Gauge => "skeletonhunter_localizer_pairs_expected";
        /// Components with too few covered pairs in the last cycle: their alerts neither fire nor
        /// resolve
        pub components_unknown: Gauge => "skeletonhunter_localizer_components_unknown";
        /// 1 for each component alert the localizer holds firing (labels: its identity as posted to
        /// Alertmanager)
        pub alerting: Family<AlertLabels, Gauge> => "skeletonhunter_component_alerting";
        /// Ranks of a job (its tenant) an alerting component touches: placed beneath it
        /// (scope=under), with skeleton pairs crossing it (hit), and the job's ranks (all)
        pub job_impact: Family<JobImpactLabels, Gauge> => "skeletonhunter_localizer_job_impact_ranks";
        /// 1 for each job (its tenant) whose TP, DP and PP groups the last trusted cycle solved from
        /// its skeleton between containers, with its grid and whether it is determined
        pub job_layout: Family<JobLayoutLabels, Gauge> => "skeletonhunter_localizer_job_layout";
        /// Probes lost / sent over the last trusted cycle's window, over the pairs of the fabric or
        /// of one ToR, spine or tenant (scope, id)
        pub area_loss: Family<AreaLabels, FloatGauge> => "skeletonhunter_overview_loss_ratio";
        /// Pairs of the fabric or of one ToR, spine or tenant (state=all), and of those losing at
        /// least 95 % (state=unreachable), in the last trusted cycle
        pub area_pairs: Family<AreaPairsLabels, Gauge> => "skeletonhunter_overview_pairs";
        /// Quantiles (0.5, 0.99) of the median RTT of the pairs of the fabric or of one ToR, spine
        /// or tenant, in the last trusted cycle
        pub area_rtt: Family<AreaQuantileLabels, FloatGauge> => "skeletonhunter_overview_pair_rtt_seconds";
        /// Pairs of the fabric whose median RTT is at most le, in the last trusted cycle
        pub pairs_by_rtt: Family<LeLabels, Gauge> => "skeletonhunter_overview_pairs_by_rtt";
        /// Loss of the lossiest and the slowest pairs (50 fabric-wide, 5 per tenant) in the last
        /// trusted cycle
        pub worst_loss: Family<WorstPairLabels, FloatGauge> => "skeletonhunter_overview_worst_pair_loss_ratio";
        /// Median RTT of the lossiest and the slowest pairs that had replies, in the last trusted
        /// cycle
        pub worst_rtt: Family<WorstPairLabels, FloatGauge> => "skeletonhunter_overview_worst_pair_rtt_seconds";
        /// 1 if the last configuration reload (SIGHUP, POST /-/reload) succeeded
        pub reload_successful: Gauge => "skeletonhunter_config_last_reload_successful";
        /// Unix time of the last successful configuration load
        pub reload_success_time: FloatGauge
            => "skeletonhunter_config_last_reload_success_timestamp_seconds";
        /// The last report as JSON, for `/report`.
        report: Mutex<String> = Mutex::new("{}".to_string());
        /// When the last cycle analyzed complete data (for `/-/ready`).
        last_ok: Mutex<Option<Instant>> = Mutex::new(None);
    }
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
        let m = Metrics::unregistered();
        m.register_families(&mut r);
        skeletonhunter_common::build::register(&mut r);
        r.register_collector(Box::new(skeletonhunter_common::process::ProcessCollector));
        Metrics { registry: r, ..m }
    }
}

/// Labels of `skeletonhunter_localizer_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

/// `skeletonhunter_localizer_build_info`, set once: the version.
fn build_info() -> Family<BuildLabels, Gauge> {
    let build = Family::<BuildLabels, Gauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION").to_string(),
        })
        .set(1);
    build
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
