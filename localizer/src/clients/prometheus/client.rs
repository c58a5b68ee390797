//! The query client: one POST per query, the body read under a size limit
//! and the request's deadline, then decoded once.

use super::decode::{decode_instant, decode_range};
use super::{QueryError, Sample, Series};
use crate::clients::http::{
    body_start, encode_form, error_chain, http_client, read_body, validate_base_url, BodyError,
    ClientError, DEFAULT_MAX_RESPONSE,
};
use std::time::Duration;

/// Bytes of an error answer kept for the log.
const ERROR_BODY_BYTES: usize = 4096;

/// Client for one Prometheus-compatible endpoint.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    timeout: Duration,
    max_response: usize,
}

impl Client {
    /// `base` is the server root as operators write it (`http://prom:9090`,
    /// or with a path prefix such as `http://thanos/query`). Each request,
    /// body included, is bounded by `timeout`; an answer by
    /// [`DEFAULT_MAX_RESPONSE`] bytes unless [`Client::max_response`] says
    /// otherwise.
    pub fn new(base: &str, timeout: Duration) -> Result<Client, ClientError> {
        let base = validate_base_url(base)?;
        let http = http_client(timeout)?;
        Ok(Client {
            base,
            http,
            timeout,
            max_response: DEFAULT_MAX_RESPONSE,
        })
    }

    /// Refuse answers longer than `bytes` ([`QueryError::TooLarge`]).
    pub fn max_response(mut self, bytes: usize) -> Client {
        self.max_response = bytes.max(1);
        self
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
        let (url, status, body) = self.post("/api/v1/query", &form).await?;
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
        let (url, status, body) = self.post("/api/v1/query_range", &form).await?;
        decode_range(&url, status, &body)
    }

    /// POST a form to `path`; the URL, status and whole body of the answer
    /// (an error answer's start only, when it is not JSON).
    async fn post(
        &self,
        path: &str,
        form: &[(&str, String)],
    ) -> Result<(String, u16, Vec<u8>), QueryError> {
        let url = format!("{}{path}", self.base);
        let deadline = tokio::time::Instant::now() + self.timeout;
        let unreachable = |reason: String| QueryError::Unreachable {
            url: url.clone(),
            reason,
        };
        let mut resp = self
            .http
            .post(&url)
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
        match read_body(&mut resp, self.max_response, deadline, self.timeout).await {
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
