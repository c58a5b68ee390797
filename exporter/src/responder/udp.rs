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
use crate::sys::batch::{RecvBatch, BATCH};
use crate::sys::sock::{async_fd, enable_rx_drop_count, enable_rx_timestamps, grow_recv_buffer};
use crate::sys::time::wall_ns;
use crate::telemetry::{Metrics, SocketDrops};
use crate::wire::probe::{self as wire, Packet, TYPE_REQUEST};
use prometheus_client::metrics::histogram::Histogram;
use skeletonhunter_common::Identity;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Whether this exporter is leaving: set once, when it stops, so the
/// replies of its last moments carry [`wire::FLAG_LEAVING`]. Clones share
/// the flag.
#[derive(Debug, Clone, Default)]
pub struct Leaving(Arc<AtomicBool>);

impl Leaving {
    /// From now on every reply says the exporter is leaving.
    pub fn announce(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Leaving::announce`] was called.
    pub fn is_announced(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Answer UDP probes that `guard` admits until `shutdown`; once `leaving`
/// is announced, every reply says so.
#[allow(clippy::too_many_arguments)]
pub async fn run_udp(
    sock: AsyncFd<UdpSocket>,
    guard: Guard,
    identity: Identity,
    metrics: Arc<Metrics>,
    peer_info: Arc<PeerInfo>,
    advertise: Vec<(u16, Vec<u8>)>,
    leaving: Leaving,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut r = Responder {
        leaving,
        batch: RecvBatch::new(RECV_LEN),
        out: Vec::with_capacity(wire::MAX_DATAGRAM),
        // The advertised TLVs are fixed at start-up (RDMA starts first).
        tlvs: wire::reply_tlvs(&identity, &advertise),
        drops: metrics.socket_drops(OwnSocket::UdpResponder),
        // How long requests wait here: long on a starved or paused host.
        waited: metrics.host_stack(Protocol::Udp, StackStage::Responder),
        guard,
        metrics,
        peer_info,
    };
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
        // Readiness is cleared only once the queue is empty: a drain cut
        // short by its bound goes on at the next turn.
        if r.drain(sock.get_ref()) {
            ready.clear_ready();
        }
    }
}

/// Receive buffer per datagram: larger than any valid request, so an
/// oversized one is seen as such (truncated) and dropped.
const RECV_LEN: usize = wire::MAX_DATAGRAM + 1;

/// Most `recvmmsg` calls one drain makes before it yields.
const DRAIN_CALLS: usize = 64;

/// The responder's state between wake-ups.
struct Responder {
    leaving: Leaving,
    batch: RecvBatch,
    out: Vec<u8>,
    tlvs: Vec<(u16, Vec<u8>)>,
    drops: SocketDrops,
    waited: Histogram,
    guard: Guard,
    metrics: Arc<Metrics>,
    peer_info: Arc<PeerInfo>,
}

impl Responder {
    /// Answer what is queued on `sock`, a batch of requests per receive
    /// call, each answered on its own as soon as it is read (its delay is
    /// taken just before its reply leaves). `true` once the queue is
    /// empty, `false` after [`DRAIN_CALLS`] calls.
    fn drain(&mut self, sock: &UdpSocket) -> bool {
        for _ in 0..DRAIN_CALLS {
            let n = match self.batch.recv(sock, 0) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) => {
                    // ICMP errors for earlier replies surface here; keep going.
                    tracing::debug!("UDP responder receive error: {e}");
                    continue;
                }
            };
            for i in 0..n {
                self.one(sock, i);
            }
            if n < BATCH {
                return true;
            }
        }
        false
    }

    /// Check, answer and count datagram `i` of the batch.
    fn one(&mut self, sock: &UdpSocket, i: usize) {
        let Some((data, d)) = self.batch.datagrams().nth(i) else {
            return;
        };
        let r = d.received;
        self.drops.observe(r.rx_drops);
        if let Err(reason) = self.guard.check(r.from.ip(), Instant::now()) {
            self.metrics.responder_drop(reason.as_str());
            return;
        }
        if r.truncated || r.len > wire::MAX_DATAGRAM {
            self.metrics.responder_drop(DropReason::Oversized.as_str());
            return;
        }
        let mut held = None;
        let delay = || {
            held = r.kernel_ns.map(|k| wall_ns().saturating_sub(k));
            held.unwrap_or(0)
        };
        let p = match answer(data, delay, &self.tlvs, &mut self.out) {
            Ok(p) => p,
            Err(reason) => {
                self.metrics.responder_drop(reason);
                return;
            }
        };
        if self.leaving.is_announced() {
            wire::set_flag(&mut self.out, wire::FLAG_LEAVING);
        }
        if let Some(ns) = held {
            self.waited.observe(ns as f64 * 1e-9);
        }
        self.peer_info.observe(r.from.ip(), &p);
        match sock.send_to(&self.out, r.from) {
            Ok(_) => self.metrics.responder_reply(Protocol::Udp),
            Err(e) => {
                tracing::debug!("UDP reply to {} failed: {e}", r.from);
                self.metrics.responder_drop(DropReason::SendFailed.as_str());
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
