//! Traffic discovery: pick a source (eBPF, else polling), run the skeleton
//! rule over what it sees and publish the skeleton peers into the
//! [`PeerSet`] under [`PeerSource::Ebpf`].
//!
//! Runs on one dedicated thread: reading the ring buffer and ticking the
//! skeleton are cheap and bursty, and keeping them off the probing runtime
//! means a burst of connection events can never delay a probe.

use super::cgroup;
use super::ebpf::{self, EbpfSource, Event};
use super::skeleton::{gid_to_ip, Cidr, Conn, Filter, PortRange, Timing, Tracker};
use super::sockdiag;
use crate::config::parse_duration;
use crate::metrics::Metrics;
use crate::peers::{Peer, PeerSet, PeerSource};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which source to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// eBPF when it loads, else polling (the log says which and why).
    #[default]
    Auto,
    /// eBPF or fail at startup.
    Ebpf,
    /// Always poll /proc/net/tcp{,6}.
    Poll,
    /// No traffic discovery.
    Off,
}

/// A configured container cgroup and who it is.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CgroupEntry {
    /// cgroup v2 directory, absolute or relative to the cgroup2 mount.
    pub path: String,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub tenant: Option<String>,
}

/// The `traffic` section of the discovery configuration (see
/// docs/discovery.md). Durations are strings like `500ms`, `10s`, `5m` or
/// plain numbers of seconds.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficConfig {
    pub mode: Mode,
    pub window: DurationStr,
    pub min_windows: u32,
    pub long_lived: DurationStr,
    pub ttl: DurationStr,
    /// How often the polling fallback reads /proc/net/tcp{,6}.
    pub poll_interval: DurationStr,
    /// Watch sockets of every network namespace (a host-network exporter
    /// serving all pods); default: only the exporter's own namespace.
    pub all_namespaces: bool,
    /// libibverbs to attach the RDMA uprobes to; default: the system's.
    pub libibverbs: Option<PathBuf>,
    pub include_cidrs: Vec<String>,
    pub exclude_cidrs: Vec<String>,
    pub ports: Vec<String>,
    pub exclude_ports: Vec<String>,
    pub cgroups: Vec<CgroupEntry>,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        let t = Timing::default();
        TrafficConfig {
            mode: Mode::Auto,
            window: DurationStr(t.window),
            min_windows: t.min_windows,
            long_lived: DurationStr(t.long_lived),
            ttl: DurationStr(t.ttl),
            poll_interval: DurationStr(Duration::from_secs(2)),
            all_namespaces: false,
            libibverbs: None,
            include_cidrs: Vec::new(),
            exclude_cidrs: Vec::new(),
            ports: Vec::new(),
            exclude_ports: Vec::new(),
            cgroups: Vec::new(),
        }
    }
}

/// A duration read from `"250ms"`, `"10s"`, `"5m"`, `"1h"` or a number of
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationStr(pub Duration);

impl<'de> Deserialize<'de> for DurationStr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        let s = match Raw::deserialize(d)? {
            Raw::N(n) => n.to_string(),
            Raw::S(s) => s,
        };
        parse_duration(&s)
            .map(DurationStr)
            .map_err(serde::de::Error::custom)
    }
}

/// The `peers.ebpf` key: `false` turns traffic discovery off, `true` (or
/// leaving it out) keeps the defaults, a mapping is a [`TrafficConfig`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EbpfSection(pub TrafficConfig);

