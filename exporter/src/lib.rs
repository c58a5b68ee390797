//! The SkeletonHunter exporter as a library: the binary
//! `skeletonhunter-exporter` runs [`app`], and
//! `skeletonhunter-discovery-trace` reuses the eBPF loader of [`sys::ebpf`].
//!
//! Layers, lowest first; a module may use its own layer (acyclically) and
//! the layers below, never above (see ARCHITECTURE.md):
//! 1. [`model`]: label enums, peer identity, connection types.
//! 2. [`sys`] (the only `unsafe`), [`wire`] (packet and event formats).
//! 3. [`config`], [`telemetry`].
//! 4. [`probe`], [`responder`], [`discovery`], [`pathtrace`].
//! 5. [`http`], [`stack`] (the probing half, host or container).
//! 6. [`reload`], [`containers`] (probing from each container).
//! 7. [`app`], [`fuzz`] (the fuzz targets of the outside-fed parsers).

pub mod model;

#[allow(unsafe_code)]
pub mod sys;
pub mod wire;

pub mod config;
pub mod telemetry;

pub mod discovery;
pub mod pathtrace;
pub mod probe;
pub mod responder;

pub mod http;
pub mod stack;

pub mod containers;
pub mod reload;

pub mod app;
pub mod fuzz;
