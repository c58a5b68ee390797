//! The web configuration file: the exporter-toolkit format every Prometheus
//! exporter reads (`--web.config.file`), parsed strictly. Unknown keys are
//! refused with their name, as the toolkit does, so a typo never leaves an
//! endpoint open. Pure: text in, [`WebConfig`] out; no file but the one
//! named is read here (certificates are read by `tls`).

use super::error::WebConfigError;
use crate::duration;
use crate::yaml::from_str_or_default;
use hyper::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// The file as written (field names are the toolkit's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    tls_server_config: Option<RawTls>,
    #[serde(default)]
    http_server_config: Option<RawHttp>,
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, String>>,
    #[serde(default)]
    rate_limit: Option<RawRateLimit>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    /// Accepted for portability and ignored: the server speaks HTTP/1.1.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    interval: Option<String>,
    burst: Option<u32>,
}

/// A PEM document: a file (re-read when it changes) or inline text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    /// `*_file`, made absolute against the web config's directory.
    File(PathBuf),
    /// `cert`, `key` or `client_ca` given inline.
    Inline(String),
}

/// `client_auth_type`. The toolkit's `RequestClientCert` and
/// `RequireAnyClientCert` accept certificates nobody verified, which is no
/// authentication at all; they are refused rather than silently weakened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default): no client certificate asked for.
    None,
    /// `VerifyClientCertIfGiven`: optional, verified against the client CA.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`: mandatory, verified (mutual TLS).
    RequireAndVerify,
}

/// A TLS protocol version (`TLS12`, `TLS13`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// `tls_server_config`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The server's certificate chain.
    pub cert: Pem,
    /// The server's private key.
    pub key: Pem,
    /// CAs that client certificates must chain to.
    pub client_ca: Option<Pem>,
    /// Whether and how client certificates are required.
    pub client_auth: ClientAuth,
    /// Lowest version accepted.
    pub min_version: TlsVersion,
    /// Highest version accepted.
    pub max_version: TlsVersion,
    /// TLS 1.2 suites allowed, by IANA name; empty: all the provider has.
    pub cipher_suites: Vec<String>,
    /// Key-exchange groups in preference order (toolkit names); empty: default.
    pub curve_preferences: Vec<String>,
    /// Pick the cipher suite by the server's order, not the client's.
    pub prefer_server_cipher_suites: bool,
}

impl TlsSettings {
    /// Files this configuration reads, for change detection.
    pub fn files(&self) -> Vec<PathBuf> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|p| match p {
                Pem::File(f) => Some(f.clone()),
                Pem::Inline(_) => None,
            })
            .collect()
    }
}

/// `rate_limit`: a token bucket over every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Time for one token to come back.
    pub interval: Duration,
    /// Tokens saved up at most.
    pub burst: u32,
}

/// A web configuration, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebConfig {
    /// `None`: plain HTTP.
    pub tls: Option<TlsSettings>,
    /// User name to bcrypt hash; empty: no authentication.
    pub users: BTreeMap<String, String>,
    /// Headers added to every response.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `None`: no rate limit.
    pub rate_limit: Option<RateLimit>,
}

/// The response headers the toolkit lets operators set, with the values
/// allowed where the header is an enumeration (kept identical so files are
/// portable between exporters).
const HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

type Result<T> = std::result::Result<T, WebConfigError>;

