//! Contracts shared by `skeletonhunter-exporter` and `skeletonhunter-localizer`.
//!
//! Everything that both binaries must agree on lives here exactly once: the
//! topology vocabulary and path model of `DESIGN.md`, the HTTP plumbing that
//! serves `/metrics`, and logging set-up.

pub mod exposition;
pub mod http;
pub mod logging;
pub mod topology;

pub use topology::{Component, Identity, Kind};
