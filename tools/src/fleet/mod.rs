//! A synthetic fleet of exporters in one process, so a real scraper
//! (Prometheus, vmagent shards) sees thousands of targets without
//! thousands of processes or namespaces.
//!
//! The topology and skeleton pairs are the localizer simulator's fabric
//! (`skeletonhunter_localizer::sim::Fabric`); each node's `/metrics` is a
//! real `skeletonhunter_exporter::telemetry::Metrics` rendered with the
//! exporter's content negotiation (classic text, OpenMetrics, protobuf with
//! native histograms, gzip), so the bytes and series a store ingests are
//! exactly what real exporters would serve. A driver advances every pair's
//! UDP probes; [`fault`] faults lose or delay the probes of the pairs whose
//! path crosses a component.
//!
//! [`fault`] (the spec and its effect on a pair, pure), [`sim`] (the
//! fleet and its probe step), [`serve`] (the ports, the driver thread, the
//! byte counts), [`targets`] (file_sd and scrape config).

pub mod fault;
pub mod serve;
pub mod sim;
pub mod targets;

pub use fault::{
    blamed, injected, pair_effect, parse_fault, sample_faults, Effect, FaultError, FleetFault,
};
pub use serve::{node_path, FleetServer, StatsSnapshot};
pub use sim::{shape_for_pairs, Fleet, FleetSpec};
pub use targets::{file_sd, scrape_config, write_file_sd};
