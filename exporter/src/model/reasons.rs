//! Free-text label values as enums: discovery events, probe errors and
//! responder drops. `as_str` gives the label value, byte for byte what the
//! dashboards and rules match on.

skeletonhunter_common::labelled_enum! {
    /// The `event` label of `skeletonhunter_discovery_events`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DiscoveryEvent {
        /// A source published a changed peer list.
        Updated,
        /// A DNS resolver could not be built.
        ResolverError,
        /// A DNS lookup succeeded.
        Resolved,
        /// A DNS lookup failed or timed out.
        ResolveFailed,
        /// A ToR-mesh peer list could not be read.
        ReadFailed,
        /// A ToR-mesh entry is not an IP address.
        BadEntry,
        /// A TCP connection reached ESTABLISHED.
        TcpUp,
        /// A TCP connection left ESTABLISHED.
        TcpDown,
        /// An RDMA QP moved to RTR.
        RdmaRtr,
        /// An RDMA QP was destroyed.
        RdmaDestroy,
        /// A connection was left out by the filter.
        Filtered,
        /// A remote became a skeleton peer.
        PeerAdded,
        /// A skeleton peer expired.
        PeerRemoved,
        /// An eBPF record could not be decoded.
        Malformed,
        /// Reading /proc/net/tcp failed.
        PollError,
        /// A /proc poll was applied.
        Poll,
        /// The start-up snapshot of established sockets was applied.
        Seed,
    }
}

skeletonhunter_common::labelled_enum! {
    /// The `reason` label of `skeletonhunter_probe_errors` for errors the
    /// probers detect themselves (decode and reply-matching reasons come with
    /// their own types).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ProbeErrorReason {
        /// The probe could not be sent (it still counts).
        SendFailed,
        /// Too many TCP dials in flight; probe skipped.
        TooManyDials,
        /// TCP dial refused.
        ConnectRefused,
        /// TCP dial timed out.
        ConnectTimeout,
        /// TCP dial: host or network unreachable.
        ConnectUnreachable,
        /// TCP dial failed otherwise.
        ConnectError,
        /// This host ran out of descriptors or local ports (EMFILE, ENFILE,
        /// EADDRNOTAVAIL) before the dial started: a local problem, never
        /// counted as sent or lost.
        LocalResources,
        /// Kernel transmit timestamps went out of step.
        TxTimestampMismatch,
        /// A reply of another prober session.
        ForeignReply,
        /// An ICMP error surfaced on the UDP socket.
        IcmpError,
        /// No IPv6 UDP socket for an IPv6 peer.
        NoIpv6Socket,
        /// No ICMP socket for the peer's family.
        NoSocketForFamily,
        /// A peer advertised a malformed RDMA endpoint.
        RdmaBadEndpoint,
        /// The responder table was full.
        RdmaResponderOverflow,
        /// An ACK arrived on a port that sends no probes.
        RdmaAckOnWrongPort,
        /// A probe without a usable source GID.
        RdmaNoSourceGid,
        /// The responder could not send an ACK.
        RdmaAckSendFailed,
        /// Posting a receive buffer or probe failed.
        RdmaPostFailed,
    }
}

impl ProbeErrorReason {
    /// What the UDP echo prober counts itself.
    pub const UDP: [ProbeErrorReason; 5] = [
        ProbeErrorReason::SendFailed,
        ProbeErrorReason::TxTimestampMismatch,
        ProbeErrorReason::ForeignReply,
        ProbeErrorReason::IcmpError,
        ProbeErrorReason::NoIpv6Socket,
    ];
    /// What the TCP dial prober counts.
    pub const TCP: [ProbeErrorReason; 6] = [
        ProbeErrorReason::TooManyDials,
        ProbeErrorReason::ConnectRefused,
        ProbeErrorReason::ConnectTimeout,
        ProbeErrorReason::ConnectUnreachable,
        ProbeErrorReason::ConnectError,
        ProbeErrorReason::LocalResources,
    ];
    /// What the ICMP prober counts itself.
    pub const ICMP: [ProbeErrorReason; 2] = [
        ProbeErrorReason::SendFailed,
        ProbeErrorReason::NoSocketForFamily,
    ];
    /// What the RDMA prober counts itself.
    pub const RDMA: [ProbeErrorReason; 6] = [
        ProbeErrorReason::RdmaBadEndpoint,
        ProbeErrorReason::RdmaResponderOverflow,
        ProbeErrorReason::RdmaAckOnWrongPort,
        ProbeErrorReason::RdmaNoSourceGid,
        ProbeErrorReason::RdmaAckSendFailed,
        ProbeErrorReason::RdmaPostFailed,
    ];
}

skeletonhunter_common::labelled_enum! {
    /// The `reason` label of `skeletonhunter_responder_dropped` besides the
    /// decode errors of the wire format.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DropReason {
        /// Larger than the largest request.
        Oversized,
        /// A valid datagram that is not a request.
        NotRequest,
        /// The reply could not be sent.
        SendFailed,
        /// The source is not on the allow-list (`responder.allow`,
        /// `responder.allow_peers`).
        NotAllowed,
        /// The source sent more than `responder.rate_limit` per second.
        RateLimited,
    }
}

skeletonhunter_common::labelled_enum! {
    /// The `socket` label of `skeletonhunter_socket_receive_drops_total`: the
    /// exporter's own datagram sockets whose kernel receive-buffer drops it
    /// counts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum OwnSocket {
        /// The UDP echo prober's sockets (IPv4 and IPv6).
        UdpProber,
        /// The UDP echo responder.
        UdpResponder,
        /// The ICMP echo prober's sockets.
        IcmpProber,
    }
}

skeletonhunter_common::labelled_enum! {
    /// Where on its own host the exporter measures a delay
    /// (`skeletonhunter_host_stack_delay_seconds{stage}`): time a busy or
    /// paused host adds that is not the network's.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum StackStage {
        /// How late a probe left against its slot in the schedule.
        Send,
        /// How long an answer waited in the prober's socket (kernel receive
        /// timestamp to the read).
        Receive,
        /// How long a request waited in the responder (kernel receive
        /// timestamp to the echo).
        Responder,
    }
}
