//! The probing engine: one [`Prober`] per protocol, one [`Scheduler`].
//!
//! Contract (all protocols, RDMA included):
//! - A prober owns a few sockets (one per address family at most; the UDP
//!   prober a fixed pool of `probe.flows` per family, see [`flows`]) and
//!   its own receive task(s). It never creates a task or socket per peer; the
//!   TCP dial prober is the exception the protocol forces (a connection is
//!   a socket), and its dials are short-lived.
//! - [`Prober::probe`] is called by the scheduler and must not block: it
//!   sends one probe, counts it as sent, and registers it in its
//!   [`InFlight`] table with the target's cached [`Series`].
//! - The prober's receive task completes in-flight entries (RTT observed
//!   once); [`Prober::expire`], called by the scheduler every few ms, counts
//!   entries past the timeout as lost. Late and duplicate replies are
//!   counted as probe errors, never as RTT or loss, so `sent = answered +
//!   lost + in flight` always holds.
//! - The one [`Scheduler`](scheduler::Scheduler) task spreads the probes of all targets and
//!   protocols evenly over the interval (slot k of M fires at k/M of the
//!   round), so thousands of peers cost a steady trickle, not bursts.

pub mod flows;
pub mod icmp;
pub mod inflight;
pub mod peer_info;
pub mod pins;
pub mod rdma;
pub mod registry;
pub mod scheduler;
pub mod target;
pub mod tcp;
pub mod udp;

pub use flows::{FlowBook, FlowCount};
pub use inflight::{Completion, InFlight};
pub use peer_info::PeerInfo;
pub use scheduler::{ScheduleConfig, Scheduler};
pub use target::{NodeClaim, Ports, Target};

use crate::model::Protocol;
use std::sync::Arc;
use std::time::Instant;

/// The one interface every protocol implements.
pub trait Prober: Send + Sync + 'static {
    /// The protocol this prober measures.
    fn protocol(&self) -> Protocol;

    /// Whether this prober probes `target` at all (RDMA: only peers whose
    /// endpoint is known). Called when the target list changes.
    fn applies_to(&self, _target: &Target) -> bool {
        true
    }

    /// Send one probe to `target` now. Never blocks; errors are counted in
    /// `skeletonhunter_probe_errors_total`, not returned.
    fn probe(&self, target: &Arc<Target>);

    /// Count in-flight probes older than the timeout as lost.
    fn expire(&self, now: Instant);
}
