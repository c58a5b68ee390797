//! Static peers from the configuration file and `--peers`.

use super::peer_set::PeerSet;
use crate::model::{DiscoveryEvent, Peer, PeerSource};
use crate::telemetry::Metrics;

/// Publish the configured static peers (at start and at every reload).
pub fn publish(set: &PeerSet, metrics: &Metrics, peers: Vec<Peer>) {
    let n = peers.len();
    if set.replace(PeerSource::Static, peers) {
        metrics.discovery_event(PeerSource::Static, DiscoveryEvent::Updated);
        // Only when the list changed: a reload with the same list says
        // nothing here.
        tracing::info!(peers = n, "static peers configured");
    }
}
