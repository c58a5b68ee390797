//! How the localizer talks to one endpoint (Prometheus or Alertmanager):
//! TLS and credentials, read from a YAML file in the shape of Prometheus'
//! own `http_config` — the file `promtool --http.config.file` reads — so
//! operators reuse what they already have. Parsed and checked once at
//! start ([`EndpointConfig::load`]); credentials given as files are read
//! again on every request, so rotated tokens are picked up without a
//! restart.
//!
//! ```yaml
//! tls_config: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key,
//!              server_name: prometheus.example, insecure_skip_verify: false,
//!              min_version: TLS12}
//! basic_auth: {username: localizer, password_file: /run/secrets/prom}
//! # or: authorization: {type: Bearer, credentials_file: /run/secrets/token}
//! # or: bearer_token_file: /run/secrets/token
//! ```

use serde::Deserialize;
use skeletonhunter_common::yaml::from_str_or_default;
use std::path::{Path, PathBuf};

/// Largest credentials file read (a token, a password): anything bigger is
/// not a credential.
const MAX_SECRET_BYTES: u64 = 64 << 10;

/// The file as written (unknown keys are errors: a typo such as `ca_fil`
/// must not silently turn certificate checks to the system roots).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileHttpConfig {
    tls_config: Option<FileTls>,
    basic_auth: Option<FileBasicAuth>,
    authorization: Option<FileAuthorization>,
    bearer_token_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileTls {
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    server_name: Option<String>,
    insecure_skip_verify: bool,
    min_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileBasicAuth {
    username: String,
    password: Option<String>,
    password_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileAuthorization {
    #[serde(rename = "type")]
    scheme: Option<String>,
    credentials: Option<String>,
    credentials_file: Option<PathBuf>,
}

/// Lowest TLS version accepted from the server (rustls speaks 1.2 and 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinTls {
    /// TLS 1.2 and 1.3 (Prometheus' default, `TLS12`).
    #[default]
    Tls12,
    /// TLS 1.3 only (`TLS13`).
    Tls13,
}

/// Validated TLS settings; file paths are resolved against the config
/// file's directory and checked readable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM CA bundle that replaces the system roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain and key (both or neither).
    pub client: Option<(PathBuf, PathBuf)>,
    /// Name verified in the server's certificate instead of the URL host.
    pub server_name: Option<String>,
    /// No certificate check at all (logged as a warning at start).
    pub insecure_skip_verify: bool,
    /// Lowest version accepted.
    pub min_version: MinTls,
}

/// A credential given inline or as a file re-read per request.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    /// Written in the config file.
    Inline(String),
    /// Read (whitespace trimmed) on every request.
    File(PathBuf),
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Secret::Inline(_) => f.write_str("Inline(<secret>)"),
            Secret::File(p) => f.debug_tuple("File").field(p).finish(),
        }
    }
}

impl Secret {
    /// The credential now.
    pub fn read(&self) -> Result<String, HttpConfigError> {
        match self {
            Secret::Inline(s) => Ok(s.clone()),
            Secret::File(p) => read_secret(p),
        }
    }
}

/// What goes in the `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `basic_auth`.
    Basic {
        /// The user.
        username: String,
        /// The password.
        password: Secret,
    },
    /// `authorization` or `bearer_token_file`: `<scheme> <credentials>`.
    Header {
        /// `Bearer` unless `authorization.type` says otherwise.
        scheme: String,
        /// The credentials.
        credentials: Secret,
    },
}

/// How to talk to one endpoint: TLS and credentials. The default is plain
/// system-root TLS and no credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointConfig {
    /// TLS settings (used for `https` URLs).
    pub tls: TlsSettings,
    /// Credentials, if any.
    pub auth: Option<Auth>,
    /// Whether the file had a `tls_config` section (refused for `http` URLs).
    pub has_tls_section: bool,
}

/// Why an http_config file is unusable; the caller adds the flag name.
#[derive(Debug, thiserror::Error)]
pub enum HttpConfigError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A credentials file is larger than any credential.
    #[error("{path}: larger than {MAX_SECRET_BYTES} bytes, not a credential")]
    SecretTooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The YAML does not parse or has unknown keys.
    #[error("{path}: {reason}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message (key and line).
        reason: String,
    },
    /// A key's value is refused.
    #[error("{path}: {key}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key, e.g. `tls_config.min_version`.
        key: &'static str,
        /// Why.
        reason: String,
    },
}

