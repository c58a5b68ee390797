//! The eBPF discovery event: `struct sh_event` of `bpf/discovery.h`,
//! mirrored as the `#[repr(C)]` [`ShEvent`]. Both sides assert the same size
//! and field offsets at compile time, and decoding reads every field at its
//! `offset_of!` position, so the two can not drift apart silently.

use crate::model::traffic::Conn;
use std::hash::{Hash, Hasher};
use std::mem::{offset_of, size_of};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `SH_TCP_UP`: a TCP connection reached ESTABLISHED.
pub const KIND_TCP_UP: u8 = 1;
/// `SH_TCP_DOWN`: a TCP connection left ESTABLISHED.
pub const KIND_TCP_DOWN: u8 = 2;
/// `SH_RDMA_RTR`: an RDMA QP moved to RTR.
pub const KIND_RDMA_RTR: u8 = 3;
/// `SH_RDMA_DESTROY`: an RDMA QP was destroyed.
pub const KIND_RDMA_DESTROY: u8 = 4;

/// The ring-buffer record, field for field as in `bpf/discovery.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShEvent {
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC).
    pub ts_ns: u64,
    /// cgroup v2 id of the socket (TCP) or caller (RDMA).
    pub cgroup_id: u64,
    /// `struct sock *` (TCP) or `struct ibv_qp *` (RDMA): identity while alive.
    pub handle: u64,
    /// tgid of the current task.
    pub pid: u32,
    /// Network namespace inode of the socket (TCP), 0 for RDMA.
    pub netns: u32,
    /// One of the `KIND_*` values.
    pub kind: u8,
    /// 4 or 6 (TCP); 0 for RDMA.
    pub family: u8,
    /// Local port, host byte order.
    pub lport: u16,
    /// Remote port, host byte order.
    pub rport: u16,
    /// RDMA: destination LID.
    pub dlid: u16,
    /// RDMA: remote (destination) QP number.
    pub qpn: u32,
    /// RDMA: this QP's number.
    pub local_qpn: u32,
    /// TCP: local address (IPv4 in the first 4 bytes).
    pub laddr: [u8; 16],
    /// TCP: remote address; RDMA: destination GID.
    pub raddr: [u8; 16],
}

/// Size of `struct sh_event`.
pub const EVENT_SIZE: usize = size_of::<ShEvent>();

// The same numbers as the `_Static_assert`s in bpf/discovery.h.
const _: () = assert!(EVENT_SIZE == 80);
const _: () = assert!(offset_of!(ShEvent, cgroup_id) == 8);
const _: () = assert!(offset_of!(ShEvent, handle) == 16);
const _: () = assert!(offset_of!(ShEvent, pid) == 24);
const _: () = assert!(offset_of!(ShEvent, netns) == 28);
const _: () = assert!(offset_of!(ShEvent, kind) == 32);
const _: () = assert!(offset_of!(ShEvent, family) == 33);
const _: () = assert!(offset_of!(ShEvent, lport) == 34);
const _: () = assert!(offset_of!(ShEvent, rport) == 36);
const _: () = assert!(offset_of!(ShEvent, dlid) == 38);
const _: () = assert!(offset_of!(ShEvent, qpn) == 40);
const _: () = assert!(offset_of!(ShEvent, local_qpn) == 44);
const _: () = assert!(offset_of!(ShEvent, laddr) == 48);
const _: () = assert!(offset_of!(ShEvent, raddr) == 64);

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Shorter than `struct sh_event`.
    #[error("event of {0} bytes, expected {EVENT_SIZE}")]
    Short(usize),
    /// A TCP event whose family is neither 4 nor 6.
    #[error("TCP event with unknown address family {0}")]
    Family(u8),
    /// A kind the decoder does not know.
    #[error("unknown event kind {0}")]
    Kind(u8),
}

/// `N` bytes at `off`; the caller checked the length.
fn at<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[off..off + N]);
    out
}

macro_rules! field {
    ($b:expr, $t:ty, $f:ident) => {
        <$t>::from_ne_bytes(at($b, offset_of!(ShEvent, $f)))
    };
}

macro_rules! put {
    ($b:expr, $v:expr, $f:ident) => {{
        let v = $v;
        let o = offset_of!(ShEvent, $f);
        $b[o..o + std::mem::size_of_val(&v)].copy_from_slice(&v);
    }};
}

