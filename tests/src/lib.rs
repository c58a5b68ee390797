//! Helpers for tests that run real packets between network namespaces and
//! real servers (Prometheus, Alertmanager, our binaries) inside them.
//!
//! Every fabric lives in namespaces with no link to the machine's own
//! namespace; addresses come from 198.18.0.0/15. Namespaces, processes and
//! nftables state are torn down on drop, so a failing test leaves nothing
//! behind.
//!
//! Layers, lowest first (a module uses only its own layer or lower ones):
//! `sys` (the only `unsafe`); `http`, `repo`, `exposition`, `privilege`,
//! `process`, `netns`, `tls`, `netpol`; `servers`, `exporter`, `sink`, `deploy`,
//! `browser`, `vmagent`; `fabric`, `dashboards`, `localizer`, `fleet`.

#[allow(unsafe_code)]
pub mod sys;

pub mod browser;
pub mod contract;
pub mod dashboards;
pub mod deploy;
pub mod exporter;
pub mod exposition;
pub mod fabric;
pub mod fleet;
pub mod http;
pub mod localizer;
pub mod netns;
pub mod netpol;
pub mod privilege;
pub mod process;
pub mod repo;
pub mod servers;
pub mod sink;
pub mod tls;
pub mod vmagent;

pub use netns::Netns;
pub use privilege::require_privileges;
pub use process::{bin_path, http_get, wait_http_ok, wait_until, ChildGuard};
