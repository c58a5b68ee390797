//! Traffic discovery's loop: run the skeleton rule over what the source
//! (eBPF events or /proc polls) sees and publish the skeleton peers into
//! the [`PeerSet`] under [`PeerSource::Ebpf`].
//!
//! Runs on one dedicated thread: reading the ring buffer and ticking the
//! skeleton are cheap and bursty, and keeping them off the probing runtime
//! means a burst of connection events can never delay a probe.

use super::cgroup;
use super::cgroup_map::CgroupMap;
use super::peer_set::PeerSet;
use super::skeleton::{gid_to_ip, Tracker};
use super::sockdiag;
use crate::config::TrafficSettings;
use crate::model::traffic::Conn;
use crate::model::{DiscoveryEvent, Peer, PeerSource};
use crate::sys::ebpf::EbpfSource;
use crate::telemetry::Metrics;
use crate::wire::discovery::Event;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the worker reads connections from.
pub enum Source {
    /// The loaded eBPF programs.
    Ebpf(Box<EbpfSource>),
    /// Polling /proc/net/tcp{,6}.
    Poll,
}

/// The discovery loop's state.
pub struct Worker {
    settings: TrafficSettings,
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
    /// Whose `net/tcp{,6}` is read: `/proc/self`, or `/proc/thread-self`
    /// for a worker in a container's namespace.
    proc_root: PathBuf,
    /// Set to end the loop (a container's worker); `None`: run forever.
    stop: Option<Arc<AtomicBool>>,
}

impl Worker {
    /// A worker publishing into `peers`; `netns` keys TCP connections.
    pub fn new(
        settings: TrafficSettings,
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
            proc_root: PathBuf::from("/proc/self"),
            stop: None,
        }
    }

    /// Read connections through `proc_root` and end when `stop` is set.
    pub fn scoped(mut self, proc_root: PathBuf, stop: Arc<AtomicBool>) -> Worker {
        self.proc_root = proc_root;
        self.stop = Some(stop);
        self
    }

    fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn event(&self, name: DiscoveryEvent) {
        if let Some(m) = &self.metrics {
            m.discovery_event(PeerSource::Ebpf, name);
        }
    }

    /// Apply one decoded eBPF event.
    pub fn handle(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::TcpUp { conn, .. } => {
                self.event(DiscoveryEvent::TcpUp);
                if !self.tracker.up(conn, now) {
                    self.event(DiscoveryEvent::Filtered);
                }
            }
            Event::TcpDown { key, .. } => {
                self.event(DiscoveryEvent::TcpDown);
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
                self.event(DiscoveryEvent::RdmaRtr);
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
                    self.event(DiscoveryEvent::Filtered);
                }
            }
            Event::RdmaDestroy { key, .. } => {
                self.event(DiscoveryEvent::RdmaDestroy);
                self.rdma_pids.remove(&key);
                self.tracker.down(key, now);
            }
        }
    }

    /// Feed one snapshot of this namespace's established sockets: every
    /// poll of the fallback (`event` = "poll"), and once at eBPF start-up
    /// ("seed") so connections opened before the exporter started count.
    pub fn sync(&mut self, sockets: &[sockdiag::Socket], now: Instant, event: DiscoveryEvent) {
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
            self.event(DiscoveryEvent::Filtered);
        }
        self.event(event);
    }

    /// Tick the skeleton and publish when the peer list changed.
    pub fn tick(&mut self, now: Instant) {
        let ch = self.tracker.tick(now);
        for _ in 0..ch.added {
            self.event(DiscoveryEvent::PeerAdded);
        }
        for _ in 0..ch.removed {
            self.event(DiscoveryEvent::PeerRemoved);
        }
        let current = self.tracker.peers();
        let list: Vec<Peer> = current
            .iter()
            .map(|p| Peer {
                closed: p.closed,
                ..Peer::new(p.addr, PeerSource::Ebpf)
            })
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
            sockdiag::established(&self.proc_root).ok().map(|s| {
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

    /// Run the loop over `source` forever (on its own thread).
    pub fn run(mut self, source: Source) {
        self.refresh_cgroups();
        // The tracepoint only reports state changes: pick up the training
        // connections that were already open when we attached (own
        // namespace; other namespaces are learned as they connect).
        if matches!(source, Source::Ebpf(_)) && !self.settings.all_namespaces {
            match sockdiag::established(&self.proc_root) {
                Ok(s) => self.sync(&s, Instant::now(), DiscoveryEvent::Seed),
                Err(e) => tracing::warn!("traffic discovery: cannot seed from /proc: {e:#}"),
            }
        }
        let tick_every = self.tick_every();
        let mut next_tick = Instant::now() + tick_every;
        let mut next_refresh = Instant::now() + Duration::from_secs(10);
        let mut next_reconcile = Instant::now() + Duration::from_secs(60);
        let mut source = source;
        let mut next_poll = Instant::now();
        while !self.stopped() {
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
                                self.event(DiscoveryEvent::Malformed);
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
                        match sockdiag::established(&self.proc_root) {
                            Ok(s) => self.sync(&s, now, DiscoveryEvent::Poll),
                            Err(e) => {
                                self.event(DiscoveryEvent::PollError);
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
    use crate::config::TrafficConfig;

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
}
