//! Wiring the namespaces into a routed fabric, and checking that it routes.

use super::overlay::{node_mac, overlay_address, OVERLAY_MTU, OVERLAY_PREFIX};
use super::topology::{
    link_addresses, tenant_of_rail, DataPlane, Fabric, FabricSpec, Host, Node, Spine, Tor, POD,
};
use crate::netns::{attach, bridge, veth, Netns};
use crate::process::wait_until;
use anyhow::{bail, ensure, Context, Result};
use skeletonhunter_common::Identity;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::Duration;

impl Fabric {
    /// Build the fabric with a routed data plane (each host routes its
    /// containers' /28) and check that it routes: every container reaches
    /// a container under the other ToR, and `mon` reaches every
    /// container's management address.
    pub fn new(spec: FabricSpec) -> Result<Fabric> {
        Fabric::build(spec, DataPlane::Routed)
    }

    /// The same fabric with a VXLAN overlay: containers share one flat
    /// subnet across hosts, tunnelled between the hosts' NICs (see
    /// [`DataPlane::Vxlan`]).
    pub fn overlay(spec: FabricSpec) -> Result<Fabric> {
        Fabric::build(spec, DataPlane::Vxlan)
    }

    fn build(spec: FabricSpec, data_plane: DataPlane) -> Result<Fabric> {
        ensure!(spec.tors >= 1 && spec.tors <= 50, "tors must be 1..=50");
        ensure!(spec.spines >= 1 && spec.spines <= 8, "spines must be 1..=8");
        ensure!(
            spec.hosts_per_tor >= 1 && spec.hosts_per_tor <= 16,
            "hosts_per_tor must be 1..=16"
        );
        ensure!(
            spec.containers_per_host >= 1 && spec.containers_per_host <= 13,
            "containers_per_host must be 1..=13"
        );
        ensure!(
            spec.tors * spec.hosts_per_tor * spec.containers_per_host <= 240,
            "at most 240 containers (one management /24)"
        );
        let spine_name = if spec.spines == 1 { "spine0" } else { "agg0" }.to_string();
        let mut spines = Vec::new();
        for s in 0..spec.spines {
            let ns = Netns::new("spine")?;
            ns.enable_forwarding()?;
            if spec.spines > 1 {
                multipath_sysctls(&ns)?;
            }
            spines.push(Spine {
                ns,
                name: format!("spine{s}"),
            });
        }
        let mon = Netns::new("mon")?;
        let mon_ip = Ipv4Addr::new(198, 19, 200, 1);
        bridge(&mon, "mgmt", &format!("{mon_ip}/24"))?;

        let mut fabric = Fabric {
            spec,
            data_plane,
            nodes: Vec::new(),
            underlay: Vec::new(),
            hosts: Vec::new(),
            tors: Vec::new(),
            spines,
            spine_name,
            mon,
            mon_ip,
        };
        for t in 0..spec.tors {
            fabric.add_tor(t)?;
            for h in 0..spec.hosts_per_tor {
                fabric.add_host(t, h)?;
                for c in 0..spec.containers_per_host {
                    fabric.add_node(t, h, c)?;
                }
            }
        }
        if data_plane == DataPlane::Vxlan {
            fabric.wire_overlay()?;
            for i in 0..fabric.hosts.len() {
                fabric.add_host_endpoint(i)?;
            }
        }
        fabric.check_connectivity()?;
        Ok(fabric)
    }

    /// A ToR linked to every spine (interface `sp<s>` to spine `s`, whose
    /// side is `t<t>`); its default route spreads over all of them.
    fn add_tor(&mut self, t: usize) -> Result<()> {
        let ns = Netns::new(&format!("tor{t}"))?;
        ns.enable_forwarding()?;
        if self.spines.len() > 1 {
            multipath_sysctls(&ns)?;
        }
        let mut default = vec!["route", "add", "default"];
        let mut gateways = Vec::new();
        for (s, spine) in self.spines.iter().enumerate() {
            let (spine_ip, tor_ip) = link_addresses(s, t);
            veth(
                &spine.ns,
                &format!("t{t}"),
                &format!("{spine_ip}/30"),
                &ns,
                &format!("sp{s}"),
                &format!("{tor_ip}/30"),
            )?;
            // The overlay's tunnels run between the hosts' NIC addresses.
            let routed = match self.data_plane {
                DataPlane::Routed => format!("198.18.{t}.0/24"),
                DataPlane::Vxlan => format!("198.19.{t}.0/24"),
            };
            spine
                .ns
                .ip(&["route", "add", &routed, "via", &tor_ip.to_string()])?;
            gateways.push(spine_ip.to_string());
        }
        if let [one] = gateways.as_slice() {
            default.extend(["via", one.as_str()]);
        } else {
            for g in &gateways {
                default.extend(["nexthop", "via", g.as_str()]);
            }
        }
        ns.ip(&default)?;
        self.tors.push(Tor {
            ns,
            name: format!("tor{t}"),
        });
        Ok(())
    }

