//! The responder every exporter runs, so peers can probe it: the UDP echo
//! responder ([`udp`]), whom it answers ([`guard`]: allow-list and
//! per-source rate), and the TCP dial acceptor ([`tcp`]). Same layer as
//! `probe/`; it uses the probe wire format, [`crate::probe::PeerInfo`] and
//! the [`crate::discovery::PeerSet`] (for `responder.allow_peers`).
//!
//! When the exporter stops, the UDP responder goes on answering for the
//! departure notice with every reply marked [`Leaving`]: its peers learn
//! that the silence to come is a departure, not loss.

pub mod guard;
pub mod tcp;
pub mod udp;

pub use guard::Guard;
pub use tcp::run_tcp;
pub use udp::{bind_udp, run_udp, BindError, Leaving};
