//! Simulated ping logs on rail-optimized GPU fabrics, with ground truth,
//! and the accuracy / speed benchmark built on them.
//!
//! [`rng`] (reproducible randomness), [`fabric`] (identities and skeleton
//! pairs), [`scenario`] (faults, noise and probe rounds), [`pinglog`] (the
//! CSV writer), [`bench`] (scoring the engine against the voting baseline),
//! [`multipath`] (spine members, K flows per pair, per-path rows, link
//! faults) and [`linkbench`] (the multipath scenarios of the benchmark).
//! Every probe pair is probed for `rounds` rounds of `packets_per_round`
//! packets.

pub mod bench;
pub mod fabric;
pub mod linkbench;
pub mod multipath;
pub mod pinglog;
pub mod rng;
pub mod scenario;

pub use fabric::{Fabric, FabricSpec};
pub use pinglog::{pair_stats, write_csv};
pub use rng::Rng;
pub use scenario::{parse_fault, FaultSpec, Scenario};
