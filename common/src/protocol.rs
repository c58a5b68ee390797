//! The probe protocols: the one vocabulary the exporter (which probes) and
//! the localizer (which reads the probes' series) share.
//!
//! What a protocol *means* to the analysis is a property here, not a string
//! compared at the use site: a new protocol is a variant and a row of each
//! table below, and the compiler lists every `match` that must learn it.

crate::labelled_enum! {
    parse "protocol";
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
}

/// How a protocol's `sent` and `lost` counters count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounds {
    /// Each round is one probe packet; loss is measured packet by packet.
    Packets,
    /// Each round is a connection attempt; a failed dial is the symptom
    /// (the `dial_failures` counter), never packet loss.
    Dials,
}

impl Protocol {
    /// A dense index, for per-protocol arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What one round of this protocol is.
    pub fn rounds(self) -> Rounds {
        match self {
            Protocol::Tcp => Rounds::Dials,
            Protocol::Udp | Protocol::Icmp | Protocol::Rdma => Rounds::Packets,
        }
    }

    /// Whether a round is a connection attempt (see [`Rounds::Dials`]).
    pub fn is_dial(self) -> bool {
        self.rounds() == Rounds::Dials
    }

    /// Preference when a pair's RTT is measured by several protocols, lowest
    /// first: the one closest to what training traffic sees (RDMA, then the
    /// UDP echo whose responder delay is subtracted, then ICMP, last the
    /// TCP handshake, which includes the peer's accept path).
    pub fn rtt_preference(self) -> u8 {
        match self {
            Protocol::Rdma => 0,
            Protocol::Udp => 1,
            Protocol::Icmp => 2,
            Protocol::Tcp => 3,
        }
    }
}

/// A protocol name that is none of [`Protocol::ALL`].
pub type UnknownProtocol = crate::label::UnknownLabel;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_round_trip() {
        for p in Protocol::ALL {
            assert_eq!(p.as_str().parse::<Protocol>().unwrap(), p);
            assert_eq!(Protocol::ALL[p.index()], p);
        }
        assert!("nosuch"
            .parse::<Protocol>()
            .unwrap_err()
            .to_string()
            .contains("nosuch"));
    }

    #[test]
    fn only_tcp_counts_dials_and_rdma_is_the_preferred_rtt() {
        let dials: Vec<_> = Protocol::ALL.into_iter().filter(|p| p.is_dial()).collect();
        assert_eq!(dials, [Protocol::Tcp]);
        let best = Protocol::ALL.into_iter().min_by_key(|p| p.rtt_preference());
        assert_eq!(best, Some(Protocol::Rdma));
        let mut prefs: Vec<_> = Protocol::ALL.iter().map(|p| p.rtt_preference()).collect();
        prefs.sort_unstable();
        prefs.dedup();
        assert_eq!(
            prefs.len(),
            Protocol::ALL.len(),
            "preferences are a strict order"
        );
    }
}
