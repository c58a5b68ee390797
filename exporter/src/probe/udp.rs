//! UDP echo prober: the main probe, answered by peers' responders.
//!
//! A pool of K sockets per address family (K = `probe.flows`, each bound
//! to its own source port, so each is one flow that ECMP hashes onto one
//! path) carries every peer's probes; each peer's probes take the K flows
//! in turn ([`FlowBook`]), so descriptors stay K per family whatever the
//! number of peers. RTT is the
//! kernel receive time of the reply minus the kernel transmit time of the
//! request (both SO_TIMESTAMPING software timestamps; the user-space send
//! time when the kernel gives none), minus the time the responder held
//! the request, so neither host's scheduling delays
//! show up as network latency. The reply's identity TLVs name the peer
//! (`dst_node`), which is how a peer found by eBPF gets its name.
//!
//! A reply marked [`wire::FLAG_LEAVING`] says the peer's exporter is
//! stopping: the peer's series are removed and its probes stop counting
//! ([`Target::leave`]); one uncounted UDP probe per interval still asks
//! whether it is back, and the first reply without the flag brings it
//! back under fresh series. A job that ends, a pod moved and a rollout
//! are thus never loss.

use super::flows::FlowBook;
use super::{
    receive_task, Completion, NodeClaim, PeerInfo, Prober, Reader, Sent, SharedInFlight, Target,
    DRAIN_CALLS,
};
use crate::model::ProbeLabels;
use crate::model::{OwnSocket, ProbeErrorReason, Protocol};
use crate::sys::batch::{RecvBatch, BATCH};
use crate::sys::sock::{
    async_fd_with, enable_rx_drop_count, enable_rx_timestamps, enable_tx_timestamps,
    grow_recv_buffer,
};
use crate::sys::time::{random_u64, wall_ns};
use crate::telemetry::{Metrics, Series};
use crate::wire::probe::{self as wire, Packet, TRACE_SESSION, TYPE_REPLY};
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The UDP prober; see the module docs.
/// Maps the kernel's transmit-timestamp ids (a per-socket counter of sent
/// datagrams, SOF_TIMESTAMPING_OPT_ID) to our sequence numbers.
struct TxIds {
    enabled: bool,
    next_id: u32,
    /// (kernel id, seq, user-space time just before the send)
    sent: VecDeque<(u32, u64, u64)>,
}

/// A transmit timestamp must fall within this long after the user-space
/// send time, or the id mapping is considered broken.
const TX_TS_WINDOW_NS: u64 = 10_000_000;

struct ProbeSocket {
    fd: AsyncFd<UdpSocket>,
    tx: Mutex<TxIds>,
}

/// The UDP echo prober; see the module docs.
pub struct UdpProber {
    /// Flow `i` of an IPv4 peer leaves from `v4[i]`.
    v4: Vec<Arc<ProbeSocket>>,
    /// The same for IPv6; empty without IPv6.
    v6: Vec<Arc<ProbeSocket>>,
    /// The flow rotation and per-flow loss.
    book: Arc<FlowBook>,
    session: u64,
    seq: AtomicU64,
    inflight: SharedInFlight<Sent<usize>>,
    metrics: Arc<Metrics>,
    peer_info: Arc<PeerInfo>,
    /// TLVs added to every request (the RDMA endpoint).
    advertise: Vec<(u16, Vec<u8>)>,
    probe_size: usize,
    buf: Mutex<Vec<u8>>,
    /// What probes to peers that are away count in: nothing exported.
    away: Arc<Series>,
}

fn open(addr: SocketAddr) -> std::io::Result<Arc<ProbeSocket>> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    grow_recv_buffer(s.as_raw_fd(), 4 << 20);
    enable_rx_drop_count(s.as_raw_fd());
    let tx = enable_tx_timestamps(s.as_raw_fd());
    if !tx && !enable_rx_timestamps(s.as_raw_fd()) {
        tracing::warn!("kernel timestamps unavailable; UDP RTTs use user-space time");
    }
    Ok(Arc::new(ProbeSocket {
        fd: async_fd_with(s, Interest::READABLE | Interest::ERROR)?,
        tx: Mutex::new(TxIds {
            enabled: tx,
            next_id: 0,
            sent: VecDeque::new(),
        }),
    }))
}

