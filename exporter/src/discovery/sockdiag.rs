//! The polling fallback: where BPF cannot load, read the established TCP
//! sockets of this network namespace from `/proc/net/tcp` and
//! `/proc/net/tcp6` every poll and feed them to the same skeleton logic
//! ([`super::skeleton::Tracker::sync`]).
//!
//! Polling only sees connections open at a poll, so it misses most brief
//! connections (which the skeleton would ignore anyway) and learns a peer up
//! to one poll interval later than the eBPF source. It needs no privilege.

use crate::model::traffic::Conn;
use crate::wire::discovery::tcp_key;
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// `st` column value of TCP_ESTABLISHED.
const ESTABLISHED: &str = "01";

/// One established socket from /proc/net/tcp{,6}.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    /// Local address.
    pub local: IpAddr,
    /// Local port.
    pub local_port: u16,
    /// Remote address.
    pub remote: IpAddr,
    /// Remote port.
    pub remote_port: u16,
    /// Socket inode, to find the owning process (and its cgroup).
    pub inode: u64,
}

/// `0100007F:1F90` (IPv4) or 32 hex digits + port (IPv6). Addresses are
/// printed as the in-memory 32-bit words in host byte order.
fn parse_endpoint(s: &str) -> Result<(IpAddr, u16)> {
    let (a, p) = s
        .split_once(':')
        .with_context(|| format!("`{s}`: expected ADDR:PORT"))?;
    let port = u16::from_str_radix(p, 16).with_context(|| format!("`{s}`: bad port"))?;
    let mut bytes = Vec::with_capacity(16);
    if a.len() != 8 && a.len() != 32 {
        bail!("`{s}`: address of {} hex digits", a.len());
    }
    for i in (0..a.len()).step_by(8) {
        let w =
            u32::from_str_radix(&a[i..i + 8], 16).with_context(|| format!("`{s}`: bad address"))?;
        bytes.extend_from_slice(&w.to_ne_bytes());
    }
    let ip = if bytes.len() == 4 {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    } else {
        let b: [u8; 16] = bytes.try_into().expect("16 bytes");
        IpAddr::V6(Ipv6Addr::from(b))
    };
    Ok((ip, port))
}

/// Parse the text of /proc/net/tcp or /proc/net/tcp6, keeping ESTABLISHED
/// sockets. Malformed lines are skipped and counted in the second value.
pub fn parse_proc_net_tcp(text: &str) -> (Vec<Socket>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            if !line.trim().is_empty() {
                bad += 1;
            }
            continue;
        }
        if f[3] != ESTABLISHED {
            continue;
        }
        match (
            parse_endpoint(f[1]),
            parse_endpoint(f[2]),
            f[9].parse::<u64>(),
        ) {
            (Ok((local, local_port)), Ok((remote, remote_port)), Ok(inode)) => out.push(Socket {
                local,
                local_port,
                remote,
                remote_port,
                inode,
            }),
            _ => bad += 1,
        }
    }
    (out, bad)
}

/// Established TCP sockets of this process's network namespace.
pub fn established(proc_root: &Path) -> Result<Vec<Socket>> {
    let mut all = Vec::new();
    for f in ["net/tcp", "net/tcp6"] {
        let p = proc_root.join(f);
        match std::fs::read_to_string(&p) {
            Ok(text) => all.extend(parse_proc_net_tcp(&text).0),
            // A kernel without IPv6 has no tcp6.
            Err(e) if f == "net/tcp6" && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("read {}", p.display())),
        }
    }
    Ok(all)
}

/// Turn sockets into skeleton connections, with the same keys the eBPF
/// source uses for this namespace (`netns`) and cgroups from `cgroups`
/// (socket inode to cgroup id; missing = 0).
pub fn to_conns(sockets: &[Socket], netns: u32, cgroups: &HashMap<u64, u64>) -> Vec<Conn> {
    sockets
        .iter()
        .map(|s| Conn {
            key: tcp_key(netns, s.local, s.local_port, s.remote, s.remote_port),
            remote: s.remote,
            local_port: s.local_port,
            remote_port: s.remote_port,
            cgroup: cgroups.get(&s.inode).copied().unwrap_or(0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 010012C6:9C40 020012C6:733C 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
   2: garbage
";

    #[test]
    fn parses_established_v4_only() {
        let (v, bad) = parse_proc_net_tcp(TCP);
        assert_eq!(bad, 1);
        assert_eq!(v.len(), 1, "LISTEN (0A) skipped");
        let s = v[0];
        if cfg!(target_endian = "little") {
            assert_eq!(s.local, "198.18.0.1".parse::<IpAddr>().unwrap());
            assert_eq!(s.remote, "198.18.0.2".parse::<IpAddr>().unwrap());
        }
        assert_eq!((s.local_port, s.remote_port, s.inode), (40000, 29500, 1002));
    }

    #[test]
    fn parses_v6() {
        let text = "header\n   0: 000080FD000000000000000001000000:9C40 000080FD000000000000000002000000:733C 01 0:0 0:0 0 0 0 77 1\n";
        let (v, bad) = parse_proc_net_tcp(text);
        assert_eq!(bad, 0);
        if cfg!(target_endian = "little") {
            assert_eq!(v[0].local, "fd80::1".parse::<IpAddr>().unwrap());
            assert_eq!(v[0].remote, "fd80::2".parse::<IpAddr>().unwrap());
        }
    }

    #[test]
    fn reads_this_namespace() {
        // A real connection on loopback shows up in /proc/self/net/tcp.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let port = c.local_addr().unwrap().port();
        let socks = established(Path::new("/proc/self")).unwrap();
        assert!(socks.iter().any(|s| s.local_port == port));
        let conns = to_conns(&socks, 1, &HashMap::new());
        assert_eq!(conns.len(), socks.len());
    }
}
