//! Raw IPv4 sockets (CAP_NET_RAW), for path tracing: one to send
//! hand-built IPv4 + UDP datagrams, others to read ICMP errors and UDP
//! answers with their IP headers.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking raw IPv4 socket.
#[derive(Debug)]
pub struct RawSocket(OwnedFd);

impl RawSocket {
    /// A raw socket for `protocol` (`libc::IPPROTO_RAW` to send with our
    /// own IP header, `IPPROTO_ICMP` / `IPPROTO_UDP` to read).
    pub fn open(protocol: i32) -> io::Result<RawSocket> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                protocol,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("path tracing needs raw sockets (root or CAP_NET_RAW): {e}"),
            ));
        }
        // SAFETY: fd is fresh and owned from here.
        Ok(RawSocket(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Send `pkt` (a whole IPv4 datagram) towards `dst`.
    pub fn send_to(&self, pkt: &[u8], dst: Ipv4Addr) -> io::Result<()> {
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(dst.octets()),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: pkt and sa are valid for the call and the lengths given.
        let n = unsafe {
            libc::sendto(
                self.0.as_raw_fd(),
                pkt.as_ptr().cast::<libc::c_void>(),
                pkt.len(),
                0,
                (&raw const sa).cast::<libc::sockaddr>(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Read one packet (IP header included); `None` when none is queued.
    pub fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
                0,
            )
        };
        (n > 0).then_some(n as usize)
    }
}

impl AsRawFd for RawSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