impl<'de> Deserialize<'de> for EbpfSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match yaml_serde::Value::deserialize(d)? {
            yaml_serde::Value::Bool(true) | yaml_serde::Value::Null => Ok(EbpfSection::default()),
            yaml_serde::Value::Bool(false) => Ok(EbpfSection(TrafficConfig {
                mode: Mode::Off,
                ..TrafficConfig::default()
            })),
            v => TrafficConfig::deserialize(v)
                .map(EbpfSection)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The validated form of [`TrafficConfig`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub timing: Timing,
    pub filter: Filter,
    pub poll_interval: Duration,
    pub all_namespaces: bool,
    pub libibverbs: Option<PathBuf>,
    pub cgroups: Vec<CgroupEntry>,
}

impl TrafficConfig {
    /// Validate, naming the offending key under `prefix` (e.g.
    /// `discovery.traffic`). `own_ports` are the exporter's own TCP ports
    /// (metrics, dial responder): connections on them are probes and
    /// scrapes, never training traffic.
    pub fn build(&self, prefix: &str, own_ports: &[u16]) -> Result<Settings> {
        let timing = Timing {
            window: self.window.0,
            min_windows: self.min_windows,
            long_lived: self.long_lived.0,
            ttl: self.ttl.0,
        };
        timing
            .validate()
            .map_err(|e| anyhow::anyhow!("{prefix}: {e}"))?;
        if self.poll_interval.0.is_zero() {
            bail!("{prefix}.poll_interval: must be > 0");
        }
        fn list<T: std::str::FromStr<Err = String>>(
            prefix: &str,
            key: &str,
            v: &[String],
        ) -> Result<Vec<T>> {
            v.iter()
                .enumerate()
                .map(|(i, s)| {
                    s.parse::<T>()
                        .map_err(|e| anyhow::anyhow!("{prefix}.{key}[{i}]: {e}"))
                })
                .collect()
        }
        let mut exclude_ports: Vec<PortRange> = list(prefix, "exclude_ports", &self.exclude_ports)?;
        exclude_ports.extend(
            own_ports
                .iter()
                .filter(|&&p| p != 0)
                .map(|&p| PortRange { lo: p, hi: p }),
        );
        let filter = Filter {
            include_cidrs: list::<Cidr>(prefix, "include_cidrs", &self.include_cidrs)?,
            exclude_cidrs: list::<Cidr>(prefix, "exclude_cidrs", &self.exclude_cidrs)?,
            ports: list(prefix, "ports", &self.ports)?,
            exclude_ports,
            cgroups: HashSet::new(),
        };
        for (i, c) in self.cgroups.iter().enumerate() {
            if c.path.trim().is_empty() {
                bail!("{prefix}.cgroups[{i}].path: must not be empty");
            }
        }
        Ok(Settings {
            mode: self.mode,
            timing,
            filter,
            poll_interval: self.poll_interval.0,
            all_namespaces: self.all_namespaces,
            libibverbs: self.libibverbs.clone(),
            cgroups: self.cgroups.clone(),
        })
    }
}

/// The configured cgroups resolved to ids (whole subtrees), and each id's
/// owner for the log.
struct CgroupMap {
    root: Option<PathBuf>,
    entries: Vec<CgroupEntry>,
    owner: HashMap<u64, usize>,
}

impl CgroupMap {
    fn new(entries: Vec<CgroupEntry>) -> CgroupMap {
        CgroupMap {
            root: cgroup::cgroup2_root(),
            entries,
            owner: HashMap::new(),
        }
    }

    /// Re-read the subtrees (containers come and go). A cgroup that does not
    /// exist (yet) matches nothing.
    fn refresh(&mut self) -> HashSet<u64> {
        self.owner.clear();
        for (i, e) in self.entries.iter().enumerate() {
            match cgroup::resolve_dir(&e.path, self.root.as_deref())
                .and_then(|d| cgroup::subtree_ids(&d))
            {
                Ok(ids) => {
                    for id in ids {
                        self.owner.entry(id).or_insert(i);
                    }
                }
                Err(err) => tracing::debug!("traffic discovery: {err:#}"),
            }
        }
        let mut set: HashSet<u64> = self.owner.keys().copied().collect();
        if !self.entries.is_empty() && set.is_empty() {
            // Keep the filter restrictive: an id no socket has.
            set.insert(u64::MAX);
        }
        set
    }

    fn describe(&self, id: u64) -> String {
        match self.owner.get(&id).map(|&i| &self.entries[i]) {
            Some(e) => format!(
                "cgroup {id} ({}, node={}, tenant={})",
                e.path,
                e.node.as_deref().unwrap_or("-"),
                e.tenant.as_deref().unwrap_or("-")
            ),
            None => format!("cgroup {id}"),
        }
    }
}

enum Source {
    Ebpf(Box<EbpfSource>),
    Poll,
}

/// Which source ended up active, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    pub source: &'static str,
    pub reason: String,
}

