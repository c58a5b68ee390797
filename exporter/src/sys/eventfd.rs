//! A non-blocking eventfd, to wake a thread that waits in [`poll_readable`].
//!
//! [`poll_readable`]: super::poll::poll_readable

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An owned eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A fresh, non-blocking, close-on-exec eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and owned from here.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Make the descriptor readable (wake the waiter).
    pub fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                (&raw const one).cast::<libc::c_void>(),
                8,
            )
        };
    }

    /// Reset the counter after a wake-up.
    pub fn drain(&self) {
        let mut v = 0u64;
        // SAFETY: reading 8 bytes into a live u64 from our eventfd.
        unsafe { libc::read(self.0.as_raw_fd(), (&raw mut v).cast::<libc::c_void>(), 8) };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
