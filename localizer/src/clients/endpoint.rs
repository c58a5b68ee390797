//! One server the localizer talks to — a Prometheus-compatible query API
//! or an Alertmanager — with its URL, HTTP client, deadline, answer limit
//! and credentials. The query methods live in [`super::prometheus`] and
//! the posting in [`super::alertmanager`]; this type is what they share.

use super::budget::ByteBudget;
use super::http::{
    has_userinfo, http_client, redact_url, validate_base_url, ClientError, DEFAULT_MAX_RESPONSE,
};
use super::http_config::{Auth, EndpointConfig};
use super::tls;
use std::net::SocketAddr;
use std::time::Duration;

/// How much longer a query request waits than the store is told to work:
/// the time for its timeout answer to travel back.
pub const QUERY_GRACE: Duration = Duration::from_secs(1);

/// One endpoint: where, how long a request may take, how big an answer
/// may be, and how to authenticate. Cheap to clone (the connection pool is
/// shared). Its `Debug` shows the URL redacted, like everything else.
#[derive(Clone)]
pub struct Endpoint {
    /// The root requests go to, userinfo included (reqwest turns it into
    /// basic auth and strips it from the request line).
    base: String,
    /// The root as it is shown: [`redact_url`] of `base`. Every log line,
    /// label, page and error uses this one.
    shown: String,
    http: reqwest::Client,
    timeout: Duration,
    max_response: usize,
    auth: Option<Auth>,
    /// The store-side bound of each query, when set ([`Endpoint::query_timeout`]).
    query_timeout: Option<Duration>,
    /// What the answers read at once may hold together, when bounded
    /// ([`Endpoint::answer_budget`]); shared by the clones.
    budget: Option<ByteBudget>,
}

impl Endpoint {
    /// `base` is the server root as operators write it (`http://prom:9090`,
    /// `https://am:9093`, or with a path prefix such as
    /// `http://thanos/query`); `config` its TLS and credentials. Refused
    /// here, at start, rather than on every request: a URL that is not
    /// http(s), a `tls_config` on an `http` URL (credentials would travel in
    /// clear while the operator believes otherwise), and an `https` URL
    /// whose certificates cannot be set up. Each request, body included,
    /// is bounded by `timeout`; an answer by [`DEFAULT_MAX_RESPONSE`] bytes
    /// unless [`Endpoint::max_response`] says otherwise. What is risky but
    /// allowed (credentials in the URL or over plain http, certificates not
    /// checked) is logged once here; [`Endpoint::check`] builds quietly.
    pub fn new(
        base: &str,
        timeout: Duration,
        config: &EndpointConfig,
    ) -> Result<Endpoint, ClientError> {
        let e = Endpoint::check(base, timeout, config)?;
        let shown = &e.shown;
        let https = e.base.starts_with("https://");
        if has_userinfo(&e.base) {
            tracing::warn!("{shown}: the URL carries credentials; they are used, and hidden from logs, metrics and pages, but any process listing shows them: put them in the endpoint's http config file (basic_auth) instead");
        }
        if !https && (config.auth.is_some() || has_userinfo(&e.base)) {
            tracing::warn!("{shown}: credentials are sent over plain http; use https");
        }
        if https && config.tls.insecure_skip_verify {
            tracing::warn!("{shown}: tls_config.insecure_skip_verify is on: the server's certificate is not checked");
        }
        Ok(e)
    }

    /// [`Endpoint::new`] without its warnings: the start-up check of a
    /// command that builds the endpoint again later.
    pub fn check(
        base: &str,
        timeout: Duration,
        config: &EndpointConfig,
    ) -> Result<Endpoint, ClientError> {
        Endpoint::build(base, timeout, config, None)
    }

    /// [`Endpoint::new`] for one member of the DNS name in `base`: every
    /// request goes to `addr`, TLS still checks the name, and it is shown
    /// (logs, the `alertmanager` label) with `addr` in place of the name.
    pub fn pinned(
        base: &str,
        timeout: Duration,
        config: &EndpointConfig,
        addr: SocketAddr,
    ) -> Result<Endpoint, ClientError> {
        let host = reqwest::Url::parse(base)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .ok_or_else(|| ClientError::NoHost {
                url: redact_url(base),
            })?;
        let mut e = Endpoint::build(base, timeout, config, Some((&host, addr)))?;
        if let Ok(mut shown) = reqwest::Url::parse(&e.shown) {
            if shown.set_ip_host(addr.ip()).is_ok() {
                e.shown = shown.as_str().trim_end_matches('/').to_string();
            }
        }
        Ok(e)
    }

    fn build(
        base: &str,
        timeout: Duration,
        config: &EndpointConfig,
        pin: Option<(&str, SocketAddr)>,
    ) -> Result<Endpoint, ClientError> {
        let base = validate_base_url(base)?;
        let shown = redact_url(&base);
        tls::install_provider();
        let https = base.starts_with("https://");
        if !https && config.has_tls_section {
            return Err(ClientError::TlsForHttp { url: shown });
        }
        let tls = if https {
            Some(
                tls::client_config(&config.tls).map_err(|e| ClientError::Tls {
                    url: shown.clone(),
                    source: e,
                })?,
            )
        } else {
            None
        };
        Ok(Endpoint {
            http: http_client(timeout, tls, pin)?,
            base,
            shown,
            timeout,
            max_response: DEFAULT_MAX_RESPONSE,
            auth: config.auth.clone(),
            query_timeout: None,
            budget: None,
        })
    }

