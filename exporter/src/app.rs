//! `skeletonhunter-exporter`: probes this host's skeleton peers and serves
//! the results on `/metrics`. This file only wires the parts together.

use anyhow::Result;
use clap::Parser;
use skeletonhunter_exporter::{
    config, discovery, metrics, peers, probe, responder, server, sock, trace,
};
use std::sync::Arc;

fn main() -> std::process::ExitCode {
    limit_malloc_retention();
    let args = config::Args::parse();
    skeletonhunter_common::logging::init(&args.log_level);
    let cfg = match config::Config::load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skeletonhunter-exporter: configuration error: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.check_config {
        println!("{cfg:#?}");
        return std::process::ExitCode::SUCCESS;
    }
    // Two worker threads: RTTs come from kernel timestamps, so scheduling
    // delay does not distort them, but encoding a large /metrics must not
    // stall sending probes (a burst afterwards) or draining replies
    // (kernel drops = false loss).
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("skeletonhunter")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("skeletonhunter-exporter: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cfg)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("skeletonhunter-exporter: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cfg: config::Config) -> Result<()> {
    let metrics = Arc::new(metrics::Metrics::new(&cfg.identity));
    let peer_set = peers::PeerSet::new(Some(metrics.clone()));
    let ext = Arc::new(responder::Extensions::default());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    // Bind everything first, so a busy port fails start-up with a clear error.
    let http = skeletonhunter_common::http::bind(cfg.listen).await?;
    let udp = match cfg.udp_listen {
        Some(a) => Some(responder::bind_udp(a)?),
        None => None,
    };
    let tcp = match cfg.tcp_listen {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen for TCP dials on {a}: {e}"))?,
        ),
        None => None,
    };
    let mut probers: Vec<Arc<dyn probe::Prober>> = Vec::new();
    let mut udp_probe_port = None;
    for p in &cfg.protocols {
        match p {
            probe::Protocol::Udp => {
                let p = probe::udp::UdpProber::start(
                    metrics.clone(),
                    ext.clone(),
                    cfg.timeout,
                    cfg.udp_size,
                )?;
                udp_probe_port = p.local_port();
                probers.push(p);
            }
            probe::Protocol::Tcp => {
                probers.push(probe::tcp::TcpProber::new(metrics.clone(), cfg.timeout))
            }
            probe::Protocol::Icmp => probers.push(probe::icmp::IcmpProber::start(
                metrics.clone(),
                cfg.timeout,
            )?),
            probe::Protocol::Rdma => {
                if let Some(p) =
                    probe::rdma::install(cfg.timeout, &cfg.identity.nic, metrics.clone(), &ext)
                {
                    probers.push(p);
                }
            }
        }
    }
    tracing::info!(
        node = %cfg.identity.node,
        host = %cfg.identity.host,
        tor = %cfg.identity.tor,
        listen = %cfg.listen,
        udp = ?cfg.udp_listen,
        tcp = ?cfg.tcp_listen,
        protocols = ?cfg.protocols,
        interval_ms = cfg.interval.as_millis() as u64,
        timeout_ms = cfg.timeout.as_millis() as u64,
        "skeletonhunter-exporter starting"
    );

    let mut tasks = tokio::task::JoinSet::new();
    if let Some(sock) = udp {
        tasks.spawn(responder::run_udp(
            sock,
            cfg.identity.clone(),
            metrics.clone(),
            ext.clone(),
            stopped(),
        ));
    }
    if let Some(l) = tcp {
        tasks.spawn(responder::run_tcp(l, metrics.clone(), stopped()));
    }
    let health = server::Health::default();
    let tracing_ctx = trace::Context::new(
        trace::Tracer::new(Default::default()),
        metrics.clone(),
        peer_set.clone(),
        cfg.udp_port,
        udp_probe_port,
    );
    tracing_ctx.observe(&ext);
    tasks.spawn(
        tracing_ctx
            .clone()
            .watch(std::time::Duration::from_secs(2), 10, 0.2, stopped()),
    );
    tasks.spawn(skeletonhunter_common::http::serve(
        http,
        tracing_ctx.routes(server::handler(metrics.clone(), health.clone())),
        stopped(),
    ));

    // Discovery sources.
    let mut own = sock::local_addresses();
    if let Ok(ip) = cfg.identity.nic.parse() {
        own.push(ip);
    }
    discovery::static_peers::publish(&peer_set, &metrics, cfg.static_peers.clone());
    if !cfg.dns.is_empty() {
        tasks.spawn(discovery::dns::run(
            cfg.dns.clone(),
            own.clone(),
            peer_set.clone(),
            metrics.clone(),
            stopped(),
        ));
    }
    if let Some(t) = cfg.tor_mesh.clone() {
        tasks.spawn(discovery::tor_mesh::run(
            t,
            cfg.identity.tor.clone(),
            own.clone(),
            peer_set.clone(),
            metrics.clone(),
            stopped(),
        ));
    }

    match discovery::traffic::spawn(cfg.ebpf.clone(), peer_set.clone(), Some(metrics.clone()))? {
        Some(active) => {
            tracing::info!(source = active.source, reason = %active.reason, "traffic discovery active")
        }
        None => tracing::info!("traffic discovery off"),
    }

    let scheduler = probe::Scheduler {
        config: probe::ScheduleConfig {
            interval: cfg.interval,
            min_tick: std::time::Duration::from_millis(2),
            expire_every: (cfg.timeout / 10).clamp(
                std::time::Duration::from_millis(5),
                std::time::Duration::from_millis(100),
            ),
            ports: probe::Ports {
                udp: cfg.udp_port,
                tcp: cfg.tcp_port,
            },
        },
        probers,
        peers: peer_set.clone(),
        metrics: metrics.clone(),
    };
    health.set_ready(true);
    tasks.spawn(scheduler.run(stopped()));

    wait_for_signal().await;
    tracing::info!("shutting down");
    health.set_ready(false);
    let _ = stop_tx.send(true);
    // Every task watches the stop signal; give them a moment, then go.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// Keep memory use flat: a large `/metrics` body is mmapped and returned to
/// the kernel when freed (glibc would otherwise raise its mmap threshold
/// after the first free and keep the freed heap resident), and the worker
/// threads share one malloc arena instead of each keeping its own.
fn limit_malloc_retention() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// SIGTERM (Kubernetes) or SIGINT (a terminal).
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
