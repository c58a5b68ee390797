//! The validated configuration the exporter runs with.

use super::ecmp::FlowSettings;
use super::file::MeshEntry;
use super::identity::IdentityOrigin;
use super::traffic::TrafficSettings;
use crate::model::traffic::Cidr;
use crate::model::{HistogramMode, Peer, Protocol};
use skeletonhunter_common::http::Limits;
use skeletonhunter_common::web::WebSource;
use skeletonhunter_common::Identity;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default `/metrics` address.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9465";
/// Default UDP echo port.
pub const DEFAULT_UDP_PORT: u16 = 9466;
/// Default TCP dial port.
pub const DEFAULT_TCP_PORT: u16 = 9467;

/// Default of `responder.rate_limit`: requests per second answered per
/// source, far above any peer's probe rate (a 1 ms interval on one flow).
pub const DEFAULT_RESPONDER_RATE: u32 = 1000;

/// The longest `responder.departure_notice`: Kubernetes kills a pod 30 s
/// after asking it to stop (the default grace period), and the exporter
/// still needs a moment to shut down after the notice.
pub const MAX_DEPARTURE_NOTICE: Duration = Duration::from_secs(25);

/// Whom the UDP echo responder answers, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponderPolicy {
    /// Source networks answered.
    pub allow: Vec<Cidr>,
    /// Answer the current peers.
    pub allow_peers: bool,
    /// Requests per second per source (burst: one second's worth); 0: off.
    pub rate_limit: u32,
}

impl ResponderPolicy {
    /// Whether every source may be answered (no allow-list at all).
    pub fn open(&self) -> bool {
        self.allow.is_empty() && !self.allow_peers
    }
}

/// A DNS source, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSource {
    /// The name to resolve.
    pub name: String,
    /// SRV records (ports and names) instead of A/AAAA.
    pub srv: bool,
    /// Resolution interval.
    pub refresh: Duration,
    /// Resolver to ask; `None`: /etc/resolv.conf.
    pub nameserver: Option<SocketAddr>,
}

/// ToR-mesh settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorMesh {
    /// Peer list file, re-read every `refresh`.
    pub file: Option<PathBuf>,
    /// Inline entries.
    pub peers: Vec<MeshEntry>,
    /// Re-read interval.
    pub refresh: Duration,
}

/// The validated configuration the exporter runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The HTTP server's address.
    pub listen: SocketAddr,
    /// Where metrics are served (`--web.telemetry-path`, default `/metrics`).
    pub telemetry_path: String,
    /// Bounds of the HTTP server.
    pub http: Limits,
    /// `--web.config.file`: TLS and authentication of the HTTP server.
    pub web: Option<Arc<WebSource>>,
    /// UDP echo responder address (`None`: off).
    pub udp_listen: Option<SocketAddr>,
    /// TCP dial acceptor address (`None`: off).
    pub tcp_listen: Option<SocketAddr>,
    /// Whom the UDP echo responder answers.
    pub responder: ResponderPolicy,
    /// How long the UDP responder goes on answering, with every reply
    /// marked leaving, once the exporter is told to stop (0: not at all).
    pub departure_notice: Duration,
    /// This exporter's labels.
    pub identity: Identity,
    /// Where each identity field came from, and the topology map lookup.
    pub identity_origin: IdentityOrigin,
    /// Probe interval per peer and protocol.
    pub interval: Duration,
    /// Loss timeout.
    pub timeout: Duration,
    /// Protocols, in slot order.
    pub protocols: Vec<Protocol>,
    /// Default UDP echo port of peers.
    pub udp_port: u16,
    /// Default TCP dial port of peers.
    pub tcp_port: u16,
    /// UDP echo request size.
    pub udp_size: usize,
    /// Multi-flow probing and flow-to-path tracing.
    pub flows: FlowSettings,
    /// Configured peers.
    pub static_peers: Vec<Peer>,
    /// DNS sources.
    pub dns: Vec<DnsSource>,
    /// ToR-mesh source.
    pub tor_mesh: Option<TorMesh>,
    /// Traffic (eBPF / polling) discovery settings.
    pub ebpf: TrafficSettings,
    /// `metrics.histograms`: classic, native or both.
    pub histograms: HistogramMode,
    /// The containers on this host probed from (`containers`).
    pub containers: super::containers::ContainerSettings,
}
