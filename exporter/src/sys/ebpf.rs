//! The eBPF discovery source: loads `bpf/discovery.c` with aya, attaches the
//! TCP state tracepoint and the libibverbs uprobes, and decodes the ring
//! buffer's events.
//!
//! Everything that can fail at load time (no privilege, old kernel, no
//! tracefs) is returned as an error, so the caller can fall back to polling
//! and say why.

use super::skeleton::Conn;
use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeScope};
use aya::programs::{TracePoint, UProbe};
use aya::{Ebpf, EbpfLoader};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The compiled programs (built by build.rs from `bpf/discovery.c`).
static DISCOVERY_OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/discovery.o"));

/// Where Debian and most distributions install libibverbs.
pub const LIBIBVERBS_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
    "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
    "/usr/lib64/libibverbs.so.1",
    "/usr/lib/libibverbs.so.1",
];

/// Size of `struct sh_event` in bpf/discovery.c.
pub const EVENT_SIZE: usize = 80;

const KIND_TCP_UP: u8 = 1;
const KIND_TCP_DOWN: u8 = 2;
const KIND_RDMA_RTR: u8 = 3;
const KIND_RDMA_DESTROY: u8 = 4;

/// One decoded ring-buffer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A TCP connection reached ESTABLISHED.
    TcpUp {
        conn: Conn,
        local: IpAddr,
        netns: u32,
        pid: u32,
    },
    /// A TCP connection left ESTABLISHED.
    TcpDown { key: u64, netns: u32 },
    /// An RDMA QP moved to RTR: it now talks to `remote_qpn` at `gid`.
    RdmaRtr {
        key: u64,
        pid: u32,
        cgroup: u64,
        remote_qpn: u32,
        local_qpn: u32,
        dlid: u16,
        gid: [u8; 16],
    },
    /// An RDMA QP was destroyed.
    RdmaDestroy { key: u64, pid: u32 },
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

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}
fn addr16(b: &[u8], o: usize) -> [u8; 16] {
    b[o..o + 16].try_into().expect("16 bytes")
}

/// Decode one `struct sh_event` (see bpf/discovery.c for the layout).
pub fn decode_event(b: &[u8]) -> Result<Event> {
    if b.len() < EVENT_SIZE {
        bail!("event of {} bytes, expected {EVENT_SIZE}", b.len());
    }
    let cgroup = u64_at(b, 8);
    let handle = u64_at(b, 16);
    let pid = u32_at(b, 24);
    let netns = u32_at(b, 28);
    let kind = b[32];
    let family = b[33];
    let lport = u16_at(b, 34);
    let rport = u16_at(b, 36);
    let dlid = u16_at(b, 38);
    let qpn = u32_at(b, 40);
    let local_qpn = u32_at(b, 44);
    let laddr = addr16(b, 48);
    let raddr = addr16(b, 64);
    let ip = |a: [u8; 16]| -> Result<IpAddr> {
        match family {
            4 => Ok(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(a))),
            f => bail!("TCP event with unknown address family {f}"),
        }
    };
    match kind {
        KIND_TCP_UP | KIND_TCP_DOWN => {
            let (local, remote) = (ip(laddr)?, ip(raddr)?);
            let key = tcp_key(netns, local, lport, remote, rport);
            if kind == KIND_TCP_DOWN {
                return Ok(Event::TcpDown { key, netns });
            }
            Ok(Event::TcpUp {
                conn: Conn {
                    key,
                    remote,
                    local_port: lport,
                    remote_port: rport,
                    cgroup,
                },
                local,
                netns,
                pid,
            })
        }
        KIND_RDMA_RTR => Ok(Event::RdmaRtr {
            key: rdma_key(pid, handle),
            pid,
            cgroup,
            remote_qpn: qpn,
            local_qpn,
            dlid,
            gid: raddr,
        }),
        KIND_RDMA_DESTROY => Ok(Event::RdmaDestroy {
            key: rdma_key(pid, handle),
            pid,
        }),
        k => bail!("unknown event kind {k}"),
    }
}

/// The network namespace inode of this process (what the BPF program
/// compares `sk->__sk_common.skc_net` against).
pub fn own_netns() -> Result<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/self/ns/net").context("stat /proc/self/ns/net")?;
    Ok(m.ino() as u32)
}

