//! Simulated rail-optimized fabrics: container identities and the skeleton
//! pairs that probe each other.
//!
//! `hosts` hosts × `rails` NICs (one per rail; `nodes_per_nic` containers
//! share a NIC). Rail `r` of the hosts of segment `g` hangs off ToR (g, r);
//! the ToRs of `tors_per_spine` consecutive segments of one rail share a
//! spine block. Skeleton: a ring over the containers of each host (tensor
//! parallel), a ring over the hosts on each rail (data parallel), and
//! data-parallel peers on the same rail at strides of one segment and half
//! the fabric.

use super::rng::hashed;
use serde::Serialize;
use skeletonhunter_common::topology::{Component, Identity, Kind};

/// Shape of a simulated fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricSpec {
    /// Hosts.
    pub hosts: usize,
    /// NICs (rails) per host.
    pub rails: usize,
    /// Containers sharing a NIC.
    pub nodes_per_nic: usize,
    /// Hosts under one ToR per rail.
    pub hosts_per_tor: usize,
    /// ToR segments sharing a spine block.
    pub tors_per_spine: usize,
    /// Probe rounds per pair.
    pub rounds: usize,
    /// Packets per round.
    pub packets_per_round: u32,
}

impl Default for FabricSpec {
    fn default() -> Self {
        FabricSpec {
            hosts: 64,
            rails: 4,
            nodes_per_nic: 1,
            hosts_per_tor: 16,
            tors_per_spine: 2,
            rounds: 6,
            packets_per_round: 100,
        }
    }
}

/// A generated fabric: container identities and the skeleton pairs.
#[derive(Debug, Clone)]
pub struct Fabric {
    /// The shape.
    pub spec: FabricSpec,
    /// Container identities.
    pub nodes: Vec<Identity>,
    /// Container ip (the `*_ip` column), per node.
    pub ips: Vec<String>,
    /// Probed (src, dst) pairs, indices into `nodes`.
    pub pairs: Vec<(u32, u32)>,
}

impl Fabric {
    /// Generate the fabric of `spec`.
    pub fn new(spec: FabricSpec) -> Fabric {
        let (h_n, r_n, s_n) = (spec.hosts, spec.rails, spec.nodes_per_nic);
        let idx = |h: usize, r: usize, s: usize| ((h * r_n + r) * s_n + s) as u32;
        let mut nodes = Vec::with_capacity(h_n * r_n * s_n);
        let mut ips = Vec::with_capacity(nodes.capacity());
        for h in 0..h_n {
            let seg = h / spec.hosts_per_tor;
            for r in 0..r_n {
                for s in 0..s_n {
                    let block = seg / spec.tors_per_spine;
                    nodes.push(Identity {
                        node: hashed(&format!("node/{h}/{r}/{s}")),
                        nic: hashed(&format!("nic/{h}/{r}")),
                        host: hashed(&format!("host/{h}")),
                        tor: hashed(&format!("tor/{seg}/{r}")),
                        spine: hashed(&format!("spine/{r}/{block}")),
                        pod: hashed(&format!("pod/{block}")),
                        tenant: hashed("tenant/0"),
                    });
                    ips.push(hashed(&format!("ip/{h}/{r}/{s}")));
                }
            }
        }
        let mut pairs = Vec::new();
        // Tensor-parallel ring inside each host.
        let per_host = r_n * s_n;
        for h in 0..h_n {
            let local: Vec<u32> = (0..r_n)
                .flat_map(|r| (0..s_n).map(move |s| idx(h, r, s)))
                .collect();
            if per_host == 2 {
                pairs.push((local[0], local[1]));
            } else if per_host > 2 {
                for k in 0..per_host {
                    pairs.push((local[k], local[(k + 1) % per_host]));
                }
            }
        }
        // Data-parallel ring and peers on the same rail.
        let mut strides = vec![1usize];
        if spec.hosts_per_tor < h_n && spec.hosts_per_tor > 1 {
            strides.push(spec.hosts_per_tor);
        }
        for r in 0..r_n {
            for s in 0..s_n {
                for &stride in &strides {
                    if h_n < 2 {
                        continue;
                    }
                    let limit = if h_n == 2 { 1 } else { h_n };
                    for h in 0..limit {
                        let to = (h + stride) % h_n;
                        if to != h {
                            pairs.push((idx(h, r, s), idx(to, r, s)));
                        }
                    }
                }
                let half = h_n / 2;
                if half > spec.hosts_per_tor && !strides.contains(&half) {
                    for h in 0..half {
                        pairs.push((idx(h, r, s), idx(h + half, r, s)));
                    }
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        Fabric {
            spec,
            nodes,
            ips,
            pairs,
        }
    }

    /// The distinct components of one kind, in a stable order.
    pub fn components(&self, kind: Kind) -> Vec<Component> {
        let mut v: Vec<String> = self.nodes.iter().map(|n| n.get(kind).to_string()).collect();
        v.sort();
        v.dedup();
        v.into_iter().map(|id| Component::new(kind, id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fabric_has_expected_shape() {
        let f = Fabric::new(FabricSpec {
            hosts: 32,
            rails: 4,
            nodes_per_nic: 1,
            hosts_per_tor: 8,
            tors_per_spine: 2,
            ..Default::default()
        });
        assert_eq!(f.nodes.len(), 128);
        assert_eq!(f.components(Kind::Tor).len(), 16);
        assert_eq!(f.components(Kind::Spine).len(), 8);
        assert_eq!(f.components(Kind::Host).len(), 32);
        // host ring (4 per host) + rail ring + stride-8 peers + half peers.
        assert_eq!(f.pairs.len(), 32 * 4 + 128 + 128 + 64);
        for &(a, b) in &f.pairs {
            assert_ne!(a, b);
        }
    }
}
