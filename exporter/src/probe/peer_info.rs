//! What peers tell about themselves in their UDP messages, learned from
//! every valid request the responder answers and every reply the prober
//! accepts: their RDMA endpoint (when RDMA probing runs) and, from replies,
//! their node name. Passed explicitly to the responder and the UDP prober
//! (writers) and to path tracing (reader of names).

use super::rdma::EndpointBook;
use crate::model::{ProbeErrorReason, Protocol};
use crate::telemetry::Metrics;
use crate::wire::probe::{Packet, TLV_RDMA_ENDPOINT, TYPE_REPLY};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Shared book of peers' self-descriptions. Cheap to share (`Arc`).
pub struct PeerInfo {
    metrics: Arc<Metrics>,
    rdma: Option<EndpointBook>,
    names: Mutex<HashMap<IpAddr, String>>,
}

impl std::fmt::Debug for PeerInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerInfo").finish_non_exhaustive()
    }
}

impl PeerInfo {
    /// `rdma`: where to learn peers' RDMA endpoints (`None` without RDMA
    /// probing: their TLVs are then ignored).
    pub fn new(metrics: Arc<Metrics>, rdma: Option<EndpointBook>) -> Arc<PeerInfo> {
        Arc::new(PeerInfo {
            metrics,
            rdma,
            names: Mutex::new(HashMap::new()),
        })
    }

    /// A valid message from `from`: a request the responder answers or a
    /// reply the prober accepted.
    pub fn observe(&self, from: IpAddr, p: &Packet<'_>) {
        if let (Some(book), Some(v)) = (&self.rdma, p.tlv(TLV_RDMA_ENDPOINT)) {
            if let Err(e) = book.learn(from, v) {
                self.metrics
                    .probe_error(Protocol::Rdma, ProbeErrorReason::RdmaBadEndpoint.as_str());
                tracing::debug!("{e}");
            }
        }
        if p.header.typ != TYPE_REPLY {
            return;
        }
        let node = p.identity().node;
        if !node.is_empty() {
            self.names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(from, node);
        }
    }

    /// The node name `addr` last gave in a reply.
    pub fn name(&self, addr: IpAddr) -> Option<String> {
        self.names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&addr)
            .cloned()
    }
}
