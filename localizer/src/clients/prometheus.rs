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

use super::http::{encode_form, error_chain, http_client, validate_base_url, ClientError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Label set of one series (`__name__` included when the server returns it).
pub type Labels = BTreeMap<String, String>;

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
    #[error("{url} answered HTTP {status}: {}", snippet(body))]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The body, for the log.
        body: String,
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
    /// The server says the answer is incomplete.
    #[error("{url} returned partial data: {}", partial_text(warnings))]
    Partial {
        /// The endpoint.
        url: String,
        /// The data warnings (empty when only `isPartial` was set).
        warnings: Vec<String>,
    },
}

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
}

impl QueryFailure {
    /// The label value (stable: alerting rules and dashboards match it).
    pub fn as_str(self) -> &'static str {
        match self {
            QueryFailure::Unreachable => "unreachable",
            QueryFailure::HttpStatus => "http_status",
            QueryFailure::ApiError => "api_error",
            QueryFailure::Decode => "decode",
            QueryFailure::Partial => "partial",
        }
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
fn snippet(body: &str) -> String {
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

/// Client for one Prometheus-compatible endpoint.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    /// `base` is the server root as operators write it (`http://prom:9090`,
    /// or with a path prefix such as `http://thanos/query`). Each request is
    /// bounded by `timeout`.
    pub fn new(base: &str, timeout: Duration) -> Result<Client, ClientError> {
        let base = validate_base_url(base)?;
        let http = http_client(timeout)?;
        Ok(Client { base, http })
    }

    /// The server root this client talks to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Evaluate `query` as an instant vector at `time` (seconds since the
    /// epoch; `None` = the server's now). A scalar result comes back as one
    /// sample without labels.
    pub async fn instant(&self, query: &str, time: Option<f64>) -> Result<Vec<Sample>, QueryError> {
        let mut form = vec![("query", query.to_string())];
        if let Some(t) = time {
            form.push(("time", format_time(t)));
        }
        let (url, data) = self.post("/api/v1/query", &form).await?;
        parse_vector(&url, data)
    }

    /// Evaluate `query` over `[start, end]` every `step`.
    pub async fn range(
        &self,
        query: &str,
        start: f64,
        end: f64,
        step: Duration,
    ) -> Result<Vec<Series>, QueryError> {
        let form = vec![
            ("query", query.to_string()),
            ("start", format_time(start)),
            ("end", format_time(end)),
            ("step", format!("{}", step.as_secs_f64())),
        ];
        let (url, data) = self.post("/api/v1/query_range", &form).await?;
        parse_matrix(&url, data)
    }

    /// POST a form to `path` and return the `data` member of a successful,
    /// complete answer.
    async fn post(
        &self,
        path: &str,
        form: &[(&str, String)],
    ) -> Result<(String, Data), QueryError> {
        let url = format!("{}{path}", self.base);
        let body = encode_form(form);
        let resp = self
            .http
            .post(&url)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(|e| QueryError::Unreachable {
                url: url.clone(),
                reason: error_chain(&e),
            })?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| QueryError::Unreachable {
            url: url.clone(),
            reason: format!("reading the response failed: {}", error_chain(&e)),
        })?;
        let data = decode_response(&url, status.as_u16(), &text)?;
        Ok((url, data))
    }
}

/// Seconds since the epoch with millisecond precision, as the API accepts.
fn format_time(t: f64) -> String {
    format!("{t:.3}")
}

/// The generic response envelope of the Prometheus HTTP API. VictoriaMetrics
/// and Thanos add `isPartial`.
#[derive(Debug, Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default, rename = "isPartial")]
    is_partial: bool,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

