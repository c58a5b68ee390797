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
//! Nothing links to the machine's own namespace: every veth is created
//! directly inside the fabric's namespaces, and addresses come from
//! 198.18.0.0/15 (data plane 198.18.<tor>.0/24, links 198.19.x.y/30,
//! management 198.19.200.0/24).

use crate::netns::{attach, bridge, veth, Netns};
use crate::servers::{self, repo_root, Server, ServerOpts, TempDir};
use crate::ChildGuard;
use anyhow::{bail, ensure, Context, Result};
use skeletonhunter_common::Identity;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How big a fabric to build.
#[derive(Debug, Clone, Copy)]
pub struct FabricSpec {
    pub tors: usize,
    pub hosts_per_tor: usize,
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
    pub ns: Netns,
    pub identity: Identity,
    /// Index of the ToR, host (within the ToR) and container (= rail).
    pub tor: usize,
    pub host: usize,
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
    pub ns: Netns,
    pub name: String,
    pub tor: usize,
    /// Host-side address of the uplink; the `nic` identity of its containers.
    pub nic_ip: Ipv4Addr,
    /// ToR-side address of the uplink (the host's default gateway).
    pub gateway: Ipv4Addr,
}

/// A routed top-of-rack switch.
#[derive(Debug)]
pub struct Tor {
    pub ns: Netns,
    pub name: String,
}

