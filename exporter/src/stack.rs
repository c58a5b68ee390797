//! The probing half of an exporter, started the same way for the host and
//! for each container it probes from ([`crate::containers`]): the
//! responders that answer peers, the probers and the scheduler that drives
//! them, and the one stop signal every task watches ([`Shutdown`]). The
//! host adds HTTP, path tracing and reloads around it (`app`).

use crate::config::Config;
use crate::discovery::PeerSet;
use crate::probe::registry::{self as probers, Probers};
use crate::probe::{Ports, ScheduleConfig, Scheduler};
use crate::responder;
use crate::telemetry::Metrics;
use anyhow::{Context as _, Result};
use std::future::Future;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::net::TcpListener as Acceptor;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// One stop signal for every task (the idea of mini-redis's `Shutdown`):
/// each task gets a future from [`Shutdown::stopped`] that resolves once
/// [`Shutdown::trigger`] was called.
#[derive(Clone)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            tx: Arc::new(watch::channel(false).0),
        }
    }
}

impl Shutdown {
    /// Resolves when the exporter is stopping.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// Tell every task to stop.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }
}

/// The responders' sockets, bound before anything starts so a busy port
/// fails start-up with a clear error.
pub struct Responders {
    udp: Option<AsyncFd<UdpSocket>>,
    tcp: Option<Acceptor>,
}

/// Bind the responders `cfg` asks for (in the calling thread's network
/// namespace).
pub async fn bind_responders(cfg: &Config) -> Result<Responders> {
    let udp = match cfg.udp_listen {
        Some(a) => Some(responder::bind_udp(a)?),
        None => None,
    };
    let tcp = match cfg.tcp_listen {
        Some(a) => Some(bind_tcp(a).await?),
        None => None,
    };
    Ok(Responders { udp, tcp })
}

async fn bind_tcp(a: SocketAddr) -> Result<Acceptor> {
    Acceptor::bind(a)
        .await
        .with_context(|| format!("cannot listen for TCP dials on {a}"))
}

/// Start the probers `cfg` lists (their sockets open in the calling
/// thread's network namespace).
pub fn start_probers(cfg: &Config, metrics: &Arc<Metrics>) -> Result<Probers> {
    let opts = probers::Options {
        timeout: cfg.timeout,
        udp_size: cfg.udp_size,
        nic: cfg.identity.nic.clone(),
        flows: cfg.flows.flows,
        flow_window: cfg.flows.window,
    };
    Ok(probers::start(&cfg.protocols, &opts, metrics)?)
}

/// Start the responders; returns the UDP responder's departure flag, if
/// it runs.
pub fn spawn_responders(
    cfg: &Config,
    peers: &PeerSet,
    bound: &mut Responders,
    metrics: &Arc<Metrics>,
    probers: &Probers,
    shutdown: &Shutdown,
    tasks: &mut JoinSet<()>,
) -> Option<responder::Leaving> {
    if let Some(l) = bound.tcp.take() {
        tasks.spawn(responder::run_tcp(l, metrics.clone(), shutdown.stopped()));
    }
    let sock = bound.udp.take()?;
    if cfg.responder.open() {
        tracing::info!("the UDP responder answers any source (set responder.allow or responder.allow_peers to restrict it)");
    }
    metrics.zero_responder_drops(&responder::udp::drop_reasons());
    let leaving = responder::Leaving::default();
    tasks.spawn(responder::run_udp(
        sock,
        responder::Guard::new(cfg.responder.clone(), peers),
        cfg.identity.clone(),
        metrics.clone(),
        probers.peer_info.clone(),
        probers.advertise.clone(),
        leaving.clone(),
        shutdown.stopped(),
    ));
    Some(leaving)
}

/// The scheduler that drives `probers` over `peers` on `cfg`'s interval.
pub fn scheduler(
    cfg: &Config,
    probers: Probers,
    peers: PeerSet,
    metrics: Arc<Metrics>,
) -> Scheduler {
    Scheduler {
        config: ScheduleConfig {
            interval: cfg.interval,
            min_tick: Duration::from_millis(2),
            expire_every: (cfg.timeout / 10)
                .clamp(Duration::from_millis(5), Duration::from_millis(100)),
            ports: Ports {
                udp: cfg.udp_port,
                tcp: cfg.tcp_port,
            },
        },
        peer_info: probers.peer_info.clone(),
        probers: probers.list,
        peers,
        metrics,
    }
}
