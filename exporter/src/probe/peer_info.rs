//! What peers tell about themselves in their UDP messages, learned from
//! every valid request the responder answers and every reply the prober
//! accepts: their RDMA endpoint (when RDMA probing runs) and, from replies,
//! their node name. Passed explicitly to the responder and the UDP prober
//! (writers) and to path tracing (reader of names).
//!
//! Names are pinned (the book of who owns which name is here, the rule in
//! [`Target::learn_node`](super::Target::learn_node)): the first one an
//! address gives is kept, a name is held by one live address at a time,
//! and a claim that is refused is counted
//! (`skeletonhunter_peer_identity_conflicts_total`) and logged at most once
//! a minute, never believed — a peer cannot churn series or take another
//! node's name (docs/security.md).

use super::pins::{NamePins, Owner, Refusal};
use super::rdma::EndpointBook;
use crate::model::{ProbeErrorReason, Protocol};
use crate::telemetry::{Metrics, Repeats, Verdict};
use crate::wire::probe::{Packet, TLV_RDMA_ENDPOINT};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shared book of peers' self-descriptions. Cheap to share (`Arc`).
pub struct PeerInfo {
    metrics: Arc<Metrics>,
    rdma: Option<EndpointBook>,
    /// Who owns which name (one entry per live named target).
    pins: Mutex<NamePins>,
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
            pins: Mutex::new(NamePins::default()),
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
    }

    fn pins(&self) -> std::sync::MutexGuard<'_, NamePins> {
        self.pins
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A token for a new target (see [`Owner`]).
    pub fn token(&self) -> u64 {
        self.pins().token()
    }

    /// Give `name` to `owner` unless another live address holds it.
    pub fn claim(&self, name: &str, owner: Owner) -> Result<(), Refusal> {
        self.pins().claim(name, owner)
    }

    /// `owner` gives `name` up.
    pub fn release(&self, name: &str, owner: Owner) {
        self.pins().release(name, owner);
    }

    /// Count an identity conflict; `Some(repeats)` when it is to be logged
    /// (once a minute).
    fn count_conflict(&self) -> Option<u64> {
        self.metrics.identity_conflict();
        let verdict = self
            .conflict_log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .hit("identity conflict", Instant::now());
        match verdict {
            Verdict::Log { repeated } => Some(repeated),
            _ => None,
        }
    }

    /// A reply from `peer` claimed `claimed` while its label is pinned to
    /// `pinned`: counted, and logged at most once a minute.
    pub fn identity_conflict(&self, peer: IpAddr, pinned: &str, claimed: &str) {
        if let Some(repeated) = self.count_conflict() {
            tracing::warn!(
                %peer,
                pinned,
                claimed = %claimed.escape_debug(),
                "a peer's reply claims another node name than its pinned identity; label kept \
                 (repeated {repeated} times in the last 60 s)"
            );
        }
    }

    /// A name `peer` claimed (`claimed`, from a reply or its
    /// configuration) is held by another address: counted, and logged at
    /// most once a minute (with the other conflicts).
    pub fn name_refused(&self, peer: IpAddr, claimed: &str, refusal: &Refusal) {
        if let Some(repeated) = self.count_conflict() {
            let owner = match refusal {
                Refusal::Owned(a) => a.to_string(),
                Refusal::OtherAddress => "another address".to_string(),
            };
            tracing::warn!(
                %peer,
                claimed = %claimed.escape_debug(),
                %owner,
                "a peer claims a node name another live peer holds; it keeps its address label \
                 (repeated {repeated} times in the last 60 s)"
            );
        }
    }

    /// The node name pinned to `addr` (configured, discovered or from its
    /// first reply), if it holds one.
    pub fn name(&self, addr: IpAddr) -> Option<String> {
        self.pins().name(addr).map(str::to_string)
    }
}
