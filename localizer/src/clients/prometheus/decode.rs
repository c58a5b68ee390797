//! Decoding an answer of the Prometheus HTTP API, straight from the bytes
//! read: the envelope is parsed once, its `result` kept as a borrowed slice
//! of the body until `resultType` is known, then parsed once more into
//! typed series. No `serde_json::Value` tree and no copy of the body is
//! built, so decoding needs about the body plus the series it yields.
//!
//! These functions take any bytes (the fuzz target `examples/fuzz.rs`
//! feeds them millions): every malformed answer is a [`QueryError`], never
//! a panic.

use super::text::Shared;
use super::{snippet, Labels, QueryError, Sample, Series};
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// Bytes of a body quoted in an error message.
const QUOTED_BYTES: usize = 4096;

/// The generic response envelope of the Prometheus HTTP API. VictoriaMetrics
/// and Thanos add `isPartial`.
#[derive(Debug, Deserialize)]
struct Envelope<'a> {
    status: String,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default, rename = "isPartial")]
    is_partial: bool,
}

/// `data`: the result stays unparsed until its type is known.
#[derive(Debug, Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(borrow)]
    result: &'a RawValue,
}

/// One series of a vector.
#[derive(Deserialize)]
struct VectorItem {
    #[serde(default)]
    metric: Option<Labels>,
    value: Point,
}

/// One series of a matrix.
#[derive(Deserialize)]
struct MatrixItem {
    #[serde(default)]
    metric: Option<Labels>,
    values: Vec<Point>,
}

/// `[timestamp, "value"]`: the API sends values as strings (`"0.5"`,
/// `"NaN"`, `"+Inf"`); a plain number is accepted too.
struct Point(f64, f64);

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Point, D::Error> {
        d.deserialize_seq(PointVisitor)
    }
}

struct PointVisitor;

impl<'de> Visitor<'de> for PointVisitor {
    type Value = Point;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a sample [timestamp, \"value\"]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
        let ts: f64 = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let value: SampleValue = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &self));
        }
        Ok(Point(ts, value.0))
    }
}

struct SampleValue(f64);

impl<'de> Deserialize<'de> for SampleValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SampleValue, D::Error> {
        d.deserialize_any(SampleValueVisitor)
    }
}

struct SampleValueVisitor;