impl UdpProber {
    /// Open `book.flows()` sockets per family and start their receive
    /// tasks (they end with the runtime). `probe_size` is the request
    /// size, so replies have room for the responder's identity.
    pub fn start(
        metrics: Arc<Metrics>,
        peer_info: Arc<PeerInfo>,
        advertise: Vec<(u16, Vec<u8>)>,
        timeout: Duration,
        probe_size: usize,
        book: Arc<FlowBook>,
    ) -> std::io::Result<Arc<UdpProber>> {
        let k = book.flows();
        let v4 = (0..k)
            .map(|_| open(SocketAddr::from(([0, 0, 0, 0], 0))))
            .collect::<std::io::Result<Vec<_>>>()?;
        let v6 = (0..k)
            .map(|_| open(SocketAddr::from(([0u16; 8], 0))))
            .collect::<std::io::Result<Vec<_>>>()
            .unwrap_or_default();
        let p = Arc::new(UdpProber {
            v4,
            v6,
            book,
            session: random_u64(),
            seq: AtomicU64::new(1),
            inflight: SharedInFlight::new(timeout),
            metrics,
            peer_info,
            advertise,
            probe_size: probe_size.clamp(wire::HEADER_LEN, wire::MAX_DATAGRAM),
            buf: Mutex::new(Vec::with_capacity(probe_size)),
            away: Arc::new(Series::detached(ProbeLabels {
                src_node: String::new(),
                dst_node: String::new(),
                protocol: Protocol::Udp,
            })),
        });
        for s in p.v4.iter().chain(&p.v6).cloned() {
            let reader = Reader::new(65536, &p.metrics, OwnSocket::UdpProber, Protocol::Udp);
            tokio::spawn(receive_loop(s, Arc::downgrade(&p), reader));
        }
        Ok(p)
    }

    /// Source ports of the IPv4 probe flows, in flow order, so path
    /// tracing can keep each flow's 5-tuple (and with it its ECMP path).
    pub fn local_ports(&self) -> Vec<u16> {
        self.v4
            .iter()
            .filter_map(|s| s.fd.get_ref().local_addr().ok().map(|a| a.port()))
            .collect()
    }

    /// Count a finished probe of `target` over `flow` and refresh the
    /// pair's worst-flow loss ratio; a probe that asked a peer away
    /// whether it is back counts nowhere.
    fn finished(&self, sent: &Sent<usize>, lost: bool, now: Instant) {
        if Arc::ptr_eq(&sent.series, &self.away) {
            return;
        }
        let (target, flow) = (&sent.target, sent.flow);
        if let Some(worst) = self.book.record(target.addr(), flow, lost, now) {
            if let Some(f) = target.flow_series() {
                f.worst_loss.set(worst);
                f.flows.set(self.book.flows() as i64);
            }
        }
    }

    /// The kernel reports when datagram `id` left: use it as the probe's
    /// send time.
    fn on_tx_timestamp(&self, sock: &ProbeSocket, id: u32, ts: u64) {
        let mut tx = sock
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !tx.enabled {
            return;
        }
        // Entries before `id` never got a timestamp (the kernel may skip
        // one under memory pressure).
        while let Some(&(i, _, _)) = tx.sent.front() {
            if (id.wrapping_sub(i) as i32) <= 0 {
                break;
            }
            tx.sent.pop_front();
        }
        let Some(&(i, seq, pre)) = tx.sent.front() else {
            return;
        };
        if i != id {
            return;
        }
        tx.sent.pop_front();
        if ts < pre || ts - pre > TX_TS_WINDOW_NS {
            // Our copy of the kernel's counter went out of step (a send
            // that failed after the kernel counted it): stop trusting it.
            tx.enabled = false;
            tx.sent.clear();
            drop(tx);
            tracing::warn!(
                "UDP transmit timestamps out of step; using user-space send times from now on"
            );
            self.metrics.probe_error(
                Protocol::Udp,
                ProbeErrorReason::TxTimestampMismatch.as_str(),
            );
            return;
        }
        drop(tx);
        if let Some(sent) = self.inflight.lock().get_mut(seq) {
            sent.tx_ns = ts;
        }
    }