impl EndpointConfig {
    /// Read and check `path`: YAML shape, mutually exclusive keys, and
    /// that every file it names can be read now.
    pub fn load(path: &Path) -> Result<EndpointConfig, HttpConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| HttpConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, path, dir)
    }

    /// [`EndpointConfig::load`] on text already read; relative paths are
    /// taken from `dir`, errors name `path`.
    pub fn parse(text: &str, path: &Path, dir: &Path) -> Result<EndpointConfig, HttpConfigError> {
        let file: FileHttpConfig =
            from_str_or_default(text).map_err(|e| HttpConfigError::Yaml {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        let ctx = Ctx { path, dir };
        let has_tls_section = file.tls_config.is_some();
        let tls = ctx.tls(file.tls_config.unwrap_or_default())?;
        let auth = ctx.auth(file.basic_auth, file.authorization, file.bearer_token_file)?;
        Ok(EndpointConfig {
            tls,
            auth,
            has_tls_section,
        })
    }
}

/// Where the file is, for errors and relative paths.
struct Ctx<'a> {
    path: &'a Path,
    dir: &'a Path,
}

impl Ctx<'_> {
    fn invalid(&self, key: &'static str, reason: impl Into<String>) -> HttpConfigError {
        HttpConfigError::Invalid {
            path: self.path.to_path_buf(),
            key,
            reason: reason.into(),
        }
    }

    /// `p` (the value of `key`) against the config file's directory,
    /// checked readable.
    fn file(&self, key: &'static str, p: &Path) -> Result<PathBuf, HttpConfigError> {
        let full = self.dir.join(p);
        std::fs::File::open(&full)
            .map_err(|e| self.invalid(key, format!("cannot read {}: {e}", full.display())))?;
        Ok(full)
    }

    fn tls(&self, t: FileTls) -> Result<TlsSettings, HttpConfigError> {
        let min_version = match t.min_version.as_deref() {
            None | Some("TLS12") => MinTls::Tls12,
            Some("TLS13") => MinTls::Tls13,
            Some(v @ ("TLS10" | "TLS11")) => {
                return Err(self.invalid(
                    "tls_config.min_version",
                    format!("{v} is not supported (TLS 1.2 and 1.3 only); use TLS12 or TLS13"),
                ))
            }
            Some(v) => {
                return Err(self.invalid(
                    "tls_config.min_version",
                    format!("{v:?}: expected TLS12 or TLS13"),
                ))
            }
        };
        let client = match (t.cert_file, t.key_file) {
            (Some(c), Some(k)) => Some((
                self.file("tls_config.cert_file", &c)?,
                self.file("tls_config.key_file", &k)?,
            )),
            (None, None) => None,
            _ => {
                return Err(self.invalid(
                    "tls_config.cert_file",
                    "cert_file and key_file go together (a client certificate needs its key)",
                ))
            }
        };
        if t.server_name.as_deref().is_some_and(str::is_empty) {
            return Err(self.invalid("tls_config.server_name", "empty"));
        }
        Ok(TlsSettings {
            ca_file: t
                .ca_file
                .map(|p| self.file("tls_config.ca_file", &p))
                .transpose()?,
            client,
            server_name: t.server_name,
            insecure_skip_verify: t.insecure_skip_verify,
            min_version,
        })
    }

    fn secret(
        &self,
        key: &'static str,
        inline: Option<String>,
        file: Option<PathBuf>,
    ) -> Result<Secret, HttpConfigError> {
        match (inline, file) {
            (Some(_), Some(_)) => Err(self.invalid(key, "give the value or the file, not both")),
            (Some(s), None) => Ok(Secret::Inline(s)),
            (None, Some(p)) => {
                let p = self.file(key, &p)?;
                read_secret(&p)?;
                Ok(Secret::File(p))
            }
            (None, None) => Err(self.invalid(key, "missing")),
        }
    }

    fn auth(
        &self,
        basic: Option<FileBasicAuth>,
        authz: Option<FileAuthorization>,
        bearer_file: Option<PathBuf>,
    ) -> Result<Option<Auth>, HttpConfigError> {
        let given = [basic.is_some(), authz.is_some(), bearer_file.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(self.invalid(
                "basic_auth",
                "basic_auth, authorization and bearer_token_file are mutually exclusive",
            ));
        }
        if let Some(b) = basic {
            if b.username.is_empty() {
                return Err(self.invalid("basic_auth.username", "missing"));
            }
            let password = self.secret("basic_auth.password", b.password, b.password_file)?;
            return Ok(Some(Auth::Basic {
                username: b.username,
                password,
            }));
        }
        if let Some(a) = authz {
            let scheme = a.scheme.unwrap_or_else(|| "Bearer".to_string());
            if scheme.is_empty() || scheme.contains(char::is_whitespace) {
                return Err(self.invalid("authorization.type", format!("{scheme:?}: one word")));
            }
            if scheme.eq_ignore_ascii_case("basic") {
                return Err(self.invalid("authorization.type", "use basic_auth for Basic"));
            }
            let credentials = self.secret(
                "authorization.credentials",
                a.credentials,
                a.credentials_file,
            )?;
            return Ok(Some(Auth::Header {
                scheme,
                credentials,
            }));
        }
        Ok(bearer_file
            .map(|p| self.secret("bearer_token_file", None, Some(p)))
            .transpose()?
            .map(|credentials| Auth::Header {
                scheme: "Bearer".to_string(),
                credentials,
            }))
    }
}

