//! The UDP echo responder. It answers each valid request from an allowed
//! source within its rate ([`super::guard`]) with the same session and
//! sequence number, the time it held the request (kernel receive to reply
//! send), this exporter's node name and, with RDMA probing, its RDMA
//! endpoint — only what the prober needs — as far as they fit in the
//! request's size, so a reply is never larger than its request. Anything
//! else is dropped and counted by reason; nothing a peer sends can make it
//! panic or reply bigger.

use super::guard::Guard;
use crate::model::{DropReason, OwnSocket, Protocol, StackStage};
use crate::probe::PeerInfo;
use crate::sys::sock::{
    async_fd, enable_rx_drop_count, enable_rx_timestamps, grow_recv_buffer, recv_with_timestamp,
};
use crate::sys::time::wall_ns;
use crate::telemetry::Metrics;
use crate::wire::probe::{self as wire, Packet, TYPE_REQUEST};
use skeletonhunter_common::Identity;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::unix::AsyncFd;

/// Bind the UDP echo socket (an error names the address).
pub fn bind_udp(addr: SocketAddr) -> Result<AsyncFd<UdpSocket>, BindError> {
    let bind_error = |source| BindError { addr, source };
    let s = UdpSocket::bind(addr).map_err(bind_error)?;
    s.set_nonblocking(true).map_err(bind_error)?;
    grow_recv_buffer(s.as_raw_fd(), 4 << 20);
    enable_rx_drop_count(s.as_raw_fd());
    if !enable_rx_timestamps(s.as_raw_fd()) {
        tracing::warn!("kernel receive timestamps unavailable on the responder socket; responder delay uses user-space time");
    }
    async_fd(s).map_err(bind_error)
}

/// The UDP echo socket could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot bind UDP responder on {addr}: {source}")]
pub struct BindError {
    /// The configured address.
    pub addr: SocketAddr,
    /// Why.
    pub source: std::io::Error,
}

/// Answer UDP probes that `guard` admits until `shutdown`.
#[allow(clippy::too_many_arguments)]
pub async fn run_udp(
    sock: AsyncFd<UdpSocket>,
    mut guard: Guard,
    identity: Identity,
    metrics: Arc<Metrics>,
    peer_info: Arc<PeerInfo>,
    advertise: Vec<(u16, Vec<u8>)>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::with_capacity(wire::MAX_DATAGRAM);
    // The advertised TLVs are fixed at start-up (RDMA starts first).
    let tlvs = wire::reply_tlvs(&identity, &advertise);
    let mut drops = metrics.socket_drops(OwnSocket::UdpResponder);
    // How long requests wait here: long on a starved or paused host.
    let waited = metrics.host_stack(Protocol::Udp, StackStage::Responder);
    loop {
        let mut ready = tokio::select! {
            _ = &mut shutdown => return,
            g = sock.readable() => match g {
                Ok(g) => g,
                Err(e) => {
                    tracing::error!("UDP responder socket failed: {e}");
                    return;
                }
            },
        };
        loop {
            let r = match recv_with_timestamp(sock.get_ref(), &mut buf) {
                Ok(r) => {
                    drops.observe(r.rx_drops);
                    r
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    break;
                }
                Err(e) => {
                    // ICMP errors for earlier replies surface here; keep going.
                    tracing::debug!("UDP responder receive error: {e}");
                    continue;
                }
            };
            if let Err(reason) = guard.check(r.from.ip(), Instant::now()) {
                metrics.responder_drop(reason.as_str());
                continue;
            }
            if r.truncated || r.len > wire::MAX_DATAGRAM {
                metrics.responder_drop(DropReason::Oversized.as_str());
                continue;
            }
            let mut held = None;
            let delay = || {
                held = r.kernel_ns.map(|k| wall_ns().saturating_sub(k));
                held.unwrap_or(0)
            };
            let p = match answer(&buf[..r.len], delay, &tlvs, &mut out) {
                Ok(p) => p,
                Err(reason) => {
                    metrics.responder_drop(reason);
                    continue;
                }
            };
            if let Some(ns) = held {
                waited.observe(ns as f64 * 1e-9);
            }
            peer_info.observe(r.from.ip(), &p);
            match sock.get_ref().send_to(&out, r.from) {
                Ok(_) => metrics.responder_reply(Protocol::Udp),
                Err(e) => {
                    tracing::debug!("UDP reply to {} failed: {e}", r.from);
                    metrics.responder_drop(DropReason::SendFailed.as_str());
                }
            }
        }
    }
}

/// Every `reason` of `skeletonhunter_responder_dropped` the UDP responder
/// counts: its own drop reasons and the wire format's decode errors.
pub fn drop_reasons() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    v.extend(wire::DecodeError::ALL.iter().map(|e| e.as_str()));
    v.sort_unstable();
    v.dedup();
    v
}

/// What the responder does with one datagram, without I/O: a valid request
/// gets its reply encoded into `out` (never longer than `data`; `delay` is
/// asked for the responder delay just before encoding) and is returned for
/// the peer bookkeeping; anything else is the drop `reason` label. The
/// fuzz targets (`crate::fuzz`) drive this very function.
pub fn answer<'a>(
    data: &'a [u8],
    delay: impl FnOnce() -> u64,
    tlvs: &[(u16, Vec<u8>)],
    out: &mut Vec<u8>,
) -> Result<Packet<'a>, &'static str> {
    let p = Packet::decode(data).map_err(wire::DecodeError::as_str)?;
    if p.header.typ != TYPE_REQUEST {
        return Err(DropReason::NotRequest.as_str());
    }
    wire::encode_reply(out, &p.header, delay(), tlvs, data.len());
    Ok(p)
}
