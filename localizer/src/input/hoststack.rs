//! The host-stack evidence of an online cycle: the query for each
//! exporter's own stack delay (`skeletonhunter_host_stack_delay_seconds`)
//! and CPU-throttled share (`skeletonhunter_host_cpu_throttled_seconds_total`
//! per second, its rows marked `evidence="throttled"`), placed on its node
//! through `skeletonhunter_node_info`, and its answer turned into the
//! engine's [`HostStack`].
//!
//! The metric carries no node label (it is the exporter's own, not a
//! pair's), so the query joins it to the identities the same exporter
//! serves (its host's, and each container's it probes from), on the target
//! labels Prometheus attaches to both (`instance`, `job`). Per node it is the worst stage's 99th percentile over the
//! window, the protocols summed: a paused or throttled exporter shows in
//! whichever stage it was caught in. Exporters that do not serve the
//! metric answer nothing, which is no evidence rather than an error.

use crate::clients::prometheus::Sample;
use crate::engine::model::HostStack;
use crate::input::histograms::{quantile, Over, RttForm};

/// The metric, as exposed (classic buckets add `_bucket`).
const METRIC: &str = "skeletonhunter_host_stack_delay_seconds";

/// The PromQL of the host-stack evidence over `w` in the histogram `form`
/// the RTT is read in; `sel` narrows a metric name to the operator's
/// matchers.
pub fn query(form: RttForm, w: &str, sel: &dyn Fn(&str) -> String) -> String {
    let over = Over {
        func: "rate",
        w,
        sel,
    };
    let delay = quantile(form, "0.99", METRIC, "instance, job, stage", &over);
    let throttled = format!(
        "sum by (instance, job) (rate({}[{w}]))",
        sel("skeletonhunter_host_cpu_throttled_seconds_total")
    );
    // Every node an exporter probes as (its host, and each container it
    // probes from) shares the process and its delays: node info is the
    // many side of the join, one value per scrape target the other.
    let per_node = |x: &str| {
        format!(
            "max by (node_id) (max by (instance, job, node_id) ({}) \
             * on (instance, job) group_left () max by (instance, job) ({x}))",
            sel("skeletonhunter_node_info")
        )
    };
    format!(
        "{} or label_replace({}, \"{EVIDENCE}\", \"{THROTTLED}\", \"\", \"\")",
        per_node(&delay),
        per_node(&throttled)
    )
}

/// The label marking the throttled rows of the answer, and its value.
const EVIDENCE: &str = "evidence";
const THROTTLED: &str = "throttled";

/// Node id -> delay (and throttled share) from the answer to [`query`]:
/// samples without a node
/// or with a value that is not a finite delay (no observation in the
/// window gives NaN) are no evidence; a node answered twice keeps the
/// larger delay.
pub fn host_stack_from(samples: &[Sample]) -> HostStack {
    let mut out = HostStack::default();
    for s in samples {
        let Some(node) = s.labels.get("node_id").filter(|n| !n.is_empty()) else {
            continue;
        };
        if !(s.value.is_finite() && s.value >= 0.0) {
            continue;
        }
        let into = match s.labels.get(EVIDENCE) {
            Some(v) if v == THROTTLED => &mut out.throttled_ratio,
            _ => &mut out.delay_seconds,
        };
        let d = into.entry(node.to_string()).or_insert(0.0);
        *d = d.max(s.value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::prometheus::Labels;

    fn sample(node: Option<&str>, value: f64) -> Sample {
        Sample {
            labels: node
                .map(|n| ("node_id".to_string(), n.to_string()))
                .into_iter()
                .collect::<Labels>(),
            timestamp: 0.0,
            value,
        }
    }

    #[test]
    fn the_query_joins_the_delay_to_the_node_on_the_target_labels() {
        let sel = |m: &str| format!("{m}{{job=\"x\"}}");
        let q = query(RttForm::Classic, "1m", &sel);
        assert!(q.contains("rate(skeletonhunter_host_stack_delay_seconds_bucket{job=\"x\"}[1m])"));
        // Node info is the many side: an exporter probing from containers
        // serves one per container beside its host's.
        assert!(q.contains("max by (instance, job, node_id) (skeletonhunter_node_info{job=\"x\"}) * on (instance, job) group_left () max by (instance, job) ("));
        assert!(q.contains("skeletonhunter_node_info{job=\"x\"}"));
        assert!(q.contains("rate(skeletonhunter_host_cpu_throttled_seconds_total{job=\"x\"}[1m])"));
        assert!(
            q.ends_with(", \"evidence\", \"throttled\", \"\", \"\")"),
            "{q}"
        );
        let both = query(RttForm::NativeOrClassic, "1m", &sel);
        assert!(
            both.contains("rate(skeletonhunter_host_stack_delay_seconds{job=\"x\"}[1m]))) or "),
            "{both}"
        );
    }

    #[test]
    fn answers_without_a_node_or_a_delay_are_no_evidence() {
        let s = host_stack_from(&[
            sample(Some("a"), 0.002),
            sample(Some("b"), f64::NAN),
            sample(Some("c"), -1.0),
            sample(None, 0.3),
            sample(Some(""), 0.3),
            sample(Some("a"), 0.004),
        ]);
        let got: Vec<(&str, f64)> = s
            .delay_seconds
            .iter()
            .map(|(n, d)| (n.as_str(), *d))
            .collect();
        assert_eq!(got, vec![("a", 0.004)]);
        assert!(s.throttled_ratio.is_empty());
        let mut t = sample(Some("a"), 0.25);
        t.labels = [("node_id", "a"), ("evidence", "throttled")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Labels>();
        let s = host_stack_from(&[t, sample(Some("a"), 0.004)]);
        assert_eq!(s.throttled_ratio.get("a"), Some(&0.25));
        assert_eq!(s.delay_seconds.get("a"), Some(&0.004));
        assert!(host_stack_from(&[]).delay_seconds.is_empty());
    }
}
