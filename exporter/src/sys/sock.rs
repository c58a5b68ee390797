//! Datagram sockets with kernel receive timestamps.
//!
//! RTTs are taken from the kernel's software timestamps (SO_TIMESTAMPING)
//! rather than from when our task happens to run: on a busy host the task
//! may wake milliseconds after the packet arrived, which would swamp the
//! microsecond differences the localizer looks for. The timestamps use the
//! wall clock, like [`super::time::wall_ns`], so the two subtract.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

/// `SO_TIMESTAMPING` (the "old" number, which carries 64-bit `timespec`s
/// on every 64-bit architecture; libc does not export it for all targets).
const SO_TIMESTAMPING: libc::c_int = 37;
const SCM_TIMESTAMPING: libc::c_int = SO_TIMESTAMPING;
/// `SO_RXQ_OVFL` (asm-generic value, x86 and arm; libc exports it only for
/// Android and Emscripten).
const SO_RXQ_OVFL: libc::c_int = 40;

/// Ask the kernel to attach to each datagram received on `fd` the number
/// of datagrams this socket has dropped so far because its receive buffer
/// was full ([`Received::rx_drops`]). Returns whether the kernel accepted it.
pub fn enable_rx_drop_count(fd: RawFd) -> bool {
    set_int_option(fd, SO_RXQ_OVFL, 1)
}

/// Ask the kernel for software receive timestamps on `fd`. Returns whether
/// it worked (old kernels, exotic sockets: RTTs then use the user-space
/// receive time).
pub fn enable_rx_timestamps(fd: RawFd) -> bool {
    set_timestamping(
        fd,
        libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE,
    )
}

/// Ask for software receive timestamps and, for probe sockets, software
/// transmit timestamps delivered on the error queue with a per-socket
/// counter id (OPT_ID) and no payload copy (OPT_TSONLY). Returns whether
/// transmit timestamps are on.
pub fn enable_tx_timestamps(fd: RawFd) -> bool {
    set_timestamping(
        fd,
        libc::SOF_TIMESTAMPING_RX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY,
    )
}

/// `setsockopt(SO_TIMESTAMPING, flags)`; whether the kernel accepted it.
fn set_timestamping(fd: RawFd, flags: libc::c_uint) -> bool {
    set_int_option(fd, SO_TIMESTAMPING, flags as libc::c_int)
}

/// `setsockopt(SOL_SOCKET, option, value)`; whether the kernel accepted it.
fn set_int_option(fd: RawFd, option: libc::c_int, value: libc::c_int) -> bool {
    set_option(fd, libc::SOL_SOCKET, option, &value)
}

/// `setsockopt(level, option, value)` with `value`'s size; whether the
/// kernel accepted it.
fn set_option<T>(fd: RawFd, level: libc::c_int, option: libc::c_int, value: &T) -> bool {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes from a live `&T`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (value as *const T).cast::<libc::c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// `recvmsg(fd, flags)` (non-blocking) into `buf`, the sender's address
/// into `name` when given, control messages into `control`. Returns the
/// bytes read and the header, whose control messages [`read_control`] reads
/// while the `control` buffer lives.
fn recvmsg(
    fd: RawFd,
    buf: &mut [u8],
    name: Option<&mut MaybeUninit<libc::sockaddr_storage>>,
    control: &mut [u64; 64],
    flags: libc::c_int,
) -> io::Result<(usize, libc::msghdr)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: zeroed msghdr is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(ss) = name {
        msg.msg_name = ss.as_mut_ptr() as *mut libc::c_void;
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(control) as _;
    // SAFETY: every pointer in msg is valid for the lengths given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // The iovec is local: nothing reads it after the call.
    msg.msg_iov = std::ptr::null_mut();
    Ok((n as usize, msg))
}

/// What the control messages of one received message said (each field
/// absent when the kernel attached none of its kind).
#[derive(Debug, Default)]
pub(super) struct Control {
    /// The software timestamp (`SCM_TIMESTAMPING`), wall clock ns.
    pub(super) timestamp_ns: Option<u64>,
    /// The socket's drop count (`SO_RXQ_OVFL`).
    pub(super) rx_drops: Option<u32>,
    /// The id of a transmit timestamp (an `IP_RECVERR`/`IPV6_RECVERR` of
    /// origin `SO_EE_ORIGIN_TIMESTAMPING`, error queue only).
    pub(super) tx_id: Option<u32>,
}

/// Read the control messages of `msg`: one reader for the rx path and the
/// tx (error queue) path.
///
/// # Safety
/// `msg` must come from [`recvmsg`] and its control buffer still be alive.
pub(super) unsafe fn read_control(msg: &libc::msghdr) -> Control {
    let mut out = Control::default();
    // SAFETY: walking the control messages the kernel wrote, with the
    // CMSG_* helpers that bound every access by msg_controllen; each is
    // read as what its level and type say it holds.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == SCM_TIMESTAMPING {
                out.timestamp_ns = software_timestamp_ns(c).or(out.timestamp_ns);
            } else if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == SO_RXQ_OVFL {
                out.rx_drops = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32));
            } else if (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR)
            {
                let e =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::sock_extended_err);
                if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                    out.tx_id = Some(e.ee_data);
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    out
}

