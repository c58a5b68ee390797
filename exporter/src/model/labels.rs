//! Label sets of the exporter's metric families. Names and values are a
//! contract with the localizer and the shipped rules (see docs/exporter.md).

use super::{IdentitySource, PeerSource, Protocol};
use prometheus_client::encoding::EncodeLabelSet;

/// Labels of the per-pair probe series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    /// This exporter's node.
    pub src_node: String,
    /// The peer's node (learned from its replies when possible).
    pub dst_node: String,
    /// The probe protocol.
    pub protocol: Protocol,
}

/// Labels of per-pair series that are not split by protocol (RDMA delays).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PairLabels {
    /// This exporter's node.
    pub src_node: String,
    /// The peer's node.
    pub dst_node: String,
}

/// Labels of per-source discovery series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// The discovery source.
    pub source: PeerSource,
}

/// Labels of discovery events.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceEventLabels {
    /// The discovery source.
    pub source: PeerSource,
    /// What happened (`updated`, `resolve_failed`, `tcp_up`, ...).
    pub event: &'static str,
}

/// Labels of probe errors.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolReasonLabels {
    /// The probe protocol.
    pub protocol: Protocol,
    /// Why the probe or reply did not count (`send_failed`, `late_reply`, ...).
    pub reason: &'static str,
}

/// Labels of responder drops.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Why the datagram was dropped.
    pub reason: &'static str,
}

/// Labels of the exporter's own sockets' kernel drops.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SocketLabels {
    /// Which socket (`OwnSocket::as_str`).
    pub socket: &'static str,
}

/// Labels of `skeletonhunter_host_stack_delay_seconds`: per protocol and
/// stage, never per peer, so a host's own delays cost a dozen series
/// whatever its number of peers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostStackLabels {
    /// The probe protocol.
    pub protocol: Protocol,
    /// Where on this host the delay was spent (`StackStage::as_str`).
    pub stage: &'static str,
}

/// Labels of responder replies.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabels {
    /// The probe protocol answered.
    pub protocol: Protocol,
}

/// Labels of `skeletonhunter_exporter_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The crate version.
    pub version: &'static str,
}

/// Labels of `skeletonhunter_discovery_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DiscoveryInfoLabels {
    /// The traffic-discovery source running: `ebpf`, `poll` or `off`.
    pub mode: &'static str,
    /// What `discovery.ebpf.mode` asked for: `auto`, `ebpf`, `poll`, `off`.
    pub configured: &'static str,
}

/// Labels of `skeletonhunter_identity_source`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IdentitySourceLabels {
    /// The identity field, named as its `identity.*` key (`tor`, `pod`, ...).
    pub field: &'static str,
    /// Where its value came from.
    pub source: IdentitySource,
}

/// Labels of `skeletonhunter_rdma_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RdmaInfoLabels {
    /// `enabled`, `disabled` (asked for, cannot run here) or `off` (not
    /// among the protocols).
    pub status: &'static str,
    /// Why it is disabled (`not_built`, `unavailable`, `no_port`, ...);
    /// empty otherwise.
    pub reason: &'static str,
}

/// Labels of `skeletonhunter_path_hop_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HopLabels {
    /// This exporter's node.
    pub src_node: String,
    /// The traced peer's node.
    pub dst_node: String,
    /// The path id: 8 hex digits, a stable hash of the hop addresses.
    pub path: String,
    /// The TTL of the hop.
    pub hop: String,
    /// Who answered at that TTL; empty for a silent hop.
    pub address: String,
}

/// Labels of the per-path series (`skeletonhunter_path_loss_ratio`,
/// `skeletonhunter_path_probes`): one per distinct path of a pair.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PathLabels {
    /// This exporter's node.
    pub src_node: String,
    /// The peer's node.
    pub dst_node: String,
    /// The path id, as in `skeletonhunter_path_hop_info`.
    pub path: String,
}
