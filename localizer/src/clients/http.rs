//! What every endpoint shares: the base-URL check, the `reqwest` client
//! with its timeouts, the bounded body reader, the form encoding and error
//! flattening.

use super::budget::{ByteBudget, Held};
use std::time::Duration;

/// Largest answer read from Prometheus unless `--max-response-size` says
/// otherwise (64 MiB: several hundred thousand series).
pub const DEFAULT_MAX_RESPONSE: usize = 64 << 20;

/// Why a response body was not read in full.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is (or announced itself as) longer than the limit; what
    /// arrived was dropped.
    #[error("the answer exceeds the {limit}-byte limit")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The answers read at once together would pass their shared budget
    /// ([`ByteBudget`]); what arrived was dropped.
    #[error("the answers read at once exceed their {budget}-byte budget")]
    OverBudget {
        /// The budget, in bytes.
        budget: usize,
    },
    /// The body did not arrive completely before the request's deadline.
    #[error("the answer did not arrive within {0:?}")]
    TimedOut(Duration),
    /// The connection failed while reading.
    #[error("reading the answer failed: {0}")]
    Read(String),
}

/// A body read in full, with the budget bytes it holds until dropped.
#[derive(Debug)]
pub struct Body {
    bytes: Vec<u8>,
    _held: Held,
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Read a whole body into one buffer of at most `limit` bytes, before
/// `deadline` (`timeout` after the request started), its capacity taken
/// from `held`'s budget as it grows. A `Content-Length` above the limit
/// fails before anything is read; a body without one is read in chunks and
/// abandoned as soon as it passes the limit or the budget, so memory never
/// exceeds the smaller of the two (plus one chunk), however much the
/// server sends.
pub async fn read_body(
    resp: &mut reqwest::Response,
    limit: usize,
    deadline: tokio::time::Instant,
    timeout: Duration,
    mut held: Held,
) -> Result<Body, BodyError> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let expected = resp.content_length().unwrap_or(0) as usize;
    let mut buf = Vec::new();
    reserve(&mut buf, &mut held, expected.min(limit), limit)?;
    loop {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .map_err(|_| BodyError::TimedOut(timeout))?
            .map_err(|e| {
                if e.is_timeout() {
                    BodyError::TimedOut(timeout)
                } else {
                    BodyError::Read(error_chain(&e))
                }
            })?;
        let Some(chunk) = chunk else {
            return Ok(Body {
                bytes: buf,
                _held: held,
            });
        };
        if buf.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        let need = buf.len() + chunk.len();
        reserve(&mut buf, &mut held, need, limit)?;
        buf.extend_from_slice(&chunk);
    }
}

/// Make room in `buf` for `need` bytes, the growth taken from `held`:
/// doubled as a `Vec` grows (up to `limit`) when the budget allows,
/// else exactly `need`.
fn reserve(buf: &mut Vec<u8>, held: &mut Held, need: usize, limit: usize) -> Result<(), BodyError> {
    let cap = buf.capacity();
    if need <= cap {
        return Ok(());
    }
    let doubled = (cap * 2).clamp(need, limit.max(need));
    for want in [doubled, need] {
        if held.grow(want - cap) {
            buf.reserve_exact(want - buf.len());
            return Ok(());
        }
    }
    Err(BodyError::OverBudget {
        budget: held.budget().map_or(usize::MAX, ByteBudget::limit),
    })
}

/// The start of a body (at most `limit` bytes, lossy UTF-8) for an error
/// message; the rest is not read. Never fails: what could not be read is
/// left out.
pub async fn body_start(
    resp: &mut reqwest::Response,
    limit: usize,
    deadline: tokio::time::Instant,
) -> String {
    let mut buf = Vec::new();
    while buf.len() < limit {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = limit - buf.len();
                buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Why a client could not be built; the caller adds the flag name.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL does not parse.
    #[error("invalid URL {url:?}: {reason}")]
    Unparsable {
        /// As given.
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// Not `http` or `https`.
    #[error("invalid URL {url:?}: scheme must be http or https")]
    Scheme {
        /// As given.
        url: String,
    },
    /// No host part.
    #[error("invalid URL {url:?}: no host")]
    NoHost {
        /// As given.
        url: String,
    },
    /// A `?query` or `#fragment` where a server root belongs.
    #[error("invalid URL {url:?}: give the server root without ?query or #fragment")]
    NotARoot {
        /// As given.
        url: String,
    },
    /// A `tls_config` for an `http` URL: the operator expects TLS.
    #[error("{url}: the http config file has a tls_config but the URL is http; use https")]
    TlsForHttp {
        /// The URL.
        url: String,
    },
    /// TLS for an `https` URL cannot be set up.
    #[error("{url}: {source}")]
    Tls {
        /// The URL.
        url: String,
        /// Why.
        source: super::tls::TlsError,
    },
    /// The TLS / HTTP stack refused its configuration.
    #[error("cannot build HTTP client: {0}")]
    Build(reqwest::Error),
}

/// The HTTP client for Prometheus and Alertmanager alike: every request is
/// bounded by `timeout` and names this build in its user agent; `tls` is
/// the rustls configuration of an `https` endpoint; `pin` sends every
/// request for that host to that address (one member of a DNS name), while
/// TLS still checks the certificate against the name.
pub fn http_client(
    timeout: Duration,
    tls: Option<rustls::ClientConfig>,
    pin: Option<(&str, std::net::SocketAddr)>,
) -> Result<reqwest::Client, ClientError> {
    let builder = match tls {
        Some(config) => reqwest::Client::builder().tls_backend_preconfigured(config),
        None => reqwest::Client::builder(),
    };
    let builder = match pin {
        Some((host, addr)) => builder.resolve(host, addr),
        None => builder,
    };
    builder
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .user_agent(concat!(
            "skeletonhunter-localizer/",
            env!("CARGO_PKG_VERSION")
        ))
        .build()
        .map_err(ClientError::Build)
}

/// What stands for a password (or a user name alone, which may be a
/// token) wherever a URL is shown.
pub const REDACTED: &str = "***";

/// `url` as it may be shown — in a log line, a label, a page, an error —:
/// the password of its userinfo replaced by [`REDACTED`]
/// (`http://user:***@host`), or the whole userinfo when it has no password
/// (`http://***@host`: a lone user name is often a token). Works on the
/// text, so a URL that does not parse is redacted too; anything without
/// userinfo comes back unchanged.
pub fn redact_url(url: &str) -> String {
    let Some((scheme_end, at)) = userinfo_span(url) else {
        return url.to_string();
    };
    let shown_user = match url[scheme_end..at].split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => REDACTED.to_string(),
    };
    format!("{}{shown_user}{}", &url[..scheme_end], &url[at..])
}

/// Whether `url` carries a user name or password (`scheme://user:pw@host`).
pub fn has_userinfo(url: &str) -> bool {
    userinfo_span(url).is_some()
}

/// Where the userinfo of `url` starts (after `://`, or at the start when
/// the scheme is missing) and where its `@` is.
fn userinfo_span(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    authority.rfind('@').map(|at| (start, start + at))
}

/// Check the base URL early so a typo fails at start-up, not every cycle.
/// Errors show the URL redacted ([`redact_url`]).
pub fn validate_base_url(base: &str) -> Result<String, ClientError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url_of = || redact_url(base);
    let url = reqwest::Url::parse(trimmed).map_err(|e| ClientError::Unparsable {
        url: url_of(),
        reason: e.to_string(),
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ClientError::Scheme { url: url_of() });
    }
    if url.host_str().is_none() {
        return Err(ClientError::NoHost { url: url_of() });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ClientError::NotARoot { url: url_of() });
    }
    Ok(trimmed.to_string())
}

