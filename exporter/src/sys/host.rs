//! Process and host settings: hostname, allocator tuning, rlimits, mounts,
//! privileges and namespaces.

use std::io;

/// The hostname, for identity defaults (`unknown` when it cannot be read).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast::<libc::c_char>(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Keep memory use flat: a large `/metrics` body is mmapped and returned to
/// the kernel when freed (glibc would otherwise raise its mmap threshold
/// after the first free and keep the freed heap resident), and the worker
/// threads share one malloc arena instead of each keeping its own. Call it
/// before any thread starts.
pub fn limit_malloc_retention() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Bytes the allocator holds free in its heap (`mallinfo2().fordblks`):
/// memory the process freed but glibc has not given back to the kernel.
/// `None` where the allocator is not glibc.
pub fn heap_free_bytes() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let info = unsafe { libc::mallinfo2() };
        Some(info.fordblks as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Give the free pages of the heap back to the kernel (`malloc_trim(0)`,
/// which also releases whole free pages in the middle of the heap, not
/// only its top). Returns whether any memory was released.
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes the arena locks itself; any thread may call it.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Raise RLIMIT_MEMLOCK for kernels that still charge BPF maps to it (< 5.11).
pub fn raise_memlock() {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid struct; failure only matters on old kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

fn nofile() -> io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim)
}

/// The open-file limit [`raise_nofile`] would put in force (the hard
/// limit), without changing anything: what `--check-config` reports.
pub fn nofile_after_raise() -> io::Result<u64> {
    nofile().map(|l| l.rlim_cur.max(l.rlim_max))
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit
/// in force afterwards (the old one when raising failed).
pub fn raise_nofile() -> io::Result<u64> {
    let lim = nofile()?;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit with a valid struct, soft = hard is always allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(raised.rlim_cur);
        }
    }
    Ok(lim.rlim_cur)
}

/// `mount -t tracefs nodev /sys/kernel/tracing`.
pub fn mount_tracefs() -> io::Result<()> {
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
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the process runs as root (benchmarks need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Clock ticks per second of `/proc/PID/stat` times.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// Move the calling thread into a fresh network namespace (benchmarks).
pub fn unshare_network() -> io::Result<()> {
    // SAFETY: unshare only changes this thread's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
