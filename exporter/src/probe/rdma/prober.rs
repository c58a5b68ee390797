//! The RDMA prober behind the common [`Prober`] interface, and its
//! start-up (or the one log line saying why RDMA probing is off).

use super::thread::{self, StartError};
use super::{endpoint_tlv, EndpointBook, RdmaConfig};
use crate::model::Protocol;
use crate::probe::{Prober, Target};
use crate::telemetry::Metrics;
use crate::wire::rdma::RdmaEndpoint;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    match RdmaProber::start(config, metrics.clone(), book) {
        Ok(p) => Some(p),
        Err(reason) => {
            metrics.set_rdma_info("disabled", reason.kind());
            log_disabled(&reason.to_string());
            None
        }
    }
}

/// Start RDMA probing for the exporter. The caller advertises
/// [`RdmaProber::advertisement`] in every UDP request and reply and feeds
/// peers' endpoint TLVs to [`RdmaProber::book`]. `None` (after the one
/// `RDMA probing disabled` log line) when this host cannot probe RDMA.
pub fn install(
    timeout: Duration,
    nic_identity: &str,
    metrics: Arc<Metrics>,
) -> Option<Arc<RdmaProber>> {
    let config = RdmaConfig {
        timeout,
        preferred_addr: nic_identity.parse().ok(),
        ..RdmaConfig::default()
    };
    let prober = start_or_disable(config, metrics, EndpointBook::new())?;
    tracing::info!(
        gid = %prober.local_endpoint().gid_addr(),
        qpn = prober.local_endpoint().qpn,
        "RDMA probing enabled"
    );
    Some(prober)
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
    ) -> Result<Arc<RdmaProber>, StartError> {
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

    /// Where peers' endpoints are learned; the prober probes those.
    pub fn book(&self) -> &EndpointBook {
        &self.book
    }

    /// The UDP TLV advertising this exporter's endpoint to peers.
    pub fn advertisement(&self) -> (u16, Vec<u8>) {
        endpoint_tlv(&self.local)
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
            Err(reason) => assert!(reason.to_string().contains("RDMA"), "{reason}"),
        }
    }
}