/// Make sure tracefs is mounted at /sys/kernel/tracing: mount it when the
/// kernel has it but nobody mounted it (common in containers and minimal
/// hosts). Returns a note for the log when it mounted it.
pub fn ensure_tracefs() -> Result<Option<String>> {
    let dir = Path::new("/sys/kernel/tracing");
    let has_events = |p: &Path| p.join("events").exists();
    if has_events(dir) || has_events(Path::new("/sys/kernel/debug/tracing")) {
        return Ok(None);
    }
    if !dir.is_dir() {
        bail!("the kernel has no tracefs (/sys/kernel/tracing does not exist)");
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, target, fstype) = (c("nodev"), c("/sys/kernel/tracing"), c("tracefs"));
    // SAFETY: plain mount(2) with valid NUL-terminated strings.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "tracefs is not mounted at /sys/kernel/tracing and mounting it failed: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(Some("mounted tracefs at /sys/kernel/tracing".into()))
}

/// Raise RLIMIT_MEMLOCK for kernels that still charge BPF maps to it (< 5.11).
fn raise_memlock() {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid struct; failure only matters on old kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// File offsets of every function symbol named `symbol` in an ELF file.
/// libibverbs exports two versions of `ibv_modify_qp` (IBVERBS_1.0 and 1.1);
/// programs may call either, so we attach to all of them.
pub fn symbol_offsets(path: &Path, symbol: &str) -> Result<Vec<u64>> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    let file = object::File::parse(&*data)
        .map_err(|e| anyhow!("{}: not an ELF object: {e}", path.display()))?;
    let mut out = Vec::new();
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        if sym.name() != Ok(symbol) || sym.address() == 0 {
            continue;
        }
        let Some(idx) = sym.section_index() else {
            continue;
        };
        let Ok(section) = file.section_by_index(idx) else {
            continue;
        };
        let Some((sec_offset, _)) = section.file_range() else {
            continue;
        };
        if let Ok(UProbeAttachLocation::AbsoluteOffset(off)) =
            UProbeAttachLocation::from_virtual_address(sym.address(), section.address(), sec_offset)
        {
            if !out.contains(&off) {
                out.push(off);
            }
        }
    }
    if out.is_empty() {
        bail!("{}: no function symbol `{symbol}`", path.display());
    }
    Ok(out)
}