impl ShEvent {
    /// Read a record in native byte order (as the kernel wrote it).
    pub fn from_bytes(b: &[u8]) -> Result<ShEvent, EventError> {
        if b.len() < EVENT_SIZE {
            return Err(EventError::Short(b.len()));
        }
        Ok(ShEvent {
            ts_ns: field!(b, u64, ts_ns),
            cgroup_id: field!(b, u64, cgroup_id),
            handle: field!(b, u64, handle),
            pid: field!(b, u32, pid),
            netns: field!(b, u32, netns),
            kind: field!(b, u8, kind),
            family: field!(b, u8, family),
            lport: field!(b, u16, lport),
            rport: field!(b, u16, rport),
            dlid: field!(b, u16, dlid),
            qpn: field!(b, u32, qpn),
            local_qpn: field!(b, u32, local_qpn),
            laddr: at(b, offset_of!(ShEvent, laddr)),
            raddr: at(b, offset_of!(ShEvent, raddr)),
        })
    }

    /// The record's bytes, as the kernel side would write them (tests and
    /// benchmarks).
    pub fn to_bytes(&self) -> [u8; EVENT_SIZE] {
        let mut b = [0u8; EVENT_SIZE];
        put!(b, self.ts_ns.to_ne_bytes(), ts_ns);
        put!(b, self.cgroup_id.to_ne_bytes(), cgroup_id);
        put!(b, self.handle.to_ne_bytes(), handle);
        put!(b, self.pid.to_ne_bytes(), pid);
        put!(b, self.netns.to_ne_bytes(), netns);
        put!(b, [self.kind], kind);
        put!(b, [self.family], family);
        put!(b, self.lport.to_ne_bytes(), lport);
        put!(b, self.rport.to_ne_bytes(), rport);
        put!(b, self.dlid.to_ne_bytes(), dlid);
        put!(b, self.qpn.to_ne_bytes(), qpn);
        put!(b, self.local_qpn.to_ne_bytes(), local_qpn);
        put!(b, self.laddr, laddr);
        put!(b, self.raddr, raddr);
        b
    }
}

/// One decoded ring-buffer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A TCP connection reached ESTABLISHED.
    TcpUp {
        /// The connection.
        conn: Conn,
        /// Its local address.
        local: IpAddr,
        /// Its network namespace inode.
        netns: u32,
        /// The task that was current (may be unrelated in softirq context).
        pid: u32,
    },
    /// A TCP connection left ESTABLISHED.
    TcpDown {
        /// The same key as its [`Event::TcpUp`].
        key: u64,
        /// Its network namespace inode.
        netns: u32,
    },
    /// An RDMA QP moved to RTR: it now talks to `remote_qpn` at `gid`.
    RdmaRtr {
        /// Identity of the QP while it lives.
        key: u64,
        /// The process owning the QP.
        pid: u32,
        /// Its cgroup v2 id.
        cgroup: u64,
        /// Destination QP number.
        remote_qpn: u32,
        /// This QP's number.
        local_qpn: u32,
        /// Destination LID.
        dlid: u16,
        /// Destination GID.
        gid: [u8; 16],
    },
    /// An RDMA QP was destroyed.
    RdmaDestroy {
        /// The same key as its [`Event::RdmaRtr`].
        key: u64,
        /// The process owning the QP.
        pid: u32,
    },
}

/// The identity of a TCP connection: the same for the eBPF and polling
/// sources, so either can reconcile the other.
pub fn tcp_key(netns: u32, local: IpAddr, lport: u16, remote: IpAddr, rport: u16) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (0u8, netns, local, lport, remote, rport).hash(&mut h);
    h.finish()
}

/// The identity of an RDMA QP: its address in its process.
pub fn rdma_key(pid: u32, qp: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (1u8, pid, qp).hash(&mut h);
    h.finish()
}

