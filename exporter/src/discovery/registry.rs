//! Which discovery sources run: the static list always, DNS and the ToR
//! mesh when configured, traffic discovery unless turned off.

use super::peer_set::PeerSet;
use super::{dns, static_list, tor_mesh, traffic_source};
use crate::config::Config;
use crate::sys::sock::local_addresses;
use crate::telemetry::Metrics;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use tokio::task::JoinSet;

/// Start every configured source: async ones as tasks in `tasks` (ending
/// when `stopped()` resolves), traffic discovery on its own thread. An
/// error is a traffic discovery that was required (`mode: ebpf`) and
/// failed.
pub fn start<F, S>(
    cfg: &Config,
    peers: &PeerSet,
    metrics: &Arc<Metrics>,
    tasks: &mut JoinSet<()>,
    stopped: S,
) -> anyhow::Result<()>
where
    S: Fn() -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let own = own_addresses(&cfg.identity.nic);
    static_list::publish(peers, metrics, cfg.static_peers.clone());
    if !cfg.dns.is_empty() {
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
    }
    match traffic_source::spawn(cfg.ebpf.clone(), peers.clone(), Some(metrics.clone()))? {
        Some(active) => {
            tracing::info!(source = active.source.as_str(), reason = %active.reason, "traffic discovery active");
        }
        None => tracing::info!("traffic discovery off"),
    }
    Ok(())
}

/// This host's addresses plus the `nic` identity: never peers of ourselves.
fn own_addresses(nic: &str) -> Vec<IpAddr> {
    let mut own = local_addresses();
    if let Ok(ip) = nic.parse() {
        own.push(ip);
    }
    own
}