/// Parse the text of the web configuration at `path` (relative file names
/// in it are taken from `path`'s directory, as the toolkit does).
pub fn parse(path: &Path, text: &str) -> Result<WebConfig> {
    let raw: RawFile = from_str_or_default(text).map_err(|e| WebConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let bad = |key: &str, why: String| WebConfigError::invalid(path, key, why);
    let dir = path.parent().unwrap_or(Path::new("."));
    let tls = match raw.tls_server_config {
        Some(t) => tls(t, dir).map_err(|(k, why)| bad(&k, why))?,
        None => None,
    };
    let users = raw.basic_auth_users.unwrap_or_default();
    for (user, hash) in &users {
        bcrypt_hash(hash).map_err(|why| bad(&format!("basic_auth_users.{user}"), why))?;
    }
    let http = raw.http_server_config.unwrap_or_default();
    let headers = headers(http.headers.unwrap_or_default()).map_err(|(k, why)| bad(&k, why))?;
    let rate_limit = match raw.rate_limit {
        Some(r) => rate_limit(r).map_err(|(k, why)| bad(&k, why))?,
        None => None,
    };
    Ok(WebConfig {
        tls,
        users,
        headers,
        rate_limit,
    })
}

/// A refused value: its key below the top level and why.
type KeyError = (String, String);

fn key_err(key: &str, why: impl Into<String>) -> KeyError {
    (key.to_string(), why.into())
}

fn pem(
    dir: &Path,
    key: &str,
    inline: Option<String>,
    file: Option<String>,
) -> std::result::Result<Option<Pem>, KeyError> {
    let file = file.filter(|f| !f.is_empty());
    let inline = inline.filter(|s| !s.is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => Err(key_err(
            &format!("tls_server_config.{key}"),
            format!("give either {key} or {key}_file, not both"),
        )),
        (Some(s), None) => Ok(Some(Pem::Inline(s))),
        (None, Some(f)) => Ok(Some(Pem::File(dir.join(f)))),
        (None, None) => Ok(None),
    }
}

fn tls(t: RawTls, dir: &Path) -> std::result::Result<Option<TlsSettings>, KeyError> {
    if t.client_allowed_sans.is_some() {
        return Err(key_err(
            "tls_server_config.client_allowed_sans",
            "not supported here: issue the allowed clients from a dedicated client_ca_file instead",
        ));
    }
    let cert = pem(dir, "cert", t.cert, t.cert_file)?;
    let key = pem(dir, "key", t.key, t.key_file)?;
    let client_ca = pem(dir, "client_ca", t.client_ca, t.client_ca_file)?;
    let auth_given = t.client_auth_type.as_deref().is_some_and(|s| !s.is_empty());
    if cert.is_none() && key.is_none() && client_ca.is_none() && !auth_given {
        return Ok(None); // an empty section: plain HTTP, as the toolkit
    }
    let cert = cert.ok_or_else(|| {
        key_err(
            "tls_server_config.cert_file",
            "missing one of cert or cert_file",
        )
    })?;
    let key = key.ok_or_else(|| {
        key_err(
            "tls_server_config.key_file",
            "missing one of key or key_file",
        )
    })?;
    let client_auth = client_auth(t.client_auth_type.as_deref().unwrap_or(""))?;
    match (client_auth, &client_ca) {
        (ClientAuth::None, Some(_)) => {
            return Err(key_err(
                "tls_server_config.client_auth_type",
                "a client CA is configured without a client auth policy (use RequireAndVerifyClientCert)",
            ))
        }
        (ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify, None) => {
            return Err(key_err(
                "tls_server_config.client_ca_file",
                "client certificates are verified against it: give client_ca_file (or client_ca)",
            ))
        }
        _ => {}
    }
    let min_version = version("min_version", t.min_version, TlsVersion::Tls12)?;
    let max_version = version("max_version", t.max_version, TlsVersion::Tls13)?;
    if min_version > max_version {
        return Err(key_err(
            "tls_server_config.min_version",
            "is above max_version",
        ));
    }
    Ok(Some(TlsSettings {
        cert,
        key,
        client_ca,
        client_auth,
        min_version,
        max_version,
        cipher_suites: t.cipher_suites.unwrap_or_default(),
        curve_preferences: t.curve_preferences.unwrap_or_default(),
        prefer_server_cipher_suites: t.prefer_server_cipher_suites.unwrap_or(true),
    }))
}

fn client_auth(s: &str) -> std::result::Result<ClientAuth, KeyError> {
    let key = "tls_server_config.client_auth_type";
    match s {
        "" | "NoClientCert" => Ok(ClientAuth::None),
        "VerifyClientCertIfGiven" => Ok(ClientAuth::VerifyIfGiven),
        "RequireAndVerifyClientCert" => Ok(ClientAuth::RequireAndVerify),
        "RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert" => Err(key_err(
            key,
            format!("{s:?} accepts certificates nobody verified; use RequireAndVerifyClientCert"),
        )),
        other => Err(key_err(
            key,
            format!("{other:?} is not one of NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"),
        )),
    }
}

fn version(
    key: &str,
    v: Option<String>,
    default: TlsVersion,
) -> std::result::Result<TlsVersion, KeyError> {
    let key = format!("tls_server_config.{key}");
    match v.as_deref().unwrap_or("") {
        "" => Ok(default),
        "TLS12" => Ok(TlsVersion::Tls12),
        "TLS13" => Ok(TlsVersion::Tls13),
        s @ ("TLS10" | "TLS11") => Err(key_err(
            &key,
            format!("{s} is not supported (only TLS12 and TLS13 are implemented)"),
        )),
        s => Err(key_err(&key, format!("{s:?} is not one of TLS12, TLS13"))),
    }
}

fn headers(
    h: BTreeMap<String, String>,
) -> std::result::Result<Vec<(HeaderName, HeaderValue)>, KeyError> {
    let mut out = Vec::with_capacity(h.len());
    for (name, value) in h {
        let key = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = HEADERS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = HEADERS.iter().map(|(n, _)| *n).collect();
            return Err(key_err(
                &key,
                format!(
                    "this header can not be configured (allowed: {})",
                    names.join(", ")
                ),
            ));
        };
        if value.is_empty() {
            continue; // "unset if blank"
        }
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(key_err(
                &key,
                format!("{value:?} is not one of {allowed:?}"),
            ));
        }
        let v =
            HeaderValue::from_str(&value).map_err(|_| key_err(&key, "not a valid header value"))?;
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| key_err(&key, "not a header name"))?;
        out.push((n, v));
    }
    Ok(out)
}

