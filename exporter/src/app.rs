//! Wiring and the run loop of `skeletonhunter-exporter`: bind the sockets,
//! start the probers, responders, path tracing, HTTP server and discovery
//! sources, then run the scheduler until SIGTERM/SIGINT. The top layer: it
//! may use every module, and none uses it.

use crate::config::{http_connection_cap, Args, Config};
use crate::containers;
use crate::discovery::traffic_source::SourceKind;
use crate::discovery::{self, PeerSet};
use crate::http::{self, Health, State};
use crate::model::Protocol;
use crate::pathtrace::mapper::{self, Mapper};
use crate::pathtrace::{self, TraceConfig, Tracer};
use crate::probe::registry::Probers;
use crate::reload::Reloader;
use crate::stack::{self, Shutdown};
use crate::sys;
use crate::telemetry::Metrics;
use anyhow::Result;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// The sockets bound before anything starts, so a busy port fails start-up
/// with a clear error.
struct Bound {
    http: TcpListener,
    responders: stack::Responders,
}

async fn bind(cfg: &Config) -> Result<Bound> {
    let http = skeletonhunter_common::http::bind(cfg.listen).await?;
    let responders = stack::bind_responders(cfg).await?;
    Ok(Bound { http, responders })
}

fn log_start(cfg: &Config) {
    tracing::info!(
        node = %cfg.identity.node,
        host = %cfg.identity.host,
        tor = %cfg.identity.tor,
        listen = %cfg.listen,
        web_config = ?cfg.web.as_ref().map(|w| w.path()),
        tls = cfg.web.as_ref().is_some_and(|w| w.serves_tls()),
        udp = ?cfg.udp_listen,
        tcp = ?cfg.tcp_listen,
        protocols = ?cfg.protocols,
        interval_ms = cfg.interval.as_millis() as u64,
        timeout_ms = cfg.timeout.as_millis() as u64,
        flows = cfg.flows.flows,
        ecmp_width = cfg.flows.ecmp_width,
        "skeletonhunter-exporter starting"
    );
}

fn tracing_context(
    cfg: &Config,
    metrics: &Arc<Metrics>,
    peers: &PeerSet,
    probers: &Probers,
) -> Arc<pathtrace::Context> {
    let counters = metrics.clone();
    let book = probers.flow_book.clone();
    let flows: pathtrace::context::FlowCounts = Arc::new(move |peer: std::net::IpAddr| {
        book.as_ref()?.counts(peer, std::time::Instant::now())
    });
    let mapper = Mapper::new(
        cfg.flows.traces_per_minute,
        mapper::REFRESH,
        sys::time::random_u64(),
        std::time::Instant::now(),
    );
    Arc::new(pathtrace::Context {
        tracer: Tracer::new(TraceConfig::default(), metrics.path_families()),
        peers: peers.clone(),
        peer_info: probers.peer_info.clone(),
        loss: Arc::new(move |dst: &str| counters.udp_counts(dst)),
        flows,
        src_node: metrics.src_node(),
        udp_port: cfg.udp_port,
        src_ports: probers.udp_source_ports.clone(),
        mapper: std::sync::Mutex::new(mapper),
    })
}

/// Raise the soft open-file limit to the hard one and fit the HTTP
/// server's connection limit inside its share.
fn http_limits(cfg: &Config) -> skeletonhunter_common::http::Limits {
    let mut limits = cfg.http;
    match sys::host::raise_nofile() {
        Ok(nofile) => {
            let cap = http_connection_cap(nofile);
            if limits.max_connections > cap {
                tracing::warn!(
                    nofile,
                    "HTTP connection limit lowered from {} to {cap} (a quarter of the open-file limit)",
                    limits.max_connections
                );
                limits.max_connections = cap;
            }
            tracing::info!(
                nofile,
                http_max_connections = limits.max_connections,
                "descriptor budget"
            );
        }
        Err(e) => tracing::warn!("cannot read RLIMIT_NOFILE: {e}"),
    }
    limits
}