    fn add_host(&mut self, t: usize, h: usize) -> Result<()> {
        let ns = Netns::new(&format!("t{t}h{h}"))?;
        ns.enable_forwarding()?;
        if self.spines.len() > 1 {
            multipath_sysctls(&ns)?;
        }
        let tor = &self.tors[t];
        let (tor_ip, nic_ip) = (
            Ipv4Addr::new(198, 19, t as u8, (h * 4 + 1) as u8),
            Ipv4Addr::new(198, 19, t as u8, (h * 4 + 2) as u8),
        );
        veth(
            &tor.ns,
            &format!("h{h}"),
            &format!("{tor_ip}/30"),
            &ns,
            "up0",
            &format!("{nic_ip}/30"),
        )?;
        if self.data_plane == DataPlane::Routed {
            tor.ns.ip(&[
                "route",
                "add",
                &format!("198.18.{t}.{}/28", h * 16),
                "via",
                &nic_ip.to_string(),
            ])?;
            bridge(&ns, "br0", &format!("198.18.{t}.{}/28", h * 16 + 1))?;
        } else {
            bridge(&ns, "br0", "")?;
            Fabric::add_vtep(&ns, nic_ip)?;
        }
        ns.ip(&["route", "add", "default", "via", &tor_ip.to_string()])?;
        self.hosts.push(Host {
            ns,
            name: format!("host-t{t}-h{h}"),
            tor: t,
            nic_ip,
            gateway: tor_ip,
        });
        Ok(())
    }

    /// Host `i`'s own endpoint: a management link to `mon` (`mg0`, after
    /// the containers' addresses) and an identity named by the host, its
    /// data address the NIC's.
    fn add_host_endpoint(&mut self, i: usize) -> Result<()> {
        let index = self.nodes.len() + i;
        ensure!(index + 10 < 255, "no management address left for host {i}");
        let host = &self.hosts[i];
        let mgmt_ip = Ipv4Addr::new(198, 19, 200, (10 + index) as u8);
        let mon_if = format!("mh{i}");
        veth(
            &self.mon,
            &mon_if,
            "",
            &host.ns,
            "mg0",
            &format!("{mgmt_ip}/24"),
        )?;
        attach(&self.mon, &mon_if, "mgmt")?;
        let identity = Identity {
            node: host.name.clone(),
            nic: host.nic_ip.to_string(),
            host: host.name.clone(),
            tor: self.tors[host.tor].name.clone(),
            spine: self.spine_name.clone(),
            pod: POD.to_string(),
            tenant: String::new(),
        };
        self.underlay.push(Node {
            ns: host.ns.alias(),
            identity,
            tor: host.tor,
            host: i % self.spec.hosts_per_tor,
            rail: usize::MAX,
            data_ip: host.nic_ip,
            mgmt_ip,
        });
        Ok(())
    }

    fn add_node(&mut self, t: usize, h: usize, c: usize) -> Result<()> {
        let index = self.nodes.len();
        let ns = Netns::new(&format!("t{t}h{h}c{c}"))?;
        let host = self.hosts.last().context("add_node before add_host")?;
        let gw = Ipv4Addr::new(198, 18, t as u8, (h * 16 + 1) as u8);
        let (data_ip, prefix) = match self.data_plane {
            DataPlane::Routed => (Ipv4Addr::new(198, 18, t as u8, (h * 16 + 2 + c) as u8), 28),
            DataPlane::Vxlan => (overlay_address(index), OVERLAY_PREFIX),
        };
        let veth_host = format!("c{c}");
        veth(
            &ns,
            "eth0",
            &format!("{data_ip}/{prefix}"),
            &host.ns,
            &veth_host,
            "",
        )?;
        attach(&host.ns, &veth_host, "br0")?;
        if self.data_plane == DataPlane::Routed {
            ns.ip(&["route", "add", "default", "via", &gw.to_string()])?;
        } else {
            // One flat subnet, no gateway; room for the tunnel's header.
            let mtu = OVERLAY_MTU.to_string();
            let mac = node_mac(index);
            ns.ip(&["link", "set", "eth0", "address", &mac, "mtu", &mtu])?;
        }

        let mgmt_ip = Ipv4Addr::new(198, 19, 200, (10 + index) as u8);
        let mon_if = format!("m{index}");
        veth(&self.mon, &mon_if, "", &ns, "mg0", &format!("{mgmt_ip}/24"))?;
        attach(&self.mon, &mon_if, "mgmt")?;

        let identity = Identity {
            node: format!("t{t}-h{h}-c{c}"),
            nic: host.nic_ip.to_string(),
            host: host.name.clone(),
            tor: self.tors[t].name.clone(),
            spine: self.spine_name.clone(),
            pod: POD.to_string(),
            tenant: tenant_of_rail(c),
        };
        self.nodes.push(Node {
            ns,
            identity,
            tor: t,
            host: h,
            rail: c,
            data_ip,
            mgmt_ip,
        });
        Ok(())
    }

