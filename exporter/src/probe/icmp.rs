//! ICMP echo prober, for targets without a responder.
//!
//! Uses an ICMP datagram socket ("ping socket") when
//! `net.ipv4.ping_group_range` allows it, otherwise a raw socket (root or
//! CAP_NET_RAW). One socket per family serves every target. The payload
//! carries our session id and a 64-bit sequence number, so replies are
//! matched exactly even when other pingers share the host (a raw socket
//! sees every echo reply) and the 16-bit ICMP sequence wraps.

use super::{receive_task, Completion, Prober, Reader, Sent, SharedInFlight, Target};
use crate::model::{OwnSocket, ProbeErrorReason, Protocol};
use crate::sys::sock::{
    async_fd, enable_rx_drop_count, enable_rx_timestamps, grow_recv_buffer, set_dont_fragment,
    set_icmp_filter_only,
};
use crate::sys::time::{random_u64, wall_ns};
use crate::telemetry::Metrics;
use socket2::{Domain, Socket, Type};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;
/// Payload: magic, session, sequence.
const PAYLOAD_MAGIC: [u8; 4] = *b"SKHI";
const ICMP_LEN: usize = 8 + 4 + 8 + 8;

struct IcmpSocket {
    fd: AsyncFd<Socket>,
    /// Raw sockets deliver the IPv4 header too and see foreign replies.
    raw: bool,
    v6: bool,
}

/// The ICMP prober; see the module docs.
pub struct IcmpProber {
    v4: Option<Arc<IcmpSocket>>,
    v6: Option<Arc<IcmpSocket>>,
    session: u64,
    ident: u16,
    seq: AtomicU64,
    inflight: SharedInFlight<Sent<()>>,
    metrics: Arc<Metrics>,
}

