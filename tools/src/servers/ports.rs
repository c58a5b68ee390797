//! Free addresses for servers and exporters, picked where no socket bound
//! to port 0 can take them first.

use anyhow::{bail, Result};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

/// Below Linux's ephemeral range (32768-60999), which the kernel hands to
/// sockets bound to port 0 (an exporter's probe flows took a port picked
/// there for another exporter's responder).
const PICKED_PORTS: std::ops::Range<u16> = 20000..32000;

/// A loopback address whose port is free for TCP and UDP now, drawn from
/// [`PICKED_PORTS`]: only another pick can take it before it is used.
pub fn free_loopback_addr() -> Result<SocketAddr> {
    free_addr_on(Ipv4Addr::LOCALHOST)
}

/// An address of `ip` (a loopback address, or one of a namespace the
/// caller runs in) whose port is free for TCP and UDP now, drawn from
/// [`PICKED_PORTS`].
pub fn free_addr_on(ip: Ipv4Addr) -> Result<SocketAddr> {
    use std::hash::BuildHasher as _;
    static PICKS: AtomicU32 = AtomicU32::new(0);
    let seed = std::collections::hash_map::RandomState::new();
    let span = u64::from(PICKED_PORTS.end - PICKED_PORTS.start);
    for _ in 0..256 {
        let draw = seed.hash_one(PICKS.fetch_add(1, Ordering::Relaxed)) % span;
        let addr = SocketAddr::from((ip, PICKED_PORTS.start + draw as u16));
        let tcp = TcpListener::bind(addr);
        if tcp.is_ok() && UdpSocket::bind(addr).is_ok() {
            return Ok(addr);
        }
    }
    bail!("no free port on {ip} in {PICKED_PORTS:?} after 256 draws")
}
