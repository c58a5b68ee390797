//! The probe protocols.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use std::fmt;

/// A probe protocol; its `as_str` is the `protocol` label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// UDP echo to the peer's responder.
    Udp,
    /// TCP dial to the peer's acceptor.
    Tcp,
    /// ICMP echo, for peers without a responder.
    Icmp,
    /// RDMA UD probe / ACK exchange.
    Rdma,
}

impl Protocol {
    /// Every protocol, in label order.
    pub const ALL: [Protocol; 4] = [Protocol::Udp, Protocol::Tcp, Protocol::Icmp, Protocol::Rdma];

    /// The `protocol` label value (also the configuration spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Tcp => "tcp",
            Protocol::Icmp => "icmp",
            Protocol::Rdma => "rdma",
        }
    }

    /// A dense index, for per-protocol arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol name that is none of [`Protocol::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol {0:?} (expected udp, tcp, icmp or rdma)")]
pub struct UnknownProtocol(pub String);

impl std::str::FromStr for Protocol {
    type Err = UnknownProtocol;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProtocol(s.to_string()))
    }
}

impl EncodeLabelValue for Protocol {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        fmt::Write::write_str(encoder, self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(p.as_str().parse::<Protocol>().unwrap(), p);
        }
        assert!("sctp"
            .parse::<Protocol>()
            .unwrap_err()
            .to_string()
            .contains("sctp"));
    }
}
