//! The TCP dial acceptor: accept and close at once, the connection set-up
//! is the probe.

use crate::model::Protocol;
use crate::telemetry::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Accept TCP dial probes until `shutdown`: accept and close at once
/// (the connection set-up is the probe).
pub async fn run_tcp(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    // A plain close (FIN): resetting here could reach the
                    // prober before its connect() completes and read as a
                    // failed dial. The prober resets its side, so neither
                    // end keeps a TIME_WAIT socket.
                    drop(stream);
                    metrics.responder_reply(Protocol::Tcp);
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off.
                    tracing::warn!("TCP dial acceptor: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}
