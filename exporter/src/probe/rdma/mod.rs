//! RDMA UD probing in the manner of R-Pingmesh: one UD queue pair per RNIC,
//! a probe / ACK / ACK-detail exchange stamped with hardware CQE
//! timestamps where the RNIC has them, and the round trip split into
//! network RTT, prober delay and responder delay.
//!
//! Layout: [`clock`] (timestamp wrap-around and wall-clock conversion),
//! [`packet`] (probe and endpoint wire formats) and [`exchange`] (the
//! prober and responder state machines) are pure; [`engine`] joins them
//! with RNICs behind a trait (tested over a fake fabric); `verbs` is the
//! thin libibverbs layer (cargo feature `rdma`); this file runs the engine
//! thread and implements the common [`Prober`].
//!
//! Peers learn each other's RDMA endpoint (GID, QPN, Q_Key) over the UDP
//! echo channel: [`install`] adds [`endpoint_tlv`] to every UDP request
//! and reply and feeds the peers' TLVs to [`EndpointBook::learn`]; the
//! RDMA prober probes exactly the peers whose endpoint is known.

// Without the `rdma` feature only the wire format is used (the TLV), so
// the engine's pure parts are compiled (and unit-tested) but idle.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod clock;
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod engine;
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod exchange;
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub mod packet;
#[cfg(feature = "rdma")]
mod verbs;

use super::{Prober, Protocol, Target};
use crate::metrics::Metrics;
use packet::RdmaEndpoint;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

pub use packet::DEFAULT_QKEY;

/// Peers' RDMA endpoints as learned from their UDP replies.
#[derive(Debug, Clone, Default)]
pub struct EndpointBook {
    inner: Arc<RwLock<HashMap<IpAddr, RdmaEndpoint>>>,
}

impl EndpointBook {
    pub fn new() -> EndpointBook {
        EndpointBook::default()
    }

    /// Record the endpoint TLV value a peer at `addr` sent. A malformed
    /// value is an error naming the peer; the old entry is kept.
    pub fn learn(&self, addr: IpAddr, tlv_value: &[u8]) -> Result<(), String> {
        let ep = RdmaEndpoint::decode(tlv_value)
            .map_err(|e| format!("RDMA endpoint from {addr}: {e}"))?;
        let mut m = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if m.get(&addr) != Some(&ep) {
            tracing::debug!(peer = %addr, gid = %ep.gid_addr(), qpn = ep.qpn, "learned RDMA endpoint");
            m.insert(addr, ep);
        }
        Ok(())
    }

    pub fn get(&self, addr: IpAddr) -> Option<RdmaEndpoint> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&addr)
            .copied()
    }
}

/// The UDP reply TLV advertising this exporter's RDMA endpoint
/// (type [`super::wire::TLV_RDMA_ENDPOINT`]).
pub fn endpoint_tlv(ep: &RdmaEndpoint) -> (u16, Vec<u8>) {
    (super::wire::TLV_RDMA_ENDPOINT, ep.encode().to_vec())
}

/// RDMA prober settings.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub struct RdmaConfig {
    /// A probe without an ACK after this long is lost.
    pub timeout: Duration,
    pub qkey: u32,
    /// Prefer the RNIC whose GID carries this address (the exporter's
    /// `nic` identity), so probes leave through the port training uses.
    pub preferred_addr: Option<IpAddr>,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            timeout: Duration::from_secs(1),
            qkey: DEFAULT_QKEY,
            preferred_addr: None,
        }
    }
}

static DISABLED_LOGGED: AtomicBool = AtomicBool::new(false);

/// Log `RDMA probing disabled: <reason>` — once per process, however many
/// times start-up is attempted.
pub fn log_disabled(reason: &str) -> bool {
    if DISABLED_LOGGED.swap(true, Ordering::SeqCst) {
        return false;
    }
    tracing::warn!("RDMA probing disabled: {reason}");
    true
}

/// Start RDMA probing, or log why it is disabled and return `None`; the
/// caller then simply runs without an RDMA prober.
pub fn start_or_disable(
    config: RdmaConfig,
    metrics: Arc<Metrics>,
    book: EndpointBook,
) -> Option<Arc<RdmaProber>> {
    match RdmaProber::start(config, metrics, book) {
        Ok(p) => Some(p),
        Err(reason) => {
            log_disabled(&reason);
            None
        }
    }
}

