//! The eBPF discovery programs: loads `bpf/discovery.c` with aya, attaches
//! the TCP state tracepoint and the libibverbs uprobes, and hands out the
//! ring buffer's events decoded by [`crate::wire::discovery`].
//!
//! Everything that can fail at load time (no privilege, old kernel, no
//! tracefs) is returned as an error, so the caller can fall back to polling
//! and say why.

use super::host::{mount_tracefs, raise_memlock};
use super::poll::poll_readable;
use crate::wire::discovery::{decode_event, Event, EventError};
use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeScope};
use aya::programs::{TracePoint, UProbe};
use aya::{Ebpf, EbpfLoader};
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

/// The network namespace inode of this process (what the BPF program
/// compares `sk->__sk_common.skc_net` against).
pub fn own_netns() -> Result<u32> {
    let ino = super::netns::own_net_inode().context("stat /proc/self/ns/net")?;
    Ok(ino as u32)
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
    if let Err(e) = std::fs::read_dir(dir) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            bail!(
                "tracefs at /sys/kernel/tracing is not readable by this user ({e}): needs CAP_DAC_READ_SEARCH"
            );
        }
    }
    if let Err(e) = mount_tracefs() {
        bail!(
            "tracefs is not mounted at /sys/kernel/tracing and mounting it failed: {e} (mounting needs CAP_SYS_ADMIN)"
        );
    }
    Ok(Some("mounted tracefs at /sys/kernel/tracing".into()))
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
            tp.load()
                .context("verifying tcp_state (needs CAP_BPF+CAP_PERFMON)")?;
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
                        format!(
                            "attaching uprobe {prog} at {}+{off:#x} (needs CAP_SYS_ADMIN)",
                            target.display()
                        )
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
        poll_readable(&[self.ring.as_fd().as_raw_fd()], timeout)[0]
    }

    /// Hand every queued record to `f` (decoded or an error for a malformed
    /// one). Returns how many records were read.
    pub fn drain(&mut self, mut f: impl FnMut(Result<Event, EventError>)) -> usize {
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
