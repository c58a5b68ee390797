//! The UDP echo wire format, shared by the prober and the responder.
//!
//! ```text
//!  0      4   5   6       8               16              24              32              40
//!  +------+---+---+-------+---------------+---------------+---------------+---------------+---- -
//!  |"SKHP"|ver|typ| flags |   session     |     seq       |  prober tx ns |responder delay| TLVs
//!  +------+---+---+-------+---------------+---------------+---------------+---------------+---- -
//!  TLV: type u16 | length u16 | value[length]          (all integers big-endian)
//! ```
//!
//! `session` is a random number per prober process, so a reply meant for a
//! previous run is never matched. TLVs make the format extensible: unknown
//! types are skipped, so a newer peer can add fields (the RDMA endpoint,
//! [`TLV_RDMA_ENDPOINT`]) without breaking older ones. Requests carry a
//! padding TLV because a reply is never larger than its request: the
//! responder fills the reply with its TLVs in priority order and omits
//! what does not fit, so the responder can never be used as an amplifier.
//! A reply carries only what the prober needs: the node name (the
//! `dst_node` of a peer found by eBPF, pinned at its first reply) and the
//! RDMA endpoint; the rest of the identity stays in `/metrics`.
//!
//! `flags` is 0 in requests. In replies, [`FLAG_LEAVING`] says that the
//! responder's exporter is stopping (a job ended, a pod was deleted or
//! rescheduled, a rollout): the prober stops counting the peer's probes
//! until it answers without the flag, so a departure is never loss. Older
//! probers ignore the flags.

use skeletonhunter_common::{Identity, Kind};

/// First bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"SKHP";
/// Format version.
pub const VERSION: u8 = 1;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Largest request the responder accepts; anything bigger is not ours.
pub const MAX_DATAGRAM: usize = 4096;
/// Identity label values are cut to this many bytes on the wire.
pub const MAX_LABEL_LEN: usize = 128;

/// A prober's echo request.
pub const TYPE_REQUEST: u8 = 1;
/// A responder's echo reply.
pub const TYPE_REPLY: u8 = 2;

/// Reply flag: the responder's exporter is stopping; its silence from now
/// on is a departure, not a fault.
pub const FLAG_LEAVING: u16 = 1;

/// Padding; its value is ignored.
pub const TLV_PAD: u16 = 0;
/// Identity labels: `TLV_IDENTITY_BASE + index in Kind::ALL`
/// (node=1, nic=2, host=3, tor=4, spine=5, pod=6, tenant=7), UTF-8.
pub const TLV_IDENTITY_BASE: u16 = 1;
/// The RDMA UD endpoint of the sender (GID, QPN, Q_Key); layout owned by
/// the RDMA prober.
pub const TLV_RDMA_ENDPOINT: u16 = 16;

/// Session id of path-trace payloads: a valid echo request, so the peer's
/// responder answers and marks the destination, with a session no prober
/// uses (`"SHTRACE\0"`). Probers ignore echoes carrying it.
pub const TRACE_SESSION: u64 = u64::from_be_bytes(*b"SHTRACE\0");

skeletonhunter_common::labelled_enum! {
    /// Why a datagram was refused; `as_str` is the metric `reason` label.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DecodeError {
        /// Shorter than the header or a TLV.
        Truncated,
        /// Larger than [`MAX_DATAGRAM`].
        Oversized,
        /// Not our magic.
        BadMagic,
        /// Another format version.
        BadVersion,
        /// Neither request nor reply.
        BadType,
        /// A TLV runs past the end.
        BadTlv,
    }
}

impl std::error::Error for DecodeError {}

/// The fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// [`TYPE_REQUEST`] or [`TYPE_REPLY`].
    pub typ: u8,
    /// 0 in requests; [`FLAG_LEAVING`] or 0 in replies (other bits are
    /// reserved and ignored).
    pub flags: u16,
    /// The prober's random session.
    pub session: u64,
    /// The probe's sequence number.
    pub seq: u64,
    /// The prober's send time (wall clock ns), echoed by the responder.
    pub tx_ns: u64,
    /// Time the responder held the request (kernel receive to reply send).
    pub responder_delay_ns: u64,
}

