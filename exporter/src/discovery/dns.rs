//! DNS peers: the A/AAAA or SRV records of a (headless) service name,
//! re-resolved periodically, so peers come and go with the service's
//! endpoints. A failed lookup keeps the last good list: a DNS hiccup must
//! not make every peer's series disappear.

use super::peer_set::PeerSet;
use crate::config::DnsSource;
use crate::model::{DiscoveryEvent, Peer, PeerSource};
use crate::telemetry::Metrics;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

fn resolver(src: &DnsSource) -> anyhow::Result<TokioResolver> {
    let mut builder = match src.nameserver {
        Some(ns) => {
            let mut server = NameServerConfig::udp_and_tcp(ns.ip());
            for c in &mut server.connections {
                c.port = ns.port();
            }
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(vec![server]),
                TokioRuntimeProvider::default(),
            )
        }
        None => TokioResolver::builder_tokio()
            .map_err(|e| anyhow::anyhow!("cannot read the system DNS configuration: {e}"))?,
    };
    let opts = builder.options_mut();
    // We re-resolve on our own schedule; a cache would only delay changes.
    opts.cache_size = 0;
    opts.ip_strategy = hickory_resolver::config::LookupIpStrategy::Ipv4AndIpv6;
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build DNS resolver: {e}"))
}

/// The first label of a DNS name, used as a peer name hint (the pod name
/// of a headless-service SRV target).
fn first_label(name: &str) -> String {
    name.trim_end_matches('.')
        .split('.')
        .next()
        .unwrap_or("")
        .to_string()
}

async fn resolve_once(r: &TokioResolver, src: &DnsSource) -> anyhow::Result<Vec<Peer>> {
    let mut out = Vec::new();
    if src.srv {
        let srv = r.srv_lookup(src.name.as_str()).await?;
        let mut targets: BTreeMap<String, u16> = BTreeMap::new();
        for rec in srv.answers() {
            if let RData::SRV(s) = &rec.data {
                targets.insert(s.target.to_string(), s.port);
            }
        }
        for (target, port) in targets {
            let ips = r.lookup_ip(target.as_str()).await?;
            for ip in ips.iter() {
                let mut p = Peer::new(ip, PeerSource::Dns);
                p.udp_port = Some(port);
                let label = first_label(&target);
                if !label.is_empty() {
                    p.name = Some(label);
                }
                out.push(p);
            }
        }
    } else {
        let ips = r.lookup_ip(src.name.as_str()).await?;
        out.extend(ips.iter().map(|ip| Peer::new(ip, PeerSource::Dns)));
    }
    Ok(out)
}

/// Resolve every DNS source every `refresh` until `shutdown`; all sources
/// together form the `dns` slot of the peer set. `own` addresses (this
/// exporter's) are left out.
pub async fn run(
    sources: Vec<DnsSource>,
    own: Vec<IpAddr>,
    set: PeerSet,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut resolvers = Vec::new();
    for s in &sources {
        match resolver(s) {
            Ok(r) => resolvers.push((s.clone(), r)),
            Err(e) => {
                tracing::error!(name = %s.name, "DNS peers disabled: {e:#}");
                metrics.discovery_event(PeerSource::Dns, DiscoveryEvent::ResolverError);
            }
        }
    }
    if resolvers.is_empty() {
        return;
    }
    let refresh = resolvers
        .iter()
        .map(|(s, _)| s.refresh)
        .min()
        .unwrap_or_default();
    let mut last: Vec<Vec<Peer>> = vec![Vec::new(); resolvers.len()];
    loop {
        for (i, (src, r)) in resolvers.iter().enumerate() {
            match tokio::time::timeout(
                refresh.max(std::time::Duration::from_secs(1)),
                resolve_once(r, src),
            )
            .await
            {
                Ok(Ok(peers)) => {
                    metrics.discovery_event(PeerSource::Dns, DiscoveryEvent::Resolved);
                    last[i] = peers
                        .into_iter()
                        .filter(|p| !own.contains(&p.addr))
                        .collect();
                }
                Ok(Err(e)) => {
                    tracing::warn!(name = %src.name, "DNS lookup failed, keeping {} known peers: {e}", last[i].len());
                    metrics.discovery_event(PeerSource::Dns, DiscoveryEvent::ResolveFailed);
                }
                Err(_) => {
                    tracing::warn!(name = %src.name, "DNS lookup timed out");
                    metrics.discovery_event(PeerSource::Dns, DiscoveryEvent::ResolveFailed);
                }
            }
        }
        let all: Vec<Peer> = last.iter().flatten().cloned().collect();
        if set.replace(PeerSource::Dns, all) {
            tracing::info!(peers = set.count(PeerSource::Dns), "DNS peers changed");
            metrics.discovery_event(PeerSource::Dns, DiscoveryEvent::Updated);
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(refresh) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_label_is_the_pod_name() {
        assert_eq!(
            super::first_label("pod-0.svc.ns.svc.cluster.local."),
            "pod-0"
        );
        assert_eq!(super::first_label("x"), "x");
    }
}
