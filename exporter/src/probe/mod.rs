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
//! - A peer that left is not lost: one whose reply says it is leaving, or
//!   one that closed every connection and then misses a probe or refuses
//!   a dial, departs ([`Target::depart`]) in whichever prober learns it
//!   first; its series go and only the UDP prober asks, uncounted, whether
//!   it is back.
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
pub use inflight::{Completion, InFlight, Sent, SharedInFlight};
pub use peer_info::PeerInfo;
pub use scheduler::{ScheduleConfig, Scheduler};
pub use target::{NodeClaim, Ports, Target};

use crate::model::{OwnSocket, Protocol, StackStage};
use crate::sys::batch::{RecvBatch, BATCH};
use crate::sys::time::wall_ns;
use crate::telemetry::{Metrics, SocketDrops};
use prometheus_client::metrics::histogram::Histogram;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

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

/// The receive task of a packet prober (ICMP, UDP): each time `fd` is
/// ready for `interest`, and while the prober lives, `drain` reads what is
/// queued with `reader` and says whether the socket is empty; readiness is
/// only cleared then, so a drain cut short by its bound resumes at once.
/// Ends when the prober is gone or the socket fails (logged as `what`
/// failed).
pub(crate) async fn receive_task<P, S: AsRawFd>(
    fd: &AsyncFd<S>,
    interest: Interest,
    prober: &Weak<P>,
    what: &str,
    mut reader: Reader,
    mut drain: impl FnMut(&P, &mut Reader) -> bool,
) {
    loop {
        let mut guard = match fd.ready(interest).await {
            Ok(g) => g,
            Err(e) => {
                tracing::error!("{what} failed: {e}");
                return;
            }
        };
        let Some(p) = prober.upgrade() else { return };
        if drain(&p, &mut reader) {
            guard.clear_ready();
        }
    }
}

/// Most `recvmmsg` calls one drain makes (64 batches of 32 datagrams)
/// before it yields to the other tasks: a flood cannot hold the task.
pub(crate) const DRAIN_CALLS: usize = 64;

/// What a packet prober's receive task reads one socket with: batch
/// buffers for the largest datagram it expects, the socket's drop counter
/// and the histogram of how long answers waited in the socket.
pub(crate) struct Reader {
    batch: RecvBatch,
    drops: SocketDrops,
    waited: Histogram,
}

impl Reader {
    /// The reader of `protocol`'s prober socket `socket`, for datagrams up
    /// to `buf_len` bytes: it counts the kernel's drops on that socket and
    /// the time each datagram waited between its kernel receive timestamp
    /// and the read (the receive stage of
    /// `skeletonhunter_host_stack_delay_seconds`: a starved or paused
    /// prober reads late).
    pub(crate) fn new(
        buf_len: usize,
        metrics: &Metrics,
        socket: OwnSocket,
        protocol: Protocol,
    ) -> Reader {
        Reader {
            batch: RecvBatch::new(buf_len),
            drops: metrics.socket_drops(socket),
            waited: metrics.host_stack(protocol, StackStage::Receive),
        }
    }

    /// Read the datagrams queued on `sock`, a batch per call, until the
    /// queue is empty (`true`) or [`DRAIN_CALLS`] calls were made
    /// (`false`): each goes to `on_datagram` with its sender and receive
    /// time (the kernel's, else the wall clock at the read), any other
    /// receive error to `on_error`.
    pub(crate) fn drain(
        &mut self,
        sock: &impl AsRawFd,
        mut on_datagram: impl FnMut(&[u8], SocketAddr, u64),
        mut on_error: impl FnMut(std::io::Error),
    ) -> bool {
        for _ in 0..DRAIN_CALLS {
            let n = match self.batch.recv(sock, 0) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) => {
                    on_error(e);
                    continue;
                }
            };
            let read = wall_ns();
            for (data, d) in self.batch.datagrams() {
                let r = d.received;
                self.drops.observe(r.rx_drops);
                if let Some(k) = r.kernel_ns {
                    // Without a kernel timestamp there is nothing to
                    // measure the wait from.
                    self.waited.observe(read.saturating_sub(k) as f64 * 1e-9);
                }
                on_datagram(data, r.from, r.kernel_ns.unwrap_or(read));
            }
            if n < BATCH {
                // The call ran out of datagrams: the queue was empty.
                return true;
            }
        }
        false
    }
}
