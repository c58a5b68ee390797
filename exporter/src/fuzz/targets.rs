//! The three targets: valid seeds, structure-aware mutations and the
//! check of one input (which must not panic and must keep the target's
//! invariants).

use super::mutate::{mutate_bytes, Rng, INTERESTING_U16};
use super::yaml::{config_seeds, mutate_config};
use super::{Outcome, Target};
use crate::config::{parse_file, Args, Config};
use crate::responder::udp::answer;
use crate::wire::discovery::{decode_event, ShEvent, EVENT_SIZE, KIND_RDMA_RTR, KIND_TCP_UP};
use crate::wire::probe::{
    encode_request, reply_tlvs, Packet, HEADER_LEN, MAX_DATAGRAM, MAX_LABEL_LEN, TLV_IDENTITY_BASE,
    TLV_RDMA_ENDPOINT, TYPE_REPLY,
};
use skeletonhunter_common::{Identity, Kind};

/// The state one target keeps between inputs.
pub struct Harness {
    target: Target,
    /// The responder's reply TLVs: every identity label at its longest,
    /// plus an RDMA endpoint, so replies are as large as they get.
    tlvs: Vec<(u16, Vec<u8>)>,
    out: Vec<u8>,
    args: Args,
}

impl Harness {
    /// The harness of `target`.
    pub fn new(target: Target) -> Harness {
        let long = "x".repeat(MAX_LABEL_LEN + 10);
        // Every field, whatever kinds the identity has.
        let mut id = Identity::default();
        for kind in Kind::ALL {
            id.set(kind, long.clone());
        }
        // Identity defaults would ask the host (hostname, routes) on every
        // input; the flags fill them instead.
        let args = Args {
            node: Some("fuzz".into()),
            nic: Some("10.0.0.1".into()),
            host: Some("fuzz".into()),
            ..Args::default()
        };
        Harness {
            target,
            tlvs: reply_tlvs(&id, &[(TLV_RDMA_ENDPOINT, vec![7; 26])]),
            out: Vec::with_capacity(MAX_DATAGRAM),
            args,
        }
    }

    /// Valid inputs to start from.
    pub fn seeds(&self) -> Vec<Vec<u8>> {
        match self.target {
            Target::Probe => probe_seeds(),
            Target::Event => event_seeds(),
            Target::Config => config_seeds(),
        }
    }

    /// Mutate `buf` (a copy of a corpus entry); `other` is another entry
    /// for splicing.
    pub fn mutate(&self, rng: &mut Rng, buf: &mut Vec<u8>, other: &[u8]) {
        match self.target {
            Target::Probe if rng.one_in(2) => mutate_probe(rng, buf),
            Target::Event if rng.one_in(2) => mutate_event(rng, buf),
            Target::Config if rng.below(4) != 0 => mutate_config(rng, buf, other),
            Target::Config => mutate_bytes(rng, buf, other, 1 << 16),
            _ => mutate_bytes(rng, buf, other, MAX_DATAGRAM + 8),
        }
    }

    /// Run one input through the target.
    pub fn check(&mut self, input: &[u8]) -> Outcome {
        match self.target {
            Target::Probe => self.check_probe(input),
            Target::Event => check_event(input),
            Target::Config => self.check_config(input),
        }
    }

    fn check_probe(&mut self, input: &[u8]) -> Outcome {
        let Ok(req) = answer(input, || u64::MAX, &self.tlvs, &mut self.out) else {
            // Refused by the responder: a prober may still decode it (a
            // reply) and read the sender's identity.
            let accepted = Packet::decode(input).map(|p| p.identity()).is_ok();
            return Outcome {
                accepted,
                ..Outcome::default()
            };
        };
        let _ = req.identity();
        let mut outcome = Outcome {
            accepted: true,
            ratio: Some(self.out.len() as f64 / input.len() as f64),
            violation: None,
        };
        if self.out.len() > input.len() {
            outcome.violation = Some(format!(
                "reply of {} bytes to a request of {}",
                self.out.len(),
                input.len()
            ));
        } else {
            match Packet::decode(&self.out) {
                Ok(r) if r.header.typ == TYPE_REPLY && r.header.seq == req.header.seq => {
                    let _ = r.identity();
                }
                other => outcome.violation = Some(format!("reply does not decode: {other:?}")),
            }
        }
        outcome
    }

    fn check_config(&mut self, input: &[u8]) -> Outcome {
        let text = String::from_utf8_lossy(input);
        let accepted = parse_file(&text)
            .and_then(|file| Config::merge(file, &self.args))
            .is_ok();
        Outcome {
            accepted,
            ..Outcome::default()
        }
    }
}

