//! Paris traceroute packets: the IPv4 + UDP probe with a fixed 5-tuple,
//! and the parsing of what comes back. Pure functions.

use super::{Answer, Flow};
use crate::wire::probe as wire;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The Internet checksum (RFC 1071) of `data`, starting from `sum`.
pub fn checksum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

/// Fold a running sum into the one's-complement checksum.
pub fn checksum_fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 + UDP datagram of `flow` with `ttl` and identification `id`,
/// for a raw socket with IP_HDRINCL. The UDP checksum is computed (a zero
/// checksum is legal on IPv4 but some middleboxes drop it); the kernel
/// fills the IP header checksum.
pub fn build_probe(flow: &Flow, ttl: u8, id: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut p = Vec::with_capacity(total);
    p.push(0x45); // version 4, IHL 5
    p.push(0); // DSCP/ECN
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0, 0]); // flags/fragment offset
    p.push(ttl);
    p.push(17); // UDP
    p.extend_from_slice(&[0, 0]); // header checksum: kernel fills it
    p.extend_from_slice(&flow.src.ip().octets());
    p.extend_from_slice(&flow.dst.ip().octets());
    p.extend_from_slice(&flow.src.port().to_be_bytes());
    p.extend_from_slice(&flow.dst.port().to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    // Pseudo-header + UDP header + payload.
    let mut sum = checksum_add(0, &flow.src.ip().octets());
    sum = checksum_add(sum, &flow.dst.ip().octets());
    sum += 17 + udp_len as u32;
    sum = checksum_add(sum, &p[20..]);
    let mut c = checksum_fold(sum);
    if c == 0 {
        c = 0xffff;
    }
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

/// The parts of a probe an ICMP error quotes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    /// Source of the quoted datagram.
    pub src: SocketAddrV4,
    /// Destination of the quoted datagram.
    pub dst: SocketAddrV4,
    /// Its IPv4 identification.
    pub id: u16,
}

/// An ICMP error about one of our UDP datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpError {
    /// Who sent the ICMP message.
    pub from: Ipv4Addr,
    /// ICMP type (11 time exceeded, 3 unreachable).
    pub icmp_type: u8,
    /// ICMP code.
    pub code: u8,
    /// The datagram it is about.
    pub quote: Quote,
}

fn ipv4_header(b: &[u8]) -> Option<(usize, u8, Ipv4Addr, Ipv4Addr)> {
    if b.len() < 20 || b[0] >> 4 != 4 {
        return None;
    }
    let ihl = (b[0] & 0x0f) as usize * 4;
    if ihl < 20 || b.len() < ihl {
        return None;
    }
    let src = Ipv4Addr::new(b[12], b[13], b[14], b[15]);
    let dst = Ipv4Addr::new(b[16], b[17], b[18], b[19]);
    Some((ihl, b[9], src, dst))
}

/// Parse a packet read from a raw ICMP socket (IP header included): an
/// ICMP time-exceeded or destination-unreachable quoting a UDP datagram.
/// Anything else (echo traffic, truncated quotes) gives `None`.
pub fn parse_icmp_error(pkt: &[u8]) -> Option<IcmpError> {
    let (ihl, proto, from, _) = ipv4_header(pkt)?;
    if proto != 1 {
        return None;
    }
    let icmp = &pkt[ihl..];
    if icmp.len() < 8 {
        return None;
    }
    let (icmp_type, code) = (icmp[0], icmp[1]);
    if icmp_type != 11 && icmp_type != 3 {
        return None;
    }
    let inner = &icmp[8..];
    let (qihl, qproto, qsrc, qdst) = ipv4_header(inner)?;
    if qproto != 17 || inner.len() < qihl + 8 {
        return None;
    }
    let id = u16::from_be_bytes([inner[4], inner[5]]);
    let udp = &inner[qihl..];
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    let dport = u16::from_be_bytes([udp[2], udp[3]]);
    Some(IcmpError {
        from,
        icmp_type,
        code,
        quote: Quote {
            src: SocketAddrV4::new(qsrc, sport),
            dst: SocketAddrV4::new(qdst, dport),
            id,
        },
    })
}

/// A UDP datagram read from a raw socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp<'a> {
    /// Where it came from.
    pub src: SocketAddrV4,
    /// Where it went.
    pub dst: SocketAddrV4,
    /// What follows the UDP header.
    pub payload: &'a [u8],
}