/// Turn an HTTP answer into the `data` of a complete, successful response.
fn decode_response(url: &str, status: u16, body: &str) -> Result<Data, QueryError> {
    let env: Envelope = match serde_json::from_str(body) {
        Ok(env) => env,
        Err(e) => {
            if !(200..300).contains(&status) {
                return Err(QueryError::Status {
                    url: url.to_string(),
                    status,
                    body: body.to_string(),
                });
            }
            return Err(QueryError::Decode {
                url: url.to_string(),
                reason: format!("{e} (body starts: {})", snippet(body)),
            });
        }
    };
    if env.status != "success" {
        return Err(QueryError::Api {
            url: url.to_string(),
            error_type: env.error_type.unwrap_or_else(|| format!("HTTP {status}")),
            error: env
                .error
                .unwrap_or_else(|| format!("status {:?} without an error message", env.status)),
        });
    }
    if !(200..300).contains(&status) {
        return Err(QueryError::Status {
            url: url.to_string(),
            status,
            body: body.to_string(),
        });
    }
    // PromQL annotations ("PromQL warning: ...", "PromQL info: ...") are
    // about the expression, not missing data; anything else (an unavailable
    // store, a failed remote read) means the answer is incomplete.
    let data_warnings: Vec<String> = env
        .warnings
        .into_iter()
        .filter(|w| !w.starts_with("PromQL "))
        .collect();
    if env.is_partial || !data_warnings.is_empty() {
        return Err(QueryError::Partial {
            url: url.to_string(),
            warnings: data_warnings,
        });
    }
    env.data.ok_or_else(|| QueryError::Decode {
        url: url.to_string(),
        reason: "\"status\":\"success\" without \"data\"".to_string(),
    })
}

/// A sample value: the API sends numbers as strings (`"0.5"`, `"NaN"`, `"+Inf"`).
fn parse_value(url: &str, v: &serde_json::Value) -> Result<(f64, f64), QueryError> {
    let bad = |why: &str| QueryError::Decode {
        url: url.to_string(),
        reason: format!("{why}: {v}"),
    };
    let arr = v
        .as_array()
        .filter(|a| a.len() == 2)
        .ok_or_else(|| bad("a sample must be [timestamp, \"value\"]"))?;
    let ts = arr[0]
        .as_f64()
        .ok_or_else(|| bad("sample timestamp is not a number"))?;
    let value = match &arr[1] {
        serde_json::Value::String(s) => {
            parse_float(s).ok_or_else(|| bad("sample value is not a float"))?
        }
        serde_json::Value::Number(n) => {
            n.as_f64().ok_or_else(|| bad("sample value out of range"))?
        }
        _ => return Err(bad("sample value is not a string")),
    };
    Ok((ts, value))
}

/// Go's float formatting: `NaN`, `+Inf`, `-Inf` as well as plain numbers.
fn parse_float(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

fn parse_labels(url: &str, v: Option<&serde_json::Value>) -> Result<Labels, QueryError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(Labels::new()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| QueryError::Decode {
            url: url.to_string(),
            reason: format!("series labels are not a string map: {e}"),
        }),
    }
}

fn parse_vector(url: &str, data: Data) -> Result<Vec<Sample>, QueryError> {
    match data.result_type.as_str() {
        "vector" => {
            let items = data.result.as_array().ok_or_else(|| QueryError::Decode {
                url: url.to_string(),
                reason: "vector result is not an array".to_string(),
            })?;
            items
                .iter()
                .map(|item| {
                    let (timestamp, value) =
                        parse_value(url, item.get("value").unwrap_or(&serde_json::Value::Null))?;
                    Ok(Sample {
                        labels: parse_labels(url, item.get("metric"))?,
                        timestamp,
                        value,
                    })
                })
                .collect()
        }
        "scalar" => {
            let (timestamp, value) = parse_value(url, &data.result)?;
            Ok(vec![Sample {
                labels: Labels::new(),
                timestamp,
                value,
            }])
        }
        other => Err(QueryError::Decode {
            url: url.to_string(),
            reason: format!("expected an instant vector, got resultType {other:?}"),
        }),
    }
}