/// A decoded datagram borrowing its TLV values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The fixed header.
    pub header: Header,
    /// (type, value) in order.
    pub tlvs: Vec<(u16, &'a [u8])>,
}

impl<'a> Packet<'a> {
    /// Parse and validate a datagram. Never panics on any input.
    pub fn decode(buf: &'a [u8]) -> Result<Packet<'a>, DecodeError> {
        if buf.len() > MAX_DATAGRAM {
            return Err(DecodeError::Oversized);
        }
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        if buf[0..4] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        if buf[4] != VERSION {
            return Err(DecodeError::BadVersion);
        }
        let typ = buf[5];
        if typ != TYPE_REQUEST && typ != TYPE_REPLY {
            return Err(DecodeError::BadType);
        }
        let u64_at = |o: usize| u64::from_be_bytes(buf[o..o + 8].try_into().expect("8 bytes"));
        let header = Header {
            typ,
            flags: u16::from_be_bytes([buf[6], buf[7]]),
            session: u64_at(8),
            seq: u64_at(16),
            tx_ns: u64_at(24),
            responder_delay_ns: u64_at(32),
        };
        let mut tlvs = Vec::new();
        let mut rest = &buf[HEADER_LEN..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(DecodeError::BadTlv);
            }
            let t = u16::from_be_bytes([rest[0], rest[1]]);
            let len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
            if rest.len() < 4 + len {
                return Err(DecodeError::BadTlv);
            }
            if t != TLV_PAD {
                tlvs.push((t, &rest[4..4 + len]));
            }
            rest = &rest[4 + len..];
        }
        Ok(Packet { header, tlvs })
    }

    /// The first TLV of type `t`.
    pub fn tlv(&self, t: u16) -> Option<&'a [u8]> {
        self.tlvs.iter().find(|(ty, _)| *ty == t).map(|(_, v)| *v)
    }

    /// The identity labels the sender included (missing ones stay empty;
    /// invalid UTF-8 is ignored).
    pub fn identity(&self) -> Identity {
        let mut id = Identity::default();
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            if let Some(v) = self.tlv(TLV_IDENTITY_BASE + i as u16) {
                if let Ok(s) = std::str::from_utf8(v) {
                    id.set(kind, s);
                }
            }
        }
        id
    }
}

fn put_header(out: &mut Vec<u8>, h: &Header) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(h.typ);
    out.extend_from_slice(&h.flags.to_be_bytes());
    out.extend_from_slice(&h.session.to_be_bytes());
    out.extend_from_slice(&h.seq.to_be_bytes());
    out.extend_from_slice(&h.tx_ns.to_be_bytes());
    out.extend_from_slice(&h.responder_delay_ns.to_be_bytes());
}

fn put_tlv(out: &mut Vec<u8>, t: u16, v: &[u8]) {
    let v = &v[..v.len().min(u16::MAX as usize)];
    out.extend_from_slice(&t.to_be_bytes());
    out.extend_from_slice(&(v.len() as u16).to_be_bytes());
    out.extend_from_slice(v);
}

/// Encode a request into `out` (cleared first): header, `tlvs`, then a
/// padding TLV up to at least `pad_to` bytes so the reply has room.
pub fn encode_request(
    out: &mut Vec<u8>,
    session: u64,
    seq: u64,
    tx_ns: u64,
    tlvs: &[(u16, Vec<u8>)],
    pad_to: usize,
) {
    out.clear();
    put_header(
        out,
        &Header {
            typ: TYPE_REQUEST,
            flags: 0,
            session,
            seq,
            tx_ns,
            responder_delay_ns: 0,
        },
    );
    for (t, v) in tlvs {
        put_tlv(out, *t, v);
    }
    let pad_to = pad_to.min(MAX_DATAGRAM);
    if out.len() < pad_to {
        // The padding TLV needs 4 bytes of its own.
        let gap = (pad_to - out.len()).max(4);
        let zeros = [0u8; 256];
        let mut value_len = gap - 4;
        out.extend_from_slice(&TLV_PAD.to_be_bytes());
        out.extend_from_slice(&(value_len as u16).to_be_bytes());
        while value_len > 0 {
            let n = value_len.min(zeros.len());
            out.extend_from_slice(&zeros[..n]);
            value_len -= n;
        }
    }
}

