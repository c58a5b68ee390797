//! The online service: the runtime, the HTTP endpoints, the ticker,
//! SIGHUP and shutdown around [`super::cycle`].

use super::cycle::Localizer;
use super::metrics::Metrics;
use super::record::report_json;
use super::routes::{handler, loaded, reload};
use super::settings::{ServiceError, Settings};
use super::status::{Board, PageInfo};
use crate::clients::http::redact_url;
use crate::input::promql::promql_duration;
use std::sync::Arc;

/// Run the loop until SIGTERM / Ctrl-C (or one cycle with `once`).
pub fn run(settings: Settings) -> Result<(), ServiceError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServiceError::Runtime)?;
    rt.block_on(serve(settings))
}

async fn serve(s: Settings) -> Result<(), ServiceError> {
    // Taken first: SIGHUP's default action would end the process.
    let mut hangup = hangup_signal();
    let metrics = Arc::new(Metrics::new());
    loaded(&metrics);
    let board = Arc::new(Board::new(PageInfo {
        interval: s.interval,
        window: s.window,
        prometheus: redact_url(&s.prometheus),
        alertmanagers: s.alertmanagers.len(),
        telemetry_path: s.telemetry_path.clone(),
    }));
    let mut loc = Localizer::new(&s, metrics.clone(), board.clone())?;
    if s.once {
        return match loc.cycle().await {
            Some(r) => {
                println!("{}", report_json(&r));
                Ok(())
            }
            None => Err(ServiceError::NoData(loc.prometheus().to_string())),
        };
    }

    let listener = skeletonhunter_common::http::bind(s.listen)
        .await
        .map_err(|e| ServiceError::Listen(e.to_string()))?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut server_stop = stop_rx.clone();
    let server = tokio::spawn(skeletonhunter_common::http::serve_web(
        listener,
        handler(metrics.clone(), board, s.interval, s.telemetry_path.clone()),
        skeletonhunter_common::http::Limits::default(),
        s.web.clone(),
        async move {
            let _ = server_stop.wait_for(|s| *s).await;
        },
    ));
    log_start(&s, &loc);

    let mut ticker = tokio::time::interval(s.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(()) = recv(&mut hangup) => {
                let _ = reload(&metrics, "SIGHUP");
            }
            _ = ticker.tick() => {
                // A cycle is bounded by the query timeouts; shutdown still
                // wins. Cycles never overlap (this loop awaits each), and
                // one longer than the interval is followed by a full
                // interval of rest rather than the next cycle at once.
                let started = tokio::time::Instant::now();
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = loc.cycle() => {}
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = loc.refresh_topology() => {}
                }
                if started.elapsed() > s.interval {
                    ticker.reset();
                }
            }
        }
    }
    tracing::info!(
        "shutting down; firing alerts expire in Alertmanager after {:?} unless a localizer re-posts them",
        s.ttl()
    );
    let _ = stop_tx.send(true);
    let _ = server.await;
    Ok(())
}

/// What the loop does, once at start.
fn log_start(s: &Settings, loc: &Localizer) {
    tracing::info!(
        "localizing every {:?} over {} from {} (each query bounded by {:?} and {} answer bytes, {} answer bytes held at once; {} Alertmanager(s)); metrics on http://{}{}",
        s.interval,
        promql_duration(s.window),
        loc.prometheus(),
        s.query_timeout(),
        s.max_response,
        s.max_cycle_response,
        loc.alertmanagers(),
        s.listen,
        s.telemetry_path
    );
    if loc.alertmanagers() == 0 {
        tracing::warn!("no --alertmanager given: faults are only exported as metrics");
    }
    if s.pair_shards > 1 {
        tracing::info!(
            "--pair-shards {}: each cycle reads one shard of the pairs once the node names are known (and at least {} nodes), so a pair is read every {} cycles, and a finding fires once reported in {} consecutive cycles",
            s.pair_shards,
            s.pair_shards_min_nodes,
            s.pair_shards,
            s.confirm_after(s.pair_shards)
        );
    }
}

/// SIGHUP, as a stream (`None` if it cannot be watched: logged once).
fn hangup_signal() -> Option<tokio::signal::unix::Signal> {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot watch SIGHUP ({e}); it will end the process");
            None
        }
    }
}

/// The next SIGHUP; never, when it is not watched.
async fn recv(hangup: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match hangup {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
