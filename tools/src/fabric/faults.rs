//! Fault injection: loss at a ToR or a spine, a dead ToR–spine link, a
//! host's NIC link down, a container cut off the data plane (the overlay's
//! own faults are in `fabric/overlay.rs`). The
//! management network is never touched, so the monitoring keeps seeing
//! every exporter.

use super::build::{reaches_within, SETTLE};
use super::topology::{Fabric, Host, Node};
use anyhow::{ensure, Context, Result};

impl Fabric {
    /// Drop `percent`% of every packet the ToR forwards or receives (0
    /// clears). A probe round trip crosses it twice, so round-trip loss is
    /// `1 - (1 - p)²` (51% for 30%).
    pub fn tor_loss(&self, tor: usize, percent: u32) -> Result<()> {
        self.tors
            .get(tor)
            .with_context(|| format!("no ToR {tor}"))?
            .ns
            .set_loss(percent, "")
    }

    /// Drop `percent`% of every packet spine `spine` forwards or receives
    /// (0 clears), on all its links. On a multipath fabric only the flows
    /// hashed onto this spine lose, in both directions (a reply may come
    /// back over another spine), so a pair's round-trip loss depends on
    /// how many of its flows cross it.
    pub fn spine_loss(&self, spine: usize, percent: u32) -> Result<()> {
        self.spines
            .get(spine)
            .with_context(|| format!("no spine {spine}"))?
            .ns
            .set_loss(percent, "")
    }

    /// Drop every packet on the link between ToR `tor` and spine `spine`,
    /// both ways (`on = false` clears it): nftables on both routers drop
    /// what enters, leaves or crosses them through the link's interface.
    /// The link stays up, so the ToR keeps hashing flows onto it — the
    /// silent ECMP-member failure that only some flows of a pair see.
    pub fn link_fault(&self, tor: usize, spine: usize, on: bool) -> Result<()> {
        let t = self
            .tors
            .get(tor)
            .with_context(|| format!("no ToR {tor}"))?;
        let s = self
            .spines
            .get(spine)
            .with_context(|| format!("no spine {spine}"))?;
        for (ns, ifname) in [(&t.ns, format!("sp{spine}")), (&s.ns, format!("t{tor}"))] {
            let table = format!("shlink_{ifname}");
            let mut script = format!("table inet {table} {{}}\ndelete table inet {table}\n");
            if on {
                script.push_str(&format!(
                    "table inet {table} {{\n chain input {{ type filter hook input priority -20; iifname \"{ifname}\" drop; }}\n chain forward {{ type filter hook forward priority -20; iifname \"{ifname}\" drop; oifname \"{ifname}\" drop; }}\n chain output {{ type filter hook output priority -20; oifname \"{ifname}\" drop; }}\n}}\n"
                ));
            }
            ns.nft(&script)?;
        }
        Ok(())
    }

    /// Take a host's NIC port (its uplink to the ToR) down or up. Taking a
    /// link down flushes the routes through it, so bringing it up restores
    /// the default route too.
    pub fn host_link(&self, host: &Host, up: bool) -> Result<()> {
        host.ns.link_set("up0", up)?;
        if up {
            let gw = host.gateway.to_string();
            host.ns
                .ip(&["route", "replace", "default", "via", &gw, "dev", "up0"])?;
            // The kernel propagates a veth's carrier change asynchronously
            // (link watch, up to about a second); until then the link drops
            // packets. Return once the ToR answers across it.
            ensure!(
                reaches_within(&host.ns, host.gateway, SETTLE)?,
                "{}: uplink up0 still carries nothing {SETTLE:?} after it was set up",
                host.name
            );
        }
        Ok(())
    }

    /// Make a container unreachable on the data plane (drop everything
    /// arriving on `eth0`, as when its network never came up) or undo it.
    /// The management interface keeps working, so its exporter is still
    /// scraped and reports the loss it sees.
    pub fn isolate_node(&self, node: &Node, isolated: bool) -> Result<()> {
        // Its own table (not `set_loss`, whose numgen rule cannot say 100%).
        let mut script = String::from("table inet shisolate {}\ndelete table inet shisolate\n");
        if isolated {
            script.push_str(
                "table inet shisolate {\n chain input { type filter hook input priority -20; iifname \"eth0\" drop; }\n chain output { type filter hook output priority -20; oifname \"eth0\" drop; }\n}\n",
            );
        }
        node.ns.nft(&script)
    }

    /// Undo every fault this module can inject.
    pub fn clear_faults(&self) -> Result<()> {
        for t in 0..self.tors.len() {
            self.tor_loss(t, 0)?;
            if self.spines.len() > 1 {
                for s in 0..self.spines.len() {
                    self.link_fault(t, s, false)?;
                }
            }
        }
        for s in 0..self.spines.len() {
            self.spine_loss(s, 0)?;
        }
        for h in &self.hosts {
            self.host_link(h, true)?;
        }
        for n in &self.nodes {
            self.isolate_node(n, false)?;
        }
        self.clear_overlay_faults()
    }
}
