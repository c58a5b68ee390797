//! The VXLAN overlay ([`DataPlane::Vxlan`]) and its faults: what a
//! container network's own layer can break while the underlay is clean.
//!
//! Each host's bridge `br0` is its virtual switch: the containers' veth
//! ports (`c<rail>`) and a VXLAN port (`vxlan0`, VNI 42, UDP 4789, from the
//! host's NIC address). Forwarding is programmed, not learned, as overlay
//! CNIs do it: every container has a permanent neighbour entry for every
//! other container, and every host's `vxlan0` has one entry per remote
//! container (its MAC → the NIC address of the host it runs on) and no
//! default entry, so a deleted entry is a black hole, not a flood.

use super::topology::{DataPlane, Fabric, Host, Node};
use crate::netns::Netns;
use anyhow::{ensure, Context, Result};
use std::net::Ipv4Addr;

/// The overlay subnet's prefix length (`198.18.100.0/24`).
pub const OVERLAY_PREFIX: u8 = 24;

/// The containers' MTU: the underlay's 1500 less VXLAN's 50 bytes.
pub const OVERLAY_MTU: u32 = 1450;

/// The VXLAN UDP port (IANA).
const VXLAN_PORT: u16 = 4789;

/// The overlay address of the container with this index (fabric order).
pub fn overlay_address(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 100, (10 + index) as u8)
}

/// The fixed MAC of the container with this index: locally administered,
/// so entries can be written before any frame is seen.
pub fn node_mac(index: usize) -> String {
    format!("02:53:48:00:{:02x}:{:02x}", index / 256, index % 256)
}

impl Fabric {
    /// The host's tunnel endpoint: `vxlan0` from its NIC address, a port of
    /// its bridge. No learning: entries come from [`Fabric::wire_overlay`].
    pub(super) fn add_vtep(ns: &Netns, nic_ip: Ipv4Addr) -> Result<()> {
        let (local, port) = (nic_ip.to_string(), VXLAN_PORT.to_string());
        ns.ip(&[
            "link",
            "add",
            "vxlan0",
            "type",
            "vxlan",
            "id",
            "42",
            "local",
            &local,
            "dstport",
            &port,
            "nolearning",
            "dev",
            "up0",
        ])?;
        ns.ip(&["link", "set", "vxlan0", "master", "br0"])?;
        ns.link_set("vxlan0", true)
    }

    /// Program every container's neighbours and every host's tunnel
    /// entries (idempotent: `replace`, so it also restores deleted ones).
    pub(super) fn wire_overlay(&self) -> Result<()> {
        for (i, n) in self.nodes.iter().enumerate() {
            let mut lines = String::new();
            for (j, m) in self.nodes.iter().enumerate() {
                if i != j {
                    lines.push_str(&format!(
                        "neigh replace {} lladdr {} dev eth0 nud permanent\n",
                        m.data_ip,
                        node_mac(j)
                    ));
                }
            }
            n.ns.batch("ip", &lines)?;
        }
        for host in &self.hosts {
            let mut lines = String::new();
            for (j, m) in self.nodes.iter().enumerate() {
                let remote = self.host_of(m);
                if remote.name != host.name {
                    lines.push_str(&format!(
                        "fdb replace {} dev vxlan0 dst {} self permanent\n",
                        node_mac(j),
                        remote.nic_ip
                    ));
                }
            }
            if !lines.is_empty() {
                host.ns.batch("bridge", &lines)?;
            }
        }
        Ok(())
    }

    fn overlay_only(&self) -> Result<()> {
        ensure!(
            self.data_plane == DataPlane::Vxlan,
            "an overlay fault on a fabric without an overlay (build it with Fabric::overlay)"
        );
        Ok(())
    }

    /// Drop `percent`% (0 clears) of the frames entering or leaving the
    /// container's port on its host's virtual switch: the container's own
    /// virtual port is faulty, its host and everything beyond are not.
    pub fn port_loss(&self, node: &Node, percent: u32) -> Result<()> {
        self.overlay_only()?;
        let table = format!("shport_c{}", node.rail);
        let mut script = format!("table bridge {table} {{}}\ndelete table bridge {table}\n");
        if percent > 0 {
            let drop = if percent >= 100 {
                "drop".to_string()
            } else {
                format!("numgen random mod 100 < {percent} drop")
            };
            let port = format!("c{}", node.rail);
            script.push_str(&format!(
                "table bridge {table} {{\n chain forward {{ type filter hook forward priority -10; iifname \"{port}\" {drop}; oifname \"{port}\" {drop}; }}\n}}\n"
            ));
        }
        self.host_of(node).ns.nft(&script)
    }

    /// Block (or unblock) the host's tunnel: its NIC drops VXLAN packets
    /// both ways. The underlay stays up (the host answers anything else),
    /// its containers still reach each other; only their traffic to other
    /// hosts dies.
    pub fn tunnel_blocked(&self, host: &Host, blocked: bool) -> Result<()> {
        self.overlay_only()?;
        let mut script = String::from("table inet shtunnel {}\ndelete table inet shtunnel\n");
        if blocked {
            script.push_str(&format!(
                "table inet shtunnel {{\n chain input {{ type filter hook input priority -20; udp dport {VXLAN_PORT} drop; }}\n chain output {{ type filter hook output priority -20; udp dport {VXLAN_PORT} drop; }}\n}}\n"
            ));
        }
        host.ns.nft(&script)
    }

    /// Delete `host`'s tunnel entry for `node` (a misconfiguration: the
    /// control plane forgot where `node` lives), or write it back. Only the
    /// containers on `host` lose `node`; everyone else still reaches it.
    pub fn forwarding_entry(&self, host: &Host, node: &Node, present: bool) -> Result<()> {
        self.overlay_only()?;
        let index = self
            .nodes
            .iter()
            .position(|n| n.identity.node == node.identity.node)
            .context("node not in this fabric")?;
        let remote = self.host_of(node);
        ensure!(
            remote.name != host.name,
            "{} runs on {}: it has no tunnel entry there",
            node.identity.node,
            host.name
        );
        let verb = if present { "replace" } else { "del" };
        let line = format!(
            "fdb {verb} {} dev vxlan0 dst {} self permanent\n",
            node_mac(index),
            remote.nic_ip
        );
        host.ns.batch("bridge", &line)
    }

    /// Undo every overlay fault (nothing on a routed fabric).
    pub(super) fn clear_overlay_faults(&self) -> Result<()> {
        if self.data_plane != DataPlane::Vxlan {
            return Ok(());
        }
        for n in &self.nodes {
            self.port_loss(n, 0)?;
        }
        for h in &self.hosts {
            self.tunnel_blocked(h, false)?;
        }
        self.wire_overlay()
    }
}
