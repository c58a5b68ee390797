//! Checks that refuse values a parser accepts but the exporter must not
//! run with: peer addresses no probe can reach, port 0, refresh intervals
//! that would hammer a resolver, an empty protocol list, duplicate peers.
//! Each error names the key.

use super::error::ConfigError;
use crate::model::Peer;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

type Result<T> = std::result::Result<T, ConfigError>;

/// The shortest refresh interval of a DNS or ToR-mesh source: a `0s`
/// refresh turned into more than a thousand queries a second.
pub const MIN_REFRESH: Duration = Duration::from_secs(1);

/// A peer address must name one host: not unspecified (`0.0.0.0`, `::`),
/// not broadcast (`255.255.255.255`), not multicast.
pub fn peer_address(key: &str, ip: IpAddr) -> Result<IpAddr> {
    let why = match ip {
        _ if ip.is_unspecified() => "is the unspecified address",
        _ if ip.is_multicast() => "is a multicast address",
        IpAddr::V4(v4) if v4.is_broadcast() => "is the broadcast address",
        _ => return Ok(ip),
    };
    Err(ConfigError::invalid(
        key,
        format!("{ip} {why}; a peer must be one host's unicast address"),
    ))
}

/// A port to probe or listen on: 1..=65535.
pub fn port(key: &str, p: Option<u16>) -> Result<Option<u16>> {
    if p == Some(0) {
        return Err(ConfigError::invalid(
            key,
            "port 0 is not a port (1..=65535)",
        ));
    }
    Ok(p)
}

/// A source's refresh interval: at least [`MIN_REFRESH`].
pub fn refresh(key: &str, d: Duration) -> Result<Duration> {
    if d < MIN_REFRESH {
        return Err(ConfigError::invalid(
            key,
            format!("{d:?} is below the minimum of {MIN_REFRESH:?}"),
        ));
    }
    Ok(d)
}

/// No two configured peers with one address (the address is the key the
/// peer set merges on, so the second entry would silently win or lose).
/// `keys[i]` names `peers[i]`.
pub fn unique_peers(peers: &[Peer], keys: &[String]) -> Result<()> {
    let mut seen: HashMap<IpAddr, usize> = HashMap::new();
    for (i, p) in peers.iter().enumerate() {
        if let Some(first) = seen.insert(p.addr, i) {
            return Err(ConfigError::invalid(
                &keys[i],
                format!("{} duplicates {}", p.addr, keys[first]),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_that_name_no_single_host_are_refused() {
        for bad in ["0.0.0.0", "::", "255.255.255.255", "224.0.0.1", "ff02::1"] {
            let e = peer_address("k", bad.parse().unwrap()).unwrap_err();
            assert!(e.to_string().starts_with("k: "), "{e}");
        }
        assert!(peer_address("k", "10.0.0.255".parse().unwrap()).is_ok());
        assert!(peer_address("k", "fe80::1".parse().unwrap()).is_ok());
    }

    #[test]
    fn port_zero_and_short_refresh_are_refused() {
        assert!(port("p", Some(0)).is_err());
        assert_eq!(port("p", Some(1)).unwrap(), Some(1));
        assert_eq!(port("p", None).unwrap(), None);
        assert!(refresh("r", Duration::ZERO).is_err());
        assert!(refresh("r", Duration::from_millis(999)).is_err());
        assert!(refresh("r", MIN_REFRESH).is_ok());
    }
}
