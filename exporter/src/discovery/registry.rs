//! Which discovery sources run: the static list always, DNS and the ToR
//! mesh when configured, traffic discovery unless turned off. The first
//! three come from the configuration and are restarted by a reload
//! ([`start_configured`]); traffic discovery runs once.

use super::peer_set::PeerSet;
use super::{dns, static_list, tor_mesh, traffic_source};
use crate::config::Config;
use crate::model::PeerSource;
use crate::sys::sock::local_addresses;
use crate::telemetry::Metrics;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use tokio::task::JoinSet;

/// Start traffic discovery on its own thread, unless turned off; returns
/// the source in use (the privileges it keeps needing depend on it). An
/// error is a traffic discovery that was required (`mode: ebpf`) and failed.
pub fn start_traffic(
    cfg: &Config,
    peers: &PeerSet,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<Option<traffic_source::SourceKind>> {
    match traffic_source::spawn(cfg.ebpf.clone(), peers.clone(), Some(metrics.clone()))? {
        Some(active) => {
            tracing::info!(source = active.source.as_str(), reason = %active.reason, "traffic discovery active");
            Ok(Some(active.source))
        }
        None => {
            tracing::info!("traffic discovery off");
            Ok(None)
        }
    }
}

/// Publish the static peers and start the DNS and ToR-mesh sources of
/// `cfg` in `tasks`; a source `cfg` does not configure has its slot
/// emptied (on a reload its peers leave). A running source's slot is kept
/// until the restarted source publishes, so unchanged peers never flap.
pub fn start_configured<F, S>(
    cfg: &Config,
    peers: &PeerSet,
    metrics: &Arc<Metrics>,
    tasks: &mut JoinSet<()>,
    stopped: S,
) where
    S: Fn() -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let own = own_addresses(&cfg.identity.nic);
    static_list::publish(peers, metrics, cfg.static_peers.clone());
    if cfg.dns.is_empty() {
        peers.replace(PeerSource::Dns, Vec::new());
    } else {
        tasks.spawn(dns::run(
            cfg.dns.clone(),
            own.clone(),
            peers.clone(),
            metrics.clone(),
            stopped(),
        ));
    }
    if let Some(t) = cfg.tor_mesh.clone() {
        tasks.spawn(tor_mesh::run(
            t,
            cfg.identity.tor.clone(),
            own,
            peers.clone(),
            metrics.clone(),
            stopped(),
        ));
    } else {
        peers.replace(PeerSource::TorMesh, Vec::new());
    }
}

/// This host's addresses plus the `nic` identity: never peers of ourselves.
fn own_addresses(nic: &str) -> Vec<IpAddr> {
    let mut own = local_addresses();
    if let Ok(ip) = nic.parse() {
        own.push(ip);
    }
    own
}