/// A credentials file, whitespace trimmed, at most [`MAX_SECRET_BYTES`].
fn read_secret(p: &Path) -> Result<String, HttpConfigError> {
    use std::io::Read;
    let read_err = |source| HttpConfigError::Read {
        path: p.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(p).map_err(read_err)?;
    let mut text = String::new();
    f.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(HttpConfigError::SecretTooLarge {
            path: p.to_path_buf(),
        });
    }
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("sh-httpcfg-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("token"), "  abc\n").unwrap();
        std::fs::write(d.join("ca.pem"), "x").unwrap();
        Dir(d)
    }

    fn parse(d: &Dir, text: &str) -> Result<EndpointConfig, HttpConfigError> {
        EndpointConfig::parse(text, &d.0.join("http.yml"), &d.0)
    }

    #[test]
    fn prometheus_shaped_files_are_read() {
        let d = dir("ok");
        let c = parse(
            &d,
            "tls_config: {ca_file: ca.pem, server_name: p.example, min_version: TLS13}\n\
             authorization: {credentials_file: token}\n",
        )
        .unwrap();
        assert_eq!(c.tls.ca_file, Some(d.0.join("ca.pem")));
        assert_eq!(c.tls.min_version, MinTls::Tls13);
        assert_eq!(c.tls.server_name.as_deref(), Some("p.example"));
        let Some(Auth::Header {
            scheme,
            credentials,
        }) = c.auth
        else {
            panic!("no header auth")
        };
        assert_eq!(scheme, "Bearer");
        assert_eq!(credentials.read().unwrap(), "abc");
        let c = parse(&d, "basic_auth: {username: u, password: p}\n").unwrap();
        assert!(matches!(c.auth, Some(Auth::Basic { .. })));
        assert_eq!(parse(&d, "").unwrap(), EndpointConfig::default());
    }

    #[test]
    fn bad_files_name_the_key() {
        let d = dir("bad");
        for (text, want) in [
            ("tls_config: {ca_fil: x}\n", "unknown field"),
            (
                "tls_config: {min_version: TLS10}\n",
                "tls_config.min_version",
            ),
            ("tls_config: {cert_file: ca.pem}\n", "tls_config.cert_file"),
            ("tls_config: {ca_file: nope.pem}\n", "nope.pem"),
            (
                "basic_auth: {username: u, password: p}\nbearer_token_file: token\n",
                "mutually exclusive",
            ),
            (
                "basic_auth: {username: u}\n",
                "basic_auth.password: missing",
            ),
            (
                "authorization: {credentials: a, credentials_file: token}\n",
                "not both",
            ),
            ("bearer_token_file: missing\n", "missing"),
        ] {
            let err = parse(&d, text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
            assert!(err.contains("http.yml"), "{err}");
        }
    }

    #[test]
    fn secrets_are_not_printed() {
        let s = Secret::Inline("hunter2".into());
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
