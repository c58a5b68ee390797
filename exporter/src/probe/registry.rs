//! Which probers run: one per configured protocol, started in the
//! configuration's order (which is also their slot order in a round).

use super::flows::FlowBook;
use super::icmp::IcmpProber;
use super::rdma::{self, RdmaProber};
use super::tcp::TcpProber;
use super::udp::UdpProber;
use super::{PeerInfo, Prober};
use crate::model::Protocol;
use crate::telemetry::Metrics;
use std::sync::Arc;
use std::time::Duration;

/// Settings every prober may need.
#[derive(Debug, Clone)]
pub struct Options {
    /// A probe without an answer after this long is lost.
    pub timeout: Duration,
    /// Size of UDP echo requests.
    pub udp_size: usize,
    /// This exporter's `nic` identity (RDMA picks the RNIC carrying it).
    pub nic: String,
    /// UDP flows (source ports) per peer.
    pub flows: usize,
    /// Window of the per-flow loss counts.
    pub flow_window: Duration,
}

/// A prober that could not start (the exporter then does not start).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The UDP probe socket.
    #[error("cannot open the UDP probe socket: {0}")]
    Udp(std::io::Error),
    /// The ICMP socket (datagram and raw both refused).
    #[error("cannot open an ICMP socket: {0}")]
    Icmp(std::io::Error),
}

/// The running probers and what the rest of the exporter needs from them.
pub struct Probers {
    /// In configuration order.
    pub list: Vec<Arc<dyn Prober>>,
    /// Source ports of the UDP probe flows in flow order, for path
    /// tracing (empty without UDP probing).
    pub udp_source_ports: Vec<u16>,
    /// Per-flow loss of the UDP probes, for path tracing.
    pub flow_book: Option<Arc<FlowBook>>,
    /// TLVs this exporter adds to its UDP requests and replies.
    pub advertise: Vec<(u16, Vec<u8>)>,
    /// Where peers' self-descriptions are learned.
    pub peer_info: Arc<PeerInfo>,
}

/// Start a prober for each of `protocols`. RDMA starts first (when
/// listed), because the UDP messages advertise its endpoint; without an
/// RDMA device it logs why once and is left out.
pub fn start(
    protocols: &[Protocol],
    opts: &Options,
    metrics: &Arc<Metrics>,
) -> Result<Probers, StartError> {
    let rdma: Option<Arc<RdmaProber>> = if protocols.contains(&Protocol::Rdma) {
        rdma::install(opts.timeout, &opts.nic, metrics.clone())
    } else {
        None
    };
    let advertise: Vec<(u16, Vec<u8>)> = rdma.iter().map(|p| p.advertisement()).collect();
    let peer_info = PeerInfo::new(metrics.clone(), rdma.as_ref().map(|p| p.book().clone()));
    let mut list: Vec<Arc<dyn Prober>> = Vec::new();
    let mut udp_source_ports = Vec::new();
    let mut flow_book = None;
    for p in protocols {
        match p {
            Protocol::Udp => {
                let book = Arc::new(FlowBook::new(
                    opts.flows,
                    opts.flow_window,
                    std::time::Instant::now(),
                ));
                let udp = UdpProber::start(
                    metrics.clone(),
                    peer_info.clone(),
                    advertise.clone(),
                    opts.timeout,
                    opts.udp_size,
                    book.clone(),
                )
                .map_err(StartError::Udp)?;
                udp_source_ports = udp.local_ports();
                flow_book = Some(book);
                list.push(udp);
            }
            Protocol::Tcp => list.push(TcpProber::new(metrics.clone(), opts.timeout)),
            Protocol::Icmp => list
                .push(IcmpProber::start(metrics.clone(), opts.timeout).map_err(StartError::Icmp)?),
            Protocol::Rdma => {
                if let Some(r) = &rdma {
                    list.push(r.clone());
                }
            }
        }
    }
    Ok(Probers {
        list,
        udp_source_ports,
        flow_book,
        advertise,
        peer_info,
    })
}