/// The capabilities the running exporter still uses once set up: raw
/// sockets (path tracing opens them for every trace; the ICMP prober's
/// raw fallback is already open); with RDMA probing, locked memory for the
/// queue pairs registered as peers come; with the polling discovery and
/// cgroup filters, reading other processes' `/proc/<pid>/fd` at every
/// poll; with containers probed from, entering their namespaces as they
/// come (`CAP_SYS_ADMIN` for `setns`, `CAP_SYS_PTRACE` to open another
/// user's `/proc/<pid>/ns`). Everything used only at start — `CAP_BPF`, `CAP_PERFMON`,
/// `CAP_DAC_READ_SEARCH` (tracefs), `CAP_SYS_ADMIN` (uprobes, mounting
/// tracefs), `CAP_NET_ADMIN` (forced receive buffers), `CAP_SYS_RESOURCE`
/// (memlock) — and anything else is dropped. See docs/operations.md,
/// "Privileges".
pub fn runtime_capabilities(
    protocols: &[Protocol],
    polls_cgroups: bool,
    containers: bool,
) -> sys::caps::CapMask {
    use sys::caps::{bit, CAP_IPC_LOCK, CAP_NET_RAW, CAP_SYS_ADMIN, CAP_SYS_PTRACE};
    let when = |yes: bool, cap| if yes { bit(cap) } else { 0 };
    bit(CAP_NET_RAW)
        | when(protocols.contains(&Protocol::Rdma), CAP_IPC_LOCK)
        | when(polls_cgroups || containers, CAP_SYS_PTRACE)
        | when(containers, CAP_SYS_ADMIN)
}

/// Drop, in every thread, the capabilities set-up needed and the run does
/// not; log what is left.
fn drop_capabilities(cfg: &Config, traffic: Option<SourceKind>) {
    let polls_cgroups = traffic == Some(SourceKind::Poll) && !cfg.ebpf.cgroups.is_empty();
    let keep = runtime_capabilities(&cfg.protocols, polls_cgroups, cfg.containers.enabled());
    let before = sys::caps::current().map(|(_, p)| p).unwrap_or(0);
    match sys::caps::keep_only(keep) {
        Ok(()) => tracing::info!(
            kept = ?sys::caps::names(before & keep),
            dropped = ?sys::caps::names(before & !keep),
            "capabilities after set-up"
        ),
        Err(e) => tracing::warn!("cannot drop capabilities after set-up: {e}"),
    }
}

/// Freed heap the exporter keeps before giving it back. A burst of
/// connections (hyper's per-connection buffers, rendered bodies) leaves
/// freed chunks between live ones that glibc keeps resident (7 -> 94 MB
/// was reported); trimming once more than this is free returns it.
const HEAP_FREE_KEPT: u64 = 2 << 20;
/// How often the freed heap is looked at (one `mallinfo2` call).
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// Give freed heap back to the kernel after bursts, until `stopped`.
async fn trim_after_bursts(stopped: impl Future<Output = ()>) {
    let mut tick = tokio::time::interval(TRIM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = tick.tick() => {}
        }
        if let Some(free) = sys::host::heap_free_bytes().filter(|f| *f > HEAP_FREE_KEPT) {
            let trimmed = sys::host::trim_heap();
            tracing::debug!(free, trimmed, "freed heap given back");
        }
    }
}