/// The TLVs a responder offers, most important first: the node name, then
/// any extensions (RDMA endpoint). The rest of the identity (NIC, host,
/// ToR, spine, pod, tenant) is not sent: no prober needs it, and anyone
/// who can send a request would learn the fabric's layout from it.
pub fn reply_tlvs(id: &Identity, extensions: &[(u16, Vec<u8>)]) -> Vec<(u16, Vec<u8>)> {
    let mut v = Vec::new();
    let label = |kind: Kind| -> Option<(u16, Vec<u8>)> {
        let s = id.get(kind);
        if s.is_empty() {
            return None;
        }
        let mut end = s.len().min(MAX_LABEL_LEN);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let i = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as u16;
        Some((TLV_IDENTITY_BASE + i, s.as_bytes()[..end].to_vec()))
    };
    v.extend(label(Kind::Node));
    v.extend(extensions.iter().cloned());
    v
}

/// Set `flag` in the header of the encoded datagram `out` (nothing
/// happens to one shorter than a header).
pub fn set_flag(out: &mut [u8], flag: u16) {
    if let Some(f) = out.get_mut(6..8) {
        let v = u16::from_be_bytes([f[0], f[1]]) | flag;
        f.copy_from_slice(&v.to_be_bytes());
    }
}

/// Whether `reply` is the responder's echo of `request`: a reply whose
/// session, sequence number and send time are the request's. A tracer
/// shares its 5-tuple with the pair's probe flow, so the flow's own echoes
/// arrive on the same port; only this tells them apart.
pub fn is_reply_to(reply: &[u8], request: &[u8]) -> bool {
    match (Packet::decode(reply), Packet::decode(request)) {
        (Ok(rep), Ok(req)) => {
            rep.header.typ == TYPE_REPLY
                && req.header.typ == TYPE_REQUEST
                && (rep.header.session, rep.header.seq, rep.header.tx_ns)
                    == (req.header.session, req.header.seq, req.header.tx_ns)
        }
        _ => false,
    }
}

