//! The floor: what the probes' system calls alone cost on this machine.
//! A bare prober in the bench sends the exporter's probes to the same
//! targets on the exporter's schedule (each target once a second, spread
//! evenly, what fell due sent every 2 ms), one `sendto` each, and drains
//! the answers with the exporter's `recvmmsg` batch and kernel receive
//! timestamps: no parsing, no histograms, no in-flight table, no async
//! runtime. The CPU its thread is charged is what a probe costs before
//! the exporter does anything of its own, so the exporter's figure is
//! read against it (on loopback it includes the far end's answer, which
//! the kernel does inside the sender's `sendto`).

use crate::support::cpu_seconds_in;
use skeletonhunter_exporter::probe::icmp::encode_echo;
use skeletonhunter_exporter::sys::batch::RecvBatch;
use skeletonhunter_exporter::sys::poll::poll_readable;
use skeletonhunter_exporter::sys::sock::{
    enable_rx_timestamps, set_dont_fragment, set_icmp_filter_only,
};
use skeletonhunter_exporter::sys::time::wall_ns;
use skeletonhunter_exporter::wire::probe as wire;
use socket2::{Domain, SockAddr, Socket, Type};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The exporter's shortest sleep between scheduler wake-ups.
const TICK: Duration = Duration::from_millis(2);
/// The exporter's default UDP request size.
const UDP_SIZE: usize = 256;
const SESSION: u64 = 0x464c_4f4f_5246_4c52;
/// The calling thread's stat(5) file.
const THREAD_STAT: &str = "/proc/thread-self/stat";

/// What one floor run measured.
pub struct Floor {
    /// CPU of the prober thread, share of one core.
    pub cpu: f64,
    /// Probes sent.
    pub sent: u64,
    /// Datagrams received.
    pub answered: u64,
}

/// Probe `targets` (ICMP echo, or UDP echo to `udp_port` when `udp`) for
/// `window` from the calling thread.
pub fn run(
    udp: bool,
    targets: &[std::net::Ipv4Addr],
    udp_port: u16,
    window: Duration,
) -> std::io::Result<Floor> {
    let sock = if udp {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
        s.bind(&SockAddr::from(SocketAddr::from(([0, 0, 0, 0], 0))))?;
        s
    } else {
        // As the exporter: a datagram ICMP socket where the host allows
        // it, else raw with only echo replies let through.
        let proto = Some(socket2::Protocol::ICMPV4);
        match Socket::new(Domain::IPV4, Type::DGRAM, proto) {
            Ok(s) => s,
            Err(_) => {
                let s = Socket::new(Domain::IPV4, Type::RAW, proto)?;
                set_icmp_filter_only(s.as_raw_fd(), 0);
                s
            }
        }
    };
    sock.set_nonblocking(true)?;
    enable_rx_timestamps(sock.as_raw_fd());
    if !udp {
        set_dont_fragment(sock.as_raw_fd());
    }
    let port = if udp { udp_port } else { 0 };
    let dsts: Vec<SockAddr> = targets
        .iter()
        .map(|&a| SockAddr::from(SocketAddr::from((a, port))))
        .collect();
    let mut batch = RecvBatch::new(2048);
    let mut req = Vec::with_capacity(UDP_SIZE);
    let (mut sent, mut answered) = (0u64, 0u64);
    let cpu0 = cpu_seconds_in(THREAD_STAT);
    let start = Instant::now();
    let spacing = Duration::from_secs(1) / dsts.len().max(1) as u32;
    let mut next = start;
    let mut cursor = 0usize;
    while start.elapsed() < window {
        let now = Instant::now();
        while next <= now && !dsts.is_empty() {
            sent += 1;
            let seq = sent;
            let dst = &dsts[cursor];
            // A failed send is a lost probe here too; the count shows it.
            let _ = if udp {
                wire::encode_request(&mut req, SESSION, seq, wall_ns(), &[], UDP_SIZE);
                sock.send_to(&req, dst)
            } else {
                sock.send_to(&encode_echo(false, 0x464c, SESSION, seq), dst)
            };
            cursor = (cursor + 1) % dsts.len();
            next += spacing;
        }
        while let Ok(n) = batch.recv(&sock, 0) {
            answered += n as u64;
        }
        // Until the next probe is due, at least a tick, in whole
        // milliseconds rounded up (as the exporter's timer): `poll` would
        // cut a fraction of a millisecond to 0 and spin.
        let wake = next
            .max(now + TICK)
            .saturating_duration_since(Instant::now());
        let ms = wake.as_nanos().div_ceil(1_000_000) as u64;
        poll_readable(&[sock.as_raw_fd()], Duration::from_millis(ms));
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Floor {
        cpu: (cpu_seconds_in(THREAD_STAT) - cpu0) / secs,
        sent,
        answered,
    })
}
