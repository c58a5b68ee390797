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

use crate::wire::rdma::{Kind, Packet};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A finished probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<P> {
    /// Every timestamp arrived: the round trip split in three.
    Measured {
        /// Who was probed.
        peer: P,
        /// The probe's sequence number.
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
    /// No ACK within the timeout.
    Lost {
        /// Who was probed.
        peer: P,
        /// The probe's sequence number.
        seq: u64,
    },
    /// The stamps cannot give the full split: the detail never arrived,
    /// the send did not complete or failed, or the stamps are inconsistent
    /// (e.g. a responder delay longer than the round trip). When the ACK
    /// did come back, `fallback_rtt_ns` is the best round trip available
    /// (T5-T2, else T6-T1), so an answered probe still counts as answered;
    /// `None` means nothing came back and the caller counts it lost.
    Unusable {
        /// Who was probed.
        peer: P,
        /// The probe's sequence number.
        seq: u64,
        /// The `reason` label of the probe error.
        reason: &'static str,
        /// A coarser RTT when one is known.
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
    /// A prober of `session`; probes expire after `timeout_ns`.
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
    /// Test helper.
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
    /// The packet to send.
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

/// Every `reason` label this exchange gives a probe that yields no RTT or
/// a reply that is not ours (counters start at 0 for each).
pub const REASONS: [&str; 9] = [
    "rdma_send_failed",
    "rdma_other_session",
    "rdma_late_or_duplicate",
    "rdma_unexpected_probe",
    "rdma_no_send_completion",
    "rdma_no_ack_detail",
    "rdma_stamps_out_of_order",
    "rdma_responder_delay_exceeds_rtt",
    "rdma_nic_interval_exceeds_host_interval",
];

/// Work-request ids of the responder have the top bit set, so one CQ can
/// serve both roles and tell the completions apart.
pub const RESPONDER_WR_BIT: u64 = 1 << 63;

impl<A: Clone> Responder<A> {
    /// Room for `capacity` pending details; `hw`: this RNIC stamps in hardware.
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
    /// Test helper.
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
mod tests;