/// Read one message from the error queue: `Some((id, ns))` for a transmit
/// timestamp, `None` for anything else. `WouldBlock` when empty.
pub fn recv_tx_timestamp(sock: &impl AsRawFd) -> io::Result<Option<(u32, u64)>> {
    let mut data = [0u8; 64];
    let mut control = [0u64; 64];
    let (_, msg) = recvmsg(
        sock.as_raw_fd(),
        &mut data,
        None,
        &mut control,
        libc::MSG_ERRQUEUE,
    )?;
    // SAFETY: `msg` is recvmsg's and `control` is alive.
    let c = unsafe { read_control(&msg) };
    Ok(c.tx_id.zip(c.timestamp_ns))
}

/// The software timestamp of an `SCM_TIMESTAMPING` control message in
/// nanoseconds, `None` when the kernel left it zero (not stamped). One
/// reader for the rx and the tx (error queue) paths.
///
/// # Safety
/// `c` must point at a control message of level `SOL_SOCKET` and type
/// `SCM_TIMESTAMPING` inside a buffer the kernel filled.
unsafe fn software_timestamp_ns(c: *const libc::cmsghdr) -> Option<u64> {
    // SAFETY: per the contract, the data holds three timespecs.
    let t =
        unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const [libc::timespec; 3]) }[0];
    (t.tv_sec != 0 || t.tv_nsec != 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
}

/// Make the receive buffer of `fd` at least `bytes` big: SO_RCVBUFFORCE
/// (root or CAP_NET_ADMIN, beyond `net.core.rmem_max`), else SO_RCVBUF.
/// Replies to thousands of probes a second must not be dropped by the
/// kernel while the exporter is busy for a moment (that would be false
/// loss).
pub fn grow_recv_buffer(fd: RawFd, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if set_int_option(fd, opt, v) {
            return;
        }
    }
}

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes written into the buffer.
    pub len: usize,
    /// The sender.
    pub from: SocketAddr,
    /// Kernel receive time (wall clock ns), when available.
    pub kernel_ns: Option<u64>,
    /// The datagram was longer than the buffer.
    pub truncated: bool,
    /// Datagrams this socket dropped so far for a full receive buffer
    /// (`SO_RXQ_OVFL`, see [`enable_rx_drop_count`]); the kernel attaches
    /// it only once the count is above 0.
    pub rx_drops: Option<u32>,
}

pub(super) fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `recvmsg` one datagram (non-blocking socket) with its kernel timestamp.
pub fn recv_with_timestamp(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut ss = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    // u64 array keeps the control buffer aligned for cmsghdr.
    let mut control = [0u64; 64];
    let (n, msg) = recvmsg(sock.as_raw_fd(), buf, Some(&mut ss), &mut control, 0)?;
    // SAFETY: `msg` is recvmsg's and `control` is alive.
    let c = unsafe { read_control(&msg) };
    // SAFETY: recvmsg filled (part of) the storage; zeroed covers the rest.
    let ss = unsafe { ss.assume_init() };
    let from = sockaddr_to_std(&ss).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    Ok(Received {
        len: n,
        from,
        kernel_ns: c.timestamp_ns,
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
        rx_drops: c.rx_drops,
    })
}

/// Every address configured on this host's (namespace's) interfaces, so
/// discovery sources can leave this exporter out of its own peer list.
pub fn local_addresses() -> Vec<std::net::IpAddr> {
    let mut out = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk and free below.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return out;
    }
    let mut cur = ifap;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr of the family it names;
            // copying at most sizeof(sockaddr_storage) of the right size.
            let family = unsafe { (*ifa.ifa_addr).sa_family } as libc::c_int;
            let len = match family {
                libc::AF_INET => size_of::<libc::sockaddr_in>(),
                libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
                _ => 0,
            };
            if len > 0 {
                // SAFETY: an all-zero sockaddr_storage is a valid value.
                let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
                // SAFETY: len is the size of the family's sockaddr, which
                // fits in sockaddr_storage and is what ifa_addr points to.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        ifa.ifa_addr as *const u8,
                        &mut ss as *mut _ as *mut u8,
                        len,
                    );
                };
                if let Some(a) = sockaddr_to_std(&ss) {
                    out.push(a.ip());
                }
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: ifap came from getifaddrs.
    unsafe { libc::freeifaddrs(ifap) };
    out
}

/// On a raw ICMPv4 socket, let only echo replies (type `echo_reply`)
/// through (`ICMP_FILTER`), so the receive task does not wake for every
/// other ICMP message on the host. Best effort.
pub fn set_icmp_filter_only(fd: RawFd, echo_reply: u8) {
    let mask: u32 = !(1u32 << echo_reply);
    set_option(fd, libc::SOL_RAW, 1, &mask);
}