    /// Read the transmit timestamps queued on `sock`'s error queue, a batch
    /// per call, until it is empty (`true`) or [`DRAIN_CALLS`] calls were
    /// made (`false`).
    fn drain_tx_timestamps(&self, sock: &ProbeSocket, batch: &mut RecvBatch) -> bool {
        for _ in 0..DRAIN_CALLS {
            // Any error (an empty queue included) ends the drain: the
            // error queue holds nothing else for this socket.
            let Ok(n) = batch.recv(sock.fd.get_ref(), libc::MSG_ERRQUEUE) else {
                return true;
            };
            for (_, d) in batch.datagrams() {
                if let Some((id, ts)) = d.tx_id.zip(d.received.kernel_ns) {
                    self.on_tx_timestamp(sock, id, ts);
                }
            }
            if n < BATCH {
                return true;
            }
        }
        false
    }

    /// `target` said it is leaving: its series go now, its flows are
    /// forgotten (nothing traces it), and its probes count nowhere.
    fn peer_left(&self, target: &Target) {
        if target.depart() {
            self.book.forget(target.addr());
            tracing::info!(peer = %target.addr(), dst_node = %target.dst_node(), "peer is leaving (its reply says so): its series are removed and its probes not counted until it answers again");
        }
    }

    fn on_datagram(&self, data: &[u8], from: SocketAddr, rx_ns: u64) {
        let p = match Packet::decode(data) {
            Ok(p) if p.header.typ == TYPE_REPLY && p.header.session == self.session => p,
            // Path traces share this socket's port; their echoes are not ours.
            Ok(p) if p.header.session == TRACE_SESSION => return,
            Ok(_) => {
                self.metrics
                    .probe_error(Protocol::Udp, ProbeErrorReason::ForeignReply.as_str());
                return;
            }
            Err(e) => {
                self.metrics.probe_error(Protocol::Udp, e.as_str());
                return;
            }
        };
        let now = Instant::now();
        let done = self.inflight.lock().complete(p.header.seq, now);
        let sent = match done {
            Completion::Answered(s) => s.data,
            other => {
                self.metrics.probe_error(Protocol::Udp, other.reason());
                return;
            }
        };
        if sent.target.is_retired() {
            return;
        }
        if p.header.flags & wire::FLAG_LEAVING != 0 {
            self.peer_left(&sent.target);
            return;
        }
        if sent.target.come_back() {
            tracing::info!(peer = %sent.target.addr(), dst_node = %sent.target.dst_node(), "peer answers again after it left; its probes count again");
        }
        self.finished(&sent, false, now);
        let rtt_ns = rx_ns
            .saturating_sub(sent.tx_ns)
            .saturating_sub(p.header.responder_delay_ns);
        let node = p.identity().node;
        // Conflicts are counted and logged by the target.
        let moved = match sent.target.learn_node(&node) {
            NodeClaim::Conflict { .. } | NodeClaim::Taken => false,
            NodeClaim::Same | NodeClaim::Pinned => {
                !node.is_empty() && node != sent.series.labels.dst_node
            }
        };
        let series = if moved {
            // The probe was counted as sent under the old name; count it
            // again under the new one so the books balance there.
            match sent.target.series(Protocol::Udp) {
                Some(s) => {
                    s.sent.inc();
                    s
                }
                None => return,
            }
        } else {
            sent.series
        };
        series.answered(rtt_ns as f64 / 1e9);
        if from.ip() != sent.target.addr() {
            tracing::debug!(expected = %sent.target.addr(), got = %from, "UDP reply from another address");
        }
        self.peer_info.observe(from.ip(), &p);
    }
}

