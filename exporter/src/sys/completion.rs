//! What the libibverbs layer hands to the RDMA engine: completions and
//! errors. Plain types, compiled with or without the `rdma` feature, so the
//! engine (and its tests over a fake RNIC) never depend on libibverbs.

/// A completion, read from either kind of CQ.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// Whether it completed successfully.
    pub ok: bool,
    /// Raw status code, for logs.
    pub status: u32,
    /// Whether it belongs to a receive (from the id, never the opcode).
    pub is_recv: bool,
    /// Bytes received (GRH included).
    pub byte_len: u32,
    /// Sender's QPN (receive completions of a UD QP).
    pub src_qp: u32,
    /// Raw hardware CQE timestamp, when the CQ has them.
    pub hw_ts: Option<u64>,
}

/// A verb that failed on an open RNIC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    /// The call returned an error; the text names the verb and the errno.
    #[error("{0}")]
    Failed(String),
    /// The provider does not implement an op the exporter needs.
    #[error("{0}")]
    Missing(&'static str),
}

impl From<&'static str> for VerbsError {
    fn from(what: &'static str) -> VerbsError {
        VerbsError::Missing(what)
    }
}

/// Whether `mask` is a usable low-bits timestamp mask (0b0..01..1 with at
/// least 16 valid bits). Devices without timestamp support report 0.
pub fn valid_mask(mask: u64) -> bool {
    mask >= 0xffff && mask.wrapping_add(1) & mask == 0
}
