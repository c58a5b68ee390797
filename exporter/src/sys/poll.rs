//! `poll(2)` over a few descriptors.

use std::os::fd::RawFd;
use std::time::Duration;

/// Wait until one of `fds` is readable or `timeout` passes (at least 0,
/// at most `i32::MAX` ms). Returns, per descriptor, whether it has events.
pub fn poll_readable(fds: &[RawFd], timeout: Duration) -> Vec<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: pfds is a valid, correctly sized array of pollfd.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    pfds.iter().map(|p| p.revents != 0).collect()
}