/// Send with the don't-fragment bit and without path-MTU bookkeeping
/// (`IP_PMTUDISC_PROBE`) on IPv4 socket `fd`, for packets far below any
/// MTU (datagrams above the interface MTU then fail instead of being
/// fragmented): without DF the kernel draws a hashed IP id for every send (`__ip_select_ident`, a visible share of a busy prober's
/// send path). Best effort.
pub fn set_dont_fragment(fd: RawFd) -> bool {
    set_option(
        fd,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        &libc::IP_PMTUDISC_PROBE,
    )
}

/// The source address the kernel would use towards `dst`: connecting an
/// IPv4 UDP socket only does the route lookup, no packet is sent.
pub fn route_source(dst: SocketAddr) -> io::Result<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
    s.connect(dst)?;
    Ok(s.local_addr()?.ip())
}

/// Register a socket we own with the tokio reactor, for reading.
pub fn async_fd<T: AsRawFd>(inner: T) -> io::Result<tokio::io::unix::AsyncFd<T>> {
    async_fd_with(inner, tokio::io::Interest::READABLE)
}

/// Register a socket we own with the tokio reactor for `interest`.
pub fn async_fd_with<T: AsRawFd>(
    inner: T,
    interest: tokio::io::Interest,
) -> io::Result<tokio::io::unix::AsyncFd<T>> {
    // SAFETY: `inner` owns its descriptor (a std or socket2 socket) and the
    // AsyncFd takes ownership of it, so the fd stays open and the same for
    // the AsyncFd's whole life.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(inner, interest) }
        .map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::time::wall_ns;

    /// The next datagram on the non-blocking `sock`, spinning until one
    /// arrives.
    fn recv_spinning(sock: &impl AsRawFd, buf: &mut [u8]) -> Received {
        loop {
            match recv_with_timestamp(sock, buf) {
                Ok(r) => break r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn a_full_receive_buffer_reports_its_drops() {
        let rx = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        rx.set_recv_buffer_size(1).unwrap(); // the kernel's minimum
        rx.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let rx: std::net::UdpSocket = rx.into();
        assert!(enable_rx_drop_count(rx.as_raw_fd()));
        let to = rx.local_addr().unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Loopback delivers synchronously: the buffer fills, the rest drop.
        for _ in 0..200 {
            tx.send_to(&[0u8; 1000], to).unwrap();
        }
        let mut buf = [0u8; 2048];
        let mut queued = 0;
        while let Ok(r) = recv_with_timestamp(&rx, &mut buf) {
            assert_eq!(r.rx_drops, None, "queued before any drop");
            queued += 1;
        }
        assert!(queued > 0 && queued < 200, "{queued} queued");
        // The next datagram carries the socket's drop count.
        tx.send_to(&[0u8; 10], to).unwrap();
        let r = recv_with_timestamp(&rx, &mut buf).unwrap();
        assert_eq!(r.rx_drops, Some(200 - queued));
    }

    #[test]
    fn kernel_timestamps_bracket_the_send_and_receive() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_tx_timestamps(a.as_raw_fd()));
        assert!(enable_rx_timestamps(b.as_raw_fd()));
        // The kernel turns receive timestamping on through deferred work
        // when the first socket asks for it: until then datagrams arrive
        // without a timestamp. Warm up from a third socket (so `a`'s OPT_ID
        // counter stays at 0) until one is stamped, for at most 2 s.
        let warm = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut stamped = false;
        for _ in 0..200 {
            warm.send_to(b"warm", b.local_addr().unwrap()).unwrap();
            let mut buf = [0u8; 16];
            let r = recv_spinning(&b, &mut buf);
            if r.kernel_ns.is_some() {
                stamped = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(stamped, "no receive timestamp within 2 s");
        let mut ids = Vec::new();
        for _ in 0..3 {
            let pre = wall_ns();
            a.send_to(b"ping", b.local_addr().unwrap()).unwrap();
            let post = wall_ns();
            // The software transmit timestamp is queued during the send.
            let (id, ts) = recv_tx_timestamp(&a).unwrap().expect("a tx timestamp");
            assert!(pre <= ts && ts <= post, "{pre} <= {ts} <= {post}");
            ids.push(id);
            let mut buf = [0u8; 16];
            let r = recv_spinning(&b, &mut buf);
            assert_eq!(&buf[..r.len], b"ping");
            assert_eq!(r.from, a.local_addr().unwrap());
            let rx = r.kernel_ns.expect("an rx timestamp");
            assert!(rx >= ts && rx <= wall_ns());
        }
        // OPT_ID numbers datagrams 0, 1, 2: what the prober relies on.
        assert_eq!(ids, [0, 1, 2]);
        assert!(matches!(recv_tx_timestamp(&a), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
    }
}
