//! The engine thread: owns the RNICs (verbs objects are not `Send`),
//! waits on their completion channels plus an eventfd that wakes it for
//! new probes, and hands everything to the [`Engine`](super::engine::Engine).

/// Why RDMA probing cannot run on this host; logged once as
/// `RDMA probing disabled: <reason>`.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Built without the `rdma` cargo feature.
    #[error("this build has no RDMA support (cargo feature `rdma` is off)")]
    NotBuilt,
    /// No RDMA subsystem, device or usable port (the text says which).
    #[error("{0}")]
    Unavailable(String),
    /// The wake-up eventfd could not be created.
    #[error("eventfd: {0}")]
    EventFd(std::io::Error),
    /// The devices opened but none has a usable port.
    #[error("no usable RDMA port")]
    NoPort,
    /// The engine thread could not be spawned.
    #[error("cannot start the RDMA thread: {0}")]
    Thread(std::io::Error),
    /// Opening the devices hung.
    #[error("RDMA devices did not open within 10 s")]
    Timeout,
}

impl StartError {
    /// The `reason` label of `skeletonhunter_rdma_info`.
    pub fn kind(&self) -> &'static str {
        match self {
            StartError::NotBuilt => "not_built",
            StartError::Unavailable(_) => "unavailable",
            StartError::EventFd(_) => "eventfd",
            StartError::NoPort => "no_port",
            StartError::Thread(_) => "thread",
            StartError::Timeout => "timeout",
        }
    }
}

#[cfg(not(feature = "rdma"))]
mod imp {
    use super::super::RdmaConfig;
    use super::StartError;
    use crate::probe::Target;
    use crate::telemetry::Metrics;
    use crate::wire::rdma::RdmaEndpoint;
    use std::sync::Arc;

    /// Stand-in for the engine thread's handle.
    pub struct Handle;

    /// Always fails: this build has no RDMA.
    pub fn spawn(
        _config: RdmaConfig,
        _metrics: Arc<Metrics>,
    ) -> Result<(Handle, RdmaEndpoint), StartError> {
        Err(StartError::NotBuilt)
    }

    impl Handle {
        pub fn probe(&self, _target: Arc<Target>, _to: RdmaEndpoint) {}
        pub fn stop(&self) {}
    }
}

#[cfg(feature = "rdma")]
mod imp {
    use super::super::engine::Engine;
    use super::super::RdmaConfig;
    use super::StartError;
    use crate::probe::Target;
    use crate::sys::eventfd::EventFd;
    use crate::sys::poll::poll_readable;
    use crate::sys::time::wall_ns;
    use crate::sys::verbs::{list_devices, Nic};
    use crate::telemetry::Metrics;
    use crate::wire::rdma::RdmaEndpoint;
    use std::net::IpAddr;
    use std::os::fd::AsRawFd;
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    enum Cmd {
        Probe(Arc<Target>, RdmaEndpoint),
        Stop,
    }

    /// Queue of the engine thread, and its wake-up.
    pub struct Handle {
        tx: mpsc::Sender<Cmd>,
        wake: Arc<EventFd>,
    }

    impl Handle {
        pub fn probe(&self, target: Arc<Target>, to: RdmaEndpoint) {
            if self.tx.send(Cmd::Probe(target, to)).is_ok() {
                self.wake.kick();
            }
        }

        pub fn stop(&self) {
            let _ = self.tx.send(Cmd::Stop);
            self.wake.kick();
        }
    }

    /// Spawn the engine; returns once the RNICs are open (or failed to).
    pub fn spawn(
        config: RdmaConfig,
        metrics: Arc<Metrics>,
    ) -> Result<(Handle, RdmaEndpoint), StartError> {
        // Listing first is cheap and gives the clearest reason on hosts
        // without RDMA (ENOSYS or no devices), without starting a thread.
        list_devices().map_err(|e| StartError::Unavailable(e.0))?;
        let wake = Arc::new(EventFd::new().map_err(StartError::EventFd)?);
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<RdmaEndpoint, StartError>>();
        let thread_wake = wake.clone();
        std::thread::Builder::new()
            .name("rdma-prober".into())
            .spawn(move || {
                let nics = match Nic::open_all(config.qkey) {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = ready_tx.send(Err(StartError::Unavailable(e.0)));
                        return;
                    }
                };
                let primary = pick_primary(&nics, config.preferred_addr);
                let fds: Vec<i32> = nics.iter().map(Nic::event_fd).collect();
                let engine = Engine::new(nics, primary, &config, metrics);
                match engine.nic(primary).map(|n| n.endpoint) {
                    Some(ep) => {
                        let _ = ready_tx.send(Ok(ep));
                        run(engine, &fds, &rx, &thread_wake);
                    }
                    None => {
                        let _ = ready_tx.send(Err(StartError::NoPort));
                    }
                }
            })
            .map_err(StartError::Thread)?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(ep)) => Ok((Handle { tx, wake }, ep)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StartError::Timeout),
        }
    }

    fn pick_primary(nics: &[Nic], preferred: Option<IpAddr>) -> usize {
        let want = preferred.map(|a| match a {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        });
        want.and_then(|g| nics.iter().position(|n| n.endpoint.gid == g))
            .unwrap_or(0)
    }

    fn run(mut engine: Engine<Nic>, nic_fds: &[i32], rx: &mpsc::Receiver<Cmd>, wake: &EventFd) {
        let all: Vec<i32> = std::iter::once(wake.as_raw_fd())
            .chain(nic_fds.iter().copied())
            .collect();
        loop {
            loop {
                match rx.try_recv() {
                    Ok(Cmd::Probe(target, to)) => engine.probe(target, to),
                    Ok(Cmd::Stop) | Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            // Wait for completions or a kick, at most 5 ms (expiry tick).
            let ready = poll_readable(&all, Duration::from_millis(5));
            if ready[0] {
                wake.drain();
            }
            engine.process(&ready[1..]);
            engine.expire(wall_ns());
        }
    }
}

pub use imp::{spawn, Handle};
