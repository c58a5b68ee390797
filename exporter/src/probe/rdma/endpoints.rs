//! Peers' RDMA endpoints, learned from the TLV in their UDP messages.

use crate::wire::probe::TLV_RDMA_ENDPOINT;
use crate::wire::rdma::{EndpointError as DecodeError, RdmaEndpoint};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

/// A malformed endpoint TLV, naming the peer that sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RDMA endpoint from {peer}: {source}")]
pub struct EndpointError {
    /// Who sent it.
    pub peer: IpAddr,
    /// What is wrong with it.
    pub source: DecodeError,
}

/// Peers' RDMA endpoints as learned from their UDP replies.
#[derive(Debug, Clone, Default)]
pub struct EndpointBook {
    inner: Arc<RwLock<HashMap<IpAddr, RdmaEndpoint>>>,
}

impl EndpointBook {
    /// An empty book.
    pub fn new() -> EndpointBook {
        EndpointBook::default()
    }

    /// Record the endpoint TLV value a peer at `addr` sent. A malformed
    /// value is an error naming the peer; the old entry is kept.
    pub fn learn(&self, addr: IpAddr, tlv_value: &[u8]) -> Result<(), EndpointError> {
        let ep = RdmaEndpoint::decode(tlv_value)
            .map_err(|source| EndpointError { peer: addr, source })?;
        let mut m = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.get(&addr) != Some(&ep) {
            tracing::debug!(peer = %addr, gid = %ep.gid_addr(), qpn = ep.qpn, "learned RDMA endpoint");
            m.insert(addr, ep);
        }
        Ok(())
    }

    /// The endpoint `addr` advertised last.
    pub fn get(&self, addr: IpAddr) -> Option<RdmaEndpoint> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&addr)
            .copied()
    }
}

/// The UDP reply TLV advertising this exporter's RDMA endpoint
/// (type [`TLV_RDMA_ENDPOINT`]).
pub fn endpoint_tlv(ep: &RdmaEndpoint) -> (u16, Vec<u8>) {
    (TLV_RDMA_ENDPOINT, ep.encode().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::rdma::DEFAULT_QKEY;

    #[test]
    fn endpoint_book_learns_and_rejects() {
        let book = EndpointBook::new();
        let addr: IpAddr = "198.18.0.2".parse().unwrap();
        let ep = RdmaEndpoint {
            gid: [1; 16],
            qpn: 0x123,
            qkey: DEFAULT_QKEY,
        };
        let (t, v) = endpoint_tlv(&ep);
        assert_eq!(t, TLV_RDMA_ENDPOINT);
        book.learn(addr, &v).unwrap();
        assert_eq!(book.get(addr), Some(ep));
        let err = book.learn(addr, &v[..3]).unwrap_err().to_string();
        assert!(err.contains("198.18.0.2") && err.contains("24"), "{err}");
        assert_eq!(book.get(addr), Some(ep), "bad input keeps the old entry");
        assert_eq!(book.get("198.18.0.3".parse().unwrap()), None);
    }
}
