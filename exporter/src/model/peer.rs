//! Peer identity: who a skeleton peer is and which discovery source named it.

use std::net::{IpAddr, SocketAddr};

skeletonhunter_common::labelled_enum! {
    /// Where a peer came from. Order is priority: when two sources name the same
    /// address, the earlier one decides ports and name.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum PeerSource {
        /// The configuration file or `--peers`.
        Static,
        /// A headless-service DNS name.
        Dns,
        /// A ToR-mesh peer list.
        TorMesh,
        /// Traffic discovery (eBPF or /proc polling).
        Ebpf,
    }
}

/// One skeleton peer: where its exporter listens and what we know of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The peer's address; also the key that merges sources.
    pub addr: IpAddr,
    /// UDP echo port of the peer's responder; `None` = the configured default.
    pub udp_port: Option<u16>,
    /// TCP dial port; `None` = the configured default.
    pub tcp_port: Option<u16>,
    /// A node name known before any reply (config, DNS, peer list). The
    /// identity learned from UDP replies wins over it.
    pub name: Option<String>,
    /// The source that contributed this entry.
    pub source: PeerSource,
    /// Traffic discovery: every connection to it has closed (it stays a
    /// peer until its TTL). A peer that closed its connections and stops
    /// answering has left — a finished or deleted job's container — and
    /// its silence is no loss ([`crate::probe`]).
    pub closed: bool,
}

impl Peer {
    /// A peer known only by its address.
    pub fn new(addr: IpAddr, source: PeerSource) -> Peer {
        Peer {
            addr,
            udp_port: None,
            tcp_port: None,
            name: None,
            source,
            closed: false,
        }
    }

    /// The same peer with a known node name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Peer {
        self.name = Some(name.into());
        self
    }

    /// The UDP echo target, given the configured default port.
    pub fn udp_addr(&self, default_port: u16) -> SocketAddr {
        SocketAddr::new(self.addr, self.udp_port.unwrap_or(default_port))
    }

    /// The TCP dial target, given the configured default port.
    pub fn tcp_addr(&self, default_port: u16) -> SocketAddr {
        SocketAddr::new(self.addr, self.tcp_port.unwrap_or(default_port))
    }
}

/// 198.18.0.`n`, a benchmarking address (RFC 2544) that is never a real
/// peer: the address the unit tests of several modules give their peers.
#[cfg(test)]
pub fn test_ip(n: u8) -> std::net::IpAddr {
    std::net::IpAddr::from([198, 18, 0, n])
}