/// reqwest errors hide the useful part (connection refused, timed out) in
/// their source chain; flatten it into one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        src = s.source();
    }
    out
}

/// `application/x-www-form-urlencoded` encoding (RFC 3986 unreserved kept,
/// everything else percent-encoded) — PromQL is full of `{}"=~` characters.
pub fn encode_form(pairs: &[(&str, String)]) -> String {
    fn enc(s: &str, out: &mut String) {
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    out.push(b as char);
                }
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
    }
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        enc(k, &mut out);
        out.push('=');
        enc(v, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding_escapes_promql() {
        let s = encode_form(&[
            ("query", "sum(x{a=~\"b|c\"}) / 2".into()),
            ("time", "1.5".into()),
        ]);
        assert_eq!(
            s,
            "query=sum%28x%7Ba%3D~%22b%7Cc%22%7D%29%20%2F%202&time=1.5"
        );
    }

    #[test]
    fn base_urls_are_validated() {
        assert_eq!(
            validate_base_url("http://p:9090/").unwrap(),
            "http://p:9090"
        );
        assert_eq!(
            validate_base_url("http://t/query").unwrap(),
            "http://t/query"
        );
        for bad in ["prom:9090", "ftp://p", "http://p/?x=1", ""] {
            let err = validate_base_url(bad).unwrap_err().to_string();
            assert!(err.contains("invalid URL"), "{bad}: {err}");
        }
    }

    fn response(body: Vec<u8>) -> reqwest::Response {
        reqwest::Response::from(hyper::Response::new(body))
    }

    /// A body is read within the budget it shares, holds its bytes until
    /// dropped, and is refused (holding nothing) when the budget is short.
    #[tokio::test]
    async fn bodies_hold_their_bytes_from_the_shared_budget() {
        let budget = ByteBudget::new(300_000);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let t = Duration::from_secs(5);
        let read = |n: usize| {
            let budget = budget.clone();
            async move {
                read_body(
                    &mut response(vec![b'x'; n]),
                    1 << 20,
                    deadline,
                    t,
                    budget.hold(),
                )
                .await
            }
        };
        let first = read(200_000).await.unwrap();
        assert_eq!(first.len(), 200_000);
        assert!(budget.held() >= 200_000);
        let err = read(200_000).await.unwrap_err();
        assert!(
            matches!(err, BodyError::OverBudget { budget: 300_000 }),
            "{err}"
        );
        drop(first);
        assert_eq!(budget.held(), 0);
        assert!(read(200_000).await.is_ok(), "the budget was given back");
        let err = read(2 << 20).await.unwrap_err();
        assert!(matches!(err, BodyError::TooLarge { .. }), "{err}");
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn shown_urls_carry_no_password() {
        for (url, shown) in [
            ("http://user:pw@host:9090/p", "http://user:***@host:9090/p"),
            ("https://tok@host", "https://***@host"),
            ("http://u:p@ss:w@host?x#y", "http://u:***@host?x#y"),
            ("http://host/a@b", "http://host/a@b"),
            ("http://host:9090", "http://host:9090"),
            ("u:pw@host:9090", "u:***@host:9090"),
            ("http://u:pw@[::1]:9", "http://u:***@[::1]:9"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
            assert_eq!(has_userinfo(url), url != shown, "{url}");
        }
        // A URL that is refused is shown redacted in the error too.
        let err = validate_base_url("ftp://u:secret@p")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("secret") && err.contains("u:***@p"), "{err}");
        let err = validate_base_url("http://u:secret@")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
