//! Connections and the filter of the skeleton rule: which established
//! connections (or RDMA queue pairs) may count towards a traffic skeleton.
//! Plain values shared by the configuration (which parses them) and the
//! discovery sources (which produce and judge them).

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// One established connection (or RDMA queue pair) as a source sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conn {
    /// Identity while it lives: the kernel socket address (eBPF), a hash of
    /// the 4-tuple (polling), or the QP pointer and pid (RDMA).
    pub key: u64,
    /// The remote end.
    pub remote: IpAddr,
    /// Local port (0 for RDMA).
    pub local_port: u16,
    /// Remote port (0 for RDMA).
    pub remote_port: u16,
    /// cgroup v2 id of the socket (0 = unknown).
    pub cgroup: u64,
}

/// Timing of the skeleton rule. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Window length.
    pub window: Duration,
    /// Distinct windows a remote must be seen in.
    pub min_windows: u32,
    /// A connection open this long makes a peer at once.
    pub long_lived: Duration,
    /// How long a remote without connections is remembered.
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
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.window.is_zero() {
            return Err(TimingError::ZeroWindow);
        }
        if self.min_windows < 3 {
            return Err(TimingError::MinWindows(self.min_windows));
        }
        if self.long_lived.is_zero() {
            return Err(TimingError::ZeroLongLived);
        }
        if self.ttl < self.window {
            return Err(TimingError::TtlBelowWindow);
        }
        Ok(())
    }
}

/// Why a [`Timing`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// `window` is zero.
    #[error("window must be > 0")]
    ZeroWindow,
    /// `min_windows` below 3 lets one brief connection qualify.
    #[error(
        "min_windows is {0}; it must be >= 3, since one brief connection can touch two windows"
    )]
    MinWindows(u32),
    /// `long_lived` is zero.
    #[error("long_lived must be > 0")]
    ZeroLongLived,
    /// `ttl` shorter than a window.
    #[error("ttl must be at least one window")]
    TtlBelowWindow,
}

/// Why a CIDR or port range was refused; the text quotes the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The address part of a CIDR is not an IP address.
    #[error("`{input}` is not a CIDR: `{addr}` is not an IP address")]
    CidrAddress {
        /// The whole text.
        input: String,
        /// The address part.
        addr: String,
    },
    /// The prefix length is too long for the family.
    #[error("`{input}` is not a CIDR: prefix length must be 0..={max}")]
    CidrPrefix {
        /// The whole text.
        input: String,
        /// The longest prefix of the family.
        max: u8,
    },
    /// A port is not in 1..=65535.
    #[error("`{input}` is not a port or range: `{part}` is not in 1..=65535")]
    Port {
        /// The whole text.
        input: String,
        /// The offending port.
        part: String,
    },
    /// The range is backwards.
    #[error("`{input}` is not a port range: {lo} > {hi}")]
    RangeOrder {
        /// The whole text.
        input: String,
        /// Lower end as written.
        lo: u16,
        /// Upper end as written.
        hi: u16,
    },
}

/// An IPv4 or IPv6 prefix, e.g. `198.18.0.0/15` or `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    /// Whether `ip` (IPv4-mapped spellings included) is inside.
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
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Cidr, ParseError> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| ParseError::CidrAddress {
            input: s.to_string(),
            addr: a.to_string(),
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| ParseError::CidrPrefix {
                    input: s.to_string(),
                    max,
                })?,
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
    /// First port.
    pub lo: u16,
    /// Last port (inclusive).
    pub hi: u16,
}

impl PortRange {
    /// Whether `p` is in the range.
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl std::str::FromStr for PortRange {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<PortRange, ParseError> {
        let port = |x: &str| {
            x.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| ParseError::Port {
                    input: s.to_string(),
                    part: x.to_string(),
                })
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => {
                let p = port(s)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(ParseError::RangeOrder {
                input: s.to_string(),
                lo,
                hi,
            });
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
    /// Remotes inside one of these prefixes never count.
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
    /// Loopback, unspecified, multicast or link-local.
    Address,
    /// Outside the included or inside an excluded prefix.
    Cidr,
    /// Port filters.
    Port,
    /// Not one of the configured cgroups.
    Cgroup,
}

impl Filter {
    /// `Ok` when `c` may count towards the skeleton.
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

/// Test fixtures shared by the traffic model's tests and the skeleton
/// rule's (`discovery::skeleton`).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Conn, Timing};
    use std::time::Duration;

    /// Windows of 1 s, 3 to count, 5 s long-lived, 4 s TTL.
    pub(crate) fn timing() -> Timing {
        Timing {
            window: Duration::from_secs(1),
            min_windows: 3,
            long_lived: Duration::from_secs(5),
            ttl: Duration::from_secs(4),
        }
    }

    /// A connection with key `key` to `remote` on the probe port.
    pub(crate) fn conn(key: u64, remote: &str) -> Conn {
        Conn {
            key,
            remote: remote.parse().unwrap(),
            local_port: 40000 + key as u16,
            remote_port: 29500,
            cgroup: 7,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{conn, timing};
    use super::*;

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
    }

    #[test]
    fn parse_errors_name_the_problem() {
        assert!("198.18.0.0/33"
            .parse::<Cidr>()
            .unwrap_err()
            .to_string()
            .contains("0..=32"));
        assert!("x/8"
            .parse::<Cidr>()
            .unwrap_err()
            .to_string()
            .contains("not an IP"));
        assert!("fd00::/8"
            .parse::<Cidr>()
            .unwrap()
            .contains("fd12::1".parse().unwrap()));
        assert!("0.0.0.0/0"
            .parse::<Cidr>()
            .unwrap()
            .contains("1.2.3.4".parse().unwrap()));
        assert!("10-5"
            .parse::<PortRange>()
            .unwrap_err()
            .to_string()
            .contains("10 > 5"));
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
        assert!(t
            .validate()
            .unwrap_err()
            .to_string()
            .contains("min_windows"));
        let mut t = timing();
        t.window = Duration::ZERO;
        assert!(t.validate().is_err());
    }
}
