//! A small client for the Prometheus HTTP API (`/api/v1/query`,
//! `/api/v1/query_range`).
//!
//! It speaks only the stable, documented subset that Prometheus,
//! VictoriaMetrics, Thanos and Mimir all serve, so the localizer runs against
//! any of them. Every error names the URL and what went wrong, because "the
//! localizer cannot reach Prometheus" is the first thing an operator needs to
//! see in the logs. Responses that the server marks as incomplete (Prometheus
//! `warnings` other than PromQL annotations, VictoriaMetrics / Thanos
//! `isPartial`) are reported as [`QueryError::Partial`]: acting on half the
//! fabric would blame components for data that simply did not arrive.
//!
//! An answer is bounded: at most `max_response` bytes (`--max-response-size`),
//! and the answers read at once by a shared budget (`--max-cycle-response-size`),
//! read before the request's deadline, then decoded once, straight from the
//! bytes into [`Sample`]s ([`decode`]); [`client`] adds the query methods
//! to [`crate::clients::Endpoint`].

mod client;
pub mod decode;
mod text;

use crate::clients::endpoint::auth_hint;
use std::sync::Arc;

/// Label set of one series (`__name__` included when the server returns
/// it), sorted by name. A vector rather than a map because a cycle at
/// 100,000 pairs holds about 700,000 of them: a `BTreeMap` node takes
/// ~560 bytes whatever it holds, three labels in a vector 72 bytes plus
/// their text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<(Arc<str>, Arc<str>)>);

impl Labels {
    /// No labels.
    pub fn new() -> Labels {
        Labels(Vec::new())
    }

    /// The value of label `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(name))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    /// Whether there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// (name, value) in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Labels {
        Labels::sorted(
            iter.into_iter()
                .map(|(k, v)| (text::text(k.as_ref()), text::text(v.as_ref())))
                .collect(),
        )
    }
}

impl Labels {
    /// Sorted by name; of a repeated name the last value is kept, as a
    /// map would.
    fn sorted(mut v: Vec<(Arc<str>, Arc<str>)>) -> Labels {
        v.reverse();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|later, earlier| later.0 == earlier.0);
        v.shrink_to_fit();
        Labels(v)
    }
}

impl std::ops::Index<&str> for Labels {
    type Output = str;

    fn index(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| panic!("no label {name:?}"))
    }
}

impl<'de> serde::Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Labels;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of label names to values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Labels, A::Error> {
                // Bounded by the answer, itself bounded by --max-response-size.
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(4));
                while let Some((k, val)) = m.next_entry::<text::Text, text::Text>()? {
                    v.push((k.0, val.0));
                }
                Ok(Labels::sorted(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// One series of an instant-vector result.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels.
    pub labels: Labels,
    /// Evaluation time, seconds since the epoch.
    pub timestamp: f64,
    /// The sample value (may be NaN or infinite).
    pub value: f64,
}

/// One series of a range-query (matrix) result.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The series' labels.
    pub labels: Labels,
    /// `(timestamp seconds, value)` in time order.
    pub points: Vec<(f64, f64)>,
}

/// Why a query produced no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request never got an HTTP answer (refused, timeout, DNS, ...).
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// The flattened error chain.
        reason: String,
    },
    /// The server answered with a non-success HTTP status.
    #[error("{url} answered HTTP {status}{}: {}", auth_hint(*status), snippet(body))]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body, for the log.
        body: String,
    },
    /// The answer is longer than the client's limit (`--max-response-size`);
    /// it was dropped unread past the limit.
    #[error("{url} answered more than {limit} bytes (--max-response-size); narrow the queries with --matchers or raise the limit")]
    TooLarge {
        /// The endpoint.
        url: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// This answer and the others read at once together pass their shared
    /// budget (`--max-cycle-response-size`); it was dropped unread past it.
    #[error("{url}: the answers of the cycle's queries together pass the {budget}-byte budget (--max-cycle-response-size); narrow the queries with --matchers, split them with --pair-shards or raise the budget")]
    OverBudget {
        /// The endpoint.
        url: String,
        /// The budget, in bytes.
        budget: usize,
    },
    /// The server answered `"status": "error"` (bad query, timeout, ...).
    #[error("{url} rejected the query ({error_type}): {error}")]
    Api {
        /// The endpoint.
        url: String,
        /// Prometheus' `errorType`.
        error_type: String,
        /// Prometheus' `error`.
        error: String,
    },
    /// The body was not the JSON the Prometheus API documents.
    #[error("{url} returned a body that is not a Prometheus API response: {reason}")]
    Decode {
        /// The endpoint.
        url: String,
        /// What did not decode.
        reason: String,
    },
    /// No answer within the query's timeout, or the store gave up at it.
    #[error("{url} did not answer within {timeout:?}")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The bound that was hit.
        timeout: std::time::Duration,
    },
    /// The server says the answer is incomplete.
    #[error("{url} returned partial data: {}", partial_text(warnings))]
    Partial {
        /// The endpoint.
        url: String,
        /// The data warnings (empty when only `isPartial` was set).
        warnings: Vec<String>,
    },
}

skeletonhunter_common::labelled_enum! {
    /// The kind of a [`QueryError`], as the `reason` label of
    /// `skeletonhunter_localizer_query_errors_total`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum QueryFailure {
        /// See [`QueryError::Unreachable`].
        Unreachable,
        /// See [`QueryError::Status`].
        HttpStatus,
        /// See [`QueryError::Api`].
        ApiError,
        /// See [`QueryError::Decode`].
        Decode,
        /// See [`QueryError::Partial`].
        Partial,
        /// See [`QueryError::TooLarge`] and [`QueryError::OverBudget`].
        TooLarge,
        /// See [`QueryError::Timeout`].
        Timeout,
    }
}

impl QueryError {
    /// What kind of failure this is (the metric's `reason` label).
    pub fn reason(&self) -> QueryFailure {
        match self {
            QueryError::Unreachable { .. } => QueryFailure::Unreachable,
            QueryError::Status { .. } => QueryFailure::HttpStatus,
            QueryError::Api { .. } => QueryFailure::ApiError,
            QueryError::Decode { .. } => QueryFailure::Decode,
            QueryError::Partial { .. } => QueryFailure::Partial,
            QueryError::TooLarge { .. } | QueryError::OverBudget { .. } => QueryFailure::TooLarge,
            QueryError::Timeout { .. } => QueryFailure::Timeout,
        }
    }
}

fn partial_text(warnings: &[String]) -> String {
    if warnings.is_empty() {
        "isPartial=true".to_string()
    } else {
        warnings.join("; ")
    }
}

/// The first 300 characters of a body, on one line, for error messages.
pub fn snippet(body: &str) -> String {
    let one_line: String = body
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    if body.trim().chars().count() > 300 {
        format!("{one_line}...")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::Labels;

    #[test]
    fn labels_are_a_sorted_map_in_a_vector() {
        let l: Labels = [("z", "1"), ("a", "2"), ("z", "3")].into_iter().collect();
        assert_eq!(l.iter().collect::<Vec<_>>(), [("a", "2"), ("z", "3")]);
        assert_eq!(
            (l.get("a"), l.get("z"), l.get("m")),
            (Some("2"), Some("3"), None)
        );
        let d: Labels =
            serde_json::from_str(r#"{"dst_node":"b","src_node":"a","dst_node":"c"}"#).unwrap();
        assert_eq!(&d["dst_node"], "c");
        assert_eq!(&d["src_node"], "a");
        assert!(serde_json::from_str::<Labels>(r#"{"a":1}"#).is_err());
        assert!(Labels::new().is_empty());
    }
}
