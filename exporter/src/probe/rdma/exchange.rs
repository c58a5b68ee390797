//! The R-Pingmesh probe/ACK exchange as two state machines, fed with
//! completion events by the verbs layer and free of any device.
//!
//! ```text
//!  prober                                   responder
//!  T1 post probe ──────────probe──────────▶ T3 recv completion
//!  T2 send completion                          post ACK
//!  T5 recv completion ◀────────ACK───────── T4 ACK send completion
//!  T6 poll sees it                             post ACK-detail(T4-T3)
//!     ◀──────────────────ACK-detail─────────
//!  network RTT    = (T5-T2) - (T4-T3)
//!  prober delay   = (T6-T1) - (T5-T2)
//!  responder delay= T4-T3
//! ```
//!
//! T2/T5 come from the prober RNIC and T3/T4 from the responder RNIC, so
//! only intervals on one clock are ever subtracted: neither host needs a
//! synchronised clock. Completions may be polled in any order (a send
//! completion can be seen after the ACK it provoked), so a probe completes
//! when all its stamps are in, whatever the order.

use super::packet::{Kind, Packet};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A finished probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<P> {
    Measured {
        peer: P,
        seq: u64,
        /// (T5-T2) - (T4-T3), ns.
        network_ns: u64,
        /// (T6-T1) - (T5-T2), ns.
        prober_delay_ns: u64,
        /// T4-T3, ns.
        responder_delay_ns: u64,
        /// Both ends used hardware CQE timestamps.
        hardware: bool,
    },
    /// No ACK before the deadline.
    Lost { peer: P, seq: u64 },
    /// The stamps cannot give the full split: the detail never arrived,
    /// the send did not complete or failed, or the stamps are inconsistent
    /// (e.g. a responder delay longer than the round trip). When the ACK
    /// did come back, `fallback_rtt_ns` is the best round trip available
    /// (T5-T2, else T6-T1), so an answered probe still counts as answered;
    /// `None` means nothing came back and the caller counts it lost.
    Unusable {
        peer: P,
        seq: u64,
        reason: &'static str,
        fallback_rtt_ns: Option<u64>,
    },
}

#[derive(Debug, Clone)]
struct Inflight<P> {
    peer: P,
    t1: u64,
    t2: Option<u64>,
    t5: Option<u64>,
    t6: Option<u64>,
    responder_delay: Option<(u64, bool)>,
    deadline: u64,
}

/// Result of feeding a packet to the prober.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received<P> {
    /// The probe is complete.
    Done(Outcome<P>),
    /// Recorded; waiting for more stamps.
    Pending,
    /// Not ours (another session, unknown or already finished sequence):
    /// counted by the caller, never double-counted as a sample.
    Stray(&'static str),
}

/// The prober side: probes in flight, keyed by sequence number.
#[derive(Debug)]
pub struct Prober<P> {
    session: u32,
    next_seq: u64,
    timeout_ns: u64,
    /// Whether the local CQ stamps are hardware ones.
    local_hw: bool,
    inflight: HashMap<u64, Inflight<P>>,
    /// seq by deadline, for cheap expiry.
    deadlines: BTreeMap<(u64, u64), ()>,
}

impl<P: Clone> Prober<P> {
    pub fn new(session: u32, timeout_ns: u64, local_hw: bool) -> Prober<P> {
        Prober {
            session,
            next_seq: 1,
            timeout_ns,
            local_hw,
            inflight: HashMap::new(),
            deadlines: BTreeMap::new(),
        }
    }

    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// A probe to `peer` is about to be posted at software time `t1`:
    /// returns the packet to send (its seq is also the send's wr_id).
    pub fn start(&mut self, peer: P, t1: u64) -> Packet {
        let seq = self.next_seq;
        self.next_seq += 1;
        let deadline = t1.saturating_add(self.timeout_ns);
        self.inflight.insert(
            seq,
            Inflight {
                peer,
                t1,
                t2: None,
                t5: None,
                t6: None,
                responder_delay: None,
                deadline,
            },
        );
        self.deadlines.insert((deadline, seq), ());
        Packet::probe(self.session, seq)
    }

    /// The send of probe `seq` completed at NIC time `t2`.
    pub fn on_send_complete(&mut self, seq: u64, t2: u64) -> Option<Outcome<P>> {
        let f = self.inflight.get_mut(&seq)?;
        f.t2.get_or_insert(t2);
        self.try_finish(seq)
    }

