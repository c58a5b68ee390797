//! The query client: one POST per query, the body read under a size limit
//! and the request's deadline, then decoded once.

use super::decode::{decode_instant, decode_range};
use super::{QueryError, Sample, Series};
use crate::clients::budget::ByteBudget;
use crate::clients::endpoint::Endpoint;
use crate::clients::http::{body_start, encode_form, error_chain, read_body, Body, BodyError};
use skeletonhunter_common::duration;
use std::time::Duration;

/// Bytes of an error answer kept for the log.
const ERROR_BODY_BYTES: usize = 4096;

/// The Prometheus query API on an [`Endpoint`]; answers are bounded by
/// [`Endpoint::max_response`] ([`QueryError::TooLarge`]) and, together,
/// by [`Endpoint::answer_budget`] ([`QueryError::OverBudget`]).
impl Endpoint {
    /// Evaluate `query` as an instant vector at `time` (seconds since the
    /// epoch; `None` = the server's now). A scalar result comes back as one
    /// sample without labels.
    pub async fn instant(&self, query: &str, time: Option<f64>) -> Result<Vec<Sample>, QueryError> {
        let mut form = vec![("query", query.to_string())];
        if let Some(t) = time {
            form.push(("time", format_time(t)));
        }
        self.push_timeout(&mut form);
        let (url, status, body) = self.post_form("/api/v1/query", &form).await?;
        decode_instant(&url, status, &body).map_err(|e| self.store_timed_out(e))
    }

    /// Evaluate `query` over `[start, end]` every `step`.
    pub async fn range(
        &self,
        query: &str,
        start: f64,
        end: f64,
        step: Duration,
    ) -> Result<Vec<Series>, QueryError> {
        let mut form = vec![
            ("query", query.to_string()),
            ("start", format_time(start)),
            ("end", format_time(end)),
            ("step", format!("{}", step.as_secs_f64())),
        ];
        self.push_timeout(&mut form);
        let (url, status, body) = self.post_form("/api/v1/query_range", &form).await?;
        decode_range(&url, status, &body).map_err(|e| self.store_timed_out(e))
    }

    /// The store's own "timed out" answer (Prometheus' `errorType`
    /// `timeout`) as the [`QueryError::Timeout`] it is.
    fn store_timed_out(&self, e: QueryError) -> QueryError {
        match e {
            QueryError::Api {
                url, error_type, ..
            } if error_type == "timeout" => QueryError::Timeout {
                url,
                timeout: self.store_timeout().unwrap_or(self.request_timeout()),
            },
            e => e,
        }
    }

    /// The store-side bound, when set (the API's `timeout` parameter).
    fn push_timeout(&self, form: &mut Vec<(&str, String)>) {
        if let Some(t) = self.store_timeout() {
            form.push((
                "timeout",
                duration::to_promql(t.max(Duration::from_millis(1))),
            ));
        }
    }

    /// POST a form to `path`; the URL, status and whole body of the answer
    /// (an error answer's start only, when it is not JSON).
    async fn post_form(
        &self,
        path: &str,
        form: &[(&str, String)],
    ) -> Result<(String, u16, Body), QueryError> {
        let timeout = self.request_timeout();
        let deadline = tokio::time::Instant::now() + timeout;
        let (url, req) = self.post(path);
        let unreachable = |reason: String| QueryError::Unreachable {
            url: url.clone(),
            reason,
        };
        let timed_out = || QueryError::Timeout {
            url: url.clone(),
            timeout: self.store_timeout().unwrap_or(timeout),
        };
        let mut resp = req
            .map_err(&unreachable)?
            .timeout(timeout)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(encode_form(form))
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    timed_out()
                } else {
                    unreachable(error_chain(&e))
                }
            })?;
        let status = resp.status().as_u16();
        let is_json = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("json"));
        if !(200..300).contains(&status) && !is_json {
            // A proxy's error page: its start is all the log needs.
            let body = body_start(&mut resp, ERROR_BODY_BYTES, deadline).await;
            return Err(QueryError::Status { url, status, body });
        }
        let limit = self.response_limit();
        let held = self
            .answer_budget()
            .map(ByteBudget::hold)
            .unwrap_or_default();
        match read_body(&mut resp, limit, deadline, timeout, held).await {
            Ok(body) => Ok((url, status, body)),
            Err(BodyError::TooLarge { limit }) => Err(QueryError::TooLarge { url, limit }),
            Err(BodyError::OverBudget { budget }) => Err(QueryError::OverBudget { url, budget }),
            Err(BodyError::TimedOut(_)) => Err(timed_out()),
            Err(e) => Err(unreachable(e.to_string())),
        }
    }
}

/// Seconds since the epoch with millisecond precision, as the API accepts.
fn format_time(t: f64) -> String {
    format!("{t:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The store is told the query's bound, and its "timed out" answer
    /// (Prometheus: HTTP 503, errorType timeout) is a timeout naming it.
    #[tokio::test]
    async fn the_store_is_told_the_query_timeout_and_its_timeout_is_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut b = [0u8; 4096];
            // Head and the short form body, until the form's last field.
            while !String::from_utf8_lossy(&req).contains("timeout=") {
                let n = s.read(&mut b).await.unwrap();
                assert!(n > 0, "request ended early");
                req.extend_from_slice(&b[..n]);
            }
            let body = r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#;
            let head = format!(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(body.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&req).into_owned()
        });
        let c = Endpoint::new(
            &format!("http://{addr}"),
            Duration::from_secs(5),
            &Default::default(),
        )
        .unwrap()
        .query_timeout(Duration::from_millis(2500));
        let err = c.instant("up", Some(1.0)).await.unwrap_err();
        let req = server.await.unwrap();
        assert!(req.contains("timeout=2500ms"), "{req}");
        assert_eq!(err.reason().as_str(), "timeout", "{err}");
        assert!(err.to_string().contains("within 2.5s"), "{err}");
    }

    #[tokio::test]
    async fn unreachable_server_names_the_url() {
        // Bind then drop a listener: the port is (almost surely) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = Endpoint::new(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_secs(2),
            &Default::default(),
        )
        .unwrap();
        let err = c.instant("up", None).await.unwrap_err();
        assert_eq!(err.reason().as_str(), "unreachable");
        assert!(
            err.to_string()
                .contains(&format!("127.0.0.1:{port}/api/v1/query")),
            "{err}"
        );
    }
}