/// Start RDMA probing for the exporter and hook it into the UDP echo
/// channel: our endpoint goes into every request and reply, and peers'
/// endpoints are learned from theirs. `None` (after the one
/// `RDMA probing disabled` log line) when this host cannot probe RDMA.
pub fn install(
    timeout: Duration,
    nic_identity: &str,
    metrics: Arc<Metrics>,
    ext: &crate::responder::Extensions,
) -> Option<Arc<RdmaProber>> {
    let config = RdmaConfig {
        timeout,
        preferred_addr: nic_identity.parse().ok(),
        ..RdmaConfig::default()
    };
    let prober = start_or_disable(config, metrics.clone(), EndpointBook::new())?;
    ext.advertise
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(endpoint_tlv(&prober.local_endpoint()));
    let book = prober.book().clone();
    ext.observers
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::new(
            move |from: IpAddr, p: &super::wire::Packet<'_>| {
                if let Some(v) = p.tlv(super::wire::TLV_RDMA_ENDPOINT) {
                    if let Err(e) = book.learn(from, v) {
                        metrics.probe_error(Protocol::Rdma, "rdma_bad_endpoint");
                        tracing::debug!("{e}");
                    }
                }
            },
        ));
    tracing::info!(
        gid = %prober.local_endpoint().gid_addr(),
        qpn = prober.local_endpoint().qpn,
        "RDMA probing enabled"
    );
    Some(prober)
}

#[cfg(not(feature = "rdma"))]
mod thread {
    use super::*;

    pub struct Handle;

    pub fn spawn(
        _config: RdmaConfig,
        _metrics: Arc<Metrics>,
    ) -> Result<(Handle, RdmaEndpoint), String> {
        Err("this build has no RDMA support (cargo feature `rdma` is off)".into())
    }

    impl Handle {
        pub fn probe(&self, _target: Arc<Target>, _to: RdmaEndpoint) {}
        pub fn stop(&self) {}
    }
}

#[cfg(feature = "rdma")]
mod thread {
    //! The engine thread: owns the RNICs (verbs objects are not `Send`),
    //! waits on their completion channels plus an eventfd that wakes it
    //! for new probes, and hands everything to the [`Engine`].

    use super::engine::{Engine, Rnic};
    use super::verbs::Nic;
    use super::*;
    use crate::probe::wall_ns;
    use std::sync::mpsc;

    enum Cmd {
        Probe(Arc<Target>, RdmaEndpoint),
        Stop,
    }

    pub struct Handle {
        tx: mpsc::Sender<Cmd>,
        wake: std::os::fd::OwnedFd,
    }

    impl Handle {
        fn kick(&self) {
            use std::os::fd::AsRawFd;
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe {
                libc::write(
                    self.wake.as_raw_fd(),
                    &one as *const u64 as *const libc::c_void,
                    8,
                )
            };
        }

        pub fn probe(&self, target: Arc<Target>, to: RdmaEndpoint) {
            if self.tx.send(Cmd::Probe(target, to)).is_ok() {
                self.kick();
            }
        }

        pub fn stop(&self) {
            let _ = self.tx.send(Cmd::Stop);
            self.kick();
        }
    }

    /// Spawn the engine; returns once the RNICs are open (or failed to).
    pub fn spawn(
        config: RdmaConfig,
        metrics: Arc<Metrics>,
    ) -> Result<(Handle, RdmaEndpoint), String> {
        // Listing first is cheap and gives the clearest reason on hosts
        // without RDMA (ENOSYS or no devices), without starting a thread.
        super::verbs::list_devices().map_err(|e| e.0)?;
        // SAFETY: plain syscall; the fd is owned below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: efd is a fresh, owned descriptor.
        let wake = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(efd) };
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<RdmaEndpoint, String>>();
        std::thread::Builder::new()
            .name("rdma-prober".into())
            .spawn(move || {
                let nics = match Nic::open_all(config.qkey) {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.0));
                        return;
                    }
                };
                let primary = pick_primary(&nics, config.preferred_addr);
                let fds: Vec<i32> = nics.iter().map(|n| n.event_fd()).collect();
                let engine = Engine::new(nics, primary, &config, metrics);
                let ep = engine.nic(primary).map(|n| n.endpoint());
                match ep {
                    Some(ep) => {
                        let _ = ready_tx.send(Ok(ep));
                        run(engine, &fds, rx, efd);
                    }
                    None => {
                        let _ = ready_tx.send(Err("no usable RDMA port".into()));
                    }
                }
            })
            .map_err(|e| format!("cannot start the RDMA thread: {e}"))?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(ep)) => Ok((Handle { tx, wake }, ep)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("RDMA devices did not open within 10 s".into()),
        }
    }

    fn pick_primary(nics: &[Nic], preferred: Option<IpAddr>) -> usize {
        let want = preferred.map(|a| match a {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        });
        want.and_then(|g| nics.iter().position(|n| n.endpoint().gid == g))
            .unwrap_or(0)
    }

    fn run(mut engine: Engine<Nic>, nic_fds: &[i32], rx: mpsc::Receiver<Cmd>, efd: i32) {
        let mut ready = vec![false; nic_fds.len()];
        loop {
            loop {
                match rx.try_recv() {
                    Ok(Cmd::Probe(target, to)) => engine.probe(target, to),
                    Ok(Cmd::Stop) | Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            // Wait for completions or a kick, at most 5 ms (expiry tick).
            let mut fds: Vec<libc::pollfd> = std::iter::once(efd)
                .chain(nic_fds.iter().copied())
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: fds is a valid array of pollfd.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 5) };
            if fds[0].revents != 0 {
                let mut v = 0u64;
                // SAFETY: draining our eventfd.
                unsafe { libc::read(efd, &mut v as *mut u64 as *mut libc::c_void, 8) };
            }
            for (r, f) in ready.iter_mut().zip(&fds[1..]) {
                *r = f.revents != 0;
            }
            engine.process(&ready);
            engine.expire(wall_ns());
        }
    }
}