    /// The send of probe `seq` failed: the probe cannot be measured, and
    /// it is not network loss either.
    pub fn on_send_failed(&mut self, seq: u64) -> Option<Outcome<P>> {
        let f = self.remove(seq)?;
        Some(Outcome::Unusable {
            peer: f.peer,
            seq,
            reason: "rdma_send_failed",
            fallback_rtt_ns: None,
        })
    }

    /// A packet arrived: `t5` is its receive completion's NIC time, `t6`
    /// the software time the poll saw it.
    pub fn on_receive(&mut self, pkt: &Packet, t5: u64, t6: u64) -> Received<P> {
        if pkt.session != self.session {
            return Received::Stray("rdma_other_session");
        }
        let Some(f) = self.inflight.get_mut(&pkt.seq) else {
            return Received::Stray("rdma_late_or_duplicate");
        };
        match pkt.kind {
            Kind::Ack => {
                if f.t5.is_some() {
                    return Received::Stray("rdma_late_or_duplicate");
                }
                f.t5 = Some(t5);
                f.t6 = Some(t6);
            }
            Kind::AckDetail => {
                if f.responder_delay.is_some() {
                    return Received::Stray("rdma_late_or_duplicate");
                }
                f.responder_delay = Some((pkt.responder_delay_ns, pkt.hw_timestamps()));
            }
            Kind::Probe => return Received::Stray("rdma_unexpected_probe"),
        }
        match self.try_finish(pkt.seq) {
            Some(o) => Received::Done(o),
            None => Received::Pending,
        }
    }

    /// Finish every probe whose deadline is at or before `now`: no ACK is
    /// loss; an ACK without the rest is unusable.
    pub fn expire(&mut self, now: u64) -> Vec<Outcome<P>> {
        let due: Vec<(u64, u64)> = self
            .deadlines
            .range(..=(now, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::with_capacity(due.len());
        for (_, seq) in due {
            if let Some(f) = self.remove(seq) {
                out.push(if f.t5.is_none() {
                    Outcome::Lost { peer: f.peer, seq }
                } else {
                    let fallback = fallback_rtt(&f);
                    Outcome::Unusable {
                        peer: f.peer,
                        seq,
                        reason: if f.t2.is_none() {
                            "rdma_no_send_completion"
                        } else {
                            "rdma_no_ack_detail"
                        },
                        fallback_rtt_ns: fallback,
                    }
                });
            }
        }
        out
    }

    /// Forget probes to peers for which `keep` is false (peer removed).
    pub fn retain_peers(&mut self, mut keep: impl FnMut(&P) -> bool) {
        let gone: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, f)| !keep(&f.peer))
            .map(|(s, _)| *s)
            .collect();
        for s in gone {
            self.remove(s);
        }
    }

    fn remove(&mut self, seq: u64) -> Option<Inflight<P>> {
        let f = self.inflight.remove(&seq)?;
        self.deadlines.remove(&(f.deadline, seq));
        Some(f)
    }

    fn try_finish(&mut self, seq: u64) -> Option<Outcome<P>> {
        let f = self.inflight.get(&seq)?;
        let (Some(t2), Some(t5), Some(t6), Some((rd, remote_hw))) =
            (f.t2, f.t5, f.t6, f.responder_delay)
        else {
            return None;
        };
        let hardware = self.local_hw && remote_hw;
        let f = self.remove(seq)?;
        Some(match split_rtt(f.t1, t2, t5, t6, rd) {
            Ok((network_ns, prober_delay_ns)) => Outcome::Measured {
                peer: f.peer,
                seq,
                network_ns,
                prober_delay_ns,
                responder_delay_ns: rd,
                hardware,
            },
            Err(reason) => Outcome::Unusable {
                fallback_rtt_ns: fallback_rtt(&f),
                peer: f.peer,
                seq,
                reason,
            },
        })
    }
}

/// The best round trip of an answered probe whose split failed: the NIC
/// interval when both NIC stamps are in and ordered, else the host one.
fn fallback_rtt<P>(f: &Inflight<P>) -> Option<u64> {
    let t5 = f.t5?;
    f.t2.and_then(|t2| t5.checked_sub(t2))
        .or_else(|| f.t6.and_then(|t6| t6.checked_sub(f.t1)))
}

