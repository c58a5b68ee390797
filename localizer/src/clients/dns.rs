//! `dns+` URLs: one flag standing for every address a name resolves to —
//! an Alertmanager cluster behind a headless Service (prometheus-operator's
//! `alertmanager-operated`), whose members come and go. The name is looked
//! up again before each use through the system resolver, so a rescheduled
//! member is found without a restart; alerts go to every member, as
//! Alertmanager's clustering expects of its clients.

use super::http::redact_url;
use std::net::SocketAddr;
use std::time::Duration;

/// The prefix that turns a URL into "every address of its host name".
pub const DNS_PREFIX: &str = "dns+";

/// Most addresses one name may stand for; the rest are left out (and
/// logged), so a misconfigured record cannot grow the clients unbounded.
pub const MAX_MEMBERS: usize = 32;

/// A server URL as given to a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerUrl {
    /// One server at this URL.
    Fixed(String),
    /// Every address of `host` (the URL without the prefix), on `port`.
    Dns {
        /// The URL after [`DNS_PREFIX`].
        url: String,
        /// Its host name.
        host: String,
        /// Its port (the scheme's default when absent).
        port: u16,
    },
}

/// A `dns+` URL that cannot stand for a set of servers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsUrlError {
    /// The part after `dns+` is no URL with a host.
    #[error("{0:?}: expected dns+http://NAME:PORT or dns+https://NAME:PORT")]
    NoName(String),
    /// An address where a name belongs: nothing to look up.
    #[error("{0:?}: dns+ needs a host name, not an address")]
    Address(String),
}

impl ServerUrl {
    /// Parse a flag's value; the URL itself is checked by the endpoint.
    pub fn parse(s: &str) -> Result<ServerUrl, DnsUrlError> {
        let Some(url) = s.strip_prefix(DNS_PREFIX) else {
            return Ok(ServerUrl::Fixed(s.to_string()));
        };
        let shown = redact_url(s);
        let parsed = reqwest::Url::parse(url).map_err(|_| DnsUrlError::NoName(shown.clone()))?;
        let host = parsed.host_str().unwrap_or("");
        let is_address = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok();
        match parsed.port_or_known_default() {
            _ if is_address => Err(DnsUrlError::Address(shown)),
            Some(port) if !host.is_empty() => Ok(ServerUrl::Dns {
                url: url.to_string(),
                host: host.to_string(),
                port,
            }),
            _ => Err(DnsUrlError::NoName(shown)),
        }
    }

    /// The URL requests are built from (without the prefix).
    pub fn url(&self) -> &str {
        match self {
            ServerUrl::Fixed(u) | ServerUrl::Dns { url: u, .. } => u,
        }
    }
}

/// Why a name could not be resolved this time.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The resolver failed (no such name, no server, ...).
    #[error("cannot resolve {host}: {source}")]
    Lookup {
        /// The name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// No answer within the deadline.
    #[error("cannot resolve {host}: no answer within {timeout:?}")]
    Timeout {
        /// The name.
        host: String,
        /// The deadline.
        timeout: Duration,
    },
}

/// The addresses `host` has now, on `port`: sorted, without duplicates, at
/// most [`MAX_MEMBERS`] (and whether some were left out).
pub async fn resolve(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<(Vec<SocketAddr>, bool), ResolveError> {
    let found = tokio::time::timeout(timeout, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| ResolveError::Timeout {
            host: host.to_string(),
            timeout,
        })?
        .map_err(|source| ResolveError::Lookup {
            host: host.to_string(),
            source,
        })?;
    // A bounded read: an answer is finite, but only the first addresses
    // are kept.
    let mut addrs: Vec<SocketAddr> = found.take(4 * MAX_MEMBERS).collect();
    addrs.sort_unstable();
    addrs.dedup();
    let cut = addrs.len() > MAX_MEMBERS;
    addrs.truncate(MAX_MEMBERS);
    Ok((addrs, cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_urls_name_a_host_and_a_port() {
        assert_eq!(
            ServerUrl::parse("http://am:9093").unwrap(),
            ServerUrl::Fixed("http://am:9093".into())
        );
        assert_eq!(
            ServerUrl::parse("dns+http://alertmanager-operated.monitoring.svc:9093").unwrap(),
            ServerUrl::Dns {
                url: "http://alertmanager-operated.monitoring.svc:9093".into(),
                host: "alertmanager-operated.monitoring.svc".into(),
                port: 9093,
            }
        );
        let https = ServerUrl::parse("dns+https://am.example").unwrap();
        assert!(
            matches!(https, ServerUrl::Dns { port: 443, .. }),
            "{https:?}"
        );
        assert_eq!(https.url(), "https://am.example");
        assert!(matches!(
            ServerUrl::parse("dns+http://10.0.0.1:9093"),
            Err(DnsUrlError::Address(_))
        ));
        assert!(matches!(
            ServerUrl::parse("dns+http://[::1]:9093"),
            Err(DnsUrlError::Address(_))
        ));
        for bad in ["dns+", "dns+am:9093", "dns+file:///x"] {
            assert!(
                matches!(ServerUrl::parse(bad), Err(DnsUrlError::NoName(_))),
                "{bad}"
            );
        }
        let secret = ServerUrl::parse("dns+nonsense://u:hunter2@").unwrap_err();
        assert!(!secret.to_string().contains("hunter2"), "{secret}");
    }

    #[tokio::test]
    async fn a_name_resolves_to_its_addresses_sorted_from_the_hosts_file() {
        let (addrs, cut) = resolve("localhost", 9093, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(!cut);
        assert!(!addrs.is_empty());
        assert!(addrs
            .iter()
            .all(|a| a.port() == 9093 && a.ip().is_loopback()));
        assert!(addrs.windows(2).all(|w| w[0] < w[1]));
    }
}