/// Select the source (eBPF first in `auto` mode) and start discovery on its
/// own thread, publishing into `peers`. Returns `None` when mode is `off`.
pub fn spawn(
    settings: Settings,
    peers: PeerSet,
    metrics: Option<Arc<Metrics>>,
) -> Result<Option<Active>> {
    let mut settings = settings;
    // Connections to our own addresses are local, never skeleton peers.
    for ip in crate::sock::local_addresses() {
        if let Ok(c) = ip.to_string().parse::<Cidr>() {
            settings.filter.exclude_cidrs.push(c);
        }
    }
    let netns = ebpf::own_netns().unwrap_or(0);
    let (source, active) = match settings.mode {
        Mode::Off => {
            tracing::info!("traffic discovery: off (discovery.ebpf is false or mode: off)");
            return Ok(None);
        }
        Mode::Poll => (
            Source::Poll,
            Active {
                source: "poll",
                reason: "mode=poll in the configuration".into(),
            },
        ),
        Mode::Ebpf | Mode::Auto => match load_ebpf(&settings, netns) {
            Ok(src) => {
                let reason = src.notes.join("; ");
                (
                    Source::Ebpf(Box::new(src)),
                    Active {
                        source: "ebpf",
                        reason,
                    },
                )
            }
            Err(e) if settings.mode == Mode::Auto => (
                Source::Poll,
                Active {
                    source: "poll",
                    reason: format!("eBPF unavailable: {e:#}"),
                },
            ),
            Err(e) => return Err(e.context("traffic discovery: mode=ebpf")),
        },
    };
    if active.source == "poll" && settings.all_namespaces {
        tracing::warn!(
            "traffic discovery: all_namespaces needs eBPF; polling sees this namespace only"
        );
    }
    tracing::info!(
        "traffic discovery: source={} ({})",
        active.source,
        active.reason
    );
    let worker = Worker::new(settings, peers, metrics, netns);
    std::thread::Builder::new()
        .name("discovery".into())
        .spawn(move || worker.run(source))
        .context("spawn the discovery thread")?;
    Ok(Some(active))
}

fn load_ebpf(settings: &Settings, netns: u32) -> Result<EbpfSource> {
    let filter_ns = if settings.all_namespaces { 0 } else { netns };
    let mut src = EbpfSource::load(filter_ns, true)?;
    let lib = settings.libibverbs.clone().or_else(ebpf::system_libibverbs);
    match lib {
        Some(lib) if lib.exists() => {
            if let Err(e) = src.attach_verbs(&lib) {
                src.notes.push(format!(
                    "RDMA uprobes not attached to {}: {e:#}",
                    lib.display()
                ));
            }
        }
        Some(lib) => src.notes.push(format!(
            "{} does not exist: RDMA peers not discovered",
            lib.display()
        )),
        None => src
            .notes
            .push("no libibverbs.so.1 on this host: RDMA peers not discovered".into()),
    }
    Ok(src)
}

/// The discovery loop's state.
pub struct Worker {
    settings: Settings,
    tracker: Tracker,
    peers: PeerSet,
    metrics: Option<Arc<Metrics>>,
    netns: u32,
    cgroups: CgroupMap,
    /// Open RDMA QPs and their process, to drop QPs of exited processes.
    rdma_pids: HashMap<u64, u32>,
    own_pid: u32,
    dropped_seen: u64,
    published: Vec<Peer>,
}

impl Worker {
    pub fn new(
        settings: Settings,
        peers: PeerSet,
        metrics: Option<Arc<Metrics>>,
        netns: u32,
    ) -> Worker {
        let tracker = Tracker::new(
            settings.timing.clone(),
            settings.filter.clone(),
            Instant::now(),
        );
        let cgroups = CgroupMap::new(settings.cgroups.clone());
        Worker {
            settings,
            tracker,
            peers,
            metrics,
            netns,
            cgroups,
            rdma_pids: HashMap::new(),
            own_pid: std::process::id(),
            dropped_seen: 0,
            published: Vec::new(),
        }
    }

    fn event(&self, name: &'static str) {
        if let Some(m) = &self.metrics {
            m.discovery_event(PeerSource::Ebpf, name);
        }
    }