/// The first libibverbs found on this system.
pub fn system_libibverbs() -> Option<PathBuf> {
    LIBIBVERBS_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The loaded programs and their ring buffer.
pub struct EbpfSource {
    bpf: Ebpf,
    ring: RingBuf<MapData>,
    dropped: PerCpuArray<MapData, u64>,
    /// Human-readable notes for the startup log (what was attached where).
    pub notes: Vec<String>,
}

impl EbpfSource {
    /// Load the programs. `netns`: report only sockets of this network
    /// namespace inode (0 = all namespaces). `tracepoint`: attach the TCP
    /// tracepoint (false only in the uprobe test).
    pub fn load(netns: u32, tracepoint: bool) -> Result<EbpfSource> {
        let mut notes = Vec::new();
        if tracepoint {
            if let Some(n) = ensure_tracefs()? {
                notes.push(n);
            }
        }
        raise_memlock();
        let mut bpf = EbpfLoader::new()
            .override_global("filter_netns", &netns, true)
            .load(DISCOVERY_OBJ)
            .context("loading the eBPF programs (needs root or CAP_BPF+CAP_PERFMON)")?;
        if tracepoint {
            let tp: &mut TracePoint = bpf
                .program_mut("tcp_state")
                .context("program tcp_state missing")?
                .try_into()?;
            tp.load().context("verifying tcp_state")?;
            tp.attach("sock", "inet_sock_set_state")
                .context("attaching tracepoint sock/inet_sock_set_state")?;
            notes.push("tracepoint sock/inet_sock_set_state attached".into());
        }
        for prog in ["ibv_modify_qp", "ibv_destroy_qp"] {
            let p: &mut UProbe = bpf
                .program_mut(prog)
                .with_context(|| format!("program {prog} missing"))?
                .try_into()?;
            p.load().with_context(|| format!("verifying {prog}"))?;
        }
        let ring = RingBuf::try_from(bpf.take_map("events").context("map events missing")?)?;
        let dropped =
            PerCpuArray::try_from(bpf.take_map("dropped").context("map dropped missing")?)?;
        Ok(EbpfSource {
            bpf,
            ring,
            dropped,
            notes,
        })
    }

    /// Attach the RDMA uprobes to every `ibv_modify_qp`/`ibv_destroy_qp` in
    /// `target` (the system's libibverbs, or a test binary). Returns how many
    /// attach points were used.
    pub fn attach_verbs(&mut self, target: &Path) -> Result<usize> {
        let mut n = 0;
        for prog in ["ibv_modify_qp", "ibv_destroy_qp"] {
            let offsets = match symbol_offsets(target, prog) {
                Ok(o) => o,
                // A test binary may define only ibv_modify_qp.
                Err(e) if prog == "ibv_destroy_qp" => {
                    self.notes.push(format!("{e}; QP destruction not traced"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let p: &mut UProbe = self
                .bpf
                .program_mut(prog)
                .with_context(|| format!("program {prog} missing"))?
                .try_into()?;
            for off in offsets {
                p.attach(off, target, UProbeScope::AllProcesses)
                    .with_context(|| {
                        format!("attaching uprobe {prog} at {}+{off:#x}", target.display())
                    })?;
                n += 1;
            }
        }
        self.notes.push(format!(
            "uprobes ibv_modify_qp/ibv_destroy_qp attached to {} ({n} points)",
            target.display()
        ));
        Ok(n)
    }

    /// Wait until events are ready or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.ring.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
    }

    /// Hand every queued record to `f` (decoded or an error for a malformed
    /// one). Returns how many records were read.
    pub fn drain(&mut self, mut f: impl FnMut(Result<Event>)) -> usize {
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            f(decode_event(&item));
            n += 1;
        }
        n
    }

    /// Total run time and invocation count of the TCP tracepoint program
    /// (needs `aya::sys::enable_stats`, kernel >= 5.8), for the benchmark.
    #[allow(dead_code, reason = "used by benches/discovery.rs")]
    pub fn tracepoint_stats(&self) -> Option<(Duration, u64)> {
        let info = self.bpf.program("tcp_state")?.info().ok()?;
        Some((info.run_time(), info.run_count()))
    }

    /// Events the kernel side could not queue because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.get(&0, 0).map(|v| v.iter().sum()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kind: u8, family: u8) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_SIZE];
        b[8..16].copy_from_slice(&42u64.to_ne_bytes());
        b[16..24].copy_from_slice(&0xffff_8880_1234_5678u64.to_ne_bytes());
        b[24..28].copy_from_slice(&1234u32.to_ne_bytes());
        b[28..32].copy_from_slice(&4026531840u32.to_ne_bytes());
        b[32] = kind;
        b[33] = family;
        b[34..36].copy_from_slice(&40000u16.to_ne_bytes());
        b[36..38].copy_from_slice(&29500u16.to_ne_bytes());
        b
    }

    #[test]
    fn decodes_tcp_v4_and_v6() {
        let mut b = raw(KIND_TCP_UP, 4);
        b[48..52].copy_from_slice(&[198, 18, 0, 1]);
        b[64..68].copy_from_slice(&[198, 18, 0, 2]);
        let Event::TcpUp {
            conn,
            local,
            netns,
            pid,
        } = decode_event(&b).unwrap()
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
        b[32] = KIND_TCP_DOWN;
        assert_eq!(
            decode_event(&b).unwrap(),
            Event::TcpDown {
                key: conn.key,
                netns
            }
        );
        let mut b = raw(KIND_TCP_UP, 6);
        b[64..80].copy_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        let Event::TcpUp { conn, .. } = decode_event(&b).unwrap() else {
            panic!()
        };
        assert_eq!(conn.remote, "fd00::2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn decodes_rdma() {
        let mut b = raw(KIND_RDMA_RTR, 0);
        b[38..40].copy_from_slice(&7u16.to_ne_bytes());
        b[40..44].copy_from_slice(&0x1234u32.to_ne_bytes());
        b[44..48].copy_from_slice(&0x99u32.to_ne_bytes());
        b[64..80].copy_from_slice(&[9; 16]);
        let Event::RdmaRtr {
            remote_qpn,
            local_qpn,
            dlid,
            gid,
            pid,
            key,
            ..
        } = decode_event(&b).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (remote_qpn, local_qpn, dlid, gid, pid),
            (0x1234, 0x99, 7, [9; 16], 1234)
        );
        b[32] = KIND_RDMA_DESTROY;
        assert_eq!(decode_event(&b).unwrap(), Event::RdmaDestroy { key, pid });
    }

    #[test]
    fn rejects_malformed() {
        assert!(decode_event(&[0u8; 10]).is_err());
        assert!(decode_event(&raw(9, 4)).is_err());
        assert!(decode_event(&raw(KIND_TCP_UP, 3)).is_err());
    }
}