/// Run the exporter until SIGTERM or SIGINT; SIGHUP reloads the
/// configuration from `args` (see [`crate::reload`]).
pub async fn run(args: Args, cfg: Config) -> Result<()> {
    let metrics = Arc::new(Metrics::with_histograms(&cfg.identity, cfg.histograms));
    let peers = PeerSet::new(Some(metrics.clone()));
    let shutdown = Shutdown::default();
    let mut bound = bind(&cfg).await?;
    let probers = stack::start_probers(&cfg, &metrics)?;
    log_start(&cfg);
    let mut tasks = JoinSet::new();
    let leaving = stack::spawn_responders(
        &cfg,
        &peers,
        &mut bound.responders,
        &metrics,
        &probers,
        &shutdown,
        &mut tasks,
    );
    let health = Health::default();
    let tracing_ctx = tracing_context(&cfg, &metrics, &peers, &probers);
    let watch = tracing_ctx
        .clone()
        .watch(Duration::from_secs(2), 10, 0.2, shutdown.stopped());
    tasks.spawn(watch);
    let traffic = discovery::registry::start_traffic(&cfg, &peers, &metrics)?;
    metrics.set_discovery_info(
        traffic.map_or("off", SourceKind::as_str),
        cfg.ebpf.mode.as_str(),
    );
    drop_capabilities(&cfg, traffic);
    let containers = containers::Running::default();
    if cfg.containers.enabled() {
        tasks.spawn(containers::run(
            Arc::new(cfg.clone()),
            metrics.clone(),
            containers.clone(),
            shutdown.stopped(),
        ));
    }
    let reloader = Arc::new(Reloader::start(
        args,
        cfg.clone(),
        peers.clone(),
        metrics.clone(),
    ));
    let state = State {
        telemetry_path: cfg.telemetry_path.clone(),
        metrics: metrics.clone(),
        health: health.clone(),
        tracing: tracing_ctx,
        reload: Some(reloader.clone()),
        trace_limit: Arc::default(),
    };
    tasks.spawn(skeletonhunter_common::http::serve_web(
        bound.http,
        http::handler(state),
        http_limits(&cfg),
        cfg.web.clone(),
        shutdown.stopped(),
    ));
    let scheduler = stack::scheduler(&cfg, probers, peers, metrics);
    health.set_ready(true);
    tasks.spawn(scheduler.run(shutdown.stopped()));
    tasks.spawn(trim_after_bursts(shutdown.stopped()));
    wait_for_signal(&reloader).await;
    reloader.stop();
    if leaving.is_some() || !containers.is_empty() {
        if let Some(l) = &leaving {
            l.announce();
        }
        containers.announce_leaving();
        give_notice(&health, cfg.departure_notice).await;
    }
    stop(&health, &shutdown, tasks).await;
    Ok(())
}

/// The departure notice: for `notice` every UDP reply (the host's and each
/// container's, already flagged by the caller) says it is leaving, so its peers stop counting it instead of seeing it fail (a
/// job that ends, a pod deleted or moved, a rollout). A second SIGTERM or
/// SIGINT cuts it short.
async fn give_notice(health: &Health, notice: Duration) {
    if notice.is_zero() {
        return;
    }
    health.set_ready(false);
    tracing::info!(
        notice_ms = notice.as_millis() as u64,
        "stopping: replies say this exporter is leaving (responder.departure_notice)"
    );
    tokio::select! {
        _ = tokio::time::sleep(notice) => {}
        _ = stop_signal() => tracing::info!("second stop signal: notice cut short"),
    }
}

/// The next SIGTERM (Kubernetes) or SIGINT (a terminal); Ctrl-C alone if
/// they cannot be watched. The one place that says what stops the exporter.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        },
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Tell every task to stop; give them a moment, then go.
async fn stop(health: &Health, shutdown: &Shutdown, mut tasks: JoinSet<()>) {
    tracing::info!("shutting down");
    health.set_ready(false);
    shutdown.trigger();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tracing::info!("stopped");
}

/// Until a stop signal ([`stop_signal`]); each SIGHUP reloads.
async fn wait_for_signal(reloader: &Reloader) {
    use tokio::signal::unix::{signal, SignalKind};
    let stop = stop_signal();
    tokio::pin!(stop);
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return stop.await;
    };
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading the configuration");
                // The outcome is logged and exported by the reloader.
                let _ = reloader.reload_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::caps::{bit, names, CAP_IPC_LOCK, CAP_NET_RAW, CAP_SYS_PTRACE};

    #[test]
    fn the_run_keeps_raw_sockets_and_only_what_its_probes_and_discovery_use() {
        let udp = [Protocol::Udp, Protocol::Tcp, Protocol::Icmp];
        assert_eq!(runtime_capabilities(&udp, false, false), bit(CAP_NET_RAW));
        assert_eq!(
            names(runtime_capabilities(&udp, false, true)),
            ["CAP_NET_RAW", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN"]
        );
        let rdma = [Protocol::Udp, Protocol::Rdma];
        assert_eq!(
            names(runtime_capabilities(&rdma, true, false)),
            ["CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_SYS_PTRACE"]
        );
        assert_eq!(
            runtime_capabilities(&rdma, false, false),
            bit(CAP_NET_RAW) | bit(CAP_IPC_LOCK)
        );
        assert_eq!(
            runtime_capabilities(&udp, true, false),
            bit(CAP_NET_RAW) | bit(CAP_SYS_PTRACE)
        );
    }
}