    /// Apply one decoded eBPF event.
    pub fn handle(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::TcpUp { conn, .. } => {
                self.event("tcp_up");
                if !self.tracker.up(conn, now) {
                    self.event("filtered");
                }
            }
            Event::TcpDown { key, .. } => {
                self.event("tcp_down");
                self.tracker.down(key, now);
            }
            Event::RdmaRtr {
                key,
                pid,
                cgroup,
                gid,
                remote_qpn,
                ..
            } => {
                self.event("rdma_rtr");
                // Our own RDMA prober's UD QPs are not training traffic.
                if pid == self.own_pid {
                    return;
                }
                let Some(remote) = gid_to_ip(gid) else {
                    tracing::debug!("RDMA QP to qpn {remote_qpn:#x}: GID has no IP address");
                    return;
                };
                let conn = Conn {
                    key,
                    remote,
                    local_port: 0,
                    remote_port: 0,
                    cgroup,
                };
                if self.tracker.up(conn, now) {
                    self.rdma_pids.insert(key, pid);
                } else {
                    self.event("filtered");
                }
            }
            Event::RdmaDestroy { key, .. } => {
                self.event("rdma_destroy");
                self.rdma_pids.remove(&key);
                self.tracker.down(key, now);
            }
        }
    }

    /// Feed one snapshot of this namespace's established sockets: every
    /// poll of the fallback (`event` = "poll"), and once at eBPF start-up
    /// ("seed") so connections opened before the exporter started count.
    pub fn sync(&mut self, sockets: &[sockdiag::Socket], now: Instant, event: &'static str) {
        let cg = match (&self.cgroups.root, self.tracker.filters_cgroups()) {
            (Some(root), true) => {
                let inodes: Vec<u64> = sockets.iter().map(|s| s.inode).collect();
                cgroup::socket_cgroups(&inodes, root)
            }
            _ => HashMap::new(),
        };
        let conns = sockdiag::to_conns(sockets, self.netns, &cg);
        let before = self.tracker.filtered();
        self.tracker.sync(&conns, now);
        for _ in before..self.tracker.filtered() {
            self.event("filtered");
        }
        self.event(event);
    }

    /// Tick the skeleton and publish when the peer list changed.
    pub fn tick(&mut self, now: Instant) {
        let ch = self.tracker.tick(now);
        for _ in 0..ch.added {
            self.event("peer_added");
        }
        for _ in 0..ch.removed {
            self.event("peer_removed");
        }
        let current = self.tracker.peers();
        let list: Vec<Peer> = current
            .iter()
            .map(|p| Peer::new(p.addr, PeerSource::Ebpf))
            .collect();
        if list != self.published {
            for p in &current {
                if !self.published.iter().any(|q| q.addr == p.addr) {
                    tracing::info!(
                        "traffic discovery: skeleton peer {} ({})",
                        p.addr,
                        self.cgroups.describe(p.cgroup)
                    );
                }
            }
            for q in &self.published {
                if !current.iter().any(|p| p.addr == q.addr) {
                    tracing::info!("traffic discovery: peer {} expired (idle past ttl)", q.addr);
                }
            }
            tracing::debug!(
                open = self.tracker.open_connections(),
                remotes = self.tracker.remotes(),
                peers = list.len(),
                "traffic discovery: skeleton changed"
            );
            self.peers.replace(PeerSource::Ebpf, list.clone());
            self.published = list;
        }
    }

    fn refresh_cgroups(&mut self) {
        if !self.settings.cgroups.is_empty() {
            let ids = self.cgroups.refresh();
            self.tracker.set_cgroups(ids);
        }
    }

    /// Drop RDMA QPs of processes that exited without destroying them and,
    /// after lost events, TCP connections this namespace no longer has.
    fn reconcile(&mut self, tcp_snapshot: bool) {
        let mut dead = HashSet::new();
        self.rdma_pids.retain(|key, pid| {
            let alive = Path::new(&format!("/proc/{pid}")).exists();
            if !alive {
                dead.insert(*key);
            }
            alive
        });
        let snapshot: Option<HashSet<u64>> = if tcp_snapshot && !self.settings.all_namespaces {
            sockdiag::established(Path::new("/proc/self"))
                .ok()
                .map(|s| {
                    sockdiag::to_conns(&s, self.netns, &HashMap::new())
                        .into_iter()
                        .map(|c| c.key)
                        .collect()
                })
        } else {
            None
        };
        let rdma = &self.rdma_pids;
        self.tracker.retain(|k| {
            if dead.contains(&k) {
                return false;
            }
            rdma.contains_key(&k) || snapshot.as_ref().is_none_or(|s| s.contains(&k))
        });
    }

    fn tick_every(&self) -> Duration {
        (self.settings.timing.window / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    fn run(mut self, source: Source) {
        self.refresh_cgroups();
        // The tracepoint only reports state changes: pick up the training
        // connections that were already open when we attached (own
        // namespace; other namespaces are learned as they connect).
        if matches!(source, Source::Ebpf(_)) && !self.settings.all_namespaces {
            match sockdiag::established(Path::new("/proc/self")) {
                Ok(s) => self.sync(&s, Instant::now(), "seed"),
                Err(e) => tracing::warn!("traffic discovery: cannot seed from /proc: {e:#}"),
            }
        }
        let tick_every = self.tick_every();
        let mut next_tick = Instant::now() + tick_every;
        let mut next_refresh = Instant::now() + Duration::from_secs(10);
        let mut next_reconcile = Instant::now() + Duration::from_secs(60);
        let mut source = source;
        let mut next_poll = Instant::now();
        loop {
            let now = Instant::now();
            match &mut source {
                Source::Ebpf(src) => {
                    src.wait(next_tick.saturating_duration_since(now));
                    let mut evs = Vec::new();
                    src.drain(|e| evs.push(e));
                    let now = Instant::now();
                    for e in evs {
                        match e {
                            Ok(ev) => self.handle(ev, now),
                            Err(e) => {
                                self.event("malformed");
                                tracing::debug!("traffic discovery: bad event: {e:#}");
                            }
                        }
                    }
                    let dropped = src.dropped();
                    if dropped > self.dropped_seen {
                        if let Some(m) = &self.metrics {
                            m.dropped_event(PeerSource::Ebpf, dropped - self.dropped_seen);
                        }
                        tracing::warn!(
                            "traffic discovery: {} events lost (ring buffer full); reconciling",
                            dropped - self.dropped_seen
                        );
                        self.dropped_seen = dropped;
                        self.reconcile(true);
                    }
                }
                Source::Poll => {
                    if now >= next_poll {
                        match sockdiag::established(Path::new("/proc/self")) {
                            Ok(s) => self.sync(&s, now, "poll"),
                            Err(e) => {
                                self.event("poll_error");
                                tracing::warn!("traffic discovery: {e:#}");
                            }
                        }
                        next_poll = now + self.settings.poll_interval;
                    }
                    let wake = next_poll.min(next_tick);
                    std::thread::sleep(wake.saturating_duration_since(Instant::now()));
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                self.tick(now);
                next_tick = now + tick_every;
            }
            if now >= next_refresh {
                self.refresh_cgroups();
                next_refresh = now + Duration::from_secs(10);
            }
            if now >= next_reconcile {
                self.reconcile(matches!(source, Source::Ebpf(_)));
                next_reconcile = now + Duration::from_secs(60);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(key: u64, remote: &str) -> Conn {
        Conn {
            key,
            remote: remote.parse().unwrap(),
            local_port: 40000,
            remote_port: 29500,
            cgroup: 0,
        }
    }

    #[test]
    fn worker_publishes_skeleton_into_peer_set_and_expires_it() {
        let cfg: TrafficConfig =
            yaml_serde::from_str("window: 1s\nlong_lived: 2s\nttl: 3s\n").unwrap();
        let settings = cfg.build("discovery.ebpf", &[9465]).unwrap();
        let peers = PeerSet::new(None);
        let mut w = Worker::new(settings, peers.clone(), None, 1);
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let up = |c: Conn| Event::TcpUp {
            conn: c,
            local: "198.18.0.1".parse().unwrap(),
            netns: 1,
            pid: 0,
        };
        w.handle(up(conn(1, "198.18.0.2")), at(0.1));
        w.handle(up(conn(2, "198.18.0.3")), at(0.1));
        w.handle(up(conn(3, "198.18.0.4")), at(0.2));
        w.handle(Event::TcpDown { key: 3, netns: 1 }, at(0.3));
        // A scrape of our own metrics port never counts.
        w.handle(
            up(Conn {
                local_port: 9465,
                ..conn(4, "198.18.0.5")
            }),
            at(0.3),
        );
        // RDMA: a QP to a RoCE v2 peer, and one of our own process (ignored).
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[198, 18, 0, 9]);
        let rtr = |key, pid| Event::RdmaRtr {
            key,
            pid,
            cgroup: 0,
            remote_qpn: 1,
            local_qpn: 2,
            dlid: 0,
            gid,
        };
        w.handle(rtr(10, 1), at(0.4));
        w.handle(rtr(11, std::process::id()), at(0.4));
        let addrs = |p: &PeerSet| -> Vec<String> {
            p.snapshot().iter().map(|p| p.addr.to_string()).collect()
        };
        w.tick(at(1.0));
        assert!(addrs(&peers).is_empty(), "nothing is persistent yet");
        w.tick(at(2.5));
        assert_eq!(addrs(&peers), ["198.18.0.2", "198.18.0.3", "198.18.0.9"]);
        assert!(peers
            .snapshot()
            .iter()
            .all(|p| p.source == PeerSource::Ebpf));
        // Traffic stops: everything expires after the TTL.
        w.handle(Event::TcpDown { key: 1, netns: 1 }, at(3.0));
        w.handle(Event::TcpDown { key: 2, netns: 1 }, at(3.0));
        w.handle(Event::RdmaDestroy { key: 10, pid: 1 }, at(3.0));
        w.tick(at(5.9));
        assert_eq!(addrs(&peers).len(), 3);
        w.tick(at(6.1));
        assert!(addrs(&peers).is_empty());
    }

    #[test]
    fn ebpf_section_accepts_bool_or_mapping() {
        let off: EbpfSection = yaml_serde::from_str("false").unwrap();
        assert_eq!(off.0.mode, Mode::Off);
        let on: EbpfSection = yaml_serde::from_str("true").unwrap();
        assert_eq!(on.0, TrafficConfig::default());
        let m: EbpfSection = yaml_serde::from_str("mode: poll\nttl: 90s\n").unwrap();
        assert_eq!((m.0.mode, m.0.ttl.0), (Mode::Poll, Duration::from_secs(90)));
        let e = yaml_serde::from_str::<EbpfSection>("mode: sometimes\n").unwrap_err();
        assert!(e.to_string().contains("sometimes"), "{e}");
        let e = yaml_serde::from_str::<EbpfSection>("ttl: 3 days\n").unwrap_err();
        assert!(e.to_string().contains("unknown unit"), "{e}");
    }

    #[test]
    fn config_builds_and_names_bad_keys() {
        let c: TrafficConfig = yaml_serde::from_str(
            "mode: poll\nwindow: 1s\nttl: 4s\nlong_lived: 2s\ninclude_cidrs: [198.18.0.0/15]\nports: ['29500-29600']\n",
        )
        .unwrap();
        let s = c.build("discovery.traffic", &[9100]).unwrap();
        assert_eq!(s.mode, Mode::Poll);
        assert_eq!(s.timing.window, Duration::from_secs(1));
        assert!(s
            .filter
            .exclude_ports
            .contains(&PortRange { lo: 9100, hi: 9100 }));
        let bad = TrafficConfig {
            include_cidrs: vec!["198.18.0.0/15".into(), "nope".into()],
            ..TrafficConfig::default()
        };
        let e = bad.build("discovery.traffic", &[]).unwrap_err().to_string();
        assert!(e.starts_with("discovery.traffic.include_cidrs[1]:"), "{e}");
        let e = yaml_serde::from_str::<TrafficConfig>("windw: 1s\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("windw"), "{e}");
        let bad = TrafficConfig {
            min_windows: 1,
            ..TrafficConfig::default()
        };
        assert!(bad
            .build("t", &[])
            .unwrap_err()
            .to_string()
            .contains("min_windows"));
    }
}