/// The R-Pingmesh split: `(network RTT, prober delay)` from the six stamps
/// (T3/T4 given as their difference). T1/T6 are host software times, T2/T5
/// NIC times; each subtraction stays on one clock. Inconsistent stamps (a
/// NIC interval longer than the host interval around it, or a responder
/// delay longer than the round trip) are an error, not a clamped zero.
pub fn split_rtt(
    t1: u64,
    t2: u64,
    t5: u64,
    t6: u64,
    responder_delay: u64,
) -> Result<(u64, u64), &'static str> {
    let nic_rtt = t5.checked_sub(t2).ok_or("rdma_stamps_out_of_order")?;
    let host_rtt = t6.checked_sub(t1).ok_or("rdma_stamps_out_of_order")?;
    let network = nic_rtt
        .checked_sub(responder_delay)
        .ok_or("rdma_responder_delay_exceeds_rtt")?;
    // With software stamps T2/T5 come from the same host clock and the
    // prober delay can be exactly zero; hardware stamps from a slightly
    // miscalibrated clock may exceed the host interval by a few ns.
    let prober = host_rtt.saturating_sub(nic_rtt);
    if nic_rtt > host_rtt.saturating_add(host_rtt / 100 + 1_000) {
        return Err("rdma_nic_interval_exceeds_host_interval");
    }
    Ok((network, prober))
}

/// What the responder must post next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply<A> {
    /// Work-request id to post the send with (its completion comes back
    /// to [`Responder::on_send_complete`]).
    pub wr_id: u64,
    pub packet: Packet,
    /// Where to send it (the prober's address handle key).
    pub to: A,
}

#[derive(Debug, Clone)]
struct Pending<A> {
    probe: Packet,
    t3: u64,
    to: A,
}

/// The responder side: ACKs waiting for their send completion (T4) so the
/// detail with T4-T3 can follow. Bounded: under a flood the oldest entries
/// are dropped (their details never sent; the probers count them
/// unusable), so memory cannot grow without limit.
#[derive(Debug)]
pub struct Responder<A> {
    next_wr: u64,
    capacity: usize,
    hw: bool,
    pending: HashMap<u64, Pending<A>>,
    order: VecDeque<u64>,
    dropped: u64,
}

/// Work-request ids of the responder have the top bit set, so one CQ can
/// serve both roles and tell the completions apart.
pub const RESPONDER_WR_BIT: u64 = 1 << 63;

