//! The web configuration as the server sees it: loaded at start (a bad
//! file stops the binary), then re-read whenever the file or a
//! certificate it names changes. Like the exporter toolkit, which re-reads
//! per request and per TLS handshake, every request and handshake looks
//! at the files' change stamps (a few `stat` calls), so a rotated
//! certificate or a new password is used by the next connection without a
//! restart. A file that no longer loads is not served past: requests get
//! 500 and handshakes fail until it is fixed (fail closed).

use super::auth::Authenticator;
use super::error::WebConfigError;
use super::file::{self, RateLimit, WebConfig};
use super::tls;
use crate::ratelimit::TokenBucket;
use hyper::header::{HeaderName, HeaderValue};
use rustls::ServerConfig;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A loaded web configuration with its TLS set-up built.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: WebConfig,
    /// `Some` when `tls_server_config` is set.
    pub tls: Option<Arc<ServerConfig>>,
}

/// What identifies a version of a file: a rewrite, a rename over it or a
/// `touch` all change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

type Current = Result<Arc<Loaded>, Arc<WebConfigError>>;

#[derive(Debug)]
struct State {
    /// The web config file, then the files it names.
    files: Vec<PathBuf>,
    stamps: Vec<Option<Stamp>>,
    current: Current,
}

/// Why a request is refused before its handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The web configuration does not load (500).
    Broken,
    /// Over `rate_limit` (429).
    TooMany,
    /// Missing or wrong credentials (401 with `WWW-Authenticate: Basic`).
    Unauthorized,
}

/// The verdict on one request: the headers every response gets, and
/// whether the request may go on.
#[derive(Debug, Clone)]
pub struct Gate {
    /// `http_server_config.headers`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `None`: serve the request.
    pub refusal: Option<Refusal>,
}

/// The server side of `--web.config.file`.
pub struct WebSource {
    path: PathBuf,
    tls_at_start: bool,
    state: Mutex<State>,
    auth: Authenticator,
    limiter: Mutex<Option<(RateLimit, TokenBucket)>>,
}

/// Names the file and the mode only: the configuration holds password
/// hashes and perhaps an inline private key, and `--check-config` prints.
impl std::fmt::Debug for WebSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSource")
            .field("path", &self.path)
            .field("tls", &self.tls_at_start)
            .finish_non_exhaustive()
    }
}

fn load(path: &Path) -> Result<Loaded, WebConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = file::parse(path, &text)?;
    let tls = match &config.tls {
        Some(t) => Some(tls::server_config(path, t)?),
        None => None,
    };
    Ok(Loaded { config, tls })
}

fn files_of(path: &Path, c: &Current) -> Vec<PathBuf> {
    let mut files = vec![path.to_path_buf()];
    if let Ok(l) = c {
        files.extend(l.config.tls.iter().flat_map(file::TlsSettings::files));
    }
    files
}

impl WebSource {
    /// Load the web configuration at `path`; any error stops here, with
    /// the file and key named.
    pub fn open(path: &Path) -> Result<WebSource, WebConfigError> {
        let before = stamp(path);
        let loaded = Arc::new(load(path)?);
        let current: Current = Ok(loaded.clone());
        let files = files_of(path, &current);
        let mut stamps: Vec<_> = files.iter().map(|f| stamp(f)).collect();
        if stamps[0] != before {
            stamps[0] = None; // changed while read: read again at first use
        }
        Ok(WebSource {
            path: path.to_path_buf(),
            tls_at_start: loaded.tls.is_some(),
            state: Mutex::new(State {
                files,
                stamps,
                current,
            }),
            auth: Authenticator::default(),
            limiter: Mutex::new(None),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the server speaks TLS. Fixed at start, as in the toolkit:
    /// adding or removing `tls_server_config` later needs a restart (and
    /// removing it makes every handshake fail until then).
    pub fn serves_tls(&self) -> bool {
        self.tls_at_start
    }

    /// The configuration now, re-read if any of its files changed.
    pub fn current(&self) -> Current {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now: Vec<_> = st.files.iter().map(|f| stamp(f)).collect();
        if now == st.stamps {
            return st.current.clone();
        }
        let current: Current = load(&self.path).map(Arc::new).map_err(Arc::new);
        match &current {
            Ok(l) => {
                if l.tls.is_some() != self.tls_at_start {
                    tracing::warn!(
                        "web config {}: tls_server_config added or removed; restart to apply",
                        self.path.display()
                    );
                }
                tracing::info!("web config {} (re)loaded", self.path.display());
            }
            Err(e) => tracing::error!("{e}; refusing requests until it is fixed"),
        }
        // Stamps as they were before this read, so a change during it is
        // seen next time; files the new configuration adds are stamped now.
        let old_files = std::mem::replace(&mut st.files, files_of(&self.path, &current));
        st.stamps = if st.files == old_files {
            now
        } else {
            let mut s: Vec<_> = st.files.iter().map(|f| stamp(f)).collect();
            s[0] = now[0];
            s
        };
        st.current = current.clone();
        current
    }

    /// The TLS configuration for a new connection; `None` refuses it.
    pub fn tls_config(&self) -> Option<Arc<ServerConfig>> {
        self.current().ok().and_then(|l| l.tls.clone())
    }

    /// Rate limit and authentication of one request; `authorization` is
    /// its `Authorization` header.
    pub async fn gate(&self, authorization: Option<&[u8]>) -> Gate {
        let Ok(loaded) = self.current() else {
            return Gate {
                headers: Vec::new(),
                refusal: Some(Refusal::Broken),
            };
        };
        let headers = loaded.config.headers.clone();
        let refusal = if !self.allow(loaded.config.rate_limit) {
            Some(Refusal::TooMany)
        } else if !self.auth.check(&loaded.config.users, authorization).await {
            Some(Refusal::Unauthorized)
        } else {
            None
        };
        Gate { headers, refusal }
    }

    fn allow(&self, limit: Option<RateLimit>) -> bool {
        let Some(limit) = limit else { return true };
        let Ok(mut l) = self.limiter.lock() else {
            return false;
        };
        let now = Instant::now();
        if l.as_ref().is_none_or(|(have, _)| *have != limit) {
            *l = Some((limit, TokenBucket::every(limit.interval, limit.burst, now)));
        }
        l.as_mut().is_some_and(|(_, b)| b.take(now))
    }
}
