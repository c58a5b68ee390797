//! TCP dial prober: can a connection be set up, and how long does it take.
//!
//! A dial is a socket by nature, so each probe is a short-lived task that
//! connects with a timeout and closes with RST (linger 0) so neither side
//! accumulates TIME_WAIT sockets. Concurrency is capped; the scheduler's
//! even spread keeps it far below the cap in practice.
//!
//! A dial is counted in `sent` when its outcome is known (so `sent =
//! answered + lost` at every scrape). A dial this host could not start —
//! no descriptor (EMFILE, ENFILE), no local port (EADDRNOTAVAIL), no
//! memory — is neither sent nor lost: it is a `probe_errors` with reason
//! `local_resources`, so the exporter never reports its own exhaustion as
//! network loss. A failed dial to a peer that closed every connection
//! is its departure, not loss (see [`super`]).

use super::{Prober, Target};
use crate::model::{ProbeErrorReason, Protocol};
use crate::telemetry::Metrics;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpSocket;

/// Most dials in flight at once; beyond it probes are skipped and counted.
pub const MAX_CONCURRENT_DIALS: usize = 4096;

/// The TCP dial prober; see the module docs.
pub struct TcpProber {
    metrics: Arc<Metrics>,
    timeout: Duration,
    in_flight: Arc<AtomicUsize>,
}

impl TcpProber {
    /// A prober whose dials time out after `timeout`.
    pub fn new(metrics: Arc<Metrics>, timeout: Duration) -> Arc<TcpProber> {
        Arc::new(TcpProber {
            metrics,
            timeout,
            in_flight: Arc::new(AtomicUsize::new(0)),
        })
    }
}

/// Why a dial failed, as a `reason` label.
fn failure_reason(e: &std::io::Error) -> ProbeErrorReason {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ProbeErrorReason::ConnectRefused,
        std::io::ErrorKind::TimedOut => ProbeErrorReason::ConnectTimeout,
        std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => {
            ProbeErrorReason::ConnectUnreachable
        }
        _ => ProbeErrorReason::ConnectError,
    }
}

/// Whether a socket error is this host's own shortage (descriptors, local
/// ports, memory) rather than anything the network did.
pub fn is_local_shortage(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
}

fn socket_for(addr: std::net::SocketAddr) -> std::io::Result<TcpSocket> {
    if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
}

async fn dial(s: TcpSocket, addr: std::net::SocketAddr) -> std::io::Result<()> {
    let stream = s.connect(addr).await?;
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
    Ok(())
}

impl Prober for TcpProber {
    fn protocol(&self) -> Protocol {
        Protocol::Tcp
    }