/// The whole fabric. Dropping it deletes every namespace (and so every
/// process still running inside one).
#[derive(Debug)]
pub struct Fabric {
    pub spec: FabricSpec,
    // Field order is drop order: endpoints first, the monitoring namespace last.
    pub nodes: Vec<Node>,
    pub hosts: Vec<Host>,
    pub tors: Vec<Tor>,
    pub spine: Netns,
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
    /// Build the fabric and check that it routes: every container reaches a
    /// container under the other ToR, and `mon` reaches every container's
    /// management address.
    pub fn new(spec: FabricSpec) -> Result<Fabric> {
        ensure!(spec.tors >= 1 && spec.tors <= 50, "tors must be 1..=50");
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
        let spine_name = "spine0".to_string();
        let spine = Netns::new("spine")?;
        spine.enable_forwarding()?;
        let mon = Netns::new("mon")?;
        let mon_ip = Ipv4Addr::new(198, 19, 200, 1);
        bridge(&mon, "mgmt", &format!("{mon_ip}/24"))?;

        let mut fabric = Fabric {
            spec,
            nodes: Vec::new(),
            hosts: Vec::new(),
            tors: Vec::new(),
            spine,
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
        fabric.check_connectivity()?;
        Ok(fabric)
    }

    fn add_tor(&mut self, t: usize) -> Result<()> {
        let ns = Netns::new(&format!("tor{t}"))?;
        ns.enable_forwarding()?;
        let (spine_ip, tor_ip) = (
            Ipv4Addr::new(198, 19, 100, (t * 4 + 1) as u8),
            Ipv4Addr::new(198, 19, 100, (t * 4 + 2) as u8),
        );
        veth(
            &self.spine,
            &format!("t{t}"),
            &format!("{spine_ip}/30"),
            &ns,
            "sp",
            &format!("{tor_ip}/30"),
        )?;
        self.spine.ip(&[
            "route",
            "add",
            &format!("198.18.{t}.0/24"),
            "via",
            &tor_ip.to_string(),
        ])?;
        ns.ip(&["route", "add", "default", "via", &spine_ip.to_string()])?;
        self.tors.push(Tor {
            ns,
            name: format!("tor{t}"),
        });
        Ok(())
    }

    fn add_host(&mut self, t: usize, h: usize) -> Result<()> {
        let ns = Netns::new(&format!("t{t}h{h}"))?;
        ns.enable_forwarding()?;
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
        tor.ns.ip(&[
            "route",
            "add",
            &format!("198.18.{t}.{}/28", h * 16),
            "via",
            &nic_ip.to_string(),
        ])?;
        bridge(&ns, "br0", &format!("198.18.{t}.{}/28", h * 16 + 1))?;
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

    fn add_node(&mut self, t: usize, h: usize, c: usize) -> Result<()> {
        let index = self.nodes.len();
        let ns = Netns::new(&format!("t{t}h{h}c{c}"))?;
        let host = self.hosts.last().context("add_node before add_host")?;
        let gw = Ipv4Addr::new(198, 18, t as u8, (h * 16 + 1) as u8);
        let data_ip = Ipv4Addr::new(198, 18, t as u8, (h * 16 + 2 + c) as u8);
        let veth_host = format!("c{c}");
        veth(
            &ns,
            "eth0",
            &format!("{data_ip}/28"),
            &host.ns,
            &veth_host,
            "",
        )?;
        attach(&host.ns, &veth_host, "br0")?;
        ns.ip(&["route", "add", "default", "via", &gw.to_string()])?;

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

    /// Every container reaches the first container of the last ToR through
    /// the spine, and `mon` reaches every management address.
    pub fn check_connectivity(&self) -> Result<()> {
        let far = self.nodes.last().context("empty fabric")?;
        for n in &self.nodes {
            if n.data_ip != far.data_ip && !reachable(&n.ns, far.data_ip)? {
                bail!(
                    "fabric does not route: {} cannot reach {} ({})",
                    n.identity.node,
                    far.identity.node,
                    far.data_ip
                );
            }
            if !reachable(&self.mon, n.mgmt_ip)? {
                bail!(
                    "management network broken: mon cannot reach {} ({})",
                    n.identity.node,
                    n.mgmt_ip
                );
            }
        }
        Ok(())
    }

    // ---- fault injection -------------------------------------------------

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
            let t0 = std::time::Instant::now();
            while !reachable(&host.ns, host.gateway)? {
                ensure!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{}: uplink up0 still carries nothing 10 s after it was set up",
                    host.name
                );
                std::thread::sleep(Duration::from_millis(100));
            }
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
        }
        for h in &self.hosts {
            self.host_link(h, true)?;
        }
        for n in &self.nodes {
            self.isolate_node(n, false)?;
        }
        Ok(())
    }
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

/// Delete every namespace left by process `pid` (names `sh-<tag>-<pid>-<n>`),
/// killing what runs inside. The demo calls it from its signal handler so
/// Ctrl-C leaves nothing behind even though destructors do not run.
pub fn remove_namespaces_of(pid: u32) -> usize {
    let Ok(out) = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
    else {
        return 0;
    };
    let suffix = format!("-{pid}-");
    let mut removed = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if !(name.starts_with("sh-") && name.contains(&suffix)) {
            continue;
        }
        if let Ok(p) = std::process::Command::new("ip")
            .args(["netns", "pids", name])
            .output()
        {
            for pid in String::from_utf8_lossy(&p.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: plain kill(2) on a pid listed in our namespace.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let ok = std::process::Command::new("ip")
            .args(["netns", "del", name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        removed += usize::from(ok);
    }
    removed
}

// ---- the monitoring stack on top of the fabric ------------------------------

/// Ports used inside the fabric. Every namespace has its own port space, so
/// fixed ports cannot collide with anything else on the machine.
pub mod ports {
    /// Exporter `/metrics`, on each container's management address.
    pub const EXPORTER_METRICS: u16 = 9477;
    /// Exporter UDP echo responder and TCP dial port, on the data plane.
    pub const EXPORTER_UDP: u16 = 7477;
    pub const EXPORTER_TCP: u16 = 7478;
    /// Servers on the monitoring namespace's loopback.
    pub const PROMETHEUS: u16 = 9090;
    pub const ALERTMANAGER: u16 = 9093;
    pub const LOCALIZER: u16 = 9478;
}

/// How to run the stack.
#[derive(Debug, Clone)]
pub struct StackOpts {
    pub spec: FabricSpec,
    pub exporter_bin: PathBuf,
    /// `None`: no localizer (the demo's fallback, or a test of the rules alone).
    pub localizer_bin: Option<PathBuf>,
    /// Probe interval per peer.
    pub probe_interval: Duration,
    /// Prometheus scrape and rule evaluation interval.
    pub scrape_interval: Duration,
    /// Localizer cycle.
    pub localizer_interval: Duration,
    /// Localizer analysis window (PromQL `increase()` range): short, so a
    /// fault shows and clears within seconds.
    pub localizer_window: Duration,
    /// The localizer's `--min-latency-excess`. Veth RTTs of 25–60 µs on a
    /// shared machine wander by tens of µs when the CPUs are busy (the
    /// default, 2 µs, is for RoCE NIC timestamps), so only a delay of this
    /// size is a latency fault on this fabric.
    pub min_latency_excess: String,
    /// Extra localizer flags (after ours).
    pub localizer_args: Vec<String>,
}

impl StackOpts {
    /// Short intervals so a fault shows within seconds and tests stay short.
    pub fn new(exporter_bin: PathBuf, localizer_bin: Option<PathBuf>) -> StackOpts {
        StackOpts {
            spec: FabricSpec::default(),
            exporter_bin,
            localizer_bin,
            probe_interval: Duration::from_millis(200),
            scrape_interval: Duration::from_secs(1),
            localizer_interval: Duration::from_secs(2),
            localizer_window: Duration::from_secs(10),
            min_latency_excess: "250us".into(),
            localizer_args: Vec::new(),
        }
    }

    /// How long after an alert resolved the localizer may still hold back
    /// a new finding on the same pairs as possible leftovers (window +
    /// scrape interval, see `run --scrape-interval`), plus a cycle. Tests
    /// wait this long between independent faults.
    pub fn settle_time(&self) -> Duration {
        self.localizer_window + self.scrape_interval + self.localizer_interval
    }
}

/// The fabric with an exporter per container, and Prometheus (shipped
/// `rules/` loaded), Alertmanager (shipped `alertmanager/` config) and the
/// localizer in the monitoring namespace. Dropping it stops everything and
/// deletes every namespace.
pub struct Stack {
    // Field order is drop order: processes first, then servers, then the
    // namespaces, then the config files.
    pub localizer: Option<ChildGuard>,
    pub exporters: Vec<ChildGuard>,
    pub prometheus: Server,
    pub alertmanager: Server,
    pub fabric: Fabric,
    dir: TempDir,
}

fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The exporter's YAML configuration for `node`: its identity, its skeleton
/// peers (static), short probe intervals, metrics on the management address.
pub fn exporter_config(fabric: &Fabric, node: &Node, opts: &StackOpts) -> String {
    let id = &node.identity;
    let mut y = String::new();
    y.push_str(&format!(
        "listen: \"{}:{}\"\n",
        node.mgmt_ip,
        ports::EXPORTER_METRICS
    ));
    y.push_str("identity:\n");
    for (k, v) in id.labels() {
        y.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    y.push_str(&format!(
        "responder:\n  udp: \"{ip}:{u}\"\n  tcp: \"{ip}:{t}\"\n",
        ip = node.data_ip,
        u = ports::EXPORTER_UDP,
        t = ports::EXPORTER_TCP
    ));
    let timeout = (opts.probe_interval * 2).min(Duration::from_secs(1));
    y.push_str(&format!(
        "probe:\n  interval: {}\n  timeout: {}\n  protocols: [udp, tcp]\n  udp_port: {}\n  tcp_port: {}\n",
        secs(opts.probe_interval),
        secs(timeout),
        ports::EXPORTER_UDP,
        ports::EXPORTER_TCP
    ));
    y.push_str("discovery:\n  ebpf: false\n  static:\n");
    for p in fabric.skeleton_peers(node) {
        y.push_str(&format!(
            "    - {{address: \"{}\", name: \"{}\"}}\n",
            p.data_ip, p.identity.node
        ));
    }
    y
}

/// Prometheus configuration: every exporter by management address, the
/// localizer, the shipped rule files, and
/// Alertmanager.
pub fn prometheus_config(fabric: &Fabric, opts: &StackOpts, rule_files: &[String]) -> String {
    let iv = secs(opts.scrape_interval);
    let mut y = format!(
        "global:\n  scrape_interval: {iv}\n  evaluation_interval: {iv}\n  scrape_timeout: {iv}\n"
    );
    y.push_str("rule_files:\n");
    for r in rule_files {
        y.push_str(&format!("  - \"{r}\"\n"));
    }
    y.push_str(&format!(
        "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"127.0.0.1:{}\"]\n",
        ports::ALERTMANAGER
    ));
    y.push_str("scrape_configs:\n  - job_name: skeletonhunter-exporter\n    static_configs:\n");
    // No target labels: the exporters publish their identity themselves
    // (`skeletonhunter_node_info`), and a `node` target label would rename
    // theirs to `exported_node`.
    for n in &fabric.nodes {
        y.push_str(&format!(
            "      - targets: [\"{}:{}\"]\n",
            n.mgmt_ip,
            ports::EXPORTER_METRICS
        ));
    }
    if opts.localizer_bin.is_some() {
        y.push_str(&format!(
            "  - job_name: skeletonhunter-localizer\n    static_configs:\n      - targets: [\"127.0.0.1:{}\"]\n",
            ports::LOCALIZER
        ));
    }
    y
}

/// Rule files shipped in `rules/` (`*.yml`/`*.yaml`, not the promtool unit
/// tests `*_test.yml`/`*.test.yml`): (relative name, path).
pub fn shipped_rule_files() -> Result<Vec<(String, PathBuf)>> {
    let dir = repo_root().join("rules");
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("read {}", dir.display())),
    };
    for e in entries {
        let p = e?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let is_yaml = name.ends_with(".yml") || name.ends_with(".yaml");
        let is_test = name.contains("_test.") || name.contains(".test.");
        if p.is_file() && is_yaml && !is_test {
            out.push((format!("rules/{name}"), p));
        }
    }
    out.sort();
    Ok(out)
}

/// The shipped Alertmanager config and every other file of `alertmanager/`
/// (templates), relative to the directory.
fn shipped_alertmanager_files() -> Result<(String, Vec<(String, PathBuf)>)> {
    let dir = repo_root().join("alertmanager");
    let config = dir.join("alertmanager.yml");
    let text = std::fs::read_to_string(&config)
        .with_context(|| format!("read the shipped {}", config.display()))?;
    let mut files = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("read {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p != config {
                let rel = p.strip_prefix(&dir)?.to_string_lossy().into_owned();
                files.push((rel, p));
            }
        }
    }
    Ok((text, files))
}

impl Stack {
    /// Build the fabric, start an exporter in every container, Prometheus,
    /// Alertmanager and (if given) the localizer in the monitoring
    /// namespace. Returns once every server is ready; call
    /// [`Stack::wait_healthy`] before injecting faults.
    pub fn start(opts: &StackOpts) -> Result<Stack> {
        let fabric = Fabric::new(opts.spec)?;
        let dir = TempDir::new("stack")?;

        let mut exporters = Vec::new();
        for node in &fabric.nodes {
            let path = dir
                .path()
                .join(format!("exporter-{}.yaml", node.identity.node));
            std::fs::write(&path, exporter_config(&fabric, node, opts))
                .with_context(|| format!("write {}", path.display()))?;
            let mut cmd = node.ns.command(&opts.exporter_bin.to_string_lossy());
            cmd.arg("--config").arg(&path);
            exporters.push(ChildGuard::spawn(
                &format!("exporter-{}", node.identity.node),
                cmd,
            )?);
        }

        let (am_config, am_files) = shipped_alertmanager_files()?;
        let mut am_opts = ServerOpts::new(
            SocketAddr::from(([127, 0, 0, 1], ports::ALERTMANAGER)),
            &am_config,
        )
        .in_netns(&fabric.mon);
        for (rel, p) in &am_files {
            am_opts = am_opts.copy_file(rel, p)?;
        }
        let alertmanager = servers::start_alertmanager(am_opts)?;

        let rules = shipped_rule_files()?;
        let names: Vec<String> = rules.iter().map(|(n, _)| n.clone()).collect();
        let mut prom_opts = ServerOpts::new(
            SocketAddr::from(([127, 0, 0, 1], ports::PROMETHEUS)),
            &prometheus_config(&fabric, opts, &names),
        )
        .in_netns(&fabric.mon);
        for (name, p) in &rules {
            prom_opts = prom_opts.copy_file(name, p)?;
        }
        let prometheus = servers::start_prometheus(prom_opts)?;

        let localizer = match &opts.localizer_bin {
            None => None,
            Some(bin) => {
                let mut cmd = fabric.mon.command(&bin.to_string_lossy());
                cmd.args([
                    "run",
                    "--prometheus",
                    &prometheus.url(),
                    "--alertmanager",
                    &alertmanager.url(),
                    "--interval",
                    &secs(opts.localizer_interval),
                    "--window",
                    &secs(opts.localizer_window),
                    "--scrape-interval",
                    &secs(opts.scrape_interval),
                    "--min-latency-excess",
                    &opts.min_latency_excess,
                    "--listen",
                    &format!("127.0.0.1:{}", ports::LOCALIZER),
                ]);
                cmd.args(&opts.localizer_args);
                Some(ChildGuard::spawn("localizer", cmd)?)
            }
        };
        Ok(Stack {
            localizer,
            exporters,
            prometheus,
            alertmanager,
            fabric,
            dir,
        })
    }

