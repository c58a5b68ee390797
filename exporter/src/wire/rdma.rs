//! Wire formats of RDMA probing: the UD probe/ACK payload, and the RDMA
//! endpoint (GID, QPN, Q_Key) that peers exchange over the exporter's UDP
//! responder channel so a prober can build an address handle for a peer.
//!
//! Both are fixed-size big-endian records with a magic and a version, so a
//! stray datagram on the QP (or a peer running another version) is rejected
//! with a reason instead of being misread.

use std::fmt;

/// `SHRP`: SkeletonHunter RDMA probe.
pub const MAGIC: [u8; 4] = *b"SHRP";
/// Format version.
pub const VERSION: u8 = 1;
/// Size of every probe packet on the wire (the UD payload).
pub const PACKET_LEN: usize = 32;
/// Receive buffers of a UD QP start with the 40-byte Global Routing Header
/// slot, filled or not (RoCE always carries a GRH).
pub const GRH_LEN: usize = 40;
/// Size of an encoded [`RdmaEndpoint`].
pub const ENDPOINT_LEN: usize = 24;
/// The Q_Key our UD QPs use unless configured otherwise. Bit 31 clear:
/// keys with it set are privileged ("controlled") Q_Keys.
pub const DEFAULT_QKEY: u32 = 0x5348_5251; // "SHRQ"

/// What a probe packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Prober -> responder. Its send completion is T2, its arrival T3.
    Probe,
    /// Responder -> prober, posted at once on arrival. Its send completion
    /// is T4, its arrival T5 (T6 when the prober's poll sees it).
    Ack,
    /// Responder -> prober after the ACK's send completed: carries the
    /// responder delay T4 - T3, which is unknown when the ACK leaves.
    AckDetail,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Probe => 1,
            Kind::Ack => 2,
            Kind::AckDetail => 3,
        }
    }
    fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Probe),
            2 => Some(Kind::Ack),
            3 => Some(Kind::AckDetail),
            _ => None,
        }
    }
}

/// Flag bit: the responder's T3/T4 came from hardware CQE timestamps.
pub const FLAG_HW_TIMESTAMPS: u8 = 0x01;

/// One probe packet.
///
/// Layout (big-endian, sizes in bytes): `magic:4 version:1 kind:1
/// flags:1 reserved:1 session:4 seq:8 responder_delay_ns:8 reserved:4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Probe, ACK or ACK detail.
    pub kind: Kind,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Random per prober instance: ACKs for an earlier incarnation (or a
    /// forged ACK) do not match.
    pub session: u32,
    /// The probe's sequence number.
    pub seq: u64,
    /// T4 - T3 on the responder (only meaningful in [`Kind::AckDetail`]).
    pub responder_delay_ns: u64,
}

/// Why a received packet was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketError {
    /// Shorter than [`PACKET_LEN`].
    Short {
        /// Bytes received.
        len: usize,
    },
    /// Not our magic.
    BadMagic,
    /// Another format version.
    BadVersion(u8),
    /// An unknown kind.
    BadKind(u8),
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::Short { len } => write!(
                f,
                "RDMA probe packet too short: {len} bytes, need {PACKET_LEN}"
            ),
            PacketError::BadMagic => write!(f, "RDMA probe packet has a bad magic"),
            PacketError::BadVersion(v) => {
                write!(
                    f,
                    "RDMA probe packet version {v} unsupported (want {VERSION})"
                )
            }
            PacketError::BadKind(k) => write!(f, "RDMA probe packet kind {k} unknown"),
        }
    }
}

impl std::error::Error for PacketError {}

impl PacketError {
    /// Every `reason` label [`PacketError::reason`] gives.
    pub const REASONS: [&str; 4] = [
        "rdma_short_packet",
        "rdma_bad_magic",
        "rdma_bad_version",
        "rdma_bad_kind",
    ];