/// Decode one `struct sh_event`.
pub fn decode_event(b: &[u8]) -> Result<Event, EventError> {
    let e = ShEvent::from_bytes(b)?;
    let ip = |a: [u8; 16]| -> Result<IpAddr, EventError> {
        match e.family {
            4 => Ok(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(a))),
            f => Err(EventError::Family(f)),
        }
    };
    match e.kind {
        KIND_TCP_UP | KIND_TCP_DOWN => {
            let (local, remote) = (ip(e.laddr)?, ip(e.raddr)?);
            let key = tcp_key(e.netns, local, e.lport, remote, e.rport);
            if e.kind == KIND_TCP_DOWN {
                return Ok(Event::TcpDown {
                    key,
                    netns: e.netns,
                });
            }
            Ok(Event::TcpUp {
                conn: Conn {
                    key,
                    remote,
                    local_port: e.lport,
                    remote_port: e.rport,
                    cgroup: e.cgroup_id,
                },
                local,
                netns: e.netns,
                pid: e.pid,
            })
        }
        KIND_RDMA_RTR => Ok(Event::RdmaRtr {
            key: rdma_key(e.pid, e.handle),
            pid: e.pid,
            cgroup: e.cgroup_id,
            remote_qpn: e.qpn,
            local_qpn: e.local_qpn,
            dlid: e.dlid,
            gid: e.raddr,
        }),
        KIND_RDMA_DESTROY => Ok(Event::RdmaDestroy {
            key: rdma_key(e.pid, e.handle),
            pid: e.pid,
        }),
        k => Err(EventError::Kind(k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kind: u8, family: u8) -> ShEvent {
        ShEvent {
            cgroup_id: 42,
            handle: 0xffff_8880_1234_5678,
            pid: 1234,
            netns: 4026531840,
            kind,
            family,
            lport: 40000,
            rport: 29500,
            ..ShEvent::default()
        }
    }

    #[test]
    fn bytes_round_trip() {
        let mut e = raw(KIND_RDMA_RTR, 0);
        e.ts_ns = 7;
        e.dlid = 3;
        e.qpn = 0x1234;
        e.local_qpn = 0x99;
        e.laddr = [1; 16];
        e.raddr = [2; 16];
        assert_eq!(ShEvent::from_bytes(&e.to_bytes()), Ok(e));
    }

    #[test]
    fn decodes_tcp_v4_and_v6() {
        let mut e = raw(KIND_TCP_UP, 4);
        e.laddr[..4].copy_from_slice(&[198, 18, 0, 1]);
        e.raddr[..4].copy_from_slice(&[198, 18, 0, 2]);
        let Event::TcpUp {
            conn,
            local,
            netns,
            pid,
        } = decode_event(&e.to_bytes()).unwrap()
        else {
            panic!("not TcpUp")
        };
        assert_eq!(conn.remote, "198.18.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(local, "198.18.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(
            (conn.local_port, conn.remote_port, conn.cgroup),
            (40000, 29500, 42)
        );
        assert_eq!((netns, pid), (4026531840, 1234));
        // The down event of the same connection has the same key.
        e.kind = KIND_TCP_DOWN;
        assert_eq!(
            decode_event(&e.to_bytes()).unwrap(),
            Event::TcpDown {
                key: conn.key,
                netns
            }
        );
        let mut e = raw(KIND_TCP_UP, 6);
        e.raddr = "fd00::2".parse::<Ipv6Addr>().unwrap().octets();
        let Event::TcpUp { conn, .. } = decode_event(&e.to_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(conn.remote, "fd00::2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn decodes_rdma() {
        let mut e = raw(KIND_RDMA_RTR, 0);
        e.dlid = 7;
        e.qpn = 0x1234;
        e.local_qpn = 0x99;
        e.raddr = [9; 16];
        let Event::RdmaRtr {
            remote_qpn,
            local_qpn,
            dlid,
            gid,
            pid,
            key,
            ..
        } = decode_event(&e.to_bytes()).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (remote_qpn, local_qpn, dlid, gid, pid),
            (0x1234, 0x99, 7, [9; 16], 1234)
        );
        e.kind = KIND_RDMA_DESTROY;
        assert_eq!(
            decode_event(&e.to_bytes()).unwrap(),
            Event::RdmaDestroy { key, pid }
        );
    }

    #[test]
    fn rejects_malformed() {
        assert!(decode_event(&[0u8; 10]).is_err());
        assert!(decode_event(&raw(9, 4).to_bytes()).is_err());
        assert!(decode_event(&raw(KIND_TCP_UP, 3).to_bytes()).is_err());
    }
}