/// RFC 1071 checksum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u32) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request carrying `session` and `seq`.
pub fn encode_echo(v6: bool, ident: u16, session: u64, seq: u64) -> [u8; ICMP_LEN] {
    let mut b = [0u8; ICMP_LEN];
    b[0] = if v6 { ECHO_REQUEST_V6 } else { ECHO_REQUEST_V4 };
    b[4..6].copy_from_slice(&ident.to_be_bytes());
    b[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
    b[8..12].copy_from_slice(&PAYLOAD_MAGIC);
    b[12..20].copy_from_slice(&session.to_be_bytes());
    b[20..28].copy_from_slice(&seq.to_be_bytes());
    if !v6 {
        // The kernel computes ICMPv6 checksums (pseudo-header) itself.
        let c = checksum(&b);
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
    b
}

/// The (session, seq) of an echo reply, skipping the IPv4 header of raw
/// sockets; `None` for anything else.
pub fn parse_echo_reply(data: &[u8], v6: bool, raw: bool) -> Option<(u64, u64)> {
    let icmp = if raw && !v6 {
        let ihl = (*data.first()? & 0x0f) as usize * 4;
        if ihl < 20 {
            return None;
        }
        data.get(ihl..)?
    } else {
        data
    };
    if icmp.len() < ICMP_LEN {
        return None;
    }
    let want = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
    if icmp[0] != want || icmp[1] != 0 || icmp[8..12] != PAYLOAD_MAGIC {
        return None;
    }
    let session = u64::from_be_bytes(icmp[12..20].try_into().ok()?);
    let seq = u64::from_be_bytes(icmp[20..28].try_into().ok()?);
    Some((session, seq))
}

fn open(v6: bool) -> std::io::Result<IcmpSocket> {
    let (domain, proto) = if v6 {
        (Domain::IPV6, socket2::Protocol::ICMPV6)
    } else {
        (Domain::IPV4, socket2::Protocol::ICMPV4)
    };
    let (sock, raw) = match Socket::new(domain, Type::DGRAM, Some(proto)) {
        Ok(s) => (s, false),
        Err(dgram_err) => match Socket::new(domain, Type::RAW, Some(proto)) {
            Ok(s) => (s, true),
            Err(raw_err) => {
                return Err(std::io::Error::new(
                    raw_err.kind(),
                    format!(
                        "ICMP datagram socket: {dgram_err} (check net.ipv4.ping_group_range); raw socket: {raw_err} (needs root or CAP_NET_RAW)"
                    ),
                ))
            }
        },
    };
    sock.set_nonblocking(true)?;
    if raw && !v6 {
        set_icmp_filter_only(sock.as_raw_fd(), ECHO_REPLY_V4);
    }
    if !v6 {
        set_dont_fragment(sock.as_raw_fd());
    }
    grow_recv_buffer(sock.as_raw_fd(), 4 << 20);
    enable_rx_drop_count(sock.as_raw_fd());
    enable_rx_timestamps(sock.as_raw_fd());
    Ok(IcmpSocket {
        fd: async_fd(sock)?,
        raw,
        v6,
    })
}

impl IcmpProber {
    /// Open the sockets (IPv4 required, IPv6 if available) and start the
    /// receive tasks.
    pub fn start(metrics: Arc<Metrics>, timeout: Duration) -> std::io::Result<Arc<IcmpProber>> {
        let v4 = open(false)?;
        tracing::info!(
            kind = if v4.raw { "raw" } else { "datagram" },
            "ICMP prober socket open"
        );
        let v6 = open(true).ok();
        let p = Arc::new(IcmpProber {
            v4: Some(Arc::new(v4)),
            v6: v6.map(Arc::new),
            session: random_u64(),
            ident: (std::process::id() & 0xffff) as u16,
            seq: AtomicU64::new(1),
            inflight: SharedInFlight::new(timeout),
            metrics,
        });
        for s in p.v4.iter().chain(p.v6.iter()).cloned() {
            let reader = Reader::new(2048, &p.metrics, OwnSocket::IcmpProber, Protocol::Icmp);
            tokio::spawn(receive_loop(s, Arc::downgrade(&p), reader));
        }
        Ok(p)
    }

    fn on_reply(&self, session: u64, seq: u64, rx_ns: u64) {
        if session != self.session {
            // Another pinger's reply on a shared raw socket.
            return;
        }
        let done = self.inflight.lock().complete(seq, Instant::now());
        match done {
            Completion::Answered(p) => {
                if !p.data.target.is_retired() {
                    let rtt = rx_ns.saturating_sub(p.data.tx_ns);
                    p.data.series.answered(rtt as f64 / 1e9);
                }
            }
            other => self.metrics.probe_error(Protocol::Icmp, other.reason()),
        }
    }
}

async fn receive_loop(sock: Arc<IcmpSocket>, prober: Weak<IcmpProber>, reader: Reader) {
    receive_task(
        &sock.fd,
        Interest::READABLE,
        &prober,
        "ICMP socket",
        reader,
        |p, reader| {
            reader.drain(
                sock.fd.get_ref(),
                |data, _, rx| {
                    if let Some((session, seq)) = parse_echo_reply(data, sock.v6, sock.raw) {
                        p.on_reply(session, seq, rx);
                    }
                },
                |e| tracing::trace!("ICMP receive error: {e}"),
            )
        },
    )
    .await;
}

impl Prober for IcmpProber {
    fn protocol(&self) -> Protocol {
        Protocol::Icmp
    }

    fn probe(&self, target: &Arc<Target>) {
        let Some(series) = target.series(Protocol::Icmp) else {
            return;
        };
        let addr = target.addr();
        let sock = match addr {
            IpAddr::V4(_) => self.v4.as_ref(),
            IpAddr::V6(_) => self.v6.as_ref(),
        };
        let Some(sock) = sock else {
            self.metrics
                .probe_error(Protocol::Icmp, ProbeErrorReason::NoSocketForFamily.as_str());
            return;
        };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let pkt = encode_echo(sock.v6, self.ident, self.session, seq);
        let sent = Sent {
            target: target.clone(),
            series,
            tx_ns: wall_ns(),
            flow: (),
        };
        self.inflight.register(seq, Instant::now(), sent);
        let dst = socket2::SockAddr::from(SocketAddr::new(addr, 0));
        if let Err(e) = sock.fd.get_ref().send_to(&pkt, &dst) {
            tracing::trace!("ICMP echo to {addr} failed: {e}");
            self.metrics
                .probe_error(Protocol::Icmp, ProbeErrorReason::SendFailed.as_str());
        }
    }

    fn expire(&self, now: Instant) {
        // Peers that left have departed already; nothing else is ICMP's.
        let _ = self.inflight.expire_lost(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_a_packet_with_its_checksum_is_zero() {
        let b = encode_echo(false, 0x1234, 99, 70_000);
        assert_eq!(checksum(&b), 0);
    }

    #[test]
    fn echo_reply_round_trip_and_rejects() {
        let mut b = encode_echo(false, 1, 42, 1 << 40);
        b[0] = ECHO_REPLY_V4;
        assert_eq!(parse_echo_reply(&b, false, false), Some((42, 1 << 40)));
        // Raw IPv4: a 20-byte header in front.
        let mut raw = vec![0x45u8];
        raw.extend_from_slice(&[0u8; 19]);
        raw.extend_from_slice(&b);
        assert_eq!(parse_echo_reply(&raw, false, true), Some((42, 1 << 40)));
        // A request, a short packet, a foreign payload, a bad IHL.
        let req = encode_echo(false, 1, 42, 7);
        assert_eq!(parse_echo_reply(&req, false, false), None);
        assert_eq!(parse_echo_reply(&b[..10], false, false), None);
        let mut foreign = b;
        foreign[8] = b'X';
        assert_eq!(parse_echo_reply(&foreign, false, false), None);
        assert_eq!(parse_echo_reply(&[0x41, 0, 0], false, true), None);
        assert_eq!(parse_echo_reply(&[], false, true), None);
    }
}
