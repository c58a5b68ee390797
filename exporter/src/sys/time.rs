//! Clocks and randomness.

use std::time::Duration;

/// Wall-clock time in nanoseconds since the epoch; the same clock as the
/// kernel's software timestamps, so the two can be subtracted.
pub fn wall_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the provided timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has used (for benchmarks).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the provided timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A random 64-bit number from the kernel, for session ids and trace
/// identifications; falls back to time and pid (uniqueness per run is all
/// callers need).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast::<libc::c_void>(), 8, 0) };
    if n != 8 {
        return wall_ns() ^ (u64::from(std::process::id()) << 32);
    }
    u64::from_ne_bytes(b)
}