/// The RDMA prober behind the common [`Prober`] interface. `probe` only
/// queues the target for the engine thread (never blocks).
pub struct RdmaProber {
    handle: thread::Handle,
    book: EndpointBook,
    local: RdmaEndpoint,
}

impl RdmaProber {
    /// Open the RNICs and start the engine, or return why RDMA probing
    /// cannot run on this host.
    pub fn start(
        config: RdmaConfig,
        metrics: Arc<Metrics>,
        book: EndpointBook,
    ) -> Result<Arc<RdmaProber>, String> {
        let (handle, local) = thread::spawn(config, metrics)?;
        Ok(Arc::new(RdmaProber {
            handle,
            book,
            local,
        }))
    }

    /// This exporter's endpoint, for the UDP responder's reply TLVs.
    pub fn local_endpoint(&self) -> RdmaEndpoint {
        self.local
    }

    pub fn book(&self) -> &EndpointBook {
        &self.book
    }
}

impl Drop for RdmaProber {
    fn drop(&mut self) {
        self.handle.stop();
    }
}

impl Prober for RdmaProber {
    fn protocol(&self) -> Protocol {
        Protocol::Rdma
    }

    /// Every target gets a slot: endpoints are learned after the target
    /// list is built, and `probe` skips peers whose endpoint is unknown.
    fn applies_to(&self, _target: &Target) -> bool {
        true
    }

    fn probe(&self, target: &Arc<Target>) {
        if let Some(ep) = self.book.get(target.addr()) {
            self.handle.probe(target.clone(), ep);
        }
    }

    /// The engine thread expires its own probes (every 5 ms at most).
    fn expire(&self, _now: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_book_learns_and_rejects() {
        let book = EndpointBook::new();
        let addr: IpAddr = "198.18.0.2".parse().unwrap();
        let ep = RdmaEndpoint {
            gid: [1; 16],
            qpn: 0x123,
            qkey: DEFAULT_QKEY,
        };
        let (t, v) = endpoint_tlv(&ep);
        assert_eq!(t, super::super::wire::TLV_RDMA_ENDPOINT);
        book.learn(addr, &v).unwrap();
        assert_eq!(book.get(addr), Some(ep));
        let err = book.learn(addr, &v[..3]).unwrap_err();
        assert!(err.contains("198.18.0.2") && err.contains("24"), "{err}");
        assert_eq!(book.get(addr), Some(ep), "bad input keeps the old entry");
        assert_eq!(book.get("198.18.0.3".parse().unwrap()), None);
    }

    #[test]
    fn disabled_message_is_logged_once() {
        // The first call in this process logs; every later one is silent.
        let first = log_disabled("test reason");
        assert!(!log_disabled("test reason"));
        assert!(!log_disabled("another reason"));
        let _ = first;
    }

    #[cfg(feature = "rdma")]
    #[test]
    fn start_reports_a_reason_without_devices() {
        // This test host has no RNIC; with one, start succeeds instead.
        let metrics = Arc::new(Metrics::new(&Default::default()));
        match RdmaProber::start(RdmaConfig::default(), metrics, EndpointBook::new()) {
            Ok(p) => assert!(p.local_endpoint().qpn >= 2),
            Err(reason) => assert!(reason.contains("RDMA"), "{reason}"),
        }
    }
}
