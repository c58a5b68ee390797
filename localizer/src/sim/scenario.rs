//! Simulator of ping logs on rail-optimized GPU fabrics, with ground truth.
//!
//! Fabric: `hosts` hosts × `rails` NICs (one per rail; `nodes_per_nic`
//! containers share a NIC). Rail `r` of the hosts of segment `g` hangs off
//! ToR (g, r); the ToRs of `tors_per_spine` consecutive segments of one rail
//! share a spine block. Skeleton: a ring over the containers of each host
//! (tensor parallel), a ring over the hosts on each rail (data parallel),
//! and data-parallel peers on the same rail at strides of one segment and
//! half the fabric. Every pair is probed for `rounds` rounds of
//! `packets_per_round` packets; faults (any kind, any symptom, partial on
//! spines as ECMP would make them) are applied along the DESIGN path model.
//! Output is the SkeletonHunter CSV schema (45 columns, hashed ids).

use crate::{PairStats, Symptom};
use anyhow::{bail, Context};
use serde::Serialize;
use skeletonhunter_common::topology::{path, Component, Identity, Kind};
use std::io::Write;

/// Small, fast, reproducible RNG (SplitMix64); the simulator needs no
/// cryptographic quality and no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.f64() * n as f64) as usize % n.max(1)
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    pub fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(1e-300);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Binomial(n, p) by geometric skipping (fast for the small p of loss).
    pub fn binomial(&mut self, n: u32, p: f64) -> u32 {
        if p <= 0.0 {
            return 0;
        }
        if p >= 1.0 {
            return n;
        }
        if p > 0.5 {
            return n - self.binomial(n, 1.0 - p);
        }
        let lq = (1.0 - p).ln();
        let (mut count, mut pos) = (0u32, 0f64);
        loop {
            let u = self.f64().max(1e-300);
            pos += (u.ln() / lq).floor() + 1.0;
            if pos > n as f64 {
                return count;
            }
            count += 1;
        }
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn hash_str(s: &str) -> u64 {
    s.bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| mix(h ^ b as u64))
}

/// A 32-hex-digit id, like the hashed ids of the production sample.
fn hashed(name: &str) -> String {
    let h = hash_str(name);
    format!("{:016x}{:016x}", h, mix(h ^ 0x5555))
}

/// Shape of a simulated fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricSpec {
    pub hosts: usize,
    pub rails: usize,
    pub nodes_per_nic: usize,
    pub hosts_per_tor: usize,
    pub tors_per_spine: usize,
    pub rounds: usize,
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

/// Fabric shape on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct FabricArgs {
    #[arg(long, default_value_t = 64)]
    pub hosts: usize,
    #[arg(long, default_value_t = 4)]
    pub rails: usize,
    #[arg(long, default_value_t = 1)]
    pub nodes_per_nic: usize,
    #[arg(long, default_value_t = 16)]
    pub hosts_per_tor: usize,
    #[arg(long, default_value_t = 2)]
    pub tors_per_spine: usize,
    #[arg(long, default_value_t = 6)]
    pub rounds: usize,
    #[arg(long, default_value_t = 100)]
    pub packets_per_round: u32,
}

impl FabricArgs {
    pub fn into_spec(self) -> anyhow::Result<FabricSpec> {
        let spec = FabricSpec {
            hosts: self.hosts,
            rails: self.rails,
            nodes_per_nic: self.nodes_per_nic,
            hosts_per_tor: self.hosts_per_tor,
            tors_per_spine: self.tors_per_spine,
            rounds: self.rounds,
            packets_per_round: self.packets_per_round,
        };
        for (name, v) in [
            ("--hosts", spec.hosts),
            ("--rails", spec.rails),
            ("--nodes-per-nic", spec.nodes_per_nic),
            ("--hosts-per-tor", spec.hosts_per_tor),
            ("--tors-per-spine", spec.tors_per_spine),
            ("--rounds", spec.rounds),
            ("--packets-per-round", spec.packets_per_round as usize),
        ] {
            if v == 0 {
                bail!("{name} must be at least 1");
            }
        }
        if spec.hosts * spec.rails * spec.nodes_per_nic > 1 << 22 {
            bail!("fabric too large (more than 4M containers)");
        }
        Ok(spec)
    }
}

