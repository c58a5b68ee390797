//! From connections to a traffic skeleton: pure logic, no I/O.
//!
//! Training traffic is sparse and regular: each rank keeps long-lived
//! connections (or reconnects regularly) to a few ring/tree neighbours.
//! Health checks, scrapes and one-off RPCs are short and irregular. So a
//! remote endpoint becomes a *skeleton peer* only when the traffic to it is
//! persistent:
//!
//! * one connection to it stays established for `long_lived`, or
//! * it is seen (a connection established, open, or closed) in at least
//!   `min_windows` distinct windows of `window` length.
//!
//! A single brief connection touches at most two windows (the one it opened
//! in and the next, if it straddles a boundary), so `min_windows >= 3` means a
//! one-off connection never qualifies. A remote with no open connection is
//! forgotten `ttl` after it was last seen, peer or not.
//!
//! Both discovery sources feed this: the eBPF source with state-change
//! events ([`Tracker::up`]/[`Tracker::down`]), the polling fallback with
//! snapshots of established sockets ([`Tracker::sync`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// One established connection (or RDMA queue pair) as a source sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conn {
    /// Identity while it lives: the kernel socket address (eBPF), a hash of
    /// the 4-tuple (polling), or the QP pointer and pid (RDMA).
    pub key: u64,
    pub remote: IpAddr,
    pub local_port: u16,
    pub remote_port: u16,
    /// cgroup v2 id of the socket (0 = unknown).
    pub cgroup: u64,
}

/// Timing of the skeleton rule. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub window: Duration,
    pub min_windows: u32,
    pub long_lived: Duration,
    pub ttl: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            window: Duration::from_secs(10),
            min_windows: 3,
            long_lived: Duration::from_secs(30),
            ttl: Duration::from_secs(300),
        }
    }
}

impl Timing {
    /// Reject settings under which the rule would be meaningless.
    pub fn validate(&self) -> Result<(), String> {
        if self.window.is_zero() {
            return Err("window must be > 0".into());
        }
        if self.min_windows < 3 {
            return Err(format!(
                "min_windows is {}; it must be >= 3, since one brief connection can touch two windows",
                self.min_windows
            ));
        }
        if self.long_lived.is_zero() {
            return Err("long_lived must be > 0".into());
        }
        if self.ttl < self.window {
            return Err("ttl must be at least one window".into());
        }
        Ok(())
    }
}