fn rate_limit(r: RawRateLimit) -> std::result::Result<Option<RateLimit>, KeyError> {
    let interval = match r.interval.as_deref() {
        None | Some("") => Duration::ZERO,
        Some(s) => duration::parse(s).map_err(|e| key_err("rate_limit.interval", e.to_string()))?,
    };
    if interval.is_zero() {
        return Ok(None); // "set to 0 to disable"
    }
    let burst = r.burst.unwrap_or(0);
    if burst == 0 {
        return Err(key_err(
            "rate_limit.burst",
            "must be at least 1 when rate_limit.interval is set",
        ));
    }
    Ok(Some(RateLimit { interval, burst }))
}

/// The costs bcrypt verifies: any other hash parses but fails every login
/// (401, nothing logged), so it is refused at load.
const BCRYPT_COSTS: std::ops::RangeInclusive<u32> = 4..=31;

/// A usable bcrypt hash, or why not.
fn bcrypt_hash(hash: &str) -> std::result::Result<(), String> {
    let how = "make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'";
    let parts =
        bcrypt::HashParts::from_str(hash).map_err(|_| format!("not a bcrypt hash ({how})"))?;
    let cost = parts.get_cost();
    if !BCRYPT_COSTS.contains(&cost) {
        return Err(format!(
            "bcrypt cost {cost} is outside {}..={}, so no password would ever match ({how})",
            BCRYPT_COSTS.start(),
            BCRYPT_COSTS.end()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG";

    fn p(text: &str) -> Result<WebConfig> {
        parse(Path::new("/etc/sh/web.yml"), text)
    }

    /// The error text of `text`, which must be refused.
    fn refused(text: &str) -> String {
        match p(text) {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_toolkit_sample_is_accepted() {
        let c = p(&format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
             min_version: TLS12\n  max_version: TLS13\n  prefer_server_cipher_suites: false\n  \
             cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [X25519]\n\
             http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n    \
             Strict-Transport-Security: max-age=31536000\n    X-XSS-Protection: ''\n\
             basic_auth_users:\n  prometheus: '{HASH}'\n\
             rate_limit:\n  interval: 100ms\n  burst: 10\n"
        ))
        .unwrap();
        let t = c.tls.unwrap();
        assert_eq!(
            t.cert,
            Pem::File("/etc/sh/server.crt".into()),
            "relative to the file"
        );
        assert_eq!(t.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(t.files().len(), 3);
        assert!(!t.prefer_server_cipher_suites);
        assert_eq!(c.users["prometheus"], HASH);
        assert_eq!(c.headers.len(), 2, "blank headers are unset");
        assert_eq!(c.headers[1].0.as_str(), "x-frame-options");
        assert_eq!(
            c.rate_limit,
            Some(RateLimit {
                interval: Duration::from_millis(100),
                burst: 10
            })
        );
    }

    #[test]
    fn empty_files_and_sections_mean_plain_open_http() {
        assert_eq!(p("").unwrap(), WebConfig::default());
        assert_eq!(p("tls_server_config: {}\n").unwrap(), WebConfig::default());
        assert_eq!(p("rate_limit:\n  interval: 0s\n").unwrap().rate_limit, None);
    }

    #[test]
    fn unknown_keys_are_named() {
        for (text, key) in [
            ("tls_server_confg: {}\n", "tls_server_confg"),
            ("tls_server_config:\n  cert_fille: a\n", "cert_fille"),
            ("http_server_config:\n  header: {}\n", "header"),
            ("rate_limit:\n  every: 1s\n", "every"),
        ] {
            let e = refused(text);
            assert!(e.contains(key) && e.contains("/etc/sh/web.yml"), "{e}");
        }
    }

    #[test]
    fn every_bad_value_names_its_key() {
        let tls = "tls_server_config:\n  cert_file: c\n  key_file: k\n";
        for (text, key, why) in [
            (
                "tls_server_config:\n  key_file: k\n",
                "tls_server_config.cert_file",
                "missing",
            ),
            (
                "tls_server_config:\n  cert_file: c\n",
                "tls_server_config.key_file",
                "missing",
            ),
            (
                "tls_server_config:\n  cert: x\n  cert_file: c\n  key_file: k\n",
                "tls_server_config.cert",
                "not both",
            ),
            (
                &format!("{tls}  client_auth_type: Sometimes\n"),
                "client_auth_type",
                "Sometimes",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAnyClientCert\n  client_ca_file: a\n"),
                "client_auth_type",
                "verified",
            ),
            (
                &format!("{tls}  client_ca_file: ca\n"),
                "client_auth_type",
                "without a client auth policy",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
                "client_ca_file",
                "give client_ca_file",
            ),
            (
                &format!("{tls}  min_version: TLS10\n"),
                "min_version",
                "not supported",
            ),
            (
                &format!("{tls}  max_version: SSL3\n"),
                "max_version",
                "SSL3",
            ),
            (
                &format!("{tls}  min_version: TLS13\n  max_version: TLS12\n"),
                "min_version",
                "above",
            ),
            (
                &format!("{tls}  client_allowed_sans: [a]\n"),
                "client_allowed_sans",
                "not supported",
            ),
            (
                "basic_auth_users:\n  bob: plaintext\n",
                "basic_auth_users.bob",
                "bcrypt",
            ),
            (
                &format!(
                    "basic_auth_users:\n  eve: '{}'\n",
                    HASH.replace("$10$", "$99$")
                ),
                "basic_auth_users.eve",
                "cost 99 is outside 4..=31",
            ),
            (
                &format!(
                    "basic_auth_users:\n  eve: '{}'\n",
                    HASH.replace("$10$", "$03$")
                ),
                "basic_auth_users.eve",
                "cost 3 is outside",
            ),
            (
                "http_server_config:\n  headers:\n    Server: x\n",
                "headers.Server",
                "can not be configured",
            ),
            (
                "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
                "X-Frame-Options",
                "allow",
            ),
            (
                "rate_limit:\n  interval: soon\n",
                "rate_limit.interval",
                "soon",
            ),
            (
                "rate_limit:\n  interval: 1s\n",
                "rate_limit.burst",
                "at least 1",
            ),
        ] {
            let e = refused(text);
            assert!(
                e.contains(key) && e.contains(why) && e.contains("web.yml"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn not_yaml_is_refused_with_the_file() {
        let e = refused("tls_server_config: [\n");
        assert!(e.starts_with("web config /etc/sh/web.yml: "), "{e}");
    }
}
