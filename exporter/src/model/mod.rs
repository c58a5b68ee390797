//! The lowest layer: the exporter's vocabulary as plain types, with no I/O
//! and no dependency on any other module of the crate. Label enums (probe
//! protocol, discovery source), peer identity, metric label sets and the
//! connection types of the skeleton rule live here so that every layer
//! above can name them without depending on the module that produces them.

mod histograms;
mod identity_source;
mod labels;
mod peer;
mod reasons;
pub mod traffic;

pub use histograms::{HistogramMode, UnknownHistogramMode};
pub use identity_source::IdentitySource;
pub use labels::{
    BuildLabels, DiscoveryInfoLabels, HopLabels, HostStackLabels, IdentitySourceLabels, PairLabels,
    PathLabels, ProbeLabels, ProtocolLabels, ProtocolReasonLabels, RdmaInfoLabels, ReasonLabels,
    SocketLabels, SourceEventLabels, SourceLabels,
};
#[cfg(test)]
pub use peer::test_ip;
pub use peer::{Peer, PeerSource};
pub use reasons::{DiscoveryEvent, DropReason, OwnSocket, ProbeErrorReason, StackStage};
pub use skeletonhunter_common::protocol::{Protocol, UnknownProtocol};
