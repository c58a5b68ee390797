//! What peers tell about themselves in their UDP messages, learned from
//! every valid request the responder answers and every reply the prober
//! accepts: their RDMA endpoint (when RDMA probing runs) and, from replies,
//! their node name. Passed explicitly to the responder and the UDP prober
//! (writers) and to path tracing (reader of names).
//!
//! Names are pinned: the first one an address gives is kept, and a reply
//! claiming another is counted (`skeletonhunter_peer_identity_conflicts_total`)
//! and logged at most once a minute, never believed — a peer cannot churn
//! series or take another node's name (docs/security.md).

use super::rdma::EndpointBook;
use crate::model::{ProbeErrorReason, Protocol};
use crate::telemetry::{Metrics, Repeats, Verdict};
use crate::wire::probe::{Packet, TLV_RDMA_ENDPOINT, TYPE_REPLY};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Names kept at most: one per peer probed, with room to spare; replies
/// come only from probed peers (they must echo our random session).
const MAX_NAMES: usize = 1 << 16;

/// Shared book of peers' self-descriptions. Cheap to share (`Arc`).
pub struct PeerInfo {
    metrics: Arc<Metrics>,
    rdma: Option<EndpointBook>,
    names: Mutex<HashMap<IpAddr, String>>,
    /// Conflict log lines: one a minute, the rest summarised.
    conflict_log: Mutex<Repeats>,
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
            conflict_log: Mutex::new(Repeats::new(Duration::from_secs(60))),
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
        if node.is_empty() {
            return;
        }
        let mut names = self
            .names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if names.len() < MAX_NAMES {
            names.entry(from).or_insert(node);
        }
    }

    /// A reply from `peer` claimed `claimed` while its label is pinned to
    /// `pinned`: counted, and logged at most once a minute.
    pub fn identity_conflict(&self, peer: IpAddr, pinned: &str, claimed: &str) {
        self.metrics.identity_conflict();
        let verdict = self
            .conflict_log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .hit("identity conflict", Instant::now());
        if let Verdict::Log { repeated } = verdict {
            tracing::warn!(
                %peer,
                pinned,
                claimed = %claimed.escape_debug(),
                "a peer's reply claims another node name than its pinned identity; label kept \
                 (repeated {repeated} times in the last 60 s)"
            );
        }
    }

    /// The first node name `addr` gave in a reply.
    pub fn name(&self, addr: IpAddr) -> Option<String> {
        self.names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&addr)
            .cloned()
    }
}