fn parse_matrix(url: &str, data: Data) -> Result<Vec<Series>, QueryError> {
    if data.result_type != "matrix" {
        return Err(QueryError::Decode {
            url: url.to_string(),
            reason: format!(
                "expected a matrix (range result), got resultType {:?}",
                data.result_type
            ),
        });
    }
    let items = data.result.as_array().ok_or_else(|| QueryError::Decode {
        url: url.to_string(),
        reason: "matrix result is not an array".to_string(),
    })?;
    items
        .iter()
        .map(|item| {
            let values = item
                .get("values")
                .and_then(|v| v.as_array())
                .ok_or_else(|| QueryError::Decode {
                    url: url.to_string(),
                    reason: "matrix series without a \"values\" array".to_string(),
                })?;
            Ok(Series {
                labels: parse_labels(url, item.get("metric"))?,
                points: values
                    .iter()
                    .map(|v| parse_value(url, v))
                    .collect::<Result<_, _>>()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://prom:9090/api/v1/query";

    #[test]
    fn decodes_a_vector_with_special_floats() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"src_node":"a","dst_node":"b"},"value":[1700000000.5,"0.25"]},
            {"metric":{"src_node":"a","dst_node":"c"},"value":[1700000000.5,"NaN"]},
            {"metric":{},"value":[1700000000.5,"+Inf"]}]}}"#;
        let data = decode_response(URL, 200, body).unwrap();
        let v = parse_vector(URL, data).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].labels["dst_node"], "b");
        assert_eq!(v[0].value, 0.25);
        assert_eq!(v[0].timestamp, 1700000000.5);
        assert!(v[1].value.is_nan());
        assert!(v[2].value.is_infinite());
    }

    #[test]
    fn decodes_scalar_and_matrix() {
        let body = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        let v = parse_vector(URL, decode_response(URL, 200, body).unwrap()).unwrap();
        assert_eq!(v[0].value, 3.0);
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"x":"1"},"values":[[1,"1"],[2,"2.5"]]}]}}"#;
        let m = parse_matrix(URL, decode_response(URL, 200, body).unwrap()).unwrap();
        assert_eq!(m[0].points, vec![(1.0, 1.0), (2.0, 2.5)]);
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        let err = parse_vector(URL, decode_response(URL, 200, body).unwrap()).unwrap_err();
        assert!(err.to_string().contains("matrix"), "{err}");
    }

    #[test]
    fn api_errors_name_the_url_and_problem() {
        let body = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let err = decode_response(URL, 400, body).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(URL) && msg.contains("bad_data") && msg.contains("char 3"),
            "{msg}"
        );
        assert_eq!(err.reason().as_str(), "api_error");
    }

    #[test]
    fn non_json_answers_are_reported_with_status_and_body() {
        let err = decode_response(URL, 502, "<html>Bad Gateway</html>").unwrap_err();
        assert_eq!(err.reason().as_str(), "http_status");
        assert!(err.to_string().contains("502") && err.to_string().contains("Bad Gateway"));
        let err = decode_response(URL, 200, "not json").unwrap_err();
        assert_eq!(err.reason().as_str(), "decode");
        assert!(err.to_string().contains(URL));
    }

    #[test]
    fn partial_answers_are_errors() {
        let body =
            r#"{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(
            decode_response(URL, 200, body)
                .unwrap_err()
                .reason()
                .as_str(),
            "partial"
        );
        let body = r#"{"status":"success","warnings":["store s1 unavailable"],"data":{"resultType":"vector","result":[]}}"#;
        let err = decode_response(URL, 200, body).unwrap_err();
        assert!(err.to_string().contains("store s1 unavailable"));
        let body = r#"{"status":"success","warnings":["PromQL warning: bucket label \"le\" is missing"],"data":{"resultType":"vector","result":[]}}"#;
        assert!(decode_response(URL, 200, body).is_ok());
    }

    #[test]
    fn malformed_samples_are_decode_errors() {
        for body in [
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":{}}}"#,
        ] {
            let err = parse_vector(URL, decode_response(URL, 200, body).unwrap()).unwrap_err();
            assert_eq!(err.reason().as_str(), "decode", "{body}: {err}");
        }
    }

    #[tokio::test]
    async fn unreachable_server_names_the_url() {
        // Bind then drop a listener: the port is (almost surely) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = Client::new(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2)).unwrap();
        let err = c.instant("up", None).await.unwrap_err();
        assert_eq!(err.reason().as_str(), "unreachable");
        assert!(
            err.to_string()
                .contains(&format!("127.0.0.1:{port}/api/v1/query")),
            "{err}"
        );
    }
}