    /// Short label for the `reason` of the probe-error counter.
    pub fn reason(&self) -> &'static str {
        match self {
            PacketError::Short { .. } => "rdma_short_packet",
            PacketError::BadMagic => "rdma_bad_magic",
            PacketError::BadVersion(_) => "rdma_bad_version",
            PacketError::BadKind(_) => "rdma_bad_kind",
        }
    }
}

impl Packet {
    /// A probe of `session` with sequence `seq`.
    pub fn probe(session: u32, seq: u64) -> Packet {
        Packet {
            kind: Kind::Probe,
            flags: 0,
            session,
            seq,
            responder_delay_ns: 0,
        }
    }

    /// The immediate ACK to `probe`.
    pub fn ack_for(probe: &Packet) -> Packet {
        Packet {
            kind: Kind::Ack,
            flags: 0,
            session: probe.session,
            seq: probe.seq,
            responder_delay_ns: 0,
        }
    }

    /// The follow-up carrying the responder delay for `probe`.
    pub fn detail_for(probe: &Packet, responder_delay_ns: u64, hw: bool) -> Packet {
        Packet {
            kind: Kind::AckDetail,
            flags: if hw { FLAG_HW_TIMESTAMPS } else { 0 },
            session: probe.session,
            seq: probe.seq,
            responder_delay_ns,
        }
    }

    /// The packet's bytes.
    pub fn encode(&self) -> [u8; PACKET_LEN] {
        let mut b = [0u8; PACKET_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = self.kind.code();
        b[6] = self.flags;
        b[8..12].copy_from_slice(&self.session.to_be_bytes());
        b[12..20].copy_from_slice(&self.seq.to_be_bytes());
        b[20..28].copy_from_slice(&self.responder_delay_ns.to_be_bytes());
        b
    }

    /// Decode a UD payload (without the GRH). Trailing bytes are allowed so
    /// a later version may append fields.
    pub fn decode(b: &[u8]) -> Result<Packet, PacketError> {
        if b.len() < PACKET_LEN {
            return Err(PacketError::Short { len: b.len() });
        }
        if b[0..4] != MAGIC {
            return Err(PacketError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(PacketError::BadVersion(b[4]));
        }
        let kind = Kind::from_code(b[5]).ok_or(PacketError::BadKind(b[5]))?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        Ok(Packet {
            kind,
            flags: b[6],
            session: u32_at(8),
            seq: u64_at(12),
            responder_delay_ns: u64_at(20),
        })
    }

    /// Whether the sender stamped in hardware.
    pub fn hw_timestamps(&self) -> bool {
        self.flags & FLAG_HW_TIMESTAMPS != 0
    }
}

/// The payload of a UD receive completion: the buffer minus the GRH slot,
/// cut to the completion's `byte_len` (which counts the GRH). `None` when
/// the completion is shorter than a GRH (a malformed completion).
pub fn ud_payload(buf: &[u8], byte_len: usize) -> Option<&[u8]> {
    if byte_len < GRH_LEN {
        return None;
    }
    buf.get(GRH_LEN..byte_len.min(buf.len()))
}

/// The sender's GID from the GRH slot of a UD receive buffer, so the
/// responder can address its ACK without a lookup. With RoCE v2 over IPv4
/// (our QP's GID is IPv4-mapped) the slot holds the 20-byte IPv4 header in
/// its last 20 bytes and the first 20 are undefined; otherwise it holds a
/// full GRH / IPv6 header with the source GID at bytes 8..24.
pub fn source_gid(grh: &[u8], local_gid_is_ipv4: bool) -> Option<[u8; 16]> {
    if grh.len() < GRH_LEN {
        return None;
    }
    let mut gid = [0u8; 16];
    if local_gid_is_ipv4 {
        let ip = &grh[20..40];
        if ip[0] != 0x45 {
            return None;
        }
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..16].copy_from_slice(&ip[12..16]);
    } else {
        if grh[0] >> 4 != 6 {
            return None;
        }
        gid.copy_from_slice(&grh[8..24]);
    }
    Some(gid)
}

/// Whether a GID is an IPv4-mapped one (RoCE v2 over IPv4).
pub fn gid_is_ipv4(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// How a peer's RDMA QP is reached: what a prober needs to address UD
/// sends to it (an address handle from the GID, then QPN and Q_Key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmaEndpoint {
    /// RoCE v2 GID (an IPv4-mapped or IPv6 address of the RNIC port).
    pub gid: [u8; 16],
    /// 24-bit queue pair number.
    pub qpn: u32,
    /// The Q_Key to send with.
    pub qkey: u32,
}

/// Why an RDMA endpoint record was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointError {
    /// Not [`ENDPOINT_LEN`] bytes.
    Length(usize),
    /// A QPN that cannot be a UD QP.
    Qpn(u32),
    /// An all-zero GID.
    ZeroGid,
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointError::Length(n) => write!(
                f,
                "RDMA endpoint field has {n} bytes, expected {ENDPOINT_LEN}"
            ),
            EndpointError::Qpn(q) => write!(
                f,
                "RDMA endpoint QPN {q:#x} is invalid (must be 2..2^24; 0 and 1 are special QPs)"
            ),
            EndpointError::ZeroGid => write!(f, "RDMA endpoint GID is all zero"),
        }
    }
}

