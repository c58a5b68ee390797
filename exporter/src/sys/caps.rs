//! Linux capabilities: read the process's sets and lower them in every
//! thread. Capabilities belong to each thread, and `capset(2)` changes only
//! the caller, so [`keep_only`] does what glibc does for `setuid`: it
//! signals every thread of the process to lower its own sets, then checks
//! each one in `/proc/self/task`.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A set of capabilities: bit `n` is capability number `n`.
pub type CapMask = u64;

/// `CAP_DAC_READ_SEARCH`: read tracefs, which is mode 0700 on most hosts.
pub const CAP_DAC_READ_SEARCH: u32 = 2;
/// `CAP_SETPCAP`: needed to shrink the bounding set.
pub const CAP_SETPCAP: u32 = 8;
/// `CAP_NET_ADMIN`: receive buffers above `net.core.rmem_max` (SO_RCVBUFFORCE).
pub const CAP_NET_ADMIN: u32 = 12;
/// `CAP_NET_RAW`: raw sockets (ICMP probes, path tracing).
pub const CAP_NET_RAW: u32 = 13;
/// `CAP_IPC_LOCK`: pin memory for RDMA registration beyond RLIMIT_MEMLOCK.
pub const CAP_IPC_LOCK: u32 = 14;
/// `CAP_SYS_PTRACE`: read other processes' `/proc/<pid>/fd` (polling
/// discovery's socket-to-cgroup attribution).
pub const CAP_SYS_PTRACE: u32 = 19;
/// `CAP_SYS_ADMIN`: mount tracefs; uprobes (perf_event_open) on this kernel.
pub const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_SYS_RESOURCE`: raise RLIMIT_MEMLOCK (kernels before 5.11 only).
pub const CAP_SYS_RESOURCE: u32 = 24;
/// `CAP_PERFMON`: tracing programs and perf events (kernel >= 5.8).
pub const CAP_PERFMON: u32 = 38;
/// `CAP_BPF`: maps and program loading (kernel >= 5.8).
pub const CAP_BPF: u32 = 39;

/// The kernel's names, by number (`capability.h`), for logs and errors.
const NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The mask holding just `cap`.
pub const fn bit(cap: u32) -> CapMask {
    1 << cap
}

/// The names of the capabilities in `mask` (`cap_41` for unnamed ones).
pub fn names(mask: CapMask) -> Vec<String> {
    (0..64u32)
        .filter(|c| mask & bit(*c) != 0)
        .map(|c| {
            NAMES
                .get(c as usize)
                .map_or(format!("cap_{c}"), ToString::to_string)
        })
        .collect()
}

/// A hexadecimal capability line of a `/proc/<pid>/status` text
/// (`CapEff`, `CapPrm`, `CapBnd`, …).
pub fn status_field(status: &str, field: &str) -> Option<CapMask> {
    let line = status
        .lines()
        .find(|l| l.split(':').next() == Some(field))?;
    CapMask::from_str_radix(line.split(':').nth(1)?.trim(), 16).ok()
}

/// This thread's effective and permitted sets.
pub fn current() -> io::Result<(CapMask, CapMask)> {
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    match (
        status_field(&status, "CapEff"),
        status_field(&status, "CapPrm"),
    ) {
        (Some(e), Some(p)) => Ok((e, p)),
        _ => Err(io::Error::other(
            "no CapEff/CapPrm in /proc/thread-self/status",
        )),
    }
}

const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// What the threads lower to; read by the signal handler.
static KEEP: AtomicU64 = AtomicU64::new(0);
/// Threads that lowered their sets / failed to, in this round.
static DONE: AtomicUsize = AtomicUsize::new(0);
static FAILED: AtomicUsize = AtomicUsize::new(0);

/// Lower the calling thread's sets to `KEEP`: bounding set first (while
/// `CAP_SETPCAP` may still be effective; without it the kernel refuses,
/// which is fine), then ambient, then effective, permitted and
/// inheritable. Only raw system calls: safe inside a signal handler.
fn lower_this_thread() -> bool {
    let keep = KEEP.load(Ordering::SeqCst);
    for cap in 0..64u32 {
        if keep & bit(cap) == 0 {
            // SAFETY: prctl with integer arguments; EPERM/EINVAL are ignored.
            unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        }
    }
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: version 3 capget writes exactly two Data structs.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if rc != 0 {
        return false;
    }
    for (i, d) in data.iter_mut().enumerate() {
        let k = (keep >> (32 * i)) as u32;
        d.effective &= k;
        d.permitted &= k;
        d.inheritable &= k;
    }
    // SAFETY: version 3 capset reads exactly two Data structs; lowering
    // sets needs no privilege.
    unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) == 0 }
}

extern "C" fn on_signal(_: libc::c_int) {
    // SAFETY: errno is thread-local; saved and restored around the calls.
    let saved = unsafe { *libc::__errno_location() };
    if lower_this_thread() {
        DONE.fetch_add(1, Ordering::SeqCst);
    } else {
        FAILED.fetch_add(1, Ordering::SeqCst);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Every thread of the process whose permitted or effective set still
/// holds more than `keep`.
fn threads_above(keep: CapMask) -> io::Result<Vec<libc::pid_t>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let Some(tid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) else {
            continue; // the thread ended
        };
        let held = status_field(&status, "CapPrm").unwrap_or(0)
            | status_field(&status, "CapEff").unwrap_or(0);
        if held & !keep != 0 {
            out.push(tid);
        }
    }
    Ok(out)
}

/// Lower effective, permitted, inheritable and ambient sets of every
/// thread to `keep` (capabilities already missing stay missing), and the
/// bounding set too when `CAP_SETPCAP` allows. Returns an error naming a
/// thread that still holds more.
pub fn keep_only(keep: CapMask) -> io::Result<()> {
    KEEP.store(keep, Ordering::SeqCst);
    let signal = libc::SIGRTMIN() + 7;
    // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    // The handler stays installed afterwards: a signal still pending in a
    // slow thread must not meet the default action (which ends the process),
    // and running the handler again only lowers to the same sets.
    // SAFETY: a valid sigaction; a null old-action pointer is allowed.
    if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    signal_threads(keep, signal)
}

/// A few rounds: find the threads above `keep`, lower them, wait for each
/// to answer. New threads started meanwhile are found by the next round.
fn signal_threads(keep: CapMask, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, me) = unsafe { (libc::getpid(), libc::gettid()) };
    for _ in 0..5 {
        let threads = threads_above(keep)?;
        if threads.is_empty() {
            return Ok(());
        }
        DONE.store(0, Ordering::SeqCst);
        FAILED.store(0, Ordering::SeqCst);
        let mut sent = 0;
        for tid in threads {
            if tid == me {
                if !lower_this_thread() {
                    return Err(io::Error::last_os_error());
                }
            // SAFETY: tgkill with plain integers; ESRCH (thread ended) is fine.
            } else if unsafe { libc::tgkill(pid, tid, signal) } == 0 {
                sent += 1;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while DONE.load(Ordering::SeqCst) + FAILED.load(Ordering::SeqCst) < sent
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    match threads_above(keep)?.first() {
        None => Ok(()),
        Some(tid) => Err(io::Error::other(format!(
            "thread {tid} still holds capabilities beyond {:?}",
            names(keep)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_and_names() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000000c000002000\n\
                      CapEff:\t0000000000002000\nCapBnd:\t000001ffffffffff\n";
        let prm = status_field(status, "CapPrm").unwrap();
        assert_eq!(prm, bit(CAP_NET_RAW) | bit(CAP_BPF) | bit(CAP_PERFMON));
        assert_eq!(names(prm), ["CAP_NET_RAW", "CAP_PERFMON", "CAP_BPF"]);
        assert_eq!(status_field(status, "CapEff"), Some(bit(CAP_NET_RAW)));
        assert_eq!(status_field(status, "CapAmb"), None);
        assert_eq!(names(bit(50)), ["cap_50"]);
    }

    // keep_only itself changes the whole test process (the other tests
    // need root), so tests/tests/exporter/privileges.rs checks it on the
    // exporter binary, thread by thread.
}
