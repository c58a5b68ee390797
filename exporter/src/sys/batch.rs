//! Receiving many datagrams in one system call (`recvmmsg`), each with its
//! own sender and control messages, so a batch keeps every datagram's
//! kernel timestamp and drop count: what a wake-up finds queued costs one
//! call, not one per datagram plus one to learn the queue is empty.

use super::sock::{read_control, sockaddr_to_std, Received};
use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// Datagrams one call takes at most.
pub const BATCH: usize = 32;

/// Control-message space per datagram (u64s keep it aligned for cmsghdr):
/// a timestamp, a drop count and an extended error fit with room to spare.
const CONTROL_WORDS: usize = 32;

/// Buffers for up to [`BATCH`] datagrams of `buf_len` bytes and what the
/// last [`RecvBatch::recv`] read into them. Allocated once; nothing is
/// allocated per call.
pub struct RecvBatch {
    buf_len: usize,
    data: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    control: Vec<[u64; CONTROL_WORDS]>,
    got: Vec<Batched>,
}

/// One datagram of a batch: [`Received`] plus its transmit-timestamp id
/// (error queue only).
#[derive(Debug, Clone, Copy)]
pub struct Batched {
    /// Length, sender, timestamp, truncation and drop count.
    pub received: Received,
    /// The id of a transmit timestamp read from the error queue.
    pub tx_id: Option<u32>,
}

impl RecvBatch {
    /// Room for [`BATCH`] datagrams of up to `buf_len` bytes each (longer
    /// ones come back truncated, and say so).
    pub fn new(buf_len: usize) -> RecvBatch {
        // SAFETY: an all-zero sockaddr_storage is a valid (AF_UNSPEC) value.
        let empty: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        RecvBatch {
            buf_len: buf_len.max(1),
            data: vec![0; BATCH * buf_len.max(1)],
            names: vec![empty; BATCH],
            control: vec![[0; CONTROL_WORDS]; BATCH],
            got: Vec::with_capacity(BATCH),
        }
    }

    /// Read what is queued on the non-blocking socket `sock`, up to
    /// [`BATCH`] datagrams, with `flags` (`MSG_ERRQUEUE` for transmit
    /// timestamps). Returns how many; `WouldBlock` when none was queued.
    /// Fewer than [`BATCH`] means the queue was empty when the call ended.
    pub fn recv(&mut self, sock: &impl AsRawFd, flags: libc::c_int) -> io::Result<usize> {
        self.got.clear();
        // SAFETY: all-zero iovec and mmsghdr are valid initial values.
        let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let chunks = self.data.chunks_exact_mut(self.buf_len);
        let slots = chunks.zip(&mut self.names).zip(&mut self.control);
        for ((iov, h), ((buf, name), control)) in iovs.iter_mut().zip(hdrs.iter_mut()).zip(slots) {
            iov.iov_base = buf.as_mut_ptr().cast();
            iov.iov_len = buf.len();
            h.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = control.as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
        }
        // SAFETY: every header points at live buffers of the lengths given
        // (data, name, control of this batch; the iovecs above), all of
        // which outlive the call; the kernel writes at most BATCH entries.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                flags | libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (n as usize).min(BATCH);
        for (h, name) in hdrs.iter().zip(&self.names).take(n) {
            // SAFETY: the header was filled by recvmmsg and its control
            // buffer (self.control) is alive and unchanged.
            let c = unsafe { read_control(&h.msg_hdr) };
            let from = (h.msg_hdr.msg_namelen > 0)
                .then(|| sockaddr_to_std(name))
                .flatten()
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
            let len = (h.msg_len as usize).min(self.buf_len);
            self.got.push(Batched {
                received: Received {
                    len,
                    from,
                    kernel_ns: c.timestamp_ns,
                    truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                    rx_drops: c.rx_drops,
                },
                tx_id: c.tx_id,
            });
        }
        Ok(n)
    }

    /// The datagrams the last [`RecvBatch::recv`] read, with their bytes.
    pub fn datagrams(&self) -> impl Iterator<Item = (&[u8], &Batched)> {
        let bufs = self.data.chunks_exact(self.buf_len);
        bufs.zip(&self.got).map(|(b, g)| (&b[..g.received.len], g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sock::{enable_rx_drop_count, enable_tx_timestamps};

    #[test]
    fn one_call_reads_many_datagrams_each_with_its_own_sender_and_timestamp() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        assert!(enable_tx_timestamps(rx.as_raw_fd()));
        enable_rx_drop_count(rx.as_raw_fd());
        let to = rx.local_addr().unwrap();
        let senders: Vec<_> = (0..3)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut b = RecvBatch::new(8);
        assert!(matches!(b.recv(&rx, 0), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
        // BATCH + 5 datagrams, one of them longer than a slot; loopback
        // queues them during the sends.
        for i in 0..BATCH + 5 {
            let s = &senders[i % 3];
            let payload: Vec<u8> = if i == 1 {
                vec![7; 20]
            } else {
                vec![i as u8; 3]
            };
            s.send_to(&payload, to).unwrap();
        }
        assert_eq!(b.recv(&rx, 0).unwrap(), BATCH);
        for (i, (data, g)) in b.datagrams().enumerate() {
            assert_eq!(g.received.from, senders[i % 3].local_addr().unwrap());
            if i == 1 {
                assert!(g.received.truncated && data == [7; 8]);
            } else {
                assert!(
                    !g.received.truncated && data == [i as u8; 3],
                    "{i}: {data:?}"
                );
            }
        }
        // Timestamps arrive once the kernel's timestamping is on (deferred
        // work after the first socket asks): where present they never go
        // backwards within a batch.
        let stamps: Vec<u64> = b
            .datagrams()
            .filter_map(|d| d.1.received.kernel_ns)
            .collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
        assert_eq!(b.recv(&rx, 0).unwrap(), 5);
        assert_eq!(b.datagrams().count(), 5);
        assert!(matches!(b.recv(&rx, 0), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
    }

    #[test]
    fn transmit_timestamps_come_from_the_error_queue_in_batches() {
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.set_nonblocking(true).unwrap();
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_tx_timestamps(tx.as_raw_fd()));
        for _ in 0..5 {
            tx.send_to(b"ping", rx.local_addr().unwrap()).unwrap();
        }
        let mut b = RecvBatch::new(64);
        assert_eq!(b.recv(&tx, libc::MSG_ERRQUEUE).unwrap(), 5);
        let ids: Vec<Option<u32>> = b.datagrams().map(|d| d.1.tx_id).collect();
        // OPT_ID numbers the datagrams 0, 1, ... in send order.
        assert_eq!(ids, (0..5).map(Some).collect::<Vec<_>>());
        assert!(b.datagrams().all(|d| d.1.received.kernel_ns.is_some()));
    }
}
