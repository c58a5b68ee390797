//! The SkeletonHunter exporter as a library: the binary
//! `skeletonhunter-exporter` wires these modules together, and
//! `skeletonhunter-discovery-trace` reuses the discovery loader.

pub mod config;
pub mod discovery;
pub mod metrics;
pub mod peers;
pub mod probe;
pub mod responder;
pub mod server;
pub mod sock;
pub mod trace;
