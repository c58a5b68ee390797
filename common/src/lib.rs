//! Contracts shared by `skeletonhunter-exporter` and `skeletonhunter-localizer`.
//!
//! Everything that both binaries must agree on lives here exactly once: the
//! topology vocabulary and path model, the probe protocols, the one duration
//! parser, the YAML reader, the HTTP plumbing that serves `/metrics`, and
//! logging set-up.

#![forbid(unsafe_code)]

pub mod build;
pub mod civil;
pub mod conns;
pub mod duration;
pub mod exposition;
pub mod families;
pub mod http;
pub mod label;
pub mod landing;
pub mod logging;
pub mod negotiate;
pub mod process;
pub mod protocol;
pub mod ranks;
pub mod ratelimit;
pub mod recent;
pub mod sync;
pub mod topology;
pub mod web;
pub mod yaml;

pub use protocol::Protocol;
pub use topology::{Component, Identity, Kind};
