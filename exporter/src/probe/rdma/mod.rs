//! RDMA UD probing in the manner of R-Pingmesh: one UD queue pair per RNIC,
//! a probe / ACK / ACK-detail exchange stamped with hardware CQE
//! timestamps where the RNIC has them, and the round trip split into
//! network RTT, prober delay and responder delay.
//!
//! Layout: [`clock`] (timestamp wrap-around and wall-clock conversion) and
//! [`exchange`] (the prober and responder state machines) are pure, the
//! packet format is [`crate::wire::rdma`]; [`engine`] joins them with RNICs
//! behind a trait (tested over a fake fabric); `device` adapts the
//! libibverbs port of [`crate::sys::verbs`] to that trait (cargo feature
//! `rdma`); `thread` runs the engine thread; [`prober`] implements the
//! common [`Prober`](super::Prober).
//!
//! Peers learn each other's RDMA endpoint (GID, QPN, Q_Key) over the UDP
//! echo channel: this exporter's [`endpoint_tlv`] goes into every UDP
//! request and reply, and peers' TLVs feed [`EndpointBook::learn`]; the
//! RDMA prober probes exactly the peers whose endpoint is known.

// Without the `rdma` feature only the wire format is used (the TLV), so
// the engine's pure parts are compiled (and unit-tested) but idle.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod clock;
#[cfg(feature = "rdma")]
mod device;
mod endpoints;
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod engine;
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod exchange;
pub mod prober;
mod thread;

pub use crate::wire::rdma::DEFAULT_QKEY;
pub use endpoints::{endpoint_tlv, EndpointBook, EndpointError};
pub use prober::{install, log_disabled, start_or_disable, RdmaProber};
pub use thread::StartError;

use std::net::IpAddr;
use std::time::Duration;

/// RDMA prober settings.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub struct RdmaConfig {
    /// A probe without an ACK after this long is lost.
    pub timeout: Duration,
    /// Q_Key of the UD queue pairs (the same on every exporter).
    pub qkey: u32,
    /// Prefer the RNIC whose GID carries this address (the exporter's
    /// `nic` identity), so probes leave through the port training uses.
    pub preferred_addr: Option<IpAddr>,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            timeout: Duration::from_secs(1),
            qkey: DEFAULT_QKEY,
            preferred_addr: None,
        }
    }
}