impl<A: Clone> Responder<A> {
    pub fn new(capacity: usize, hw: bool) -> Responder<A> {
        Responder {
            next_wr: 0,
            capacity: capacity.max(1),
            hw,
            pending: HashMap::new(),
            order: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Entries dropped because the table was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn wr_id(&mut self) -> u64 {
        self.next_wr = (self.next_wr + 1) & !RESPONDER_WR_BIT;
        self.next_wr | RESPONDER_WR_BIT
    }

    /// A probe arrived at NIC time `t3` from `from`: the ACK to post now.
    /// Anything but a probe gets `None` (a prober's packets are handled by
    /// [`Prober::on_receive`]).
    pub fn on_probe(&mut self, pkt: &Packet, t3: u64, from: A) -> Option<Reply<A>> {
        if pkt.kind != Kind::Probe {
            return None;
        }
        while self.pending.len() >= self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    if self.pending.remove(&old).is_some() {
                        self.dropped += 1;
                    }
                }
                None => break,
            }
        }
        let wr_id = self.wr_id();
        self.pending.insert(
            wr_id,
            Pending {
                probe: *pkt,
                t3,
                to: from.clone(),
            },
        );
        self.order.push_back(wr_id);
        Some(Reply {
            wr_id,
            packet: Packet::ack_for(pkt),
            to: from,
        })
    }

    /// The ACK posted as `wr_id` left at NIC time `t4`: the detail to post.
    /// The detail's own completion comes back here too and yields nothing.
    pub fn on_send_complete(&mut self, wr_id: u64, t4: u64) -> Option<Reply<A>> {
        let p = self.pending.remove(&wr_id)?;
        // A send completion stamped before the receive means a clock step;
        // report zero delay rather than a wrapped huge one.
        let delay = t4.saturating_sub(p.t3);
        let wr = self.wr_id();
        Some(Reply {
            wr_id: wr,
            packet: Packet::detail_for(&p.probe, delay, self.hw),
            to: p.to,
        })
    }

    /// The ACK posted as `wr_id` failed: forget it.
    pub fn on_send_failed(&mut self, wr_id: u64) {
        self.pending.remove(&wr_id);
    }

    /// Drop stale order entries whose completions were already handled, so
    /// the queue stays proportional to the table.
    pub fn compact(&mut self) {
        let pending = &self.pending;
        self.order.retain(|w| pending.contains_key(w));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn split_matches_r_pingmesh_formulas() {
        // T1=1µs, T2=2µs, T3/T4 with 5µs responder delay, T5=32µs, T6=40µs.
        let (net, prober) = split_rtt(1_000, 2_000, 32_000, 40_000, 5_000).unwrap();
        assert_eq!(net, (32_000 - 2_000) - 5_000);
        assert_eq!(prober, (40_000 - 1_000) - (32_000 - 2_000));
    }

    #[test]
    fn split_rejects_inconsistent_stamps() {
        assert_eq!(split_rtt(0, 10, 5, 100, 0), Err("rdma_stamps_out_of_order"));
        assert_eq!(
            split_rtt(0, 10, 20, 100, 50),
            Err("rdma_responder_delay_exceeds_rtt")
        );
        assert_eq!(
            split_rtt(0, 0, 1_000_000, 10_000, 0),
            Err("rdma_nic_interval_exceeds_host_interval")
        );
        // Software stamps: NIC interval == host interval is fine.
        assert_eq!(split_rtt(0, 0, 10_000, 10_000, 1_000), Ok((9_000, 0)));
    }

    fn full_exchange(order: &[&str]) -> Outcome<&'static str> {
        let mut p: Prober<&str> = Prober::new(77, 100 * MS, true);
        let probe = p.start("peer-b", 1_000);
        let seq = probe.seq;
        let mut r: Responder<u32> = Responder::new(16, true);
        let ack = r.on_probe(&probe, 50_000, 9).unwrap();
        let detail = r.on_send_complete(ack.wr_id, 53_000).unwrap();
        assert_eq!(detail.packet.responder_delay_ns, 3_000);
        let mut done = None;
        for step in order {
            let res = match *step {
                "send" => p.on_send_complete(seq, 2_000).map(Received::Done),
                "ack" => Some(p.on_receive(&ack.packet, 30_000, 31_000)),
                "detail" => Some(p.on_receive(&detail.packet, 30_500, 31_500)),
                _ => unreachable!(),
            };
            if let Some(Received::Done(o)) = res {
                assert!(done.is_none(), "finished twice");
                done = Some(o);
            }
        }
        assert_eq!(p.in_flight(), 0);
        done.expect("exchange finished")
    }

    #[test]
    fn exchange_completes_in_any_completion_order() {
        let want = Outcome::Measured {
            peer: "peer-b",
            seq: 1,
            network_ns: (30_000 - 2_000) - 3_000,
            prober_delay_ns: (31_000 - 1_000) - (30_000 - 2_000),
            responder_delay_ns: 3_000,
            hardware: true,
        };
        for order in [
            ["send", "ack", "detail"],
            ["ack", "send", "detail"],
            ["ack", "detail", "send"],
            ["detail", "ack", "send"],
        ] {
            assert_eq!(full_exchange(&order), want, "order {order:?}");
        }
    }

    #[test]
    fn lost_and_unusable_on_expiry() {
        let mut p: Prober<u8> = Prober::new(1, 10 * MS, false);
        let a = p.start(1, 0);
        let b = p.start(2, 0);
        let c = p.start(3, 5 * MS);
        p.on_send_complete(a.seq, 10);
        p.on_send_complete(b.seq, 10);
        assert_eq!(
            p.on_receive(&Packet::ack_for(&b), 100, 110),
            Received::Pending
        );
        assert!(p.expire(10 * MS - 1).is_empty());
        let mut out = p.expire(10 * MS);
        out.sort_by_key(|o| match o {
            Outcome::Lost { seq, .. } | Outcome::Unusable { seq, .. } => *seq,
            Outcome::Measured { seq, .. } => *seq,
        });
        assert_eq!(
            out,
            vec![
                Outcome::Lost {
                    peer: 1,
                    seq: a.seq
                },
                Outcome::Unusable {
                    peer: 2,
                    seq: b.seq,
                    reason: "rdma_no_ack_detail",
                    fallback_rtt_ns: Some(90),
                },
            ]
        );
        assert_eq!(p.in_flight(), 1);
        assert_eq!(
            p.expire(15 * MS),
            vec![Outcome::Lost {
                peer: 3,
                seq: c.seq
            }]
        );
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn late_duplicate_and_foreign_packets_are_strays() {
        let mut p: Prober<u8> = Prober::new(5, 10 * MS, false);
        let probe = p.start(1, 0);
        // Another session's ACK with the same seq.
        let foreign = Packet::ack_for(&Packet::probe(6, probe.seq));
        assert_eq!(
            p.on_receive(&foreign, 1, 1),
            Received::Stray("rdma_other_session")
        );
        let ack = Packet::ack_for(&probe);
        assert_eq!(p.on_receive(&ack, 100, 100), Received::Pending);
        assert_eq!(
            p.on_receive(&ack, 200, 200),
            Received::Stray("rdma_late_or_duplicate")
        );
        assert_eq!(
            p.on_receive(&probe, 200, 200),
            Received::Stray("rdma_unexpected_probe")
        );
        // After expiry, the late detail is a stray, never a second outcome.
        assert_eq!(p.expire(10 * MS).len(), 1);
        let detail = Packet::detail_for(&probe, 1, false);
        assert_eq!(
            p.on_receive(&detail, 300, 300),
            Received::Stray("rdma_late_or_duplicate")
        );
    }

    #[test]
    fn send_failure_is_not_loss() {
        let mut p: Prober<u8> = Prober::new(5, 10 * MS, false);
        let probe = p.start(4, 0);
        assert_eq!(
            p.on_send_failed(probe.seq),
            Some(Outcome::Unusable {
                peer: 4,
                seq: probe.seq,
                reason: "rdma_send_failed",
                fallback_rtt_ns: None,
            })
        );
        assert!(p.expire(u64::MAX).is_empty());
    }

    #[test]
    fn inconsistent_stamps_fall_back_to_nic_rtt() {
        let mut p: Prober<u8> = Prober::new(5, 10 * MS, true);
        let probe = p.start(4, 0);
        p.on_send_complete(probe.seq, 1_000);
        p.on_receive(&Packet::ack_for(&probe), 5_000, 6_000);
        // Responder claims 9 µs inside a 4 µs round trip.
        assert_eq!(
            p.on_receive(&Packet::detail_for(&probe, 9_000, true), 5_100, 6_100),
            Received::Done(Outcome::Unusable {
                peer: 4,
                seq: probe.seq,
                reason: "rdma_responder_delay_exceeds_rtt",
                fallback_rtt_ns: Some(4_000),
            })
        );
        // No send completion: the host interval stands in.
        let probe = p.start(4, 100);
        p.on_receive(&Packet::ack_for(&probe), 5_000, 7_100);
        assert_eq!(
            p.expire(u64::MAX),
            vec![Outcome::Unusable {
                peer: 4,
                seq: probe.seq,
                reason: "rdma_no_send_completion",
                fallback_rtt_ns: Some(7_000),
            }]
        );
    }

    #[test]
    fn hardware_flag_needs_both_ends() {
        let mut p: Prober<u8> = Prober::new(5, 10 * MS, true);
        let probe = p.start(4, 0);
        p.on_send_complete(probe.seq, 1_000);
        p.on_receive(&Packet::ack_for(&probe), 5_000, 6_000);
        match p.on_receive(&Packet::detail_for(&probe, 100, false), 5_100, 6_100) {
            Received::Done(Outcome::Measured { hardware, .. }) => assert!(!hardware),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn retain_peers_drops_removed_peer_probes() {
        let mut p: Prober<u8> = Prober::new(5, 10 * MS, true);
        p.start(1, 0);
        p.start(2, 0);
        p.retain_peers(|peer| *peer == 2);
        assert_eq!(p.in_flight(), 1);
        assert_eq!(p.expire(u64::MAX), vec![Outcome::Lost { peer: 2, seq: 2 }]);
    }

    #[test]
    fn responder_is_bounded_and_tags_wr_ids() {
        let mut r: Responder<u8> = Responder::new(2, false);
        let probes: Vec<Packet> = (1..=3).map(|s| Packet::probe(9, s)).collect();
        let acks: Vec<Reply<u8>> = probes
            .iter()
            .map(|p| r.on_probe(p, 10, 1).unwrap())
            .collect();
        assert!(acks.iter().all(|a| a.wr_id & RESPONDER_WR_BIT != 0));
        assert_eq!(acks[2].packet.kind, Kind::Ack);
        assert_eq!(r.pending(), 2);
        assert_eq!(r.dropped(), 1);
        // The oldest ACK's completion no longer yields a detail.
        assert_eq!(r.on_send_complete(acks[0].wr_id, 20), None);
        let d = r.on_send_complete(acks[2].wr_id, 25).unwrap();
        assert_eq!(d.packet.kind, Kind::AckDetail);
        assert_eq!(d.packet.seq, 3);
        assert_eq!(d.packet.responder_delay_ns, 15);
        assert!(!d.packet.hw_timestamps());
        // The detail's own completion is ignored.
        assert_eq!(r.on_send_complete(d.wr_id, 30), None);
        // Non-probes are not answered.
        assert_eq!(r.on_probe(&Packet::ack_for(&probes[0]), 1, 1), None);
        r.compact();
    }
}
