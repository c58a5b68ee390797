//! Helpers that only tests use: the skip-or-fail privilege rule, test
//! exporters and pairs, parsing an exposition, the localizer's online loop
//! without namespaces, dashboards, the browser and the deploy contract.
//! Namespaces, servers and the fabric are `skeletonhunter_tools`.
//!
//! Layers, lowest first (a module uses only its own layer or lower ones,
//! and any of the tools crate): `exposition`, `privilege`, `netpol`;
//! `exporter`, `browser`, `vmagent`, `contract`; `dashboards`, `localizer`.

pub mod browser;
pub mod contract;
pub mod dashboards;
pub mod exporter;
pub mod exposition;
pub mod localizer;
pub mod netpol;
pub mod privilege;
pub mod vmagent;

pub use privilege::require_privileges;