impl Visitor<'_> for SampleValueVisitor {
    type Value = SampleValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a sample value (\"0.5\", \"NaN\", \"+Inf\")")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<SampleValue, E> {
        parse_float(s)
            .map(SampleValue)
            .ok_or_else(|| E::invalid_value(Unexpected::Str(s), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<SampleValue, E> {
        Ok(SampleValue(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<SampleValue, E> {
        Ok(SampleValue(v as f64))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<SampleValue, E> {
        Ok(SampleValue(v as f64))
    }
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

/// The start of a body, as text, for error messages.
fn quote(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(QUOTED_BYTES)]).into_owned()
}

/// Turn an HTTP answer into the `data` of a complete, successful response.
fn decode_response<'a>(url: &str, status: u16, body: &'a [u8]) -> Result<Data<'a>, QueryError> {
    let ok_status = (200..300).contains(&status);
    let env: Envelope<'a> = match serde_json::from_slice(body) {
        Ok(env) => env,
        Err(e) if ok_status => {
            return Err(QueryError::Decode {
                url: url.to_string(),
                reason: format!("{e} (body starts: {})", snippet(&quote(body))),
            })
        }
        Err(_) => {
            return Err(QueryError::Status {
                url: url.to_string(),
                status,
                body: quote(body),
            })
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
    if !ok_status {
        return Err(QueryError::Status {
            url: url.to_string(),
            status,
            body: quote(body),
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

/// Parse the kept `result` as `T`.
fn result_as<'a, T: Deserialize<'a>>(
    url: &str,
    raw: &'a RawValue,
    what: &str,
) -> Result<T, QueryError> {
    serde_json::from_str(raw.get()).map_err(|e| QueryError::Decode {
        url: url.to_string(),
        reason: format!("{what}: {e}"),
    })
}

/// An instant-query answer (`/api/v1/query`): a vector, or a scalar as one
/// sample without labels.
pub fn decode_instant(url: &str, status: u16, body: &[u8]) -> Result<Vec<Sample>, QueryError> {
    let data = decode_response(url, status, body)?;
    let _shared = Shared::begin();
    match data.result_type.as_str() {
        "vector" => {
            let items: Vec<VectorItem> = result_as(url, data.result, "vector result")?;
            Ok(items
                .into_iter()
                .map(|i| Sample {
                    labels: i.metric.unwrap_or_default(),
                    timestamp: i.value.0,
                    value: i.value.1,
                })
                .collect())
        }
        "scalar" => {
            let p: Point = result_as(url, data.result, "scalar result")?;
            Ok(vec![Sample {
                labels: Labels::new(),
                timestamp: p.0,
                value: p.1,
            }])
        }
        other => Err(QueryError::Decode {
            url: url.to_string(),
            reason: format!("expected an instant vector, got resultType {other:?}"),
        }),
    }
}

/// A range-query answer (`/api/v1/query_range`): a matrix.
pub fn decode_range(url: &str, status: u16, body: &[u8]) -> Result<Vec<Series>, QueryError> {
    let data = decode_response(url, status, body)?;
    if data.result_type != "matrix" {
        return Err(QueryError::Decode {
            url: url.to_string(),
            reason: format!(
                "expected a matrix (range result), got resultType {:?}",
                data.result_type
            ),
        });
    }
    let _shared = Shared::begin();
    let items: Vec<MatrixItem> = result_as(url, data.result, "matrix result")?;
    Ok(items
        .into_iter()
        .map(|i| Series {
            labels: i.metric.unwrap_or_default(),
            points: i.values.into_iter().map(|p| (p.0, p.1)).collect(),
        })
        .collect())
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
        let v = decode_instant(URL, 200, body.as_bytes()).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(&v[0].labels["dst_node"], "b");
        assert_eq!(v[0].value, 0.25);
        assert_eq!(v[0].timestamp, 1700000000.5);
        assert!(v[1].value.is_nan());
        assert!(v[2].value.is_infinite());
    }

    #[test]
    fn decodes_scalar_and_matrix() {
        let body = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        let v = decode_instant(URL, 200, body.as_bytes()).unwrap();
        assert_eq!(v[0].value, 3.0);
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"x":"1"},"values":[[1,"1"],[2,"2.5"]]}]}}"#;
        let m = decode_range(URL, 200, body.as_bytes()).unwrap();
        assert_eq!(m[0].points, vec![(1.0, 1.0), (2.0, 2.5)]);
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        let err = decode_instant(URL, 200, body.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("matrix"), "{err}");
    }

    #[test]
    fn api_errors_name_the_url_and_problem() {
        let body = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let err = decode_response(URL, 400, body.as_bytes()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(URL) && msg.contains("bad_data") && msg.contains("char 3"),
            "{msg}"
        );
        assert_eq!(err.reason().as_str(), "api_error");
    }

    #[test]
    fn non_json_answers_are_reported_with_status_and_body() {
        let err = decode_response(URL, 502, b"<html>Bad Gateway</html>").unwrap_err();
        assert_eq!(err.reason().as_str(), "http_status");
        assert!(err.to_string().contains("502") && err.to_string().contains("Bad Gateway"));
        let err = decode_response(URL, 200, b"not json").unwrap_err();
        assert_eq!(err.reason().as_str(), "decode");
        assert!(err.to_string().contains(URL));
    }

    #[test]
    fn partial_answers_are_errors() {
        let body =
            r#"{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(
            decode_response(URL, 200, body.as_bytes())
                .unwrap_err()
                .reason()
                .as_str(),
            "partial"
        );
        let body = r#"{"status":"success","warnings":["store s1 unavailable"],"data":{"resultType":"vector","result":[]}}"#;
        let err = decode_response(URL, 200, body.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("store s1 unavailable"));
        let body = r#"{"status":"success","warnings":["PromQL warning: bucket label \"le\" is missing"],"data":{"resultType":"vector","result":[]}}"#;
        assert!(decode_response(URL, 200, body.as_bytes()).is_ok());
    }

    #[test]
    fn malformed_samples_are_decode_errors() {
        for body in [
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":{}}}"#,
        ] {
            let err = decode_instant(URL, 200, body.as_bytes()).unwrap_err();
            assert_eq!(err.reason().as_str(), "decode", "{body}: {err}");
        }
    }
}