async fn receive_loop(sock: Arc<ProbeSocket>, prober: Weak<UdpProber>, reader: Reader) {
    let interest = Interest::READABLE | Interest::ERROR;
    // OPT_TSONLY: an error-queue entry carries no payload.
    let mut stamps = RecvBatch::new(64);
    receive_task(
        &sock.fd,
        interest,
        &prober,
        "UDP probe socket",
        reader,
        |p, reader| {
            // Transmit timestamps first: a reply is only ever read after the
            // timestamp of its request, which the kernel queued during send.
            let stamps_drained = p.drain_tx_timestamps(&sock, &mut stamps);
            let drained = reader.drain(
                sock.fd.get_ref(),
                |data, from, rx| p.on_datagram(data, from, rx),
                |e| {
                    // ICMP port unreachable from a peer without responder
                    // surfaces as ECONNREFUSED here; the probe times out.
                    tracing::trace!("UDP probe receive error: {e}");
                    p.metrics
                        .probe_error(Protocol::Udp, ProbeErrorReason::IcmpError.as_str());
                },
            );
            stamps_drained && drained
        },
    )
    .await;
}

impl Prober for UdpProber {
    fn protocol(&self) -> Protocol {
        Protocol::Udp
    }

    fn probe(&self, target: &Arc<Target>) {
        let (series, flow) = match target.series(Protocol::Udp) {
            Some(s) => (s, self.book.next_flow(target.addr(), Instant::now())),
            // Away: one uncounted probe over the first flow asks whether
            // it is back (its flows stay forgotten until it is).
            None if target.is_away() && !target.is_retired() => (self.away.clone(), 0),
            None => return,
        };
        let dst = target.udp_addr;
        let pool = match dst {
            SocketAddr::V4(_) => &self.v4,
            SocketAddr::V6(_) => &self.v6,
        };
        let Some(sock) = pool.get(flow) else {
            self.metrics
                .probe_error(Protocol::Udp, ProbeErrorReason::NoIpv6Socket.as_str());
            return;
        };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let sock = sock.as_ref();
        let mut buf = self
            .buf
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tx_ns = wall_ns();
        wire::encode_request(
            &mut buf,
            self.session,
            seq,
            tx_ns,
            &self.advertise,
            self.probe_size,
        );
        let sent = Sent {
            target: target.clone(),
            series,
            tx_ns,
            flow,
        };
        self.inflight.register(seq, Instant::now(), sent);
        // The id map is locked across the send, so the receive task cannot
        // see this datagram's timestamp before its id is recorded.
        let mut tx = sock
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match sock.fd.get_ref().send_to(&buf, dst) {
            Ok(_) if tx.enabled => {
                let id = tx.next_id;
                tx.next_id = id.wrapping_add(1);
                tx.sent.push_back((id, seq, tx_ns));
                if tx.sent.len() > 1 << 16 {
                    tx.sent.pop_front();
                }
            }
            Ok(_) => {}
            Err(e) => {
                // The probe still counts: a send error on a dead route is
                // loss as far as the pair is concerned.
                tracing::trace!("UDP probe to {dst} failed: {e}");
                self.metrics
                    .probe_error(Protocol::Udp, ProbeErrorReason::SendFailed.as_str());
            }
        }
    }

    fn expire(&self, now: Instant) {
        let (lost, left) = self.inflight.expire_lost(now);
        for lost in lost {
            self.finished(&lost, true, now);
        }
        for t in left {
            self.book.forget(t.addr());
            tracing::info!(peer = %t.addr(), dst_node = %t.dst_node(), "peer closed its connections and went silent: it left; its series are removed and its probes not counted until it answers again");
        }
        self.book.sweep(now);
    }
}