    fn probe(&self, target: &Arc<Target>) {
        let (Some(series), Some(dial_series)) =
            (target.series(Protocol::Tcp), target.dial_series())
        else {
            return;
        };
        if self.in_flight.load(Ordering::Relaxed) >= MAX_CONCURRENT_DIALS {
            self.metrics
                .probe_error(Protocol::Tcp, ProbeErrorReason::TooManyDials.as_str());
            return;
        }
        let addr = target.tcp_addr;
        // The socket first: without a descriptor nothing was sent, and the
        // shortage is ours, not the network's.
        let socket = match socket_for(addr) {
            Ok(s) => s,
            Err(e) => {
                let reason = if is_local_shortage(&e) {
                    ProbeErrorReason::LocalResources
                } else {
                    ProbeErrorReason::SendFailed
                };
                tracing::debug!("TCP dial to {addr}: no socket: {e}");
                self.metrics.probe_error(Protocol::Tcp, reason.as_str());
                return;
            }
        };
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let timeout = self.timeout;
        let metrics = self.metrics.clone();
        let in_flight = self.in_flight.clone();
        let target = target.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let r = tokio::time::timeout(timeout, dial(socket, addr)).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            // Gone while dialling: its series are no longer exported.
            if target.is_retired() || target.is_away() {
                return;
            }
            let failed = !matches!(r, Ok(Ok(())));
            if failed && target.peer.closed {
                // It closed every connection and now refuses or ignores a
                // dial: it left (an ended job's container), as a lost UDP
                // probe to it would say — often first, since a closed port
                // answers a dial at once. Not loss.
                if target.depart() {
                    tracing::info!(peer = %target.addr(), dst_node = %target.dst_node(), "peer closed its connections and refuses dials: it left; its series are removed and its probes not counted until it answers again");
                }
                return;
            }
            match r {
                Ok(Ok(())) => {
                    series.sent.inc();
                    series.answered(start.elapsed().as_secs_f64());
                    dial_series.success.set(1);
                }
                Ok(Err(e)) if is_local_shortage(&e) => {
                    // EADDRNOTAVAIL at connect: out of local ports; nothing
                    // left this host, so it is neither sent nor lost.
                    metrics.probe_error(Protocol::Tcp, ProbeErrorReason::LocalResources.as_str());
                }
                Ok(Err(e)) => {
                    tracing::debug!("TCP dial to {addr} failed: {e}");
                    metrics.probe_error(Protocol::Tcp, failure_reason(&e).as_str());
                    series.sent.inc();
                    series.lost_one();
                    dial_series.success.set(0);
                    dial_series.failures.inc();
                }
                Err(_) => {
                    metrics.probe_error(Protocol::Tcp, ProbeErrorReason::ConnectTimeout.as_str());
                    series.sent.inc();
                    series.lost_one();
                    dial_series.success.set(0);
                    dial_series.failures.inc();
                }
            }
        });
    }

    fn expire(&self, _now: Instant) {
        // Each dial carries its own timeout.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Peer, PeerSource};
    use crate::probe::{PeerInfo, Ports};

    /// A loopback port nothing listens on (a dial to it is refused).
    fn refused_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }

    /// Dial a refusing port once from a target whose peer has `closed`
    /// its connections or not; returns (departures, dial failures, away).
    fn dial_refused(closed: bool) -> (String, String, bool) {
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let info = PeerInfo::new(metrics.clone(), None);
        let mut peer = Peer::new([127, 0, 0, 1].into(), PeerSource::Ebpf);
        peer.closed = closed;
        let ports = Ports {
            udp: 1,
            tcp: refused_port(),
        };
        let target = Arc::new(Target::new(peer, ports, metrics.clone(), info));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let prober = TcpProber::new(metrics.clone(), Duration::from_secs(10));
        rt.block_on(async {
            prober.probe(&target);
            // On this one-thread runtime the dial's task runs from leaving
            // the in-flight count to counting its outcome without a pause.
            let deadline = Instant::now() + Duration::from_secs(30);
            while prober.in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        let text = String::from_utf8(metrics.render(None).body.to_vec()).expect("utf-8");
        let line = |name: &str| {
            let l = text.lines().find(|l| l.starts_with(name));
            l.map_or_else(|| "absent".to_string(), str::to_string)
        };
        (
            line("skeletonhunter_peer_departures_total"),
            line("skeletonhunter_probe_dial_failures_total"),
            target.is_away(),
        )
    }

    #[test]
    fn a_refused_dial_is_loss_unless_the_peer_closed_its_connections() {
        let (departed, failures, away) = dial_refused(false);
        assert!(departed.ends_with(" 0"), "{departed}");
        assert!(failures.ends_with(" 1"), "{failures}");
        assert!(!away);
        // The peer closed every connection: the refusal is its departure.
        let (departed, failures, away) = dial_refused(true);
        assert!(departed.ends_with(" 1"), "{departed}");
        assert_eq!(failures, "absent", "its series are gone");
        assert!(away);
    }

    #[test]
    fn running_out_of_descriptors_or_ports_is_ours_not_the_networks() {
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::EADDRNOTAVAIL,
            libc::ENOBUFS,
        ] {
            assert!(is_local_shortage(&std::io::Error::from_raw_os_error(errno)));
        }
        for errno in [libc::ECONNREFUSED, libc::ETIMEDOUT, libc::EHOSTUNREACH] {
            assert!(!is_local_shortage(&std::io::Error::from_raw_os_error(
                errno
            )));
        }
    }
}
