//! One container probed from: a thread that enters the container's
//! network and UTS namespaces, takes the container's host name as its
//! node, and runs the probing half of an exporter there ([`crate::stack`])
//! on a runtime of its own — responders that answer the container's peers,
//! probers whose packets cross the container's virtual port, switch and
//! tunnel, and a discovery that polls the container's own connections for
//! its skeleton peers. Its series carry the container's identity; they are
//! removed when the thread ends.

use crate::config::Config;
use crate::discovery::traffic_source::{self, Scope};
use crate::discovery::PeerSet;
use crate::responder::Leaving;
use crate::stack::{self, Shutdown};
use crate::sys::netns;
use crate::telemetry::Metrics;
use anyhow::{Context as _, Result};
use skeletonhunter_common::sync::lock;
use skeletonhunter_common::Kind;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::task::JoinSet;

use super::find::Found;

/// A running container prober.
pub struct Handle {
    /// The selected cgroup (for the log).
    pub cgroup: std::path::PathBuf,
    stop: Shutdown,
    discovery_stop: Arc<AtomicBool>,
    /// The UDP responder's departure flag, once it runs.
    leaving: Arc<Mutex<Option<Leaving>>>,
    /// Set when the prober could not start (tried again at a later scan).
    failed: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Handle {
    /// Stop the prober (its series go when its thread ends).
    pub fn stop(&self) {
        self.discovery_stop.store(true, Ordering::Relaxed);
        self.stop.trigger();
    }

    /// Whether the thread has ended (stopped, not selected, or failed).
    pub fn ended(&self) -> bool {
        self.thread.is_finished()
    }

    /// Whether the prober failed to start (its ports busy while an ended
    /// container's prober still gives its notice in the same namespace, a
    /// process gone mid-way): the container is tried again.
    pub fn failed(&self) -> bool {
        self.ended() && self.failed.load(Ordering::Relaxed)
    }

    /// From now on the container's replies say it is leaving.
    pub fn announce_leaving(&self) {
        if let Some(l) = lock(&self.leaving).as_ref() {
            l.announce();
        }
    }
}

/// The node names probed from now, one prober each: a container re-created
/// under its old name waits until the ended one's prober (still giving its
/// departure notice) has stopped and removed its series, which are the
/// new one's label sets too.
#[derive(Clone, Default)]
pub struct Names(Arc<Mutex<HashSet<String>>>);

impl Names {
    fn claim(&self, name: &str) -> bool {
        lock(&self.0).insert(name.to_string())
    }

    fn release(&self, name: &str) {
        lock(&self.0).remove(name);
    }
}

/// The configuration a container's prober runs with: the host's probe
/// settings and traffic filters, `name` as its node and the fields it
/// names for itself (`own`, [`super::find::OWN_FIELDS`]) over the host's,
/// responders on the host's ports on every address of the container, and
/// no peers but those its own traffic shows (static, DNS and ToR-mesh
/// peers are the host's).
pub fn container_config(host: &Config, name: &str, own: &[(Kind, String)]) -> Config {
    let mut c = host.clone();
    c.identity.node = name.to_string();
    for (k, v) in own {
        c.identity.set(*k, v.clone());
    }
    let any = |a: SocketAddr| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), a.port());
    c.udp_listen = host.udp_listen.map(any);
    c.tcp_listen = host.tcp_listen.map(any);
    c.static_peers.clear();
    c.dns.clear();
    c.tor_mesh = None;
    c.containers = Default::default();
    c
}

/// Start probing from `found` on a thread of its own.
pub fn start(
    found: Found,
    host: Arc<Config>,
    metrics: Arc<Metrics>,
    names: Names,
) -> Result<Handle> {
    let stop = Shutdown::default();
    let discovery_stop = Arc::new(AtomicBool::new(false));
    let leaving = Arc::new(Mutex::new(None));
    let failed = Arc::new(AtomicBool::new(false));
    let cgroup = found.cgroup.clone();
    let thread = {
        let (stop, discovery_stop, leaving, fail) = (
            stop.clone(),
            discovery_stop.clone(),
            leaving.clone(),
            failed.clone(),
        );
        std::thread::Builder::new()
            .name(format!("ctr-{}", found.pid))
            .spawn(move || {
                let cgroup = found.cgroup.display().to_string();
                let probe = Probe {
                    host: &host,
                    metrics: &metrics,
                    names,
                    stop,
                    discovery_stop,
                    leaving,
                };
                if let Err(e) = run(found, probe) {
                    fail.store(true, Ordering::Relaxed);
                    tracing::warn!(%cgroup, "containers: not probing from this container (tried again at the next scan): {e:#}");
                }
            })
            .context("spawn a container prober thread")?
    };
    Ok(Handle {
        cgroup,
        stop,
        discovery_stop,
        leaving,
        failed,
        thread,
    })
}

