//! Helpers for tests that run real packets between network namespaces and
//! real servers (Prometheus, Alertmanager, our binaries) inside them.
//!
//! Every fabric lives in namespaces with no link to the machine's own
//! namespace; addresses come from 198.18.0.0/15. Namespaces, processes and
//! nftables state are torn down on drop, so a failing test leaves nothing
//! behind.

pub mod dashboards;
pub mod fabric;
pub mod netns;
pub mod privilege;
pub mod process;
pub mod servers;

pub use netns::Netns;
pub use privilege::require_privileges;
pub use process::{bin_path, http_get, wait_until, ChildGuard};