fn probe_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let id_tlv = |i: u16, s: &str| (TLV_IDENTITY_BASE + i, s.as_bytes().to_vec());
    let tlv_sets: [Vec<(u16, Vec<u8>)>; 3] = [
        vec![],
        vec![id_tlv(0, "node-a"), (TLV_RDMA_ENDPOINT, vec![1; 26])],
        vec![id_tlv(0, "n"), id_tlv(3, "asw-1"), (999, vec![0xff; 3])],
    ];
    for (i, tlvs) in tlv_sets.iter().enumerate() {
        for pad in [0, HEADER_LEN + 5, 64, 256, 1472, MAX_DATAGRAM] {
            let mut b = Vec::new();
            encode_request(&mut b, 42 + i as u64, 7, 1_000, tlvs, pad);
            seeds.push(b);
        }
    }
    // A reply as the responder writes it.
    let mut reply = Vec::new();
    let h = Packet::decode(&seeds[3]).expect("seed decodes").header;
    let id = Identity {
        node: "node-b".into(),
        ..Identity::default()
    };
    crate::wire::probe::encode_reply(&mut reply, &h, 5, &reply_tlvs(&id, &[]), 256);
    seeds.push(reply);
    seeds
}

/// Offsets of the TLVs' length fields, walking as the decoder does.
fn tlv_length_offsets(buf: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while at + 4 <= buf.len() {
        out.push(at + 2);
        at += 4 + u16::from_be_bytes([buf[at + 2], buf[at + 3]]) as usize;
    }
    out
}

/// Mutations that know the layout: header type, TLV lengths and types,
/// identity TLVs with odd values, sizes around the limits.
fn mutate_probe(rng: &mut Rng, buf: &mut Vec<u8>) {
    if buf.len() < HEADER_LEN {
        buf.resize(HEADER_LEN, 0);
    }
    match rng.below(5) {
        0 => buf[5] = *rng.pick(&[0, 1, 2, 3, 0xff]),
        1 => {
            let offsets = tlv_length_offsets(buf);
            if !offsets.is_empty() {
                let at = *rng.pick(&offsets);
                let v = match rng.below(3) {
                    0 => *rng.pick(&INTERESTING_U16),
                    1 => (buf.len() - at - 2) as u16,
                    _ => (buf.len() - at - 2).saturating_sub(1) as u16,
                };
                buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
        }
        2 => {
            let t = match rng.below(3) {
                0 => TLV_IDENTITY_BASE + rng.below(8) as u16,
                1 => TLV_RDMA_ENDPOINT,
                _ => rng.next_u64() as u16,
            };
            let n = *rng.pick(&[0usize, 1, 6, 26, MAX_LABEL_LEN, 300]);
            let byte = *rng.pick(&[b'a', 0xc3, 0xff, 0]);
            buf.extend_from_slice(&t.to_be_bytes());
            buf.extend_from_slice(&(n as u16).to_be_bytes());
            buf.extend(std::iter::repeat_n(byte, n));
        }
        3 => {
            let len = *rng.pick(&[
                HEADER_LEN - 1,
                HEADER_LEN,
                HEADER_LEN + 3,
                MAX_DATAGRAM,
                MAX_DATAGRAM + 1,
            ]);
            buf.resize(len, 0);
        }
        _ => {
            let offsets = tlv_length_offsets(buf);
            if let Some(&at) = offsets.get(rng.below(offsets.len().max(1))) {
                // Rewrite the TLV's type.
                let t = rng.below(20) as u16;
                buf[at - 2..at].copy_from_slice(&t.to_be_bytes());
            }
        }
    }
}

fn event_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for kind in 0..=5u8 {
        for family in [0u8, 4, 6] {
            let e = ShEvent {
                ts_ns: 1,
                cgroup_id: 2,
                handle: 0xffff_8880_0000_1000,
                pid: 77,
                netns: 4026531840,
                kind,
                family,
                lport: 40000,
                rport: 9466,
                dlid: 3,
                qpn: 0x11,
                local_qpn: 0x12,
                laddr: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                raddr: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
            };
            seeds.push(e.to_bytes().to_vec());
        }
    }
    seeds
}

/// Mutations that know `struct sh_event`: the kind and family bytes, the
/// ports and sizes around `EVENT_SIZE`.
fn mutate_event(rng: &mut Rng, buf: &mut Vec<u8>) {
    let mut e = ShEvent::from_bytes(buf).unwrap_or_default();
    match rng.below(4) {
        0 => e.kind = *rng.pick(&[0, KIND_TCP_UP, 2, KIND_RDMA_RTR, 4, 5, 0xff]),
        1 => e.family = *rng.pick(&[0, 4, 6, 10, 0xff]),
        2 => (e.lport, e.rport) = (*rng.pick(&INTERESTING_U16), *rng.pick(&INTERESTING_U16)),
        _ => {
            let len = *rng.pick(&[0, 1, EVENT_SIZE - 1, EVENT_SIZE, EVENT_SIZE + 1, 4096]);
            buf.resize(len, 0);
            return;
        }
    }
    let tail = buf.get(EVENT_SIZE..).unwrap_or_default().to_vec();
    *buf = e.to_bytes().to_vec();
    buf.extend(tail);
}

fn check_event(input: &[u8]) -> Outcome {
    let accepted = decode_event(input).is_ok();
    let mut outcome = Outcome {
        accepted,
        ..Outcome::default()
    };
    if let Ok(e) = ShEvent::from_bytes(input) {
        if e.to_bytes()[..] != input[..EVENT_SIZE] {
            outcome.violation = Some("ShEvent does not round-trip".into());
        }
    }
    outcome
}
