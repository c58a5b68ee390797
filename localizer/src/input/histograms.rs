//! Which RTT histogram series a cycle reads (`run --histograms`): the
//! classic `_bucket` / `_count` series, the native histogram series (one
//! per pair and protocol instead of 25 bucket series), or native with a
//! per-pair classic fallback; and the free probe that tells whether the
//! store evaluates native-histogram functions at all.

use crate::clients::prometheus::{QueryError, Sample};

skeletonhunter_common::labelled_enum! {
    /// Which series the RTT median and answer count are read from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RttForm {
        /// The classic `_bucket` / `_count` series (25 bucket series a pair).
        Classic,
        /// The native histogram series (one a pair): needs a store with native
        /// histograms (Prometheus `--enable-feature=native-histograms`).
        Native,
        /// Native where a pair has it, else classic (PromQL `or`, per pair),
        /// so a fleet in transition reads both kinds.
        NativeOrClassic,
    }
}

/// The query that tells whether the store evaluates native-histogram
/// functions: it reads no series, so it costs nothing at any scale.
pub const NATIVE_PROBE: &str = "histogram_count(vector(1))";

/// What [`NATIVE_PROBE`]'s answer says: `Some(true)` when the store knows
/// the function, `Some(false)` when it rejects the query as bad input (an
/// unknown function: VictoriaMetrics answers 422), `None` when the answer
/// says nothing about it (unreachable, timeout, 5xx, 401/403): ask again.
pub fn store_knows_native(answer: &Result<Vec<Sample>, QueryError>) -> Option<bool> {
    match answer {
        Ok(_) => Some(true),
        Err(QueryError::Api {
            error_type, error, ..
        }) => {
            let rejected = matches!(error_type.as_str(), "bad_data" | "400" | "422")
                || error.contains("unknown func");
            rejected.then_some(false)
        }
        Err(QueryError::Status { status, .. }) => {
            matches!(status, 400 | 404 | 422).then_some(false)
        }
        Err(_) => None,
    }
}

/// The RTT median query in `form` over `w`, and the answer-count query
/// when the form has a cheap one; `sel` narrows a metric name to the
/// operator's matchers.
///
/// Classic histograms count answers in one `_count` series a pair (1/26 of
/// the median's cost). A native histogram has no such series:
/// `histogram_count` re-reads every histogram and cost as much as the
/// median itself (1.4x at 100,000 pairs on Prometheus 2.42), so the native
/// forms leave it out and the answers are derived from the median's
/// presence and the loss counters (`input::promql`).
pub fn rtt_queries(
    form: RttForm,
    w: &str,
    sel: &dyn Fn(&str) -> String,
) -> (String, Option<String>) {
    let by = "src_node, dst_node, protocol";
    let over = Over {
        func: "increase",
        w,
        sel,
    };
    let median = quantile(form, "0.5", "skeletonhunter_probe_rtt_seconds", by, &over);
    let count = (form == RttForm::Classic).then(|| {
        format!(
            "sum by ({by}) (increase({}[{w}]))",
            sel("skeletonhunter_probe_rtt_seconds_count")
        )
    });
    (median, count)
}

/// How a histogram is read over the window: the range function
/// (`increase`, `rate`), the range `w`, and `sel`, which narrows a metric
/// name to the operator's matchers.
pub struct Over<'a> {
    /// `increase` or `rate`.
    pub func: &'a str,
    /// The range, in PromQL form.
    pub w: &'a str,
    /// A metric name narrowed to the operator's matchers.
    pub sel: &'a dyn Fn(&str) -> String,
}

/// The `q` quantile of the histogram `metric` per `by`, read in `form`:
/// its classic `_bucket` series, its native series, or native where a
/// series has it and classic elsewhere.
pub fn quantile(form: RttForm, q: &str, metric: &str, by: &str, over: &Over<'_>) -> String {
    let (func, w) = (over.func, over.w);
    let classic = format!(
        "histogram_quantile({q}, sum by ({by}, le) ({func}({}[{w}])))",
        (over.sel)(&format!("{metric}_bucket"))
    );
    let native = format!(
        "histogram_quantile({q}, sum by ({by}) ({func}({}[{w}])))",
        (over.sel)(metric)
    );
    match form {
        RttForm::Classic => classic,
        RttForm::Native => native,
        RttForm::NativeOrClassic => format!("{native} or {classic}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_probe_tells_known_from_unknown_from_no_answer() {
        let url = || "http://s/api/v1/query".to_string();
        let api = |t: &str, e: &str| {
            Err(QueryError::Api {
                url: url(),
                error_type: t.into(),
                error: e.into(),
            })
        };
        assert_eq!(store_knows_native(&Ok(Vec::new())), Some(true));
        // VictoriaMetrics 1.79: HTTP 422 `unknown func "histogram_count"`.
        assert_eq!(
            store_knows_native(&api("422", "unknown func \"histogram_count\"")),
            Some(false)
        );
        assert_eq!(
            store_knows_native(&api("bad_data", "parse error")),
            Some(false)
        );
        let status = |status| {
            Err(QueryError::Status {
                url: url(),
                status,
                body: String::new(),
            })
        };
        assert_eq!(store_knows_native(&status(422)), Some(false));
        for undecided in [
            status(401),
            status(503),
            api("timeout", "query timed out"),
            Err(QueryError::Unreachable {
                url: url(),
                reason: "refused".into(),
            }),
        ] {
            assert_eq!(store_knows_native(&undecided), None, "{undecided:?}");
        }
    }
}
