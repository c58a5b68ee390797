//! Paris-style UDP path tracing along a probe flow.
//!
//! Classic traceroute varies the destination port per probe, so on an
//! ECMP fabric each probe may hash onto a different path and the "path" it
//! prints is a mix of several. Paris traceroute keeps every field the
//! switches hash on — the 5-tuple — fixed and varies only the TTL; the
//! probe is identified by a field hashing ignores. Here that is the IPv4
//! identification field (our packets are built on a raw socket, so we set
//! it), which every router quotes back in its ICMP time-exceeded or
//! destination-unreachable message. Using the probe flow's own 5-tuple
//! means the trace shows the path that flow — and so the pair's loss and
//! latency — actually takes.
//!
//! The destination is reached when it answers: an ICMP port unreachable
//! (nobody listens on the port) or a UDP datagram from the flow's
//! destination port back to its source port (the peer's responder echoing
//! the request, which is a valid UDP echo request for that reason).
//!
//! The UDP prober probes each peer over several flows (source ports);
//! each is traced on its own 5-tuple, so each shows the ECMP path that
//! flow takes, and flows with the same hops form one path of the pair.
//!
//! Layout: [`packet`] builds and parses packets (pure); [`paris`] is the
//! blocking engine over raw sockets (CAP_NET_RAW, through `sys::raw`);
//! [`tracer`] keeps the last trace per flow and the budget of concurrent
//! traces; [`paths`] groups flows into paths (pure) and [`hops`] publishes
//! the path series (`skeletonhunter_path_hop_info`,
//! `skeletonhunter_path_loss_ratio`, `skeletonhunter_path_probes`);
//! [`anomaly`], [`mapper`] and [`context`] decide when a flow is traced;
//! [`http`] serves `/trace` and `/traces`. May use `model/`, `sys/`, `wire/`,
//! `telemetry/`, `discovery/` (the peer set) and `probe/` (learned names).

pub mod anomaly;
pub mod budget;
pub mod context;
pub mod hops;
pub mod http;
pub mod mapper;
pub mod packet;
pub mod paris;
pub mod paths;
pub mod tracer;

pub use context::Context;
pub use tracer::{Start, TraceReason, Tracer};

use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

/// The flow a trace follows: every probe carries exactly this 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Flow {
    /// Source address and port (the probe flow's).
    pub src: SocketAddrV4,
    /// The peer's responder.
    pub dst: SocketAddrV4,
}

/// Trace settings.
#[derive(Debug, Clone)]
pub struct TraceConfig {
    /// Highest TTL tried. Data-centre Clos fabrics are a handful of hops.
    pub max_ttl: u8,
    /// How long to wait for an answer to one probe.
    pub wait: Duration,
    /// Probes per TTL before the hop is recorded as silent.
    pub attempts: u8,
    /// Give up after this many silent TTLs in a row (a dead link: nothing
    /// beyond it can answer).
    pub max_silent: u8,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            max_ttl: 16,
            wait: Duration::from_millis(400),
            attempts: 2,
            max_silent: 3,
        }
    }
}

/// What answered a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// ICMP time exceeded: a router on the path.
    TimeExceeded,
    /// ICMP destination unreachable from a router (code in the message).
    Unreachable,
    /// The destination itself (port unreachable, or its responder).
    Destination,
}

/// One hop of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hop {
    /// The TTL of the probes.
    pub ttl: u8,
    /// `None` when no probe at this TTL was answered.
    pub address: Option<Ipv4Addr>,
    /// What kind of answer came.
    pub answer: Option<Answer>,
    /// Time from send to answer.
    pub rtt_seconds: Option<f64>,
}

/// A finished trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trace {
    /// The flow traced.
    pub flow: Flow,
    /// One entry per TTL tried.
    pub hops: Vec<Hop>,
    /// Whether the destination answered.
    pub reached: bool,
    /// When it started.
    pub started_unix_seconds: f64,
    /// How long it took.
    pub duration_seconds: f64,
}
