//! The responder every exporter runs: UDP echo and a TCP dial acceptor.
//!
//! The UDP side answers each valid request with the same session and
//! sequence number, the time it held the request (kernel receive to reply
//! send) and as much of this exporter's identity as fits in the request's
//! size, so the prober learns who answered and a reply is never larger than
//! its request. Anything that is not a valid request is dropped and counted
//! by reason; nothing a peer sends can make it panic or reply bigger.

use crate::metrics::Metrics;
use crate::probe::wire::{self, Packet, TYPE_REQUEST};
use crate::probe::{wall_ns, Protocol};
use crate::sock::{enable_rx_timestamps, recv_with_timestamp};
use skeletonhunter_common::Identity;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::net::TcpListener;

/// Fields other modules add to this exporter's probe messages (the RDMA
/// endpoint TLV), and hooks that see every valid peer message.
#[derive(Default)]
pub struct Extensions {
    /// Extra TLVs sent in requests and replies, most important first.
    pub advertise: RwLock<Vec<(u16, Vec<u8>)>>,
    /// Called with the sender and the decoded packet of every valid
    /// request the responder answers and every reply the prober accepts.
    #[allow(clippy::type_complexity)]
    pub observers: RwLock<Vec<Arc<dyn Fn(IpAddr, &Packet<'_>) + Send + Sync>>>,
}

impl Extensions {
    pub fn advertised(&self) -> Vec<(u16, Vec<u8>)> {
        self.advertise
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn notify(&self, from: IpAddr, p: &Packet<'_>) {
        let obs = self.observers.read().unwrap_or_else(|e| e.into_inner());
        for o in obs.iter() {
            o(from, p);
        }
    }
}

/// Bind the UDP echo socket (an error names the address).
pub fn bind_udp(addr: SocketAddr) -> anyhow::Result<AsyncFd<UdpSocket>> {
    let s = UdpSocket::bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot bind UDP responder on {addr}: {e}"))?;
    s.set_nonblocking(true)?;
    crate::sock::grow_recv_buffer(s.as_raw_fd(), 4 << 20);
    if !enable_rx_timestamps(s.as_raw_fd()) {
        tracing::warn!("kernel receive timestamps unavailable on the responder socket; responder delay uses user-space time");
    }
    Ok(crate::sock::async_fd(s)?)
}

/// Answer UDP probes until `shutdown`.
pub async fn run_udp(
    sock: AsyncFd<UdpSocket>,
    identity: Identity,
    metrics: Arc<Metrics>,
    ext: Arc<Extensions>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::with_capacity(wire::MAX_DATAGRAM);
    let mut tlvs = wire::reply_tlvs(&identity, &ext.advertised());
    let mut tlv_refresh = tokio::time::Instant::now();
    loop {
        let mut guard = tokio::select! {
            _ = &mut shutdown => return,
            g = sock.readable() => match g {
                Ok(g) => g,
                Err(e) => {
                    tracing::error!("UDP responder socket failed: {e}");
                    return;
                }
            },
        };
        // Extensions may change at runtime (RDMA endpoint comes up late).
        if tlv_refresh.elapsed() > Duration::from_secs(1) {
            tlvs = wire::reply_tlvs(&identity, &ext.advertised());
            tlv_refresh = tokio::time::Instant::now();
        }
        loop {
            let r = match recv_with_timestamp(sock.get_ref(), &mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    guard.clear_ready();
                    break;
                }
                Err(e) => {
                    // ICMP errors for earlier replies surface here; keep going.
                    tracing::debug!("UDP responder receive error: {e}");
                    continue;
                }
            };
            if r.truncated || r.len > wire::MAX_DATAGRAM {
                metrics.responder_drop("oversized");
                continue;
            }
            let data = &buf[..r.len];
            let p = match Packet::decode(data) {
                Ok(p) => p,
                Err(e) => {
                    metrics.responder_drop(e.as_str());
                    continue;
                }
            };
            if p.header.typ != TYPE_REQUEST {
                metrics.responder_drop("not_request");
                continue;
            }
            ext.notify(r.from.ip(), &p);
            let now = wall_ns();
            let delay = r.kernel_ns.map(|k| now.saturating_sub(k)).unwrap_or(0);
            wire::encode_reply(&mut out, &p.header, delay, &tlvs, r.len);
            match sock.get_ref().send_to(&out, r.from) {
                Ok(_) => metrics.responder_reply(Protocol::Udp),
                Err(e) => {
                    tracing::debug!("UDP reply to {} failed: {e}", r.from);
                    metrics.responder_drop("send_failed");
                }
            }
        }
    }
}

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
