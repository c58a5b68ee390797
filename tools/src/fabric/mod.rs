//! A routed data-centre fabric of network namespaces, for end-to-end tests
//! and the demo.
//!
//! ```text
//!                      spine0 (routes between ToRs)
//!                  ┌──────┴──────┐
//!                tor0           tor1          routed ToRs: nftables loss in
//!             ┌───┼───┐      ┌───┼───┐        their forward hook hits every
//!            h0  h1  h2     h0  h1  h2        packet that crosses them
//!           ┌┴┐ ┌┴┐ ┌┴┐    ┌┴┐ ┌┴┐ ┌┴┐      hosts: a bridge (the virtual
//!           c0 c1 ...                         switch) and an uplink (the NIC)
//!                                             containers: one exporter each
//!   mon ── mgmt bridge ── one management veth per container (never faulted)
//! ```
//!
//! Why containers separate from hosts: with one endpoint per host, a dead
//! container and a dead host port are crossed by exactly the same probes and
//! no localizer can tell them apart. Two containers per host (one per rail,
//! as in rail-optimised GPU clusters) make the node, the host and the ToR
//! separately identifiable, which is what the end-to-end test checks.
//!
//! Why a separate management network: Prometheus must keep scraping every
//! exporter while the data plane is faulted, exactly as a real out-of-band
//! management network allows; otherwise a ToR fault would also look like
//! "exporter down" and the scenarios would not test the localizer.
//!
//! With `FabricSpec::spines` above one (`FabricSpec::multipath`), every
//! ToR links to every spine and its default route is a Linux multipath
//! route hashing on the 5-tuple, so each probe flow takes one spine and
//! different flows of one pair take different spines (equal-cost
//! multipath); `Fabric::link_fault` drops everything on one ToR–spine link.
//!
//! Nothing links to the machine's own namespace: every veth is created
//! directly inside the fabric's namespaces, and addresses come from
//! 198.18.0.0/15 (data plane 198.18.<tor>.0/24, links 198.19.x.y/30,
//! ToR–spine links 198.19.(100 + spine).x/30, management 198.19.200.0/24).
//!
//! The folder: `topology` holds the shapes (spec, nodes, hosts, ToRs) and
//! their lookups; `build` wires the namespaces and checks they route;
//! `faults` injects and clears faults; `overlay` builds the VXLAN data
//! plane ([`Fabric::overlay`]) and its faults; `containers` leaves
//! container processes in cgroups for an exporter that probes from inside
//! them; `noise` starves or pauses an
//! exporter (a busy host, not a fault); `stack` starts the monitoring stack
//! on top (`opts` says how, `shipped` reads the shipped timing), from the
//! configs `config` writes; `alerts`
//! reads Alertmanager's view back; `flows` reads an exporter's per-flow
//! traces and the spines they cross; `cleanup` removes what a killed process
//! left behind.

mod alerts;
mod build;
mod cleanup;
mod config;
mod containers;
mod faults;
mod flows;
mod noise;
mod opts;
mod overlay;
pub mod ports;
mod shipped;
mod stack;
mod topology;

pub use alerts::AlertView;
pub use build::{reachable, reaches_within, SETTLE};
pub use cleanup::remove_namespaces_of;
pub use config::{
    container_host_config, default_rule_files, exporter_config, kubernetes_target_labels,
    pair_detail_rule_files, prometheus_config, shipped_rule_files,
};
pub use containers::{cgroup2_root, Containers};
pub use flows::{exporter_get, flow_traces, spines_by_pair, FlowTrace};
pub use noise::{CpuQuota, Pauses};
pub use opts::{StackOpts, Timing};
pub use stack::{start_exporters, Stack};
pub use topology::{
    link_addresses, tenant_of_rail, DataPlane, Fabric, FabricSpec, Host, Node, Spine, Tor, POD,
};
