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

use crate::model::traffic::{canonical, Conn, Filter, Timing};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

/// A discovered skeleton peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkeletonPeer {
    /// The peer's address.
    pub addr: IpAddr,
    /// cgroup id of the most recent connection to it (0 = unknown): which of
    /// this host's containers the peer belongs to.
    pub cgroup: u64,
    /// It had a standing (long-lived) connection and has none open now.
    pub closed: bool,
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
    /// A connection to it stayed open for `long_lived`: it trains over a
    /// standing connection, so none open means it left (a remote that
    /// reconnects now and then has none open between its connections).
    standing: bool,
}

/// What one call changed, for metrics and logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    /// Remotes that became peers.
    pub added: usize,
    /// Peers that expired.
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
    /// An empty skeleton; windows count from `origin`.
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
            standing: false,
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
            if long_lived.contains(addr) {
                r.standing = true;
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
                closed: r.standing && r.open == 0,
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
    use crate::model::traffic::fixtures::{conn, timing};
    use std::time::Duration;

    fn secs(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    /// Now, and an unfiltered tracker with the test timing starting now.
    fn tracker() -> (Instant, Tracker) {
        let t0 = Instant::now();
        (t0, Tracker::new(timing(), Filter::default(), t0))
    }

    fn addrs(t: &Tracker) -> Vec<String> {
        t.peers().iter().map(|p| p.addr.to_string()).collect()
    }

    #[test]
    fn persistent_connection_becomes_peer_brief_one_does_not() {
        let (t0, mut t) = tracker();
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
        let (t0, mut t) = tracker();
        t.up(conn(1, "198.18.0.2"), secs(t0, 0.2));
        assert_eq!(t.tick(secs(t0, 0.9)), Changes::default());
        assert_eq!(t.tick(secs(t0, 1.9)).added, 0);
        assert_eq!(t.tick(secs(t0, 2.1)).added, 1);
        assert_eq!(t.peers()[0].cgroup, 7);
    }

    #[test]
    fn repeated_short_connections_across_windows_count() {
        let (t0, mut t) = tracker();
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
        let (t0, mut t) = tracker();
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
        let (t0, mut t) = tracker();
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
        let (t0, mut t) = tracker();
        t.up(conn(1, "198.18.0.2"), t0);
        t.up(conn(1, "198.18.0.3"), secs(t0, 0.1)); // same key reused
        t.down(1, secs(t0, 0.2));
        t.tick(secs(t0, 10.0));
        assert_eq!(t.remotes(), 0, "both remotes idle past the TTL");
    }

    #[test]
    fn retain_drops_dead_connections() {
        let (t0, mut t) = tracker();
        t.up(conn(1, "198.18.0.2"), t0);
        t.retain(|k| k != 1);
        assert_eq!(t.open_connections(), 0);
        t.tick(secs(t0, 5.0));
        assert_eq!(t.remotes(), 0);
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

    #[test]
    fn a_peer_whose_standing_connection_closed_is_closed_a_reconnecting_one_never() {
        let (t0, mut t) = tracker();
        let lived = timing().long_lived.as_secs_f64();
        t.up(conn(1, "198.18.0.2"), secs(t0, 0.1));
        t.tick(secs(t0, lived + 0.2));
        assert!(!t.peers()[0].closed, "open");
        t.down(1, secs(t0, lived + 0.3));
        t.tick(secs(t0, lived + 0.4));
        assert!(t.peers()[0].closed, "its standing connection closed");
        t.up(conn(3, "198.18.0.2"), secs(t0, lived + 0.5));
        t.tick(secs(t0, lived + 0.6));
        assert!(!t.peers()[0].closed, "back");

        // Brief connections in enough windows: a peer, never closed.
        let (t0, mut t) = tracker();
        for i in 0..4u64 {
            t.up(conn(10 + i, "198.18.0.4"), secs(t0, i as f64 + 0.1));
            t.down(10 + i, secs(t0, i as f64 + 0.2));
            t.tick(secs(t0, i as f64 + 0.5));
        }
        assert_eq!(addrs(&t), vec!["198.18.0.4"]);
        assert!(!t.peers()[0].closed);
    }
}
