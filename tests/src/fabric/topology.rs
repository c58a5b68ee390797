//! The fabric's shape: what exists where, and the lookups tests use.

use crate::netns::Netns;
use anyhow::{Context, Result};
use skeletonhunter_common::Identity;
use std::net::Ipv4Addr;

/// How big a fabric to build.
#[derive(Debug, Clone, Copy)]
pub struct FabricSpec {
    /// Number of ToRs under the spine.
    pub tors: usize,
    /// Hosts (NIC uplinks) per ToR.
    pub hosts_per_tor: usize,
    /// Containers (rails) per host.
    pub containers_per_host: usize,
}

impl Default for FabricSpec {
    /// 2 ToRs × 3 hosts × 2 containers: the smallest fabric in which a ToR,
    /// a host port and a single container are each identifiable.
    fn default() -> Self {
        FabricSpec {
            tors: 2,
            hosts_per_tor: 3,
            containers_per_host: 2,
        }
    }
}

/// A training container: one exporter runs in its namespace.
#[derive(Debug)]
pub struct Node {
    /// The container's namespace; its exporter runs here.
    pub ns: Netns,
    /// Where it sits in the fabric, as its exporter reports it.
    pub identity: Identity,
    /// Index of the ToR, host (within the ToR) and container (= rail).
    pub tor: usize,
    /// Index of the host within its ToR.
    pub host: usize,
    /// Index of the container within its host (= its rail and tenant).
    pub rail: usize,
    /// Data-plane address (probes go here), interface `eth0`.
    pub data_ip: Ipv4Addr,
    /// Management address (Prometheus scrapes here), interface `mg0`.
    pub mgmt_ip: Ipv4Addr,
}

/// A physical host: its namespace is the host's virtual switch (bridge
/// `br0`) and its uplink `up0` is the NIC port towards the ToR.
#[derive(Debug)]
pub struct Host {
    /// The host's namespace (its bridge and uplink).
    pub ns: Netns,
    /// Host name, the `host` identity of its containers.
    pub name: String,
    /// Index of the ToR the host hangs off.
    pub tor: usize,
    /// Host-side address of the uplink; the `nic` identity of its containers.
    pub nic_ip: Ipv4Addr,
    /// ToR-side address of the uplink (the host's default gateway).
    pub gateway: Ipv4Addr,
}

/// A routed top-of-rack switch.
#[derive(Debug)]
pub struct Tor {
    /// The ToR's namespace (a router).
    pub ns: Netns,
    /// ToR name, the `tor` identity of its containers.
    pub name: String,
}

/// The whole fabric. Dropping it deletes every namespace (and so every
/// process still running inside one).
#[derive(Debug)]
pub struct Fabric {
    /// The size it was built with.
    pub spec: FabricSpec,
    // Field order is drop order: endpoints first, the monitoring namespace last.
    /// Containers, ToR by ToR, host by host.
    pub nodes: Vec<Node>,
    /// Hosts, ToR by ToR (see [`Fabric::host_of`]).
    pub hosts: Vec<Host>,
    /// ToRs, in index order.
    pub tors: Vec<Tor>,
    /// The spine router's namespace.
    pub spine: Netns,
    /// Spine name, the `spine` identity of every container.
    pub spine_name: String,
    /// Where Prometheus, Alertmanager and the localizer run.
    pub mon: Netns,
    /// Address of `mon` on the management network.
    pub mon_ip: Ipv4Addr,
}

/// Name of the pod every ToR of the fabric belongs to.
pub const POD: &str = "pod0";

/// Tenant (job) of a rail: each rail is one job, so the per-tenant views
/// have two tenants to tell apart.
pub fn tenant_of_rail(rail: usize) -> String {
    format!("job-{}", (b'a' + (rail % 26) as u8) as char)
}

impl Fabric {
    /// The host `node` runs on.
    pub fn host_of(&self, node: &Node) -> &Host {
        &self.hosts[node.tor * self.spec.hosts_per_tor + node.host]
    }

    /// The node with identity `node` (e.g. `t0-h1-c0`).
    pub fn node(&self, name: &str) -> Result<&Node> {
        self.nodes
            .iter()
            .find(|n| n.identity.node == name)
            .with_context(|| format!("no node {name} in the fabric"))
    }

    /// The traffic skeleton of a rail-optimised job: each container talks to
    /// the container of the same rail on every other host (rank i of every
    /// host is in one ring / all-reduce group). No same-host pairs: such
    /// traffic goes over NVLink in a GPU server, not the network.
    pub fn skeleton_peers(&self, node: &Node) -> Vec<&Node> {
        self.nodes
            .iter()
            .filter(|p| p.rail == node.rail && (p.tor, p.host) != (node.tor, node.host))
            .collect()
    }
}