/// A generated fabric: container identities and the skeleton pairs.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub spec: FabricSpec,
    pub nodes: Vec<Identity>,
    /// Container ip (the `*_ip` column), per node.
    pub ips: Vec<String>,
    pub pairs: Vec<(u32, u32)>,
}

impl Fabric {
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

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultSpec {
    pub component: Component,
    pub symptom: Symptom,
    /// Loss: extra packet loss rate; unreachable: share of failed dials;
    /// latency: extra RTT in seconds.
    pub severity: f64,
    /// Spines only: share of the flows (pairs) the fault hits (ECMP).
    pub ecmp_fraction: Option<f64>,
}

/// What to simulate on a fabric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    pub seed: u64,
    pub faults: Vec<FaultSpec>,
    /// Pairs with a persistent problem of their own (no component to blame).
    pub noisy_pairs: usize,
    /// Pairs with one bad round (transient).
    pub blips: usize,
    pub background_loss: f64,
    pub background_dial_failure: f64,
}

impl Scenario {
    pub fn healthy(seed: u64) -> Scenario {
        Scenario {
            seed,
            faults: Vec::new(),
            noisy_pairs: 0,
            blips: 0,
            background_loss: 1e-4,
            background_dial_failure: 2e-4,
        }
    }
}

/// Parse a `kind=index:symptom[:severity[:ecmp_fraction]]` fault for a fabric.
pub fn parse_fault(fabric: &Fabric, s: &str) -> anyhow::Result<FaultSpec> {
    let (kind, rest) = s.split_once('=').with_context(|| {
        format!("fault {s:?}: expected kind=index:symptom[:severity[:ecmp_fraction]]")
    })?;
    let kind: Kind = kind.parse().with_context(|| format!("fault {s:?}"))?;
    if !kind.is_path_component() {
        bail!("fault {s:?}: {kind} is not on probe paths");
    }
    let mut parts = rest.split(':');
    let index: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .with_context(|| format!("fault {s:?}: bad index"))?;
    let comps = fabric.components(kind);
    let component = comps
        .get(index)
        .cloned()
        .with_context(|| format!("fault {s:?}: only {} {kind} components", comps.len()))?;
    let symptom = match parts.next().unwrap_or("") {
        "loss" => Symptom::Loss,
        "unreachable" => Symptom::Unreachable,
        "latency" => Symptom::Latency,
        other => bail!("fault {s:?}: unknown symptom {other:?} (loss, unreachable, latency)"),
    };
    let severity = match parts.next() {
        Some(v) => v
            .parse()
            .with_context(|| format!("fault {s:?}: bad severity"))?,
        None => match symptom {
            Symptom::Loss => 0.2,
            Symptom::Unreachable => 1.0,
            Symptom::Latency => 20e-6,
        },
    };
    let ecmp_fraction = match parts.next() {
        Some(v) => Some(
            v.parse()
                .with_context(|| format!("fault {s:?}: bad ecmp fraction"))?,
        ),
        None => None,
    };
    Ok(FaultSpec {
        component,
        symptom,
        severity,
        ecmp_fraction,
    })
}

/// One probe round.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub src: u32,
    pub dst: u32,
    pub connected: bool,
    pub latency_us: Option<f64>,
    pub loss_rate: f64,
    pub ping_time: u64,
}

#[derive(Clone, Copy, Default)]
struct PairEffect {
    loss: f64,
    unreachable: f64,
    delay_s: f64,
    /// Transient: one round goes bad.
    blip: Option<(usize, Symptom)>,
}