    /// Every container reaches the first container of the last ToR through
    /// the spine, and `mon` reaches every management address.
    pub fn check_connectivity(&self) -> Result<()> {
        let far = self.nodes.last().context("empty fabric")?;
        for n in &self.nodes {
            if n.data_ip != far.data_ip && !reaches_within(&n.ns, far.data_ip, SETTLE)? {
                bail!(
                    "fabric does not route: {} cannot reach {} ({})",
                    n.identity.node,
                    far.identity.node,
                    far.data_ip
                );
            }
            if !reaches_within(&self.mon, n.mgmt_ip, SETTLE)? {
                bail!(
                    "management network broken: mon cannot reach {} ({})",
                    n.identity.node,
                    n.mgmt_ip
                );
            }
        }
        // The hosts' own endpoints: NIC to NIC, and scraped from `mon`.
        for u in &self.underlay {
            let other = self.underlay.iter().find(|o| o.data_ip != u.data_ip);
            if let Some(o) =
                other.filter(|o| !reaches_within(&u.ns, o.data_ip, SETTLE).unwrap_or(false))
            {
                bail!(
                    "underlay does not route: {} cannot reach {} ({})",
                    u.identity.node,
                    o.identity.node,
                    o.data_ip
                );
            }
            if !reaches_within(&self.mon, u.mgmt_ip, SETTLE)? {
                bail!(
                    "management network broken: mon cannot reach host {}",
                    u.identity.node
                );
            }
        }
        Ok(())
    }
}

/// Router settings of a multipath fabric: hash flows by their 5-tuple so
/// they really spread over the spines (`fib_multipath_hash_policy=1`),
/// with one seed on every router so a flow and its reply take the same
/// spine (the hash of a 5-tuple and of its reverse is the same); name the
/// interface a probe came in by in time-exceeded messages, so a traced
/// hop address identifies the directed link into the router; and no ICMP
/// rate limit, so tracing many flows at once gets every hop answered
/// (switches have their own, far higher, control-plane limits).
fn multipath_sysctls(ns: &Netns) -> Result<()> {
    ns.exec(&[
        "sysctl",
        "-qw",
        "net.ipv4.fib_multipath_hash_policy=1",
        "net.ipv4.fib_multipath_hash_seed=1",
        "net.ipv4.icmp_errors_use_inbound_ifaddr=1",
        "net.ipv4.icmp_ratelimit=0",
    ])?;
    Ok(())
}

/// How long a path of a fabric just built (or just repaired) may take to
/// carry its first packets: neighbour discovery runs first (twice on the
/// overlay, for the container and for the tunnel's underlay hop), and a
/// request the kernel dropped is asked again only a second later, beyond
/// one [`reachable`] try on a loaded machine.
pub const SETTLE: Duration = Duration::from_secs(10);

/// Whether `ns` reaches `ip` within `timeout`, trying every 100 ms; for
/// paths that should work, where one lost first try is no verdict.
pub fn reaches_within(ns: &Netns, ip: Ipv4Addr, timeout: Duration) -> Result<bool> {
    let every = Duration::from_millis(100);
    // Stop at the first answer or error; a timeout is the answer "no".
    let first = wait_until(&format!("{ip}"), timeout, every, || {
        match reachable(ns, ip) {
            Ok(false) => None,
            done => Some(done),
        }
    });
    first.unwrap_or(Ok(false))
}

/// Whether `ns` can reach `ip` now: a TCP connect to a closed port that is
/// answered (refused) proves the round trip without needing `ping` or a
/// listener; a timeout or "unreachable" means no path.
pub fn reachable(ns: &Netns, ip: Ipv4Addr) -> Result<bool> {
    ns.run_in(move || {
        let addr = SocketAddr::V4(SocketAddrV4::new(ip, 9));
        match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        }
    })
}
