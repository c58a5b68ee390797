//! What each demo fault does to the fabric, in words, and which verdicts
//! name it.

use super::args::FaultKind;
use crate::fabric::{link_addresses, Stack};
use anyhow::Result;

/// The link of `--fault link`: (ToR, spine).
const LINK: (usize, usize) = (0, 1);

impl FaultKind {
    /// What the fault is, in words (`loss`: the ToR's, in percent), and
    /// the (kind, component) alerts that name it correctly (none for a
    /// link: any verdict is shown, and whether it names the link is
    /// printed).
    pub(super) fn describe(
        self,
        loss: u32,
        stack: &Stack,
    ) -> (String, Vec<(&'static str, String)>) {
        match self {
            FaultKind::Tor => (
                format!("{loss}% packet loss at ToR tor1"),
                vec![("tor", "tor1".into())],
            ),
            FaultKind::Host => {
                let h = &stack.fabric.hosts[1];
                (
                    format!("NIC link of {} down", h.name),
                    vec![("host", h.name.clone()), ("nic", h.nic_ip.to_string())],
                )
            }
            FaultKind::Node => (
                "container t1-h0-c1 unreachable on the data plane".into(),
                vec![("node", "t1-h0-c1".into())],
            ),
            // The hosts' own exporters show the underlay clean: the host's
            // virtual switch (its tunnel endpoint) is to blame.
            FaultKind::Overlay => {
                let h = &stack.fabric.hosts[1];
                (
                    format!(
                        "the VXLAN tunnel of {} blocked (its containers still reach each other, its underlay answers)",
                        h.name
                    ),
                    vec![("vswitch", h.name.clone())],
                )
            }
            FaultKind::Link => (
                format!(
                    "every packet on the link tor{}-spine{} dropped, both ways",
                    LINK.0, LINK.1
                ),
                Vec::new(),
            ),
        }
    }

    /// Put the fault on the fabric (`on`) or take it off.
    pub(super) fn inject(self, loss: u32, stack: &Stack, on: bool) -> Result<()> {
        let f = &stack.fabric;
        match self {
            FaultKind::Link => f.link_fault(LINK.0, LINK.1, on),
            FaultKind::Tor => f.tor_loss(1, if on { loss } else { 0 }),
            FaultKind::Host => f.host_link(&f.hosts[1], !on),
            FaultKind::Node => f.isolate_node(f.node("t1-h0-c1")?, on),
            FaultKind::Overlay => f.tunnel_blocked(&f.hosts[1], on),
        }
    }
}

/// Whether a verdict names the faulty link: by name, or by a traced hop
/// address of the link (either router's interface on it).
pub(super) fn print_link_verdict(kind: &str, component: &str) {
    let (spine_side, tor_side) = link_addresses(LINK.1, LINK.0);
    let names_link = kind.contains("link")
        || component == spine_side.to_string()
        || component == tor_side.to_string()
        || (component.contains(&format!("tor{}", LINK.0))
            && component.contains(&format!("spine{}", LINK.1)));
    if names_link {
        println!(
            "the verdict names the faulty link tor{}-spine{}",
            LINK.0, LINK.1
        );
    } else {
        println!(
            "NOTE: the verdict ({kind} {component}) does not name the link tor{}-spine{} \
             (its hop addresses are {spine_side} and {tor_side}); this localizer does \
             not localize to links",
            LINK.0, LINK.1
        );
    }
}
