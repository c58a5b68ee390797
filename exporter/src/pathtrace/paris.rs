//! The blocking Paris traceroute engine: one probe per TTL and attempt on
//! the fixed 5-tuple, answers matched by the quoted identification. Runs
//! on a blocking thread; raw sockets come from [`crate::sys::raw`].

use super::packet::{build_probe, classify, parse_icmp_error, parse_udp};
use super::{Answer, Flow, Hop, Trace, TraceConfig};
use crate::sys::poll::poll_readable;
use crate::sys::raw::RawSocket;
use crate::sys::sock::route_source;
use crate::sys::time::random_u64;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The source address the kernel would use towards `dst`.
pub fn source_for(dst: Ipv4Addr) -> io::Result<Ipv4Addr> {
    match route_source(SocketAddr::from((dst, 9)))? {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(_) => Err(io::Error::other("no IPv4 source address")),
    }
}

/// The three raw sockets of one trace.
struct Sockets {
    tx: RawSocket,
    icmp: RawSocket,
    udp: RawSocket,
}

impl Sockets {
    fn open() -> io::Result<Sockets> {
        Ok(Sockets {
            tx: RawSocket::open(libc::IPPROTO_RAW)?,
            icmp: RawSocket::open(libc::IPPROTO_ICMP)?,
            udp: RawSocket::open(libc::IPPROTO_UDP)?,
        })
    }

    /// Wait until `deadline` for an answer to probe `id` of `flow`, whose
    /// UDP payload is `request`.
    fn await_answer(
        &self,
        flow: &Flow,
        id: u16,
        request: &[u8],
        deadline: Instant,
        buf: &mut [u8],
    ) -> Option<(Ipv4Addr, Answer)> {
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let wait = left.clamp(Duration::from_millis(1), Duration::from_secs(1));
            let ready = poll_readable(&[self.icmp.as_raw_fd(), self.udp.as_raw_fd()], wait);
            let mut got = None;
            if ready[0] {
                while let Some(n) = self.icmp.recv(buf) {
                    if let Some(e) = parse_icmp_error(&buf[..n]) {
                        got = got.or(classify(flow, id, request, Some(&e), None));
                    }
                }
            }
            if ready[1] {
                while let Some(n) = self.udp.recv(buf) {
                    got = got.or(classify(flow, id, request, None, parse_udp(&buf[..n])));
                }
            }
            if got.is_some() {
                return got;
            }
        }
        None
    }
}

/// Probe one TTL up to `cfg.attempts` times.
fn probe_hop(
    socks: &Sockets,
    flow: &Flow,
    ttl: u8,
    base: u16,
    cfg: &TraceConfig,
    payload: &[u8],
    buf: &mut [u8],
) -> io::Result<Hop> {
    let mut hop = Hop {
        ttl,
        address: None,
        answer: None,
        rtt_seconds: None,
    };
    for attempt in 0..cfg.attempts.max(1) {
        // The TTL and attempt share the low byte of the identification.
        let id = base | ((u16::from(ttl) << 2 | u16::from(attempt)) & 0xff);
        let pkt = build_probe(flow, ttl, id, payload);
        let sent = Instant::now();
        socks.tx.send_to(&pkt, *flow.dst.ip())?;
        if let Some((addr, answer)) = socks.await_answer(flow, id, payload, sent + cfg.wait, buf) {
            hop.address = Some(addr);
            hop.answer = Some(answer);
            hop.rtt_seconds = Some(sent.elapsed().as_secs_f64());
            break;
        }
    }
    Ok(hop)
}

/// Trace `flow` (blocking; run it on a blocking thread). `payload` is the
/// UDP payload of every probe. The source address is filled in from the
/// route when unspecified.
pub fn trace(mut flow: Flow, cfg: &TraceConfig, payload: &[u8]) -> io::Result<Trace> {
    if flow.src.ip().is_unspecified() {
        flow.src.set_ip(source_for(*flow.dst.ip())?);
    }
    let socks = Sockets::open()?;
    let started = SystemTime::now();
    let t0 = Instant::now();
    // Identification values of this trace: a random base keeps concurrent
    // traces (and earlier runs) apart.
    let base = (random_u64() as u16) & 0xff00;
    let mut hops = Vec::new();
    let mut reached = false;
    let mut silent = 0u8;
    let mut buf = vec![0u8; 2048];
    for ttl in 1..=cfg.max_ttl.min(63) {
        let hop = probe_hop(&socks, &flow, ttl, base, cfg, payload, &mut buf)?;
        let answer = hop.answer;
        hops.push(hop);
        match answer {
            Some(Answer::Destination) => {
                reached = true;
                break;
            }
            Some(Answer::Unreachable) => break,
            Some(Answer::TimeExceeded) => silent = 0,
            None => {
                silent += 1;
                if silent >= cfg.max_silent {
                    break;
                }
            }
        }
    }
    Ok(Trace {
        flow,
        hops,
        reached,
        started_unix_seconds: started
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        duration_seconds: t0.elapsed().as_secs_f64(),
    })
}
