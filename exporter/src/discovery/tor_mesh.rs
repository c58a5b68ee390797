//! ToR-mesh mode: probe every peer that shares this exporter's ToR, taken
//! from a peer list (inline, or a file re-read periodically so the list can
//! change without a restart). A full mesh inside a rack is cheap and covers
//! the links that skeleton traffic alone may leave unobserved.

use super::peer_set::PeerSet;
use crate::config::{read_mesh_list, MeshEntry, TorMesh};
use crate::model::{DiscoveryEvent, Peer, PeerSource};
use crate::telemetry::Metrics;
use std::net::IpAddr;
use std::sync::Arc;

/// The peers of `entries` on ToR `tor`, minus our own addresses. Entries
/// with a bad address are skipped (and reported by the caller).
pub fn select(entries: &[MeshEntry], tor: &str, own: &[IpAddr]) -> (Vec<Peer>, Vec<String>) {
    let mut peers = Vec::new();
    let mut bad = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let addr: IpAddr = match e.address.trim().parse() {
            Ok(a) => a,
            Err(_) => {
                bad.push(format!("entry {i}: {:?} is not an IP address", e.address));
                continue;
            }
        };
        if e.tor != tor || own.contains(&addr) {
            continue;
        }
        let mut p = Peer::new(addr, PeerSource::TorMesh);
        p.name = e.node.clone().filter(|n| !n.is_empty());
        p.udp_port = e.udp_port;
        p.tcp_port = e.tcp_port;
        peers.push(p);
    }
    (peers, bad)
}

/// Keep the `tor_mesh` slot in line with the list until `shutdown`.
pub async fn run(
    cfg: TorMesh,
    tor: String,
    own: Vec<IpAddr>,
    set: PeerSet,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let mut entries = cfg.peers.clone();
        let mut ok = true;
        if let Some(path) = &cfg.file {
            match read_mesh_list(path) {
                Ok(list) => entries.extend(list),
                Err(e) => {
                    ok = false;
                    tracing::warn!("{e}; keeping the last list");
                    metrics.discovery_event(PeerSource::TorMesh, DiscoveryEvent::ReadFailed);
                }
            }
        }
        if ok {
            let (peers, bad) = select(&entries, &tor, &own);
            for b in bad {
                tracing::warn!("ToR-mesh peer list: {b}");
                metrics.discovery_event(PeerSource::TorMesh, DiscoveryEvent::BadEntry);
            }
            if set.replace(PeerSource::TorMesh, peers) {
                tracing::info!(peers = set.count(PeerSource::TorMesh), tor = %tor, "ToR-mesh peers changed");
                metrics.discovery_event(PeerSource::TorMesh, DiscoveryEvent::Updated);
            }
        }
        if cfg.file.is_none() {
            // An inline list never changes.
            shutdown.await;
            return;
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(cfg.refresh) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_mesh_list as parse_list;

    #[test]
    fn selects_same_tor_peers_except_self() {
        let list = parse_list(
            "- {address: 10.0.0.1, tor: t1, node: a}\n- {address: 10.0.0.2, tor: t1, node: b, udp_port: 7000}\n- {address: 10.0.0.3, tor: t2}\n- {address: nope, tor: t1}\n",
        )
        .unwrap();
        let (peers, bad) = select(&list, "t1", &["10.0.0.1".parse().unwrap()]);
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].name.as_deref(), Some("b"));
        assert_eq!(peers[0].udp_port, Some(7000));
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("nope"));
        assert!(parse_list("- {address: 1.2.3.4, rack: x}").is_err());
    }
}