/// Parse a packet read from a raw UDP socket.
pub fn parse_udp(pkt: &[u8]) -> Option<Udp<'_>> {
    let (ihl, proto, src, dst) = ipv4_header(pkt)?;
    if proto != 17 || pkt.len() < ihl + 8 {
        return None;
    }
    let u = &pkt[ihl..];
    Some(Udp {
        src: SocketAddrV4::new(src, u16::from_be_bytes([u[0], u[1]])),
        dst: SocketAddrV4::new(dst, u16::from_be_bytes([u[2], u[3]])),
        payload: &u[8..],
    })
}

/// What a received packet means for the probe `id` of `flow` in flight,
/// whose UDP payload is `request`. A UDP datagram counts only as the echo
/// of `request`: the pair's probe flow uses the same 5-tuple, and an echo
/// of one of its probes must not pass for the destination answering a
/// TTL that never reached it.
pub fn classify(
    flow: &Flow,
    id: u16,
    request: &[u8],
    icmp: Option<&IcmpError>,
    udp: Option<Udp<'_>>,
) -> Option<(Ipv4Addr, Answer)> {
    if let Some(e) = icmp {
        if e.quote.src.port() != flow.src.port()
            || e.quote.dst != flow.dst
            || e.quote.id != id
            || (!flow.src.ip().is_unspecified() && e.quote.src.ip() != flow.src.ip())
        {
            return None;
        }
        // Any error from the destination itself (port unreachable, as a
        // rule) means the probe got there.
        let answer = if e.from == *flow.dst.ip() {
            Answer::Destination
        } else if e.icmp_type == 11 {
            Answer::TimeExceeded
        } else {
            Answer::Unreachable
        };
        return Some((e.from, answer));
    }
    if let Some(u) = udp {
        if u.src == flow.dst
            && u.dst.port() == flow.src.port()
            && wire::is_reply_to(u.payload, request)
        {
            return Some((*flow.dst.ip(), Answer::Destination));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            src: "198.18.1.2:40000".parse().unwrap(),
            dst: "198.18.2.2:9970".parse().unwrap(),
        }
    }

    fn ip_checksum_ok(h: &[u8]) -> bool {
        checksum_fold(checksum_add(0, h)) == 0
    }

    #[test]
    fn probe_keeps_the_five_tuple_and_varies_ttl_and_id() {
        let f = flow();
        let a = build_probe(&f, 1, 0x1204, b"hello");
        let b = build_probe(&f, 7, 0x121c, b"hello");
        assert_eq!(a.len(), 20 + 8 + 5);
        assert_eq!(a[8], 1);
        assert_eq!(b[8], 7);
        assert_eq!(&a[4..6], &[0x12, 0x04]);
        // Everything ECMP hashes on is identical.
        assert_eq!(a[9], 17);
        assert_eq!(&a[12..24], &b[12..24]);
        let udp = parse_udp(&a).unwrap();
        assert_eq!(
            (udp.src, udp.dst, udp.payload),
            (f.src, f.dst, &b"hello"[..])
        );
        // UDP checksum verifies over the pseudo-header.
        let mut sum = checksum_add(0, &a[12..20]);
        sum += 17 + (a.len() - 20) as u32;
        sum = checksum_add(sum, &a[20..]);
        assert_eq!(checksum_fold(sum), 0);
        let _ = ip_checksum_ok;
    }

    /// An ICMP message from `from` quoting `probe` (as a router builds it).
    fn icmp_about(from: [u8; 4], typ: u8, code: u8, probe: &[u8]) -> Vec<u8> {
        let mut icmp = vec![typ, code, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&probe[..28]);
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
        p.extend_from_slice(&from);
        p.extend_from_slice(&[198, 18, 1, 2]);
        let total = (20 + icmp.len()) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&icmp);
        p
    }

    /// What the trace makes of the ICMP (type, code) `from` sends about
    /// `probe` (id 0x3408 of `f`).
    fn answer(
        f: &Flow,
        probe: &[u8],
        from: [u8; 4],
        (typ, code): (u8, u8),
    ) -> Option<(Ipv4Addr, Answer)> {
        let e = parse_icmp_error(&icmp_about(from, typ, code, probe)).unwrap();
        classify(f, 0x3408, &[], Some(&e), None)
    }

    #[test]
    fn icmp_time_exceeded_is_matched_by_quote() {
        let f = flow();
        let probe = build_probe(&f, 1, 0x3404, b"x");
        let msg = icmp_about([198, 18, 1, 1], 11, 0, &probe);
        let e = parse_icmp_error(&msg).unwrap();
        assert_eq!(e.from, Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(
            e.quote,
            Quote {
                src: f.src,
                dst: f.dst,
                id: 0x3404
            }
        );
        assert_eq!(
            classify(&f, 0x3404, &[], Some(&e), None),
            Some((Ipv4Addr::new(198, 18, 1, 1), Answer::TimeExceeded))
        );
        // Another probe's id, or another flow, is not ours.
        assert_eq!(classify(&f, 0x3408, &[], Some(&e), None), None);
        let other = Flow {
            dst: "198.18.2.2:9971".parse().unwrap(),
            ..f
        };
        assert_eq!(classify(&other, 0x3404, &[], Some(&e), None), None);
    }

    #[test]
    fn destination_detected_by_port_unreachable_or_reply() {
        let f = flow();
        let probe = build_probe(&f, 2, 0x3408, b"x");
        assert_eq!(
            answer(&f, &probe, [198, 18, 2, 2], (3, 3)),
            Some((Ipv4Addr::new(198, 18, 2, 2), Answer::Destination))
        );
        // A router's net unreachable stops the trace as unreachable.
        assert_eq!(
            answer(&f, &probe, [198, 18, 1, 1], (3, 0)),
            Some((Ipv4Addr::new(198, 18, 1, 1), Answer::Unreachable))
        );
        // The responder's echo of this trace's request, back to our port.
        let request = echo_request(wire::TRACE_SESSION, 7);
        let back = Flow {
            src: f.dst,
            dst: f.src,
        };
        let reply = build_probe(&back, 64, 1, &echo_reply(&request));
        assert_eq!(
            classify(&f, 0x3408, &request, None, parse_udp(&reply)),
            Some((Ipv4Addr::new(198, 18, 2, 2), Answer::Destination))
        );
        // The same 5-tuple carries the pair's probe flow: the echo of one
        // of its probes (another session), or of an earlier trace (another
        // send time), is not this probe arriving.
        for stale in [
            echo_request(0x1234, 7),
            echo_request(wire::TRACE_SESSION, 6),
        ] {
            let echo = build_probe(&back, 64, 1, &echo_reply(&stale));
            assert_eq!(classify(&f, 0x3408, &request, None, parse_udp(&echo)), None);
        }
        // Nor is a datagram that is not an echo reply, or our own request.
        let junk = build_probe(&back, 64, 1, b"reply");
        assert_eq!(classify(&f, 0x3408, &request, None, parse_udp(&junk)), None);
        let mirrored = build_probe(&back, 64, 1, &request);
        assert_eq!(
            classify(&f, 0x3408, &request, None, parse_udp(&mirrored)),
            None
        );
        // Unrelated UDP is ignored.
        let other = build_probe(&f, 64, 1, &echo_reply(&request));
        assert_eq!(
            classify(&f, 0x3408, &request, None, parse_udp(&other)),
            None
        );
    }

    fn echo_request(session: u64, tx_ns: u64) -> Vec<u8> {
        let mut out = Vec::new();
        wire::encode_request(&mut out, session, 0, tx_ns, &[], wire::HEADER_LEN);
        out
    }

    fn echo_reply(request: &[u8]) -> Vec<u8> {
        let req = wire::Packet::decode(request).unwrap().header;
        let mut out = Vec::new();
        wire::encode_reply(&mut out, &req, 5, &[], request.len());
        out
    }

    #[test]
    fn garbage_is_never_an_answer() {
        assert_eq!(parse_icmp_error(&[]), None);
        assert_eq!(parse_icmp_error(&[0x45; 30]), None);
        let f = flow();
        let probe = build_probe(&f, 1, 1, b"x");
        let mut msg = icmp_about([198, 18, 1, 1], 11, 0, &probe);
        msg.truncate(20 + 8 + 20 + 4); // quote shorter than IP + 8 bytes
        assert_eq!(parse_icmp_error(&msg), None);
        let echo = icmp_about([198, 18, 1, 1], 0, 0, &probe);
        assert_eq!(parse_icmp_error(&echo), None);
        assert_eq!(parse_udp(&[0x60; 40]), None);
        for n in 0..probe.len() {
            let _ = parse_udp(&probe[..n]);
            let _ = parse_icmp_error(&probe[..n]);
        }
    }
}