/// Encode the reply to `req` into `out` (cleared first). It is never longer
/// than `request_len`: TLVs that do not fit are skipped, the rest keep
/// their order.
pub fn encode_reply(
    out: &mut Vec<u8>,
    req: &Header,
    responder_delay_ns: u64,
    tlvs: &[(u16, Vec<u8>)],
    request_len: usize,
) {
    out.clear();
    put_header(
        out,
        &Header {
            typ: TYPE_REPLY,
            flags: 0,
            session: req.session,
            seq: req.seq,
            tx_ns: req.tx_ns,
            responder_delay_ns,
        },
    );
    for (t, v) in tlvs {
        if out.len() + 4 + v.len() <= request_len {
            put_tlv(out, *t, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident() -> Identity {
        Identity {
            node: "node-a".into(),
            nic: "10.0.0.1".into(),
            host: "sn123".into(),
            tor: "asw-1".into(),
            spine: "dsw-1".into(),
            pod: "pod-1".into(),
            tenant: "job-7".into(),
        }
    }

    #[test]
    fn request_and_reply_round_trip() {
        let mut req = Vec::new();
        encode_request(&mut req, 42, 7, 1_000, &[], 256);
        assert_eq!(req.len(), 256);
        let p = Packet::decode(&req).unwrap();
        assert_eq!(p.header.typ, TYPE_REQUEST);
        assert_eq!(
            (p.header.session, p.header.seq, p.header.tx_ns),
            (42, 7, 1_000)
        );
        assert!(p.tlvs.is_empty(), "padding is not reported");

        let rdma = (TLV_RDMA_ENDPOINT, vec![9u8; 24]);
        let tlvs = reply_tlvs(&ident(), std::slice::from_ref(&rdma));
        let mut rep = Vec::new();
        encode_reply(&mut rep, &p.header, 5_000, &tlvs, req.len());
        assert!(rep.len() <= req.len());
        let r = Packet::decode(&rep).unwrap();
        assert_eq!(r.header.typ, TYPE_REPLY);
        assert_eq!(
            (r.header.session, r.header.seq, r.header.tx_ns),
            (42, 7, 1_000)
        );
        assert_eq!(r.header.responder_delay_ns, 5_000);
        // Only the node name of the identity is sent.
        let sent = Identity {
            node: "node-a".into(),
            ..Default::default()
        };
        assert_eq!(r.identity(), sent);
        assert_eq!(r.tlv(TLV_RDMA_ENDPOINT), Some(&[9u8; 24][..]));
        assert_eq!(r.header.flags, 0);

        // A leaving responder's reply says so, and nothing else changes.
        let mut marked = rep.clone();
        set_flag(&mut marked, FLAG_LEAVING);
        let leaving = Packet::decode(&marked).unwrap();
        assert_eq!(leaving.header.flags, FLAG_LEAVING);
        assert_eq!(
            Header {
                flags: 0,
                ..leaving.header
            },
            r.header
        );
        assert_eq!(leaving.tlvs, r.tlvs);
        let mut short = vec![0u8; 7];
        set_flag(&mut short, FLAG_LEAVING);
        assert_eq!(short, vec![0u8; 7], "no header, nothing set");
    }

    #[test]
    fn reply_never_exceeds_request_and_keeps_node_first() {
        let tlvs = reply_tlvs(&ident(), &[]);
        for req_len in [HEADER_LEN, HEADER_LEN + 5, 60, 80, 100, 4096] {
            let mut req = Vec::new();
            encode_request(&mut req, 1, 2, 3, &[], req_len);
            let h = Packet::decode(&req).unwrap().header;
            let mut rep = Vec::new();
            encode_reply(&mut rep, &h, 0, &tlvs, req.len());
            assert!(rep.len() <= req.len(), "{} > {}", rep.len(), req.len());
            let id = Packet::decode(&rep).unwrap().identity();
            if req.len() >= HEADER_LEN + 4 + 6 {
                assert_eq!(id.node, "node-a", "node fits in {req_len}");
            }
        }
        // A bare header request gets a bare header reply.
        let mut req = Vec::new();
        encode_request(&mut req, 1, 2, 3, &[], 0);
        assert_eq!(req.len(), HEADER_LEN);
    }

    #[test]
    fn long_labels_are_cut_at_a_char_boundary() {
        let id = Identity {
            node: "é".repeat(100),
            ..Default::default()
        };
        let tlvs = reply_tlvs(&id, &[]);
        assert!(tlvs[0].1.len() <= MAX_LABEL_LEN);
        assert!(std::str::from_utf8(&tlvs[0].1).is_ok());
    }

    #[test]
    fn bad_datagrams_are_rejected_with_a_reason() {
        let mut good = Vec::new();
        encode_request(
            &mut good,
            1,
            2,
            3,
            &[(TLV_RDMA_ENDPOINT, vec![1, 2, 3])],
            64,
        );
        assert!(Packet::decode(&good).is_ok());
        assert_eq!(Packet::decode(&good[..10]), Err(DecodeError::Truncated));
        assert_eq!(Packet::decode(&[]), Err(DecodeError::Truncated));
        let mut m = good.clone();
        m[0] = b'X';
        assert_eq!(Packet::decode(&m), Err(DecodeError::BadMagic));
        let mut m = good.clone();
        m[4] = 9;
        assert_eq!(Packet::decode(&m), Err(DecodeError::BadVersion));
        let mut m = good.clone();
        m[5] = 3;
        assert_eq!(Packet::decode(&m), Err(DecodeError::BadType));
        // A TLV claiming more bytes than remain.
        assert_eq!(
            Packet::decode(&good[..HEADER_LEN + 5]),
            Err(DecodeError::BadTlv)
        );
        assert_eq!(
            Packet::decode(&vec![0u8; MAX_DATAGRAM + 1]),
            Err(DecodeError::Oversized)
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small xorshift fuzz: every outcome is fine except a panic.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut good = Vec::new();
        encode_request(&mut good, 1, 2, 3, &[], 128);
        for i in 0..20_000 {
            let mut buf = if i % 2 == 0 {
                good.clone()
            } else {
                vec![0u8; (x % 300) as usize]
            };
            for b in &mut buf {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(8) {
                    *b = x as u8;
                }
            }
            let _ = Packet::decode(&buf);
        }
    }
}
