//! The reference the exporter's RTTs are compared with: a pinger in the
//! bench that sends one probe at a time, 20 a second, to an address the
//! exporter does not probe, and takes its RTT the way the exporter does
//! (kernel receive timestamp; for UDP also the kernel transmit timestamp
//! and the responder's delay subtracted), but never batched and never
//! busy. The median of its RTTs is what a quiet prober sees on the same
//! path at the same time.

use skeletonhunter_exporter::model::Protocol;
use skeletonhunter_exporter::probe::icmp::{encode_echo, parse_echo_reply};
use skeletonhunter_exporter::sys::poll::poll_readable;
use skeletonhunter_exporter::sys::sock::{
    enable_rx_timestamps, enable_tx_timestamps, recv_tx_timestamp, recv_with_timestamp,
};
use skeletonhunter_exporter::sys::time::wall_ns;
use skeletonhunter_exporter::wire::probe::{self as wire, Packet, TYPE_REPLY};
use socket2::{Domain, SockAddr, Socket, Type};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The address the reference probes (loopback, not among the targets).
pub const ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 2, 0, 1);
const SESSION: u64 = 0x5245_4645_5245_4e43;
const GAP: Duration = Duration::from_millis(50);

/// Probe for `window` with `protocol` (UDP to `udp_port`); the median RTT
/// in seconds, `None` when nothing was answered.
pub fn median(protocol: Protocol, udp_port: u16, window: Duration) -> Option<f64> {
    let mut rtts = match protocol {
        Protocol::Udp => udp(udp_port, window),
        _ => icmp(window),
    }
    .ok()?;
    rtts.sort_by(f64::total_cmp);
    rtts.get(rtts.len() / 2).copied()
}

/// Wait up to 1 s for the datagram that `accept` takes; its RTT.
fn answer(
    sock: &Socket,
    mut accept: impl FnMut(&[u8], u64) -> Option<f64>,
) -> std::io::Result<Option<f64>> {
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 2048];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        poll_readable(&[sock.as_raw_fd()], left);
        while let Ok(r) = recv_with_timestamp(sock, &mut buf) {
            if let Some(rtt) = r.kernel_ns.and_then(|k| accept(&buf[..r.len], k)) {
                return Ok(Some(rtt));
            }
        }
    }
    Ok(None)
}

/// Raw ICMP connected to [`ADDRESS`], so only its replies arrive.
fn icmp(window: Duration) -> std::io::Result<Vec<f64>> {
    let sock = Socket::new(Domain::IPV4, Type::RAW, Some(socket2::Protocol::ICMPV4))?;
    sock.connect(&SockAddr::from(SocketAddr::from((ADDRESS, 0))))?;
    enable_rx_timestamps(sock.as_raw_fd());
    let end = Instant::now() + window;
    let mut out = Vec::new();
    for seq in 1u64.. {
        if Instant::now() >= end {
            break;
        }
        let tx = wall_ns();
        sock.send(&encode_echo(false, 0x5246, SESSION, seq))?;
        let got = answer(&sock, |data, rx| {
            (parse_echo_reply(data, false, true) == Some((SESSION, seq)))
                .then(|| rx.saturating_sub(tx) as f64 * 1e-9)
        })?;
        out.extend(got);
        std::thread::sleep(GAP);
    }
    Ok(out)
}

/// UDP echo to the responder at [`ADDRESS`]:`port`, kernel timestamps at
/// both ends, the responder's delay subtracted.
fn udp(port: u16, window: Duration) -> std::io::Result<Vec<f64>> {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
    sock.bind(&SockAddr::from(SocketAddr::from(([0, 0, 0, 0], 0))))?;
    // Not connected: the responder, bound to 0.0.0.0, answers from
    // whatever source the route gives (127.0.0.1), not from ADDRESS.
    let to = SockAddr::from(SocketAddr::from((ADDRESS, port)));
    sock.set_nonblocking(true)?;
    enable_tx_timestamps(sock.as_raw_fd());
    let end = Instant::now() + window;
    let (mut out, mut req) = (Vec::new(), Vec::new());
    for seq in 1u64.. {
        if Instant::now() >= end {
            break;
        }
        let pre = wall_ns();
        wire::encode_request(&mut req, SESSION, seq, pre, &[], 256);
        sock.send_to(&req, &to)?;
        // The transmit timestamp is queued during the send on loopback.
        let tx = match recv_tx_timestamp(&sock) {
            Ok(Some((_, ts))) => ts,
            _ => pre,
        };
        let got = answer(&sock, |data, rx| {
            let p = Packet::decode(data).ok()?;
            let ours = p.header.typ == TYPE_REPLY && p.header.seq == seq;
            ours.then(|| {
                rx.saturating_sub(tx)
                    .saturating_sub(p.header.responder_delay_ns) as f64
                    * 1e-9
            })
        })?;
        out.extend(got);
        std::thread::sleep(GAP);
    }
    Ok(out)
}
