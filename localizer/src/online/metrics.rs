//! The localizer's own `/metrics`: blame per component and the health of the
//! online loop.
//!
//! Blame series are rebuilt every trusted cycle (components the engine no
//! longer considers disappear), under a lock that `/metrics` also takes, so
//! a scrape never sees a half-updated set. Health metrics are named
//! `skeletonhunter_localizer_*`; the shipped alerting rules watch them (a
//! stale `last_success_timestamp_seconds` means nobody is localizing).
//!
//! Here the families and the state behind `/report` and `/-/ready`;
//! `labels` their label sets, `register` their names and help texts. A
//! cycle writes them through its record (`record.rs`), a reload in
//! `routes.rs`.

mod labels;
mod register;

pub use labels::*;

use crate::input::histograms::RttForm;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use skeletonhunter_common::exposition;
use skeletonhunter_common::http::Reply;
use skeletonhunter_common::topology::Component;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

type FloatGauge = Gauge<f64, AtomicU64>;

/// `m` locked, poisoned or not: what the locks here guard (a unit, a JSON
/// text, an instant) is whole whatever panicked while holding them.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
            analysis_duration: FloatGauge::default(),
            reload_successful: Gauge::default(),
            reload_success_time: FloatGauge::default(),
            report: Mutex::new("{}".to_string()),
            last_ok: Mutex::new(None),
        };
        register::register_all(&mut r, &m);
        Metrics { registry: r, ..m }
    }

    /// A cycle analyzed complete data now.
    pub fn mark_cycle_ok(&self) {
        *lock(&self.last_ok) = Some(Instant::now());
    }

    /// Time since the last cycle that analyzed complete data (`None`: none
    /// yet).
    pub fn since_cycle_ok(&self) -> Option<Duration> {
        lock(&self.last_ok).map(|t| t.elapsed())
    }

    /// The RTT query form in use (one series; absent until decided).
    pub fn set_histograms(&self, mode: RttForm) {
        let _g = lock(&self.update);
        self.histograms.clear();
        self.histograms
            .get_or_create(&HistogramsLabels { mode })
            .set(1);
    }

    /// Replace the `skeletonhunter_component_alerting` series with the
    /// alerts held firing now.
    pub fn set_alerting(&self, alerts: impl IntoIterator<Item = AlertLabels>) {
        let _g = lock(&self.update);
        self.alerting.clear();
        for l in alerts {
            self.alerting.get_or_create(&l).set(1);
        }
    }

    /// Replace the blame series with this cycle's verdicts: `blamed` maps a
    /// component to (score, faulty).
    pub fn set_blame(&self, blamed: &BTreeMap<Component, (f64, bool)>) {
        let _g = lock(&self.update);
        self.blame.clear();
        self.faulty.clear();
        for (c, (score, faulty)) in blamed {
            let l = ComponentLabels {
                kind: c.kind.as_str().to_string(),
                id: c.id.clone(),
            };
            self.blame.get_or_create(&l).set(*score);
            self.faulty.get_or_create(&l).set(i64::from(*faulty));
        }
    }

    /// Keep the last report's JSON for `/report`.
    pub fn set_report(&self, json: String) {
        *lock(&self.report) = json;
    }

    /// The last report's JSON.
    pub fn report(&self) -> String {
        lock(&self.report).clone()
    }

    /// The exposition for a scrape with this `Accept` header.
    pub fn encode(&self, accept: Option<&str>) -> Reply {
        let _g = lock(&self.update);
        exposition::render(&self.registry, accept, 64 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::prometheus::QueryFailure;
    use crate::input::promql::QueryKind;
    use skeletonhunter_common::topology::Kind;

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
