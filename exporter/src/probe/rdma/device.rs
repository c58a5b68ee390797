//! The libibverbs port of [`crate::sys::verbs`] as an [`Rnic`] of the engine.

use super::clock::{best_sample, ClockSample};
use super::engine::{Completion, Rnic, VerbsError};
use crate::sys::time::wall_ns;
use crate::sys::verbs::Nic;
use crate::wire::rdma::RdmaEndpoint;

impl Rnic for Nic {
    fn name(&self) -> &str {
        &self.name
    }
    fn endpoint(&self) -> RdmaEndpoint {
        self.endpoint
    }
    fn hw_clock(&self) -> Option<(u64, u64)> {
        self.hw_clock
    }
    fn send(&mut self, to: &RdmaEndpoint, payload: &[u8], wr_id: u64) -> Result<(), VerbsError> {
        Nic::send(self, to, payload, wr_id)
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<(), VerbsError> {
        Nic::poll(self, out, max)
    }
    fn recv_slot(&self, c: &Completion) -> Option<&[u8]> {
        Nic::recv_slot(self, c)
    }
    fn repost(&mut self, c: &Completion) -> Result<(), VerbsError> {
        Nic::repost(self, c)
    }
    fn ack_events(&mut self) -> Result<(), VerbsError> {
        Nic::ack_events(self)
    }
    /// The tightest of 5 bracketed (NIC counter, wall clock) readings.
    fn clock_sample(&self) -> Option<ClockSample> {
        let (mask, _) = self.hw_clock?;
        best_sample(5, wall_ns, || self.raw_clock(), mask)
    }
}

#[cfg(test)]
mod tests {
    use super::super::exchange::RESPONDER_WR_BIT;
    use crate::sys::verbs::{is_recv_wr, RECV_TAG};

    #[test]
    fn receive_ids_never_collide_with_send_ids() {
        assert!(is_recv_wr(RECV_TAG | 5));
        assert!(!is_recv_wr(1), "prober sequence numbers");
        assert!(!is_recv_wr(RESPONDER_WR_BIT | 7), "responder ids");
        assert!(!is_recv_wr(RESPONDER_WR_BIT | RECV_TAG | 7));
    }
}
