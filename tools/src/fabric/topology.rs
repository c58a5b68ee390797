//! The fabric's shape: what exists where, and the lookups tests use.

use crate::netns::Netns;
use anyhow::{Context, Result};
use skeletonhunter_common::Identity;
use std::net::Ipv4Addr;

/// How big a fabric to build.
#[derive(Debug, Clone, Copy)]
pub struct FabricSpec {
    /// Number of ToRs.
    pub tors: usize,
    /// Number of spines. With one, every ToR hangs off it (the default
    /// shape); with several, every ToR links to every spine and spreads
    /// flows over them by an L4 hash (equal-cost multipath).
    pub spines: usize,
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
            spines: 1,
            hosts_per_tor: 3,
            containers_per_host: 2,
        }
    }
}

impl FabricSpec {
    /// 3 ToRs × 3 spines × 2 hosts × 1 container: the smallest multipath
    /// fabric in which a ToR–spine link fault differs from a spine fault
    /// (a spine also carries the flows between the other ToRs) and from a
    /// ToR fault (the ToR's other links carry on). Three spines make the
    /// coverage formula ask for 15 flows.
    pub fn multipath() -> FabricSpec {
        FabricSpec {
            tors: 3,
            spines: 3,
            hosts_per_tor: 2,
            containers_per_host: 1,
        }
    }
}

/// How containers reach each other across hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPlane {
    /// Each host routes its containers' /28 behind its bridge; ToRs and
    /// spines route those subnets (a routed container network).
    Routed,
    /// An overlay: every container in one subnet on its host's bridge
    /// (the virtual switch), hosts joined by VXLAN tunnels between their
    /// NIC addresses over the routed underlay, forwarding entries written
    /// statically (no flooding, no learning), as overlay CNIs program them.
    Vxlan,
}

/// Worker processes (GPUs) a training container holds, as its launcher's
/// variables say ([`Fabric::ranks_of`]).
pub const WORKERS_PER_CONTAINER: usize = 2;

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

/// A spine router.
#[derive(Debug)]
pub struct Spine {
    /// The spine's namespace (a router).
    pub ns: Netns,
    /// `spine<index>`.
    pub name: String,
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
    /// How containers reach each other.
    pub data_plane: DataPlane,
    // Field order is drop order: endpoints first, the monitoring namespace last.
    /// Containers, ToR by ToR, host by host.
    pub nodes: Vec<Node>,
    /// The hosts' own endpoints (the overlay fabric only): one exporter in
    /// each host's namespace probes the other hosts' NICs host to host, on
    /// the underlay, named by its host (`node` = `host`). Their namespaces
    /// are the hosts'.
    pub underlay: Vec<Node>,
    /// Hosts, ToR by ToR (see [`Fabric::host_of`]).
    pub hosts: Vec<Host>,
    /// ToRs, in index order.
    pub tors: Vec<Tor>,
    /// The spine routers, in index order.
    pub spines: Vec<Spine>,
    /// The `spine` identity of every container: the aggregation block
    /// above the ToRs (`spine0` with one spine, `agg0` with several; the
    /// spines themselves are told apart by traced hops).
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

/// Link addresses between spine `s` and ToR `t`: (spine side, ToR side),
/// each in a /30 of 198.19.(100 + s).0/24.
pub fn link_addresses(s: usize, t: usize) -> (Ipv4Addr, Ipv4Addr) {
    let net = (100 + s) as u8;
    (
        Ipv4Addr::new(198, 19, net, (t * 4 + 1) as u8),
        Ipv4Addr::new(198, 19, net, (t * 4 + 2) as u8),
    )
}

impl Fabric {
    /// The spine a traced hop address belongs to (one of its link
    /// addresses), if any.
    pub fn spine_of_address(&self, a: Ipv4Addr) -> Option<usize> {
        (0..self.spines.len()).find(|s| (0..self.tors.len()).any(|t| link_addresses(*s, t).0 == a))
    }

    /// The host `node` runs on.
    pub fn host_of(&self, node: &Node) -> &Host {
        &self.hosts[node.tor * self.spec.hosts_per_tor + node.host]
    }

    /// The node with identity `node` (e.g. `t0-h1-c0`).
    pub fn node(&self, name: &str) -> Result<&Node> {
        self.probers()
            .find(|n| n.identity.node == name)
            .with_context(|| format!("no node {name} in the fabric"))
    }

    /// Every endpoint an exporter runs for: the containers, then the
    /// hosts' own endpoints.
    pub fn probers(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().chain(&self.underlay)
    }

    /// What `node`'s exporter probes: a container its skeleton peers, a
    /// host's endpoint every other host's.
    pub fn peers_of(&self, node: &Node) -> Vec<&Node> {
        if self
            .underlay
            .iter()
            .any(|u| u.identity.node == node.identity.node)
        {
            let other = |u: &&Node| u.identity.node != node.identity.node;
            return self.underlay.iter().filter(other).collect();
        }
        self.skeleton_peers(node)
    }

    /// The ranks of container `node` in its job, as torchrun numbers its
    /// workers: (first rank, [`WORKERS_PER_CONTAINER`], world size), the
    /// job's containers in fabric order.
    pub fn ranks_of(&self, node: &Node) -> (usize, usize, usize) {
        let job = |n: &&Node| n.identity.tenant == node.identity.tenant;
        let index = self
            .nodes
            .iter()
            .filter(job)
            .position(|n| n.identity.node == node.identity.node)
            .unwrap_or(0);
        let world = self.nodes.iter().filter(job).count() * WORKERS_PER_CONTAINER;
        (index * WORKERS_PER_CONTAINER, WORKERS_PER_CONTAINER, world)
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
