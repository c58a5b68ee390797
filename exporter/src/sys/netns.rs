//! Entering a container's namespaces: a thread that calls [`enter`] with a
//! process's network and UTS namespaces runs in them from then on, and every
//! socket it (or a thread it spawns) opens lives in the container's network
//! — which is how one exporter probes across each container's own virtual
//! port, switch and tunnel. Only the calling thread moves; the process and
//! its other threads stay where they are.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A process's network and UTS namespaces, held open so they cannot be
/// replaced under us between finding and entering them.
#[derive(Debug)]
pub struct Namespaces {
    net: File,
    uts: File,
    /// The network namespace's inode: the container's key.
    pub net_inode: u64,
}

impl Namespaces {
    /// Open `/proc/<pid>/ns/{net,uts}`. Needs ptrace-read access to `pid`
    /// (root with `CAP_SYS_PTRACE` for other users' processes).
    pub fn of(pid: u32) -> io::Result<Namespaces> {
        let dir = Path::new("/proc").join(pid.to_string()).join("ns");
        let net = File::open(dir.join("net"))?;
        let uts = File::open(dir.join("uts"))?;
        let net_inode = net.metadata()?.ino();
        Ok(Namespaces {
            net,
            uts,
            net_inode,
        })
    }
}

/// The inode of this process's network namespace.
pub fn own_net_inode() -> io::Result<u64> {
    Ok(std::fs::metadata("/proc/self/ns/net")?.ino())
}

/// Move the calling thread into `ns` (network, then UTS). Needs
/// `CAP_SYS_ADMIN`.
pub fn enter(ns: &Namespaces) -> io::Result<()> {
    for (f, kind) in [(&ns.net, libc::CLONE_NEWNET), (&ns.uts, libc::CLONE_NEWUTS)] {
        // SAFETY: setns on a namespace descriptor we hold open; it changes
        // only the calling thread's namespaces.
        if unsafe { libc::setns(f.as_raw_fd(), kind) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The host name of the calling thread's UTS namespace (a pod's name in
/// Kubernetes).
pub fn hostname() -> io::Result<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length; gethostname
    // writes at most that many bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}