/// What a prober's thread runs with.
struct Probe<'a> {
    host: &'a Config,
    metrics: &'a Metrics,
    names: Names,
    stop: Shutdown,
    discovery_stop: Arc<AtomicBool>,
    leaving: Arc<Mutex<Option<Leaving>>>,
}

fn run(found: Found, p: Probe<'_>) -> Result<()> {
    netns::enter(&found.ns).context("enter its namespaces")?;
    let hostname = netns::hostname().context("read its host name")?;
    if !p.host.containers.selects(&hostname) {
        tracing::info!(
            cgroup = %found.cgroup.display(),
            hostname,
            "containers: host name not selected (containers.hostnames)"
        );
        return Ok(());
    }
    let own = super::find::own(&found.dir);
    let cfg = container_config(p.host, &hostname, &own.fields);
    let name = cfg.identity.node.clone();
    if !p.names.claim(&name) {
        anyhow::bail!("{name} is still probed from by the prober of an ended container");
    }
    let view = Arc::new(p.metrics.view(&cfg.identity));
    view.set_ranks(own.ranks);
    if let Some(r) = own.ranks {
        tracing::info!(node = %name, ranks = %r.span(), world = ?r.world, "containers: its workers' ranks");
    }
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("build its runtime")
        .and_then(|rt| {
            rt.block_on(serve(
                &cfg,
                &view,
                p.stop,
                p.discovery_stop.clone(),
                p.leaving,
            ))
        });
    p.discovery_stop.store(true, Ordering::Relaxed);
    view.retire();
    p.names.release(&name);
    tracing::info!(node = %name, cgroup = %found.cgroup.display(), "containers: stopped probing from this container");
    outcome
}

async fn serve(
    cfg: &Config,
    metrics: &Arc<Metrics>,
    stop: Shutdown,
    discovery_stop: Arc<AtomicBool>,
    leaving: Arc<Mutex<Option<Leaving>>>,
) -> Result<()> {
    let peers = PeerSet::new(None);
    let mut responders = stack::bind_responders(cfg).await?;
    let probers = stack::start_probers(cfg, metrics)?;
    let mut tasks = JoinSet::new();
    *lock(&leaving) = stack::spawn_responders(
        cfg,
        &peers,
        &mut responders,
        metrics,
        &probers,
        &stop,
        &mut tasks,
    );
    let scope = Scope {
        stop: discovery_stop,
        thread: format!("disc-{}", cfg.identity.node),
    };
    traffic_source::spawn_in(
        cfg.ebpf.clone(),
        peers.clone(),
        Some(metrics.clone()),
        Some(scope),
    )?;
    tracing::info!(
        node = %cfg.identity.node,
        tenant = %cfg.identity.tenant,
        "containers: probing from this container"
    );
    let scheduler = stack::scheduler(cfg, probers, peers, metrics.clone());
    scheduler.run(stop.stopped()).await;
    tasks.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Args, Config};
    use clap::Parser as _;

    #[test]
    fn a_container_is_the_host_but_for_its_name_job_and_peers() {
        let args = Args::parse_from([
            "x", "--node", "h1", "--host", "h1", "--tor", "t1", "--tenant", "infra", "--peers",
            "10.0.0.9",
        ]);
        let host = Config::merge(Default::default(), &args).unwrap();
        let own = [(Kind::Tenant, "llama".to_string())];
        let c = container_config(&host, "llama-worker-0", &own);
        assert_eq!(
            (c.identity.node.as_str(), c.identity.tenant.as_str()),
            ("llama-worker-0", "llama")
        );
        assert_eq!(
            (c.identity.host.as_str(), c.identity.tor.as_str()),
            ("h1", "t1")
        );
        assert!(c.static_peers.is_empty() && !host.static_peers.is_empty());
        assert_eq!(c.udp_listen.map(|a| a.ip().is_unspecified()), Some(true));
        assert!(!c.containers.enabled());
        let own = [(Kind::Node, "rank-7".to_string())];
        assert_eq!(
            container_config(&host, "pod-x", &own).identity.node,
            "rank-7"
        );
    }
}