    /// Where the stack's generated config files are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Fail (with its log) if any process of the stack has exited.
    pub fn check_running(&mut self) -> Result<()> {
        for e in &mut self.exporters {
            e.check_running()?;
        }
        if let Some(l) = &mut self.localizer {
            l.check_running()?;
        }
        self.prometheus.check_running()?;
        self.alertmanager.check_running()
    }

    /// Number of directed skeleton pairs (each probed by its source).
    pub fn skeleton_pairs(&self) -> usize {
        self.fabric
            .nodes
            .iter()
            .map(|n| self.fabric.skeleton_peers(n).len())
            .sum()
    }

    /// Wait until Prometheus scrapes every exporter (and the localizer),
    /// every skeleton pair has UDP probe results, and no pair lost a probe
    /// over the last few seconds.
    pub fn wait_healthy(&mut self, timeout: Duration) -> Result<()> {
        let targets = self.fabric.nodes.len() + usize::from(self.localizer.is_some());
        let pairs = self.skeleton_pairs();
        let deadline = std::time::Instant::now() + timeout;
        let mut last: String;
        loop {
            self.check_running()?;
            match self.health_status(targets, pairs) {
                Ok(None) => return Ok(()),
                Ok(Some(why)) => last = why,
                Err(e) => last = format!("{e:#}"),
            }
            if std::time::Instant::now() > deadline {
                bail!("stack not healthy within {timeout:?}: {last}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `None` when healthy, else what is missing.
    fn health_status(&self, targets: usize, pairs: usize) -> Result<Option<String>> {
        let up = self.prometheus.targets_up()?;
        if up < targets {
            return Ok(Some(format!("{up}/{targets} scrape targets up")));
        }
        // Probes counted over the last 5 s for every pair: the window the
        // loss check below looks at has data for all of them.
        let sent = self.prometheus.query(
            "sum by (src_node, dst_node) (increase(skeletonhunter_probe_sent_total{protocol=\"udp\"}[5s])) > 0",
        )?;
        if sent.len() < pairs {
            return Ok(Some(format!(
                "{}/{pairs} skeleton pairs have UDP probe results",
                sent.len()
            )));
        }
        let lost = self.prometheus.query(
            "sum by (src_node, dst_node) (increase(skeletonhunter_probe_lost_total[5s])) > 0 \
             or sum by (src_node, dst_node) (increase(skeletonhunter_probe_dial_failures_total[5s])) > 0",
        )?;
        if !lost.is_empty() {
            return Ok(Some(format!("{} pairs still losing probes", lost.len())));
        }
        Ok(None)
    }

    /// Alerts Alertmanager holds (resolved ones excluded) that carry
    /// `kind` and `component` labels: the localizer's verdicts, the rules'
    /// pair alerts and the monitoring alerts alike.
    pub fn labelled_alerts(&self) -> Result<Vec<AlertView>> {
        Ok(self
            .alertmanager
            .alerts()?
            .iter()
            .filter_map(AlertView::from_json)
            .collect())
    }

    /// Alerts that blame a fabric component (kind node, nic, host, tor,
    /// spine or pod), as the localizer posts them.
    pub fn component_alerts(&self) -> Result<Vec<AlertView>> {
        Ok(self
            .labelled_alerts()?
            .into_iter()
            .filter(AlertView::is_component)
            .collect())
    }
}

/// The parts of an Alertmanager alert the tests and the demo look at.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertView {
    pub alertname: String,
    pub kind: String,
    pub component: String,
    pub symptom: String,
    /// `active`, `suppressed` (inhibited/silenced) or `unprocessed`.
    pub state: String,
    pub json: serde_json::Value,
}

impl AlertView {
    /// Whether the alert blames a fabric component (not a probe pair, an
    /// exporter or the localizer).
    pub fn is_component(&self) -> bool {
        self.kind
            .parse::<skeletonhunter_common::Kind>()
            .is_ok_and(|k| k != skeletonhunter_common::Kind::Tenant)
    }

    /// Whether the alert is about the monitoring itself (an exporter or the
    /// localizer down or stale).
    pub fn is_monitoring(&self) -> bool {
        self.kind == "exporter" || self.kind == "localizer"
    }

    /// `None` for alerts without `kind`/`component` labels (pair or
    /// exporter alerts) and for resolved ones.
    pub fn from_json(a: &serde_json::Value) -> Option<AlertView> {
        let l = &a["labels"];
        let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
        let (kind, component) = (s(&l["kind"]), s(&l["component"]));
        if kind.is_empty() || component.is_empty() {
            return None;
        }
        if let Some(ends) = a["endsAt"].as_str() {
            if is_past_rfc3339(ends) {
                return None;
            }
        }
        Some(AlertView {
            alertname: s(&l["alertname"]),
            kind,
            component,
            symptom: s(&l["symptom"]),
            state: s(&a["status"]["state"]),
            json: a.clone(),
        })
    }
}

/// Whether an RFC 3339 UTC timestamp (as Alertmanager writes them) is in the
/// past. Unparsable timestamps count as not past.
fn is_past_rfc3339(ts: &str) -> bool {
    // "2026-11-21T19:30:31.123Z": compare as seconds since the epoch.
    let parse = || -> Option<i64> {
        let (date, time) = ts.split_once('T')?;
        let mut d = date.split('-').map(|x| x.parse::<i64>());
        let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
        let time = time.trim_end_matches('Z');
        let time = time.split(['+']).next()?;
        let mut t = time.split(':');
        let (hh, mm) = (
            t.next()?.parse::<i64>().ok()?,
            t.next()?.parse::<i64>().ok()?,
        );
        let ss: f64 = t.next()?.parse().ok()?;
        // Days from civil (Howard Hinnant's algorithm).
        let y2 = if m <= 2 { y - 1 } else { y };
        let era = y2.div_euclid(400);
        let yoe = y2 - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146097 + doe - 719468;
        Some(days * 86400 + hh * 3600 + mm * 60 + ss as i64)
    };
    let Some(t) = parse() else { return false };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    t < now
}