/// An IPv4 or IPv6 prefix, e.g. `198.18.0.0/15` or `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.len)
                };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.len)
                };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a CIDR: `{a}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("`{s}` is not a CIDR: prefix length must be 0..={max}"))?,
        };
        Ok(Cidr {
            addr: canonical(addr),
            len,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// A port or an inclusive port range, e.g. `29500` or `40000-40999`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl std::str::FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<PortRange, String> {
        let port = |x: &str| {
            x.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("`{s}` is not a port or range: `{x}` is not in 1..=65535"))
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => {
                let p = port(s)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(format!("`{s}` is not a port range: {lo} > {hi}"));
        }
        Ok(PortRange { lo, hi })
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, what dual-stack sockets
/// report) are the IPv4 peer: canonicalize so both spellings merge.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Which connections may count towards the skeleton. Keeps management and
/// monitoring traffic (scrapes of our own /metrics, SSH, DNS) out.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// When non-empty, only remotes inside one of these prefixes count.
    pub include_cidrs: Vec<Cidr>,
    pub exclude_cidrs: Vec<Cidr>,
    /// When non-empty, only connections whose local or remote port is in one
    /// of these ranges count (e.g. NCCL's socket ports).
    pub ports: Vec<PortRange>,
    /// Connections with a local or remote port here never count (our own
    /// metrics and responder ports are added by the exporter).
    pub exclude_ports: Vec<PortRange>,
    /// When non-empty, only sockets of these cgroup ids count.
    pub cgroups: HashSet<u64>,
}

/// Why a connection was left out, for the debug log and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    Address,
    Cidr,
    Port,
    Cgroup,
}

impl Filter {
    pub fn check(&self, c: &Conn) -> Result<(), Rejected> {
        let ip = canonical(c.remote);
        if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() || is_link_local(ip) {
            return Err(Rejected::Address);
        }
        if self.exclude_cidrs.iter().any(|n| n.contains(ip)) {
            return Err(Rejected::Cidr);
        }
        if !self.include_cidrs.is_empty() && !self.include_cidrs.iter().any(|n| n.contains(ip)) {
            return Err(Rejected::Cidr);
        }
        // RDMA queue pairs have no ports (both 0): port filters do not apply.
        let has_ports = c.local_port != 0 || c.remote_port != 0;
        let either = |r: &PortRange| r.contains(c.local_port) || r.contains(c.remote_port);
        if has_ports && self.exclude_ports.iter().any(either) {
            return Err(Rejected::Port);
        }
        if has_ports && !self.ports.is_empty() && !self.ports.iter().any(either) {
            return Err(Rejected::Port);
        }
        if !self.cgroups.is_empty() && !self.cgroups.contains(&c.cgroup) {
            return Err(Rejected::Cgroup);
        }
        Ok(())
    }
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// A discovered skeleton peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkeletonPeer {
    pub addr: IpAddr,
    /// cgroup id of the most recent connection to it (0 = unknown): which of
    /// this host's containers the peer belongs to.
    pub cgroup: u64,
}

#[derive(Debug)]
struct Open {
    remote: IpAddr,
    since: Instant,
}

#[derive(Debug)]
struct Remote {
    /// Distinct window indices it was seen in, oldest first, at most
    /// `min_windows` of them.
    windows: VecDeque<u64>,
    last_seen: Instant,
    open: u32,
    peer: bool,
    cgroup: u64,
}

/// What one call changed, for metrics and logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    pub added: usize,
    pub removed: usize,
}

/// The skeleton state of one exporter.
#[derive(Debug)]
pub struct Tracker {
    timing: Timing,
    filter: Filter,
    origin: Instant,
    conns: HashMap<u64, Open>,
    remotes: HashMap<IpAddr, Remote>,
    filtered: u64,
}

impl Tracker {
    pub fn new(timing: Timing, filter: Filter, origin: Instant) -> Tracker {
        Tracker {
            timing,
            filter,
            origin,
            conns: HashMap::new(),
            remotes: HashMap::new(),
            filtered: 0,
        }
    }

    fn window_of(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.origin).as_nanos() / self.timing.window.as_nanos())
            as u64
    }

    fn mark(&mut self, remote: IpAddr, cgroup: u64, now: Instant) {
        let w = self.window_of(now);
        let max = self.timing.min_windows as usize;
        let r = self.remotes.entry(remote).or_insert_with(|| Remote {
            windows: VecDeque::with_capacity(max),
            last_seen: now,
            open: 0,
            peer: false,
            cgroup,
        });
        if r.windows.back() != Some(&w) {
            if r.windows.len() == max {
                r.windows.pop_front();
            }
            r.windows.push_back(w);
        }
        if now > r.last_seen {
            r.last_seen = now;
        }
        if cgroup != 0 {
            r.cgroup = cgroup;
        }
    }

    /// A connection reached ESTABLISHED. Returns false when the filter
    /// rejected it (it is then ignored for good, down event included).
    pub fn up(&mut self, c: Conn, now: Instant) -> bool {
        if self.filter.check(&c).is_err() {
            self.filtered += 1;
            return false;
        }
        let remote = canonical(c.remote);
        if let Some(old) = self.conns.insert(c.key, Open { remote, since: now }) {
            // The same key again without a down (a lost event): the old
            // connection is gone.
            self.release(old.remote);
        }
        self.mark(remote, c.cgroup, now);
        if let Some(r) = self.remotes.get_mut(&remote) {
            r.open += 1;
        }
        true
    }

    fn release(&mut self, remote: IpAddr) {
        if let Some(r) = self.remotes.get_mut(&remote) {
            r.open = r.open.saturating_sub(1);
        }
    }

    /// A connection left ESTABLISHED (or a QP was destroyed). Unknown keys
    /// (filtered, or opened before we started) are ignored.
    pub fn down(&mut self, key: u64, now: Instant) {
        if let Some(old) = self.conns.remove(&key) {
            self.release(old.remote);
            self.mark(old.remote, 0, now);
        }
    }

    /// Replace the open connections with a snapshot (the polling source, and
    /// the eBPF source's periodic reconciliation after lost events): new keys
    /// are `up`, missing keys are `down`.
    pub fn sync(&mut self, current: &[Conn], now: Instant) {
        let keys: HashSet<u64> = current.iter().map(|c| c.key).collect();
        let gone: Vec<u64> = self
            .conns
            .keys()
            .filter(|k| !keys.contains(k))
            .copied()
            .collect();
        for k in gone {
            self.down(k, now);
        }
        for c in current {
            if !self.conns.contains_key(&c.key) {
                self.up(*c, now);
            }
        }
    }

    /// Drop connections for which `alive` is false without marking their
    /// remote (e.g. RDMA QPs of processes that exited without destroying them).
    pub fn retain(&mut self, mut alive: impl FnMut(u64) -> bool) {
        let dead: Vec<u64> = self.conns.keys().filter(|k| !alive(**k)).copied().collect();
        for k in dead {
            if let Some(old) = self.conns.remove(&k) {
                self.release(old.remote);
            }
        }
    }

    /// Advance time: open connections mark the current window, persistent
    /// remotes become peers, idle remotes expire. Call at least once per
    /// window.
    pub fn tick(&mut self, now: Instant) -> Changes {
        let open: Vec<(IpAddr, Instant)> =
            self.conns.values().map(|o| (o.remote, o.since)).collect();
        let mut long_lived = HashSet::new();
        for (remote, since) in open {
            self.mark(remote, 0, now);
            if now.saturating_duration_since(since) >= self.timing.long_lived {
                long_lived.insert(remote);
            }
        }
        let mut ch = Changes::default();
        let min = self.timing.min_windows as usize;
        let ttl = self.timing.ttl;
        self.remotes.retain(|addr, r| {
            if r.open == 0 && now.saturating_duration_since(r.last_seen) > ttl {
                if r.peer {
                    ch.removed += 1;
                }
                return false;
            }
            if !r.peer && (r.windows.len() >= min || long_lived.contains(addr)) {
                r.peer = true;
                ch.added += 1;
            }
            true
        });
        ch
    }

    /// The current skeleton peers, sorted by address.
    pub fn peers(&self) -> Vec<SkeletonPeer> {
        let mut v: Vec<SkeletonPeer> = self
            .remotes
            .iter()
            .filter(|(_, r)| r.peer)
            .map(|(a, r)| SkeletonPeer {
                addr: *a,
                cgroup: r.cgroup,
            })
            .collect();
        v.sort_by_key(|p| p.addr);
        v
    }

    /// Replace the cgroup filter (configured cgroups gain containers at run
    /// time, so their subtrees are re-read periodically).
    pub fn set_cgroups(&mut self, ids: HashSet<u64>) {
        self.filter.cgroups = ids;
    }

    /// Whether the filter restricts cgroups (the polling source then has to
    /// find each socket's cgroup).
    pub fn filters_cgroups(&self) -> bool {
        !self.filter.cgroups.is_empty()
    }

    /// Open connections currently tracked.
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// Remotes tracked (peers and candidates).
    pub fn remotes(&self) -> usize {
        self.remotes.len()
    }

    /// Connections the filter has rejected so far.
    pub fn filtered(&self) -> u64 {
        self.filtered
    }
}

/// The IP address in an RDMA GID, when it carries one: RoCE v2 GIDs are the
/// interface's IPv6 address or an IPv4-mapped address (`::ffff:a.b.c.d`).
/// InfiniBand GIDs (subnet prefix fe80::/64 + GUID) and the all-zero GID of a
/// non-global route carry none.
pub fn gid_to_ip(gid: [u8; 16]) -> Option<IpAddr> {
    let v6 = Ipv6Addr::from(gid);
    if v6.is_unspecified() {
        return None;
    }
    if let Some(v4) = v6.to_ipv4_mapped() {
        return (v4 != Ipv4Addr::UNSPECIFIED).then_some(IpAddr::V4(v4));
    }
    if (v6.segments()[0] & 0xffc0) == 0xfe80 {
        return None;
    }
    Some(IpAddr::V6(v6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            window: Duration::from_secs(1),
            min_windows: 3,
            long_lived: Duration::from_secs(5),
            ttl: Duration::from_secs(4),
        }
    }

    fn conn(key: u64, remote: &str) -> Conn {
        Conn {
            key,
            remote: remote.parse().unwrap(),
            local_port: 40000 + key as u16,
            remote_port: 29500,
            cgroup: 7,
        }
    }

    fn secs(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    fn addrs(t: &Tracker) -> Vec<String> {
        t.peers().iter().map(|p| p.addr.to_string()).collect()
    }

    #[test]
    fn persistent_connection_becomes_peer_brief_one_does_not() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        t.up(conn(1, "198.18.0.2"), secs(t0, 0.1));
        // A brief connection straddling a window boundary.
        t.up(conn(2, "198.18.0.4"), secs(t0, 0.95));
        t.down(2, secs(t0, 1.05));
        for i in 1..=6 {
            t.tick(secs(t0, i as f64 + 0.5));
        }
        assert_eq!(addrs(&t), vec!["198.18.0.2"]);
    }

    #[test]
    fn peer_after_min_windows_not_before() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        t.up(conn(1, "198.18.0.2"), secs(t0, 0.2));
        assert_eq!(t.tick(secs(t0, 0.9)), Changes::default());
        assert_eq!(t.tick(secs(t0, 1.9)).added, 0);
        assert_eq!(t.tick(secs(t0, 2.1)).added, 1);
        assert_eq!(t.peers()[0].cgroup, 7);
    }

    #[test]
    fn repeated_short_connections_across_windows_count() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        for (i, s) in [0.2, 1.2, 2.2].into_iter().enumerate() {
            t.up(conn(10 + i as u64, "198.18.0.3"), secs(t0, s));
            t.down(10 + i as u64, secs(t0, s + 0.01));
        }
        t.tick(secs(t0, 2.5));
        assert_eq!(addrs(&t), vec!["198.18.0.3"]);
    }

    #[test]
    fn long_lived_connection_counts_even_with_huge_windows() {
        let t0 = Instant::now();
        let mut tm = timing();
        tm.window = Duration::from_secs(3600);
        tm.ttl = Duration::from_secs(3600);
        let mut t = Tracker::new(tm, Filter::default(), t0);
        t.up(conn(1, "198.18.0.2"), t0);
        t.tick(secs(t0, 4.9));
        assert!(t.peers().is_empty());
        t.tick(secs(t0, 5.0));
        assert_eq!(addrs(&t), vec!["198.18.0.2"]);
    }

    #[test]
    fn idle_peer_expires_after_ttl_but_not_while_open() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        t.up(conn(1, "198.18.0.2"), t0);
        for i in 1..=20 {
            t.tick(secs(t0, i as f64));
        }
        assert_eq!(t.peers().len(), 1, "open connection keeps the peer");
        t.down(1, secs(t0, 20.5));
        assert_eq!(t.tick(secs(t0, 24.4)).removed, 0);
        assert_eq!(t.tick(secs(t0, 24.6)).removed, 1);
        assert!(t.peers().is_empty());
        assert_eq!(t.remotes(), 0);
    }

    #[test]
    fn sync_diffs_snapshots() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        let a = conn(1, "198.18.0.2");
        let b = conn(2, "198.18.0.3");
        t.sync(&[a, b], t0);
        assert_eq!(t.open_connections(), 2);
        t.sync(&[a], secs(t0, 1.0));
        assert_eq!(t.open_connections(), 1);
        for i in 1..=3 {
            t.sync(&[a], secs(t0, i as f64));
            t.tick(secs(t0, i as f64));
        }
        assert_eq!(addrs(&t), vec!["198.18.0.2"]);
    }

    #[test]
    fn lost_down_event_does_not_leak_open_count() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        t.up(conn(1, "198.18.0.2"), t0);
        t.up(conn(1, "198.18.0.3"), secs(t0, 0.1)); // same key reused
        t.down(1, secs(t0, 0.2));
        t.tick(secs(t0, 10.0));
        assert_eq!(t.remotes(), 0, "both remotes idle past the TTL");
    }

    #[test]
    fn retain_drops_dead_connections() {
        let t0 = Instant::now();
        let mut t = Tracker::new(timing(), Filter::default(), t0);
        t.up(conn(1, "198.18.0.2"), t0);
        t.retain(|k| k != 1);
        assert_eq!(t.open_connections(), 0);
        t.tick(secs(t0, 5.0));
        assert_eq!(t.remotes(), 0);
    }

    #[test]
    fn filters() {
        let f = Filter {
            include_cidrs: vec!["198.18.0.0/15".parse().unwrap()],
            exclude_cidrs: vec!["198.18.9.0/24".parse().unwrap()],
            ports: vec!["29500-29599".parse().unwrap()],
            exclude_ports: vec!["9100".parse().unwrap()],
            cgroups: [7].into_iter().collect(),
        };
        let ok = conn(1, "198.18.0.2");
        assert_eq!(f.check(&ok), Ok(()));
        assert_eq!(f.check(&conn(1, "127.0.0.1")), Err(Rejected::Address));
        assert_eq!(
            f.check(&conn(1, "::ffff:127.0.0.1")),
            Err(Rejected::Address)
        );
        assert_eq!(f.check(&conn(1, "fe80::1")), Err(Rejected::Address));
        assert_eq!(f.check(&conn(1, "10.0.0.1")), Err(Rejected::Cidr));
        assert_eq!(f.check(&conn(1, "198.18.9.1")), Err(Rejected::Cidr));
        assert_eq!(
            f.check(&Conn {
                remote_port: 80,
                ..ok
            }),
            Err(Rejected::Port)
        );
        assert_eq!(
            f.check(&Conn {
                local_port: 9100,
                ..ok
            }),
            Err(Rejected::Port)
        );
        assert_eq!(f.check(&Conn { cgroup: 8, ..ok }), Err(Rejected::Cgroup));
        // RDMA (no ports) is not subject to port filters.
        let qp = Conn {
            local_port: 0,
            remote_port: 0,
            ..ok
        };
        assert_eq!(f.check(&qp), Ok(()));
        // IPv4-mapped remotes match IPv4 prefixes.
        assert_eq!(f.check(&conn(1, "::ffff:198.18.0.2")), Ok(()));
        let mut t = Tracker::new(timing(), f, Instant::now());
        assert!(!t.up(conn(1, "10.0.0.1"), Instant::now()));
        assert_eq!(t.filtered(), 1);
    }

    #[test]
    fn parse_errors_name_the_problem() {
        assert!("198.18.0.0/33"
            .parse::<Cidr>()
            .unwrap_err()
            .contains("0..=32"));
        assert!("x/8".parse::<Cidr>().unwrap_err().contains("not an IP"));
        assert!("fd00::/8"
            .parse::<Cidr>()
            .unwrap()
            .contains("fd12::1".parse().unwrap()));
        assert!("0.0.0.0/0"
            .parse::<Cidr>()
            .unwrap()
            .contains("1.2.3.4".parse().unwrap()));
        assert!("10-5".parse::<PortRange>().unwrap_err().contains("10 > 5"));
        assert!("0".parse::<PortRange>().is_err());
        assert!("70000".parse::<PortRange>().is_err());
        assert_eq!(
            "22".parse::<PortRange>().unwrap(),
            PortRange { lo: 22, hi: 22 }
        );
    }

    #[test]
    fn timing_validation() {
        assert!(timing().validate().is_ok());
        let mut t = timing();
        t.min_windows = 2;
        assert!(t.validate().unwrap_err().contains("min_windows"));
        let mut t = timing();
        t.window = Duration::ZERO;
        assert!(t.validate().is_err());
    }

    #[test]
    fn gids() {
        let mut g = [0u8; 16];
        assert_eq!(gid_to_ip(g), None);
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[198, 18, 0, 7]);
        assert_eq!(gid_to_ip(g), Some("198.18.0.7".parse().unwrap()));
        let ib: Ipv6Addr = "fe80::248a:703:49:a5b4".parse().unwrap();
        assert_eq!(gid_to_ip(ib.octets()), None);
        let v6: Ipv6Addr = "fd00::7".parse().unwrap();
        assert_eq!(gid_to_ip(v6.octets()), Some(IpAddr::V6(v6)));
    }
}
