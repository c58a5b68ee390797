//! Every series registered under its documented name and help text.

use super::labels::BuildLabels;
use super::Metrics;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