/// Generate every probe round of the scenario, in pair order.
pub fn rows(fabric: &Fabric, scenario: &Scenario, mut emit: impl FnMut(&Row)) {
    let mut rng = Rng::new(scenario.seed);
    let np = fabric.pairs.len();
    let mut effects = vec![PairEffect::default(); np];
    for (i, &(a, b)) in fabric.pairs.iter().enumerate() {
        if scenario.faults.is_empty() {
            break;
        }
        let p = path(&fabric.nodes[a as usize], &fabric.nodes[b as usize]);
        for f in &scenario.faults {
            if !p.contains(&f.component) {
                continue;
            }
            if let Some(frac) = f.ecmp_fraction {
                let h = mix(scenario.seed
                    ^ hash_str(&f.component.id)
                    ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
                if (h >> 11) as f64 / (1u64 << 53) as f64 >= frac {
                    continue;
                }
            }
            let e = &mut effects[i];
            match f.symptom {
                Symptom::Loss => e.loss = 1.0 - (1.0 - e.loss) * (1.0 - f.severity),
                Symptom::Unreachable => {
                    e.unreachable = 1.0 - (1.0 - e.unreachable) * (1.0 - f.severity)
                }
                Symptom::Latency => e.delay_s += f.severity,
            }
        }
    }
    let mut noise_rng = Rng::new(scenario.seed ^ 0xdead_beef);
    for _ in 0..scenario.noisy_pairs.min(np) {
        let e = &mut effects[noise_rng.below(np)];
        match noise_rng.below(3) {
            0 => e.loss = noise_rng.range(0.05, 0.3),
            1 => e.unreachable = 1.0,
            _ => e.delay_s += noise_rng.range(20e-6, 80e-6),
        }
    }
    for _ in 0..scenario.blips.min(np) {
        let i = noise_rng.below(np);
        let round = noise_rng.below(fabric.spec.rounds);
        let s = Symptom::ALL[noise_rng.below(3)];
        effects[i].blip = Some((round, s));
    }

    let ppr = fabric.spec.packets_per_round;
    let t0: u64 = 1_733_989_087_000_000_000;
    for (i, &(a, b)) in fabric.pairs.iter().enumerate() {
        let (na, nb) = (&fabric.nodes[a as usize], &fabric.nodes[b as usize]);
        let base_us = match skeletonhunter_common::topology::path_class(na, nb) {
            skeletonhunter_common::topology::PathClass::SameHost => 4.0,
            skeletonhunter_common::topology::PathClass::SameTor => 9.0,
            skeletonhunter_common::topology::PathClass::CrossTor => 14.0,
        } + 0.4 * rng.normal();
        let e = effects[i];
        for round in 0..fabric.spec.rounds {
            let (mut loss, mut unreach, mut delay_us) = (e.loss, e.unreachable, e.delay_s * 1e6);
            if let Some((r, s)) = e.blip {
                if r == round {
                    match s {
                        Symptom::Loss => loss = 1.0 - (1.0 - loss) * 0.5,
                        Symptom::Unreachable => unreach = 1.0,
                        Symptom::Latency => delay_us += 200.0,
                    }
                }
            }
            // A TCP-style dial survives loss unless its retries are lost too.
            let dial_fail = 1.0
                - (1.0 - scenario.background_dial_failure) * (1.0 - unreach) * (1.0 - loss.powi(3));
            let ping_time = t0 + round as u64 * 10_000_000_000 + (i as u64 % 10_000) * 997_123;
            if rng.f64() < dial_fail {
                emit(&Row {
                    src: a,
                    dst: b,
                    connected: false,
                    latency_us: None,
                    loss_rate: 1.0,
                    ping_time,
                });
                continue;
            }
            let p_lost = 1.0 - (1.0 - scenario.background_loss) * (1.0 - loss);
            let lost = rng.binomial(ppr, p_lost);
            let latency_us = if lost >= ppr {
                None
            } else {
                let mut l = base_us * (0.05 * rng.normal()).exp() + delay_us;
                if rng.f64() < 0.02 {
                    l += rng.range(20.0, 100.0);
                }
                Some(l.max(0.5))
            };
            emit(&Row {
                src: a,
                dst: b,
                connected: true,
                latency_us,
                loss_rate: lost as f64 / ppr as f64,
                ping_time,
            });
        }
    }
}

/// The production sample's header (45 columns).
pub const HEADER: &str = "agent_type,dial,dscp,dst_asw,dst_cluster_id,dst_cluster_name,dst_dsw,dst_idc,dst_ip,dst_logic_site,dst_node_id,dst_node_sn,dst_pod,dst_port,dst_real_ip,dst_region_id,dst_region_name,dst_tenant_id,dst_zone_id,extra_stats,host_ip,latency,loss_rate,ping_time,ptp_ts,route,src_asw,src_cluster_id,src_cluster_name,src_dsw,src_idc,src_ip,src_logic_site,src_node_id,src_node_sn,src_pod,src_port,src_real_ip,src_region_id,src_region_name,src_security_domain,src_tenant_id,src_zone_id,task_start_time,task_type";

/// Write the scenario as a SkeletonHunter CSV (with the UTF-8 BOM of the
/// production export).
pub fn write_csv<W: Write>(
    fabric: &Fabric,
    scenario: &Scenario,
    mut out: W,
) -> std::io::Result<()> {
    out.write_all("\u{feff}".as_bytes())?;
    out.write_all(HEADER.as_bytes())?;
    out.write_all(b"\n")?;
    let cluster = hashed("cluster");
    let region = hashed("region");
    let idc = hashed("idc");
    let site = hashed("site");
    let zone = hashed("zone");
    let domain = hashed("domain");
    let mut err = Ok(());
    let mut line = String::with_capacity(1200);
    rows(fabric, scenario, |r| {
        if err.is_err() {
            return;
        }
        use std::fmt::Write as _;
        let (s, d) = (&fabric.nodes[r.src as usize], &fabric.nodes[r.dst as usize]);
        let (sip, dip) = (&fabric.ips[r.src as usize], &fabric.ips[r.dst as usize]);
        line.clear();
        let lat = r.latency_us.map(|l| format!("{l:.3}")).unwrap_or_default();
        let dial = if r.connected { "success" } else { "fail" };
        let _ = writeln!(
            line,
            "overlay,{dial},0,{dt},,{cluster},{dd},{idc},{dip},{site},{dn},{dh},{dp},65300,{dr},{region},{region},{dten},{zone},,{sr},{lat},{loss},{pt},,,{st},,{cluster},{sd},{idc},{sip},{site},{sn},{sh},{sp},{port},{sr},{region},{region},{domain},{sten},{zone},{pt0},RDMA_PING",
            dt = d.tor,
            dd = d.spine,
            dn = d.node,
            dh = d.host,
            dp = d.pod,
            dr = d.nic,
            dten = d.tenant,
            sr = s.nic,
            loss = r.loss_rate,
            pt = r.ping_time,
            st = s.tor,
            sd = s.spine,
            sn = s.node,
            sh = s.host,
            sp = s.pod,
            port = 40000 + (r.ping_time % 20000),
            sten = s.tenant,
            pt0 = r.ping_time - 160_712,
        );
        err = out.write_all(line.as_bytes());
    });
    err?;
    out.flush()
}

/// Aggregate the scenario straight into pair statistics (no CSV), for
/// tests that only need the engine.
pub fn pair_stats(fabric: &Fabric, scenario: &Scenario) -> Vec<PairStats> {
    let mut csv = Vec::new();
    write_csv(fabric, scenario, &mut csv).expect("writing to memory");
    crate::csv::read_pings(
        csv.as_slice(),
        &crate::csv::CsvOptions {
            packets_per_round: fabric.spec.packets_per_round as f64,
        },
    )
    .expect("the simulator writes valid CSV")
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

    #[test]
    fn binomial_sampler_has_right_mean() {
        let mut rng = Rng::new(3);
        let n = 20000;
        let total: u32 = (0..n).map(|_| rng.binomial(100, 0.03)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 3.0).abs() < 0.1, "mean {mean}");
        let total: u32 = (0..n).map(|_| rng.binomial(100, 0.9)).sum();
        assert!((total as f64 / n as f64 - 90.0).abs() < 0.2);
    }

    #[test]
    fn csv_round_trips_through_the_reader() {
        let f = Fabric::new(FabricSpec {
            hosts: 8,
            rails: 2,
            hosts_per_tor: 4,
            ..Default::default()
        });
        let mut sc = Scenario::healthy(5);
        sc.faults
            .push(parse_fault(&f, "node=0:unreachable").unwrap());
        let stats = pair_stats(&f, &sc);
        assert_eq!(stats.len(), f.pairs.len());
        let target = f.components(Kind::Node)[0].id.clone();
        for p in &stats {
            let touches = p.src.node == target || p.dst.node == target;
            assert_eq!(touches, p.failed_dials == p.rounds, "{p:?}");
        }
        assert!(parse_fault(&f, "tor=99:loss").is_err());
        assert!(parse_fault(&f, "tenant=0:loss").is_err());
        assert!(parse_fault(&f, "tor=0:slow").is_err());
    }
}