    /// Refuse answers longer than `bytes`.
    pub fn max_response(mut self, bytes: usize) -> Endpoint {
        self.max_response = bytes.max(1);
        self
    }

    /// Bound the answers this endpoint and its clones hold at once by
    /// `budget` (see [`ByteBudget`]): the queries of a cycle run together.
    pub fn with_answer_budget(mut self, budget: ByteBudget) -> Endpoint {
        self.budget = Some(budget);
        self
    }

    /// The shared budget of the answers, when there is one.
    pub fn answer_budget(&self) -> Option<&ByteBudget> {
        self.budget.as_ref()
    }

    /// Bound each query by `t` instead of the endpoint's timeout (which
    /// still bounds connecting): the store is told `t` (the API's `timeout`
    /// parameter) so it stops work the localizer no longer waits for, and
    /// the request waits [`QUERY_GRACE`] longer so the store's own timeout
    /// answer arrives.
    pub fn query_timeout(mut self, t: Duration) -> Endpoint {
        self.query_timeout = Some(t);
        self
    }

    /// The store-side query bound, when set.
    pub fn store_timeout(&self) -> Option<Duration> {
        self.query_timeout
    }

    /// How long a query request may take.
    pub fn request_timeout(&self) -> Duration {
        self.query_timeout.map_or(self.timeout, |t| t + QUERY_GRACE)
    }

    /// The server root as shown, its password redacted (also the metric
    /// label of an Alertmanager).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// The bound of each request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The largest answer read.
    pub fn response_limit(&self) -> usize {
        self.max_response
    }

    /// A POST to `path` under the root, with the credentials read now: the
    /// URL as shown (redacted) and the request, or why the credentials could
    /// not be read.
    pub fn post(&self, path: &str) -> (String, Result<reqwest::RequestBuilder, String>) {
        let req = self.http.post(format!("{}{path}", self.base));
        let url = format!("{}{path}", self.shown);
        let req = match &self.auth {
            None => Ok(req),
            Some(Auth::Basic { username, password }) => password
                .read()
                .map(|p| req.basic_auth(username, Some(p)))
                .map_err(|e| e.to_string()),
            Some(Auth::Header {
                scheme,
                credentials,
            }) => credentials.read().map_err(|e| e.to_string()).and_then(|c| {
                let mut v = reqwest::header::HeaderValue::from_str(&format!("{scheme} {c}"))
                    .map_err(|_| "the credentials are not a valid header value".to_string())?;
                v.set_sensitive(true);
                Ok(req.header(reqwest::header::AUTHORIZATION, v))
            }),
        };
        (url, req)
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.shown)
            .field("timeout", &self.timeout)
            .field("max_response", &self.max_response)
            .field("auth", &self.auth)
            .field("query_timeout", &self.query_timeout)
            .field("budget", &self.budget)
            .finish()
    }
}

/// A hint for answers that mean "who are you?".
pub fn auth_hint(status: u16) -> &'static str {
    match status {
        401 => {
            " (authentication required: check the credentials in the endpoint's http config file)"
        }
        403 => " (forbidden: the credentials are not allowed here)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::http_config::{Secret, TlsSettings};

    #[test]
    fn tls_config_on_plain_http_is_refused() {
        let c = EndpointConfig {
            has_tls_section: true,
            ..Default::default()
        };
        let err = Endpoint::new("http://p:9090", Duration::from_secs(1), &c).unwrap_err();
        assert!(err.to_string().contains("https"), "{err}");
    }

    #[test]
    fn https_with_a_bad_ca_is_refused_at_start() {
        let p = std::env::temp_dir().join(format!("sh-endpoint-ca-{}", std::process::id()));
        std::fs::write(&p, "").unwrap();
        let c = EndpointConfig {
            tls: TlsSettings {
                ca_file: Some(p.clone()),
                ..Default::default()
            },
            has_tls_section: true,
            auth: None,
        };
        let err = Endpoint::new("https://p:9090", Duration::from_secs(1), &c).unwrap_err();
        let _ = std::fs::remove_file(&p);
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn unreadable_credentials_fail_the_request_not_the_process() {
        let c = EndpointConfig {
            auth: Some(Auth::Header {
                scheme: "Bearer".into(),
                credentials: Secret::File("/nonexistent/token".into()),
            }),
            ..Default::default()
        };
        let e = Endpoint::new("http://p:9090", Duration::from_secs(1), &c).unwrap();
        let (url, req) = e.post("/api/v1/query");
        assert_eq!(url, "http://p:9090/api/v1/query");
        assert!(req.unwrap_err().contains("/nonexistent/token"));
    }

    /// Credentials in the URL are used (basic auth, out of the request
    /// line) but never shown: the URL the errors and labels get is
    /// redacted.
    #[test]
    fn credentials_in_the_url_are_used_and_never_shown() {
        let e = Endpoint::new(
            "http://user:s3cret@p:9090/",
            Duration::from_secs(1),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(e.shown_url(), "http://user:***@p:9090");
        assert!(!format!("{e:?}").contains("s3cret"), "{e:?}");
        let (url, req) = e.post("/api/v2/alerts");
        assert_eq!(url, "http://user:***@p:9090/api/v2/alerts");
        let req = req.unwrap().build().unwrap();
        assert_eq!(req.url().as_str(), "http://p:9090/api/v2/alerts");
        let auth = req.headers()[reqwest::header::AUTHORIZATION]
            .to_str()
            .unwrap();
        // base64("user:s3cret")
        assert_eq!(auth, "Basic dXNlcjpzM2NyZXQ=");
    }
}
