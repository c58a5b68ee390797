//! The query client: one POST per query, the body read under a size limit
//! and the request's deadline, then decoded once.

use super::decode::{decode_instant, decode_range};
use super::{QueryError, Sample, Series};
use crate::clients::endpoint::Endpoint;
use crate::clients::http::{body_start, encode_form, error_chain, read_body, BodyError};
use std::time::Duration;

/// Bytes of an error answer kept for the log.
const ERROR_BODY_BYTES: usize = 4096;

/// The Prometheus query API on an [`Endpoint`]; answers are bounded by
/// [`Endpoint::max_response`] ([`QueryError::TooLarge`]).
impl Endpoint {
    /// Evaluate `query` as an instant vector at `time` (seconds since the
    /// epoch; `None` = the server's now). A scalar result comes back as one
    /// sample without labels.
    pub async fn instant(&self, query: &str, time: Option<f64>) -> Result<Vec<Sample>, QueryError> {
        let mut form = vec![("query", query.to_string())];
        if let Some(t) = time {
            form.push(("time", format_time(t)));
        }
        let (url, status, body) = self.post_form("/api/v1/query", &form).await?;
        decode_instant(&url, status, &body)
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
        let (url, status, body) = self.post_form("/api/v1/query_range", &form).await?;
        decode_range(&url, status, &body)
    }

    /// POST a form to `path`; the URL, status and whole body of the answer
    /// (an error answer's start only, when it is not JSON).
    async fn post_form(
        &self,
        path: &str,
        form: &[(&str, String)],
    ) -> Result<(String, u16, Vec<u8>), QueryError> {
        let deadline = tokio::time::Instant::now() + self.timeout();
        let (url, req) = self.post(path);
        let unreachable = |reason: String| QueryError::Unreachable {
            url: url.clone(),
            reason,
        };
        let mut resp = req
            .map_err(&unreachable)?
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(encode_form(form))
            .send()
            .await
            .map_err(|e| unreachable(error_chain(&e)))?;
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
        match read_body(&mut resp, limit, deadline, self.timeout()).await {
            Ok(body) => Ok((url, status, body)),
            Err(BodyError::TooLarge { limit }) => Err(QueryError::TooLarge { url, limit }),
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
