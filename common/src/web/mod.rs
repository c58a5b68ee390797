//! `--web.config.file`: TLS, basic authentication, response headers and a
//! request rate limit for both binaries' HTTP servers, in the exporter
//! toolkit's file format so operators reuse the files they already have
//! for Prometheus and its exporters (see docs/operations.md, "Securing the
//! HTTP endpoints").
//!
//! Layout: [`file`] (the format, pure), [`tls`] (rustls set-up), [`auth`]
//! (basic authentication with a bounded bcrypt cache), [`source`] (loading
//! and change-driven reloading, and the per-request gate), [`error`].

pub mod auth;
pub mod error;
pub mod file;
pub mod source;
pub mod tls;

pub use error::WebConfigError;
pub use file::{parse, ClientAuth, Pem, RateLimit, TlsSettings, TlsVersion, WebConfig};
pub use source::{Gate, Loaded, Refusal, WebSource};
