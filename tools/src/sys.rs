//! The one door to `libc` for the test crate: every `unsafe` call of the
//! helpers, the tests and the demo lives here, behind a safe function whose
//! arguments make the call sound. Everything else in the crate is
//! `unsafe`-free (the workspace lints deny it).

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// The effective user id: privileged tests and the demo need root.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory of ours and
    // cannot fail.
    unsafe { libc::geteuid() }
}

/// Send `signal` (e.g. `libc::SIGTERM`) to process `pid`. Used to stop a
/// child cleanly and to kill what is left inside a namespace being deleted.
pub fn kill(pid: i32, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Move the calling thread (only it: the rest of the process stays put)
/// into the network namespace `ns`, an open `/run/netns/<name>` file.
pub fn enter_netns(ns: &impl AsFd) -> io::Result<()> {
    let fd = ns.as_fd();
    // SAFETY: the borrowed fd is open for the whole call; setns(2) reads no
    // memory of ours and changes only this thread's network namespace.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A set of signals to be taken synchronously: blocked in every thread and
/// collected by one waiting thread, so a handler can run arbitrary code
/// (the demo's clean-up on Ctrl-C) instead of async-signal-safe code only.
pub struct SignalSet(libc::sigset_t);

impl SignalSet {
    /// A set holding `signals`.
    pub fn new(signals: &[libc::c_int]) -> io::Result<SignalSet> {
        // SAFETY: an all-zero sigset_t is a valid value to initialise with
        // sigemptyset, which it is at once.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid, exclusively borrowed sigset_t.
        if unsafe { libc::sigemptyset(&mut set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        for &s in signals {
            // SAFETY: as above; an invalid signal number is reported as EINVAL.
            if unsafe { libc::sigaddset(&mut set, s) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SignalSet(set))
    }

    /// Block the set in the calling thread and in every thread it starts
    /// afterwards (the mask is inherited). Call before other threads exist.
    pub fn block(&self) -> io::Result<()> {
        // SAFETY: `self.0` is an initialised sigset_t; a null old-set
        // pointer is allowed and means "do not report the old mask".
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &self.0, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Wait until one of the (blocked) signals arrives and return it.
    pub fn wait(&self) -> io::Result<libc::c_int> {
        let mut sig = 0;
        // SAFETY: `self.0` is an initialised sigset_t and `sig` a valid
        // out-pointer for the duration of the call.
        let rc = unsafe { libc::sigwait(&self.0, &mut sig) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(sig)
    }
}
