//! Wire formats: the bytes the exporter exchanges with peers and with its
//! own eBPF programs. Pure encoding and decoding, never I/O; may use
//! [`crate::model`] only. Decoders never panic on any input.

pub mod discovery;
pub mod probe;
pub mod rdma;
