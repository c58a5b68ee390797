//! The responder every exporter runs, so peers can probe it: the UDP echo
//! responder ([`udp`]) and the TCP dial acceptor ([`tcp`]). Same layer as
//! `probe/`; it uses the probe wire format and [`crate::probe::PeerInfo`].

pub mod tcp;
pub mod udp;

pub use tcp::run_tcp;
pub use udp::{bind_udp, run_udp, BindError};