impl std::error::Error for EndpointError {}

impl RdmaEndpoint {
    /// Layout (big-endian, sizes in bytes): `gid:16 qpn:4 qkey:4`.
    pub fn encode(&self) -> [u8; ENDPOINT_LEN] {
        let mut b = [0u8; ENDPOINT_LEN];
        b[0..16].copy_from_slice(&self.gid);
        b[16..20].copy_from_slice(&self.qpn.to_be_bytes());
        b[20..24].copy_from_slice(&self.qkey.to_be_bytes());
        b
    }

    /// Parse an endpoint TLV value.
    pub fn decode(b: &[u8]) -> Result<RdmaEndpoint, EndpointError> {
        if b.len() != ENDPOINT_LEN {
            return Err(EndpointError::Length(b.len()));
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[0..16]);
        let qpn = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
        let qkey = u32::from_be_bytes([b[20], b[21], b[22], b[23]]);
        if !(2..(1 << 24)).contains(&qpn) {
            return Err(EndpointError::Qpn(qpn));
        }
        if gid == [0u8; 16] {
            return Err(EndpointError::ZeroGid);
        }
        Ok(RdmaEndpoint { gid, qpn, qkey })
    }

    /// The GID as an IPv6 address (IPv4-mapped for RoCE v2 over IPv4), for
    /// logs and labels.
    pub fn gid_addr(&self) -> std::net::Ipv6Addr {
        std::net::Ipv6Addr::from(self.gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_round_trip_all_kinds() {
        let probe = Packet::probe(0xdead_beef, 42);
        let ack = Packet::ack_for(&probe);
        let detail = Packet::detail_for(&probe, 1_234_567, true);
        for p in [probe, ack, detail] {
            let bytes = p.encode();
            assert_eq!(bytes.len(), PACKET_LEN);
            assert_eq!(Packet::decode(&bytes), Ok(p));
        }
        assert_eq!(ack.seq, 42);
        assert_eq!(ack.session, 0xdead_beef);
        assert!(detail.hw_timestamps());
        assert!(!Packet::detail_for(&probe, 1, false).hw_timestamps());
    }

    #[test]
    fn packet_layout_is_fixed() {
        let b = Packet::detail_for(&Packet::probe(0x0102_0304, 0x1122_3344_5566_7788), 9, true)
            .encode();
        assert_eq!(&b[0..4], b"SHRP");
        assert_eq!(b[4], 1);
        assert_eq!(b[5], 3);
        assert_eq!(b[6], 1);
        assert_eq!(&b[8..12], &[1, 2, 3, 4]);
        assert_eq!(
            &b[12..20],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(&b[20..28], &[0, 0, 0, 0, 0, 0, 0, 9]);
    }

    #[test]
    fn packet_rejects_garbage() {
        let good = Packet::probe(1, 2).encode();
        assert_eq!(
            Packet::decode(&good[..10]),
            Err(PacketError::Short { len: 10 })
        );
        let mut bad = good;
        bad[0] = b'X';
        assert_eq!(Packet::decode(&bad), Err(PacketError::BadMagic));
        let mut bad = good;
        bad[4] = 9;
        assert_eq!(Packet::decode(&bad), Err(PacketError::BadVersion(9)));
        let mut bad = good;
        bad[5] = 0;
        assert_eq!(Packet::decode(&bad), Err(PacketError::BadKind(0)));
        // Appended bytes from a newer version are tolerated.
        let mut longer = good.to_vec();
        longer.extend_from_slice(&[0xff; 8]);
        assert_eq!(Packet::decode(&longer), Ok(Packet::probe(1, 2)));
        assert!(PacketError::BadMagic.to_string().contains("magic"));
    }

    #[test]
    fn ud_payload_strips_grh() {
        let mut buf = vec![0u8; GRH_LEN + PACKET_LEN + 16];
        buf[GRH_LEN..GRH_LEN + PACKET_LEN].copy_from_slice(&Packet::probe(7, 8).encode());
        let p = ud_payload(&buf, GRH_LEN + PACKET_LEN).unwrap();
        assert_eq!(p.len(), PACKET_LEN);
        assert_eq!(Packet::decode(p), Ok(Packet::probe(7, 8)));
        assert_eq!(ud_payload(&buf, 10), None);
        // byte_len larger than the buffer is cut to the buffer.
        assert_eq!(ud_payload(&buf, 10_000).unwrap().len(), PACKET_LEN + 16);
    }

    #[test]
    fn source_gid_from_ipv4_and_ipv6_grh() {
        let mut slot = [0xeeu8; GRH_LEN]; // first 20 bytes are garbage
        slot[20] = 0x45;
        slot[32..36].copy_from_slice(&[198, 18, 0, 7]);
        let gid = source_gid(&slot, true).unwrap();
        assert!(gid_is_ipv4(&gid));
        assert_eq!(
            std::net::Ipv6Addr::from(gid).to_string(),
            "::ffff:198.18.0.7"
        );
        slot[20] = 0x60;
        assert_eq!(source_gid(&slot, true), None);
        let mut v6 = [0u8; GRH_LEN];
        v6[0] = 0x60;
        v6[8] = 0xfe;
        v6[9] = 0x80;
        v6[23] = 1;
        let gid = source_gid(&v6, false).unwrap();
        assert!(!gid_is_ipv4(&gid));
        assert_eq!(std::net::Ipv6Addr::from(gid).to_string(), "fe80::1");
        v6[0] = 0x40;
        assert_eq!(source_gid(&v6, false), None);
        assert_eq!(source_gid(&v6[..10], false), None);
    }

    #[test]
    fn endpoint_round_trip_and_validation() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[198, 18, 0, 1]);
        let ep = RdmaEndpoint {
            gid,
            qpn: 0x00ab_cdef,
            qkey: DEFAULT_QKEY,
        };
        let b = ep.encode();
        assert_eq!(RdmaEndpoint::decode(&b), Ok(ep));
        assert_eq!(ep.gid_addr().to_string(), "::ffff:198.18.0.1");
        assert_eq!(
            RdmaEndpoint::decode(&b[..20]),
            Err(EndpointError::Length(20))
        );
        let mut bad = b;
        bad[16..20].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(RdmaEndpoint::decode(&bad), Err(EndpointError::Qpn(1)));
        bad[16..20].copy_from_slice(&(1u32 << 24).to_be_bytes());
        assert_eq!(RdmaEndpoint::decode(&bad), Err(EndpointError::Qpn(1 << 24)));
        let mut zero = b;
        zero[0..16].fill(0);
        assert_eq!(RdmaEndpoint::decode(&zero), Err(EndpointError::ZeroGid));
    }
}
