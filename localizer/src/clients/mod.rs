//! HTTP clients of the services the localizer talks to. One [`Endpoint`]
//! type (URL, client, deadline, TLS and credentials from an
//! [`http_config`] file) serves both: [`prometheus`] adds the query API and
//! its JSON, [`alertmanager`] the posting of alerts and one outbox per
//! Alertmanager; [`http`] holds the bounded body reader and URL checks,
//! [`budget`] the byte budget that the answers read at once share,
//! [`dns`] the `dns+` URLs that stand for every member of a cluster,
//! [`tls`] the rustls set-up. They know the wire formats, not what the
//! queries or alerts mean.

pub mod alertmanager;
pub mod budget;
pub mod dns;
pub mod endpoint;
pub mod http;
pub mod http_config;
pub mod prometheus;
pub mod tls;

pub use endpoint::Endpoint;
pub use http_config::EndpointConfig;
