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
//! Packet building and ICMP parsing are pure functions; the blocking
//! [`trace`] drives raw sockets (CAP_NET_RAW) and runs on a blocking thread.
//! [`Tracer`] keeps the last trace per destination, serves them as JSON
//! and as `skeletonhunter_path_hop_info`, and starts traces on demand or
//! when a pair turns anomalous.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The flow a trace follows: every probe carries exactly this 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Flow {
    pub src: SocketAddrV4,
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
    pub ttl: u8,
    /// `None` when no probe at this TTL was answered.
    pub address: Option<Ipv4Addr>,
    pub answer: Option<Answer>,
    pub rtt_seconds: Option<f64>,
}

/// A finished trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trace {
    pub flow: Flow,
    pub hops: Vec<Hop>,
    /// Whether the destination answered.
    pub reached: bool,
    pub started_unix_seconds: f64,
    pub duration_seconds: f64,
}

// ---------------------------------------------------------------- packets

/// The Internet checksum (RFC 1071) of `data`, starting from `sum`.
fn checksum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

fn checksum_fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 + UDP datagram of `flow` with `ttl` and identification `id`,
/// for a raw socket with IP_HDRINCL. The UDP checksum is computed (a zero
/// checksum is legal on IPv4 but some middleboxes drop it); the kernel
/// fills the IP header checksum.
pub fn build_probe(flow: &Flow, ttl: u8, id: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut p = Vec::with_capacity(total);
    p.push(0x45); // version 4, IHL 5
    p.push(0); // DSCP/ECN
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0, 0]); // flags/fragment offset
    p.push(ttl);
    p.push(17); // UDP
    p.extend_from_slice(&[0, 0]); // header checksum: kernel fills it
    p.extend_from_slice(&flow.src.ip().octets());
    p.extend_from_slice(&flow.dst.ip().octets());
    p.extend_from_slice(&flow.src.port().to_be_bytes());
    p.extend_from_slice(&flow.dst.port().to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    // Pseudo-header + UDP header + payload.
    let mut sum = checksum_add(0, &flow.src.ip().octets());
    sum = checksum_add(sum, &flow.dst.ip().octets());
    sum += 17 + udp_len as u32;
    sum = checksum_add(sum, &p[20..]);
    let mut c = checksum_fold(sum);
    if c == 0 {
        c = 0xffff;
    }
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

/// The parts of a probe an ICMP error quotes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub id: u16,
}

/// An ICMP error about one of our UDP datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpError {
    /// Who sent the ICMP message.
    pub from: Ipv4Addr,
    pub icmp_type: u8,
    pub code: u8,
    pub quote: Quote,
}

fn ipv4_header(b: &[u8]) -> Option<(usize, u8, Ipv4Addr, Ipv4Addr)> {
    if b.len() < 20 || b[0] >> 4 != 4 {
        return None;
    }
    let ihl = (b[0] & 0x0f) as usize * 4;
    if ihl < 20 || b.len() < ihl {
        return None;
    }
    let src = Ipv4Addr::new(b[12], b[13], b[14], b[15]);
    let dst = Ipv4Addr::new(b[16], b[17], b[18], b[19]);
    Some((ihl, b[9], src, dst))
}

/// Parse a packet read from a raw ICMP socket (IP header included): an
/// ICMP time-exceeded or destination-unreachable quoting a UDP datagram.
/// Anything else (echo traffic, truncated quotes) gives `None`.
pub fn parse_icmp_error(pkt: &[u8]) -> Option<IcmpError> {
    let (ihl, proto, from, _) = ipv4_header(pkt)?;
    if proto != 1 {
        return None;
    }
    let icmp = &pkt[ihl..];
    if icmp.len() < 8 {
        return None;
    }
    let (icmp_type, code) = (icmp[0], icmp[1]);
    if icmp_type != 11 && icmp_type != 3 {
        return None;
    }
    let inner = &icmp[8..];
    let (qihl, qproto, qsrc, qdst) = ipv4_header(inner)?;
    if qproto != 17 || inner.len() < qihl + 8 {
        return None;
    }
    let id = u16::from_be_bytes([inner[4], inner[5]]);
    let udp = &inner[qihl..];
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    let dport = u16::from_be_bytes([udp[2], udp[3]]);
    Some(IcmpError {
        from,
        icmp_type,
        code,
        quote: Quote {
            src: SocketAddrV4::new(qsrc, sport),
            dst: SocketAddrV4::new(qdst, dport),
            id,
        },
    })
}

/// Parse a packet read from a raw UDP socket: `(source, destination)`.
pub fn parse_udp(pkt: &[u8]) -> Option<(SocketAddrV4, SocketAddrV4)> {
    let (ihl, proto, src, dst) = ipv4_header(pkt)?;
    if proto != 17 || pkt.len() < ihl + 8 {
        return None;
    }
    let u = &pkt[ihl..];
    Some((
        SocketAddrV4::new(src, u16::from_be_bytes([u[0], u[1]])),
        SocketAddrV4::new(dst, u16::from_be_bytes([u[2], u[3]])),
    ))
}

/// What a received packet means for the probe `id` of `flow` in flight.
pub fn classify(
    flow: &Flow,
    id: u16,
    icmp: Option<&IcmpError>,
    udp: Option<(SocketAddrV4, SocketAddrV4)>,
) -> Option<(Ipv4Addr, Answer)> {
    if let Some(e) = icmp {
        if e.quote.src.port() != flow.src.port()
            || e.quote.dst != flow.dst
            || e.quote.id != id
            || (!flow.src.ip().is_unspecified() && e.quote.src.ip() != flow.src.ip())
        {
            return None;
        }
        // Any error from the destination itself (port unreachable, as a
        // rule) means the probe got there.
        let answer = if e.from == *flow.dst.ip() {
            Answer::Destination
        } else if e.icmp_type == 11 {
            Answer::TimeExceeded
        } else {
            Answer::Unreachable
        };
        return Some((e.from, answer));
    }
    if let Some((src, dst)) = udp {
        if src == flow.dst && dst.port() == flow.src.port() {
            return Some((*flow.dst.ip(), Answer::Destination));
        }
    }
    None
}

/// The source address the kernel would use towards `dst` (no packet is
/// sent: connecting a UDP socket only does the route lookup).
pub fn source_for(dst: Ipv4Addr) -> io::Result<Ipv4Addr> {
    let s = UdpSocket::bind("0.0.0.0:0")?;
    s.connect((dst, 9))?;
    match s.local_addr()? {
        std::net::SocketAddr::V4(a) => Ok(*a.ip()),
        _ => Err(io::Error::other("no IPv4 source address")),
    }
}

// ---------------------------------------------------------------- sockets

fn raw_socket(protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            protocol,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("path tracing needs raw sockets (root or CAP_NET_RAW): {e}"),
        ));
    }
    // SAFETY: fd is fresh and owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send_raw(fd: &OwnedFd, pkt: &[u8], dst: Ipv4Addr) -> io::Result<()> {
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(dst.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: pkt and sa are valid for the call.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            pkt.as_ptr() as *const libc::c_void,
            pkt.len(),
            0,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn recv_raw(fd: &OwnedFd, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: buf is valid for writes of its length.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        )
    };
    (n > 0).then_some(n as usize)
}

/// Trace `flow` (blocking; run it on a blocking thread). `payload` is the
/// UDP payload of every probe. The source address is filled in from the
/// route when unspecified.
pub fn trace(mut flow: Flow, cfg: &TraceConfig, payload: &[u8]) -> io::Result<Trace> {
    if flow.src.ip().is_unspecified() {
        flow.src.set_ip(source_for(*flow.dst.ip())?);
    }
    let tx = raw_socket(libc::IPPROTO_RAW)?;
    let icmp = raw_socket(libc::IPPROTO_ICMP)?;
    let udp = raw_socket(libc::IPPROTO_UDP)?;
    let started = SystemTime::now();
    let t0 = Instant::now();
    // Identification values of this trace: a random base keeps concurrent
    // traces (and earlier runs) apart.
    let base = (super_random() as u16) & 0xff00;
    let mut hops = Vec::new();
    let mut reached = false;
    let mut silent = 0u8;
    let mut buf = vec![0u8; 2048];
    // The TTL and attempt share the low byte of the identification.
    'ttl: for ttl in 1..=cfg.max_ttl.min(63) {
        let mut hop = Hop {
            ttl,
            address: None,
            answer: None,
            rtt_seconds: None,
        };
        for attempt in 0..cfg.attempts.max(1) {
            let id = base | (((ttl as u16) << 2 | attempt as u16) & 0xff);
            let pkt = build_probe(&flow, ttl, id, payload);
            let sent = Instant::now();
            send_raw(&tx, &pkt, *flow.dst.ip())?;
            let deadline = sent + cfg.wait;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                let mut fds = [
                    libc::pollfd {
                        fd: icmp.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: udp.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                let ms = left.as_millis().clamp(1, 1_000) as i32;
                // SAFETY: fds is a valid pollfd array.
                unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
                let mut got = None;
                if fds[0].revents != 0 {
                    while let Some(n) = recv_raw(&icmp, &mut buf) {
                        if let Some(e) = parse_icmp_error(&buf[..n]) {
                            got = got.or(classify(&flow, id, Some(&e), None));
                        }
                    }
                }
                if fds[1].revents != 0 {
                    while let Some(n) = recv_raw(&udp, &mut buf) {
                        got = got.or(classify(&flow, id, None, parse_udp(&buf[..n])));
                    }
                }
                if let Some((addr, answer)) = got {
                    hop.address = Some(addr);
                    hop.answer = Some(answer);
                    hop.rtt_seconds = Some(sent.elapsed().as_secs_f64());
                    break;
                }
            }
            if hop.address.is_some() {
                break;
            }
        }
        let answer = hop.answer;
        hops.push(hop);
        match answer {
            Some(Answer::Destination) => {
                reached = true;
                break 'ttl;
            }
            Some(Answer::Unreachable) => break 'ttl,
            Some(Answer::TimeExceeded) => silent = 0,
            None => {
                silent += 1;
                if silent >= cfg.max_silent {
                    break 'ttl;
                }
            }
        }
    }
    Ok(Trace {
        flow,
        hops,
        reached,
        started_unix_seconds: started
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        duration_seconds: t0.elapsed().as_secs_f64(),
    })
}

fn super_random() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64
    }
}

// ---------------------------------------------------------------- store

/// The process's `skeletonhunter_path_hop_info` family, registered into
/// the exporter's registry by [`register_metrics`] (called from
/// `Metrics::new`) and written by the [`Tracer`].
static HOP_INFO: std::sync::LazyLock<Family<HopLabels, Gauge>> =
    std::sync::LazyLock::new(Family::default);

/// Register the path-tracing metric families in `registry`.
pub fn register_metrics(registry: &mut Registry) {
    registry.register(
        "skeletonhunter_path_hop_info",
        "Hops of the last Paris traceroute along the probe flow of a pair (1 per hop; hop is the TTL, address empty for a silent hop)",
        HOP_INFO.clone(),
    );
}

/// Labels of `skeletonhunter_path_hop_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HopLabels {
    pub src_node: String,
    pub dst_node: String,
    pub hop: String,
    pub address: String,
}

/// The last trace towards one destination, or the one running.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub src_node: String,
    pub dst_node: String,
    /// Why it was traced: `on_demand` or `anomaly`.
    pub reason: &'static str,
    pub running: bool,
    pub trace: Option<Trace>,
    pub error: Option<String>,
}

/// At most this many traces run at once (each holds a blocking thread and
/// three raw sockets); a fabric-wide fault makes many pairs anomalous at
/// the same moment.
pub const MAX_CONCURRENT: usize = 8;

/// Outcome of [`Tracer::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Started,
    AlreadyRunning,
    Busy,
}

impl Start {
    pub fn as_str(self) -> &'static str {
        match self {
            Start::Started => "started",
            Start::AlreadyRunning => "already_running",
            Start::Busy => "busy",
        }
    }
}

/// Traces by destination, their metric, and the anomaly trigger.
pub struct Tracer {
    config: TraceConfig,
    entries: Mutex<HashMap<IpAddr, Entry>>,
    hop_info: Family<HopLabels, Gauge>,
    /// Label sets currently published per destination, to remove them
    /// when the path changes (a stale hop is worse than none).
    published: Mutex<HashMap<IpAddr, Vec<HopLabels>>>,
    last_auto: Mutex<HashMap<IpAddr, Instant>>,
    /// Minimum time between automatic traces of one destination.
    pub auto_interval: Duration,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

/// What the caller knows about the flow to trace.
#[derive(Debug, Clone)]
pub struct Request {
    pub flow: Flow,
    pub src_node: String,
    pub dst_node: String,
    pub reason: &'static str,
    /// UDP payload of the probes (a valid echo request makes the peer's
    /// responder answer, which marks the destination).
    pub payload: Vec<u8>,
}

impl Tracer {
    pub fn new(config: TraceConfig) -> Arc<Tracer> {
        Tracer::with_family(config, HOP_INFO.clone())
    }

    /// A tracer writing its hops into `hop_info` (tests use a private one).
    pub fn with_family(config: TraceConfig, hop_info: Family<HopLabels, Gauge>) -> Arc<Tracer> {
        Arc::new(Tracer {
            config,
            entries: Mutex::new(HashMap::new()),
            hop_info,
            published: Mutex::new(HashMap::new()),
            last_auto: Mutex::new(HashMap::new()),
            auto_interval: Duration::from_secs(60),
        })
    }

    /// Start a trace unless one to the same destination is running or
    /// [`MAX_CONCURRENT`] traces are. Needs a tokio runtime.
    pub fn start(self: &Arc<Self>, req: Request) -> Start {
        let dst = IpAddr::V4(*req.flow.dst.ip());
        {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if entries.get(&dst).is_some_and(|e| e.running) {
                return Start::AlreadyRunning;
            }
            if entries.values().filter(|e| e.running).count() >= MAX_CONCURRENT {
                return Start::Busy;
            }
            let previous = entries.remove(&dst);
            entries.insert(
                dst,
                Entry {
                    src_node: req.src_node.clone(),
                    dst_node: req.dst_node.clone(),
                    reason: req.reason,
                    running: true,
                    trace: previous.and_then(|p| p.trace),
                    error: None,
                },
            );
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let result = trace(req.flow, &me.config, &req.payload);
            me.finish(dst, &req, result);
        });
        Start::Started
    }

    /// Trace an anomalous pair, at most once per
    /// [`Tracer::auto_interval`] per destination (while it stays
    /// anomalous, its path is re-traced at that pace). When the tracer is
    /// busy the pair is simply tried again at the next check.
    pub fn on_anomaly(self: &Arc<Self>, req: Request) -> bool {
        let dst = IpAddr::V4(*req.flow.dst.ip());
        let mut last = self.last_auto.lock().unwrap_or_else(|e| e.into_inner());
        if last
            .get(&dst)
            .is_some_and(|t| t.elapsed() < self.auto_interval)
        {
            return false;
        }
        let dst_node = req.dst_node.clone();
        match self.start(Request {
            reason: "anomaly",
            ..req
        }) {
            Start::Started => {
                last.insert(dst, Instant::now());
                tracing::info!(dst = %dst, dst_node = %dst_node, "tracing the path of an anomalous pair");
                true
            }
            Start::AlreadyRunning | Start::Busy => false,
        }
    }

    fn finish(&self, dst: IpAddr, req: &Request, result: io::Result<Trace>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = entries.get_mut(&dst) else {
            return; // forgotten meanwhile
        };
        entry.running = false;
        match result {
            Ok(t) => {
                tracing::info!(
                    dst = %dst,
                    hops = %t.hops.iter().map(|h| h.address.map(|a| a.to_string()).unwrap_or_else(|| "*".into())).collect::<Vec<_>>().join(" "),
                    reached = t.reached,
                    "path traced"
                );
                self.publish(dst, &req.src_node, &req.dst_node, &t);
                entry.trace = Some(t);
                entry.error = None;
            }
            Err(e) => {
                tracing::warn!(dst = %dst, "path trace failed: {e}");
                entry.error = Some(e.to_string());
            }
        }
    }

    fn publish(&self, dst: IpAddr, src_node: &str, dst_node: &str, t: &Trace) {
        let labels: Vec<HopLabels> = t
            .hops
            .iter()
            .map(|h| HopLabels {
                src_node: src_node.to_string(),
                dst_node: dst_node.to_string(),
                hop: h.ttl.to_string(),
                address: h.address.map(|a| a.to_string()).unwrap_or_default(),
            })
            .collect();
        let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = published.remove(&dst) {
            for l in old {
                self.hop_info.remove(&l);
            }
        }
        for l in &labels {
            self.hop_info.get_or_create(l).set(1);
        }
        published.insert(dst, labels);
    }

    /// Drop a destination's trace and series (the peer left).
    pub fn forget(&self, dst: IpAddr) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&dst);
        if let Some(old) = self
            .published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&dst)
        {
            for l in old {
                self.hop_info.remove(&l);
            }
        }
    }

    /// All entries as JSON, keyed by destination address.
    pub fn to_json(&self) -> String {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(&IpAddr, &Entry)> = entries.iter().collect();
        v.sort_by_key(|(a, _)| **a);
        let list: Vec<serde_json::Value> = v
            .into_iter()
            .map(|(a, e)| {
                let mut j = serde_json::to_value(e).unwrap_or_default();
                if let Some(o) = j.as_object_mut() {
                    o.insert("destination".into(), a.to_string().into());
                }
                j
            })
            .collect();
        serde_json::json!({ "traces": list }).to_string()
    }
}

/// Parse the `target` parameter of `/trace?target=ADDR`.
pub fn parse_target_query(query: Option<&str>) -> Result<Ipv4Addr, String> {
    let q = query.ok_or("missing query: use /trace?target=<IPv4 address>")?;
    for pair in q.split('&') {
        if let Some(v) = pair.strip_prefix("target=") {
            return v
                .parse::<Ipv4Addr>()
                .map_err(|_| format!("target={v:?} is not an IPv4 address"));
        }
    }
    Err("missing target parameter: use /trace?target=<IPv4 address>".into())
}

/// Detects a pair turning anomalous from its cumulative sent/lost
/// counters: over the last `window` probes, loss at or above `threshold`
/// (a ratio). Edge-triggered: it fires when the pair becomes anomalous,
/// not on every check while it stays so.
#[derive(Debug, Clone)]
pub struct AnomalyDetector {
    pub window: u64,
    pub threshold: f64,
    state: HashMap<IpAddr, (u64, u64, bool)>,
}

impl AnomalyDetector {
    pub fn new(window: u64, threshold: f64) -> AnomalyDetector {
        AnomalyDetector {
            window: window.max(1),
            threshold,
            state: HashMap::new(),
        }
    }

    /// Feed the current counters of `peer`; true when it just turned
    /// anomalous. Counters that went backwards (series recreated) restart
    /// the window.
    pub fn update(&mut self, peer: IpAddr, sent: u64, lost: u64) -> bool {
        let e = self.state.entry(peer).or_insert((sent, lost, false));
        if sent < e.0 || lost < e.1 {
            *e = (sent, lost, false);
            return false;
        }
        let ds = sent - e.0;
        if ds < self.window {
            return false;
        }
        let dl = lost - e.1;
        let anomalous = dl as f64 >= self.threshold * ds as f64;
        let turned = anomalous && !e.2;
        *e = (sent, lost, anomalous);
        turned
    }

    /// Whether the last full window of `peer` was anomalous.
    pub fn is_anomalous(&self, peer: IpAddr) -> bool {
        self.state.get(&peer).is_some_and(|s| s.2)
    }

    pub fn forget(&mut self, peer: IpAddr) {
        self.state.remove(&peer);
    }
}

// ---------------------------------------------------------------- wiring

use crate::metrics::{Metrics, ProbeLabels};
use crate::peers::PeerSet;
use crate::probe::{wall_ns, wire, Protocol};
use crate::responder::Extensions;
use skeletonhunter_common::http::{Reply, Request as HttpRequest};

/// Session id of trace payloads: a valid UDP echo request, so the peer's
/// responder answers and marks the destination, with a session no prober
/// uses (`"SHTRACE\0"`).
pub const TRACE_SESSION: u64 = u64::from_be_bytes(*b"SHTRACE\0");

/// Everything the exporter's tracing needs to know: the tracer, where the
/// pairs' counters are, and how the probe flow looks.
pub struct Context {
    pub tracer: Arc<Tracer>,
    pub metrics: Arc<Metrics>,
    pub peers: PeerSet,
    /// Default UDP echo port of peers.
    pub udp_port: u16,
    /// Source port of the UDP probe flow (the UDP prober's socket), so a
    /// trace follows the probes' ECMP path; `None` uses [`FALLBACK_SPORT`].
    pub src_port: Option<u16>,
    /// Node names learned from replies (the `dst_node` label in use).
    names: Mutex<HashMap<IpAddr, String>>,
}

/// Source port when the probe flow's is unknown.
pub const FALLBACK_SPORT: u16 = 33434;

impl Context {
    pub fn new(
        tracer: Arc<Tracer>,
        metrics: Arc<Metrics>,
        peers: PeerSet,
        udp_port: u16,
        src_port: Option<u16>,
    ) -> Arc<Context> {
        Arc::new(Context {
            tracer,
            metrics,
            peers,
            udp_port,
            src_port,
            names: Mutex::new(HashMap::new()),
        })
    }

    /// Learn peers' node names from the UDP replies the prober accepts, as
    /// the prober does, so anomaly checks read the series in use.
    pub fn observe(self: &Arc<Self>, ext: &Extensions) {
        let me = Arc::downgrade(self);
        ext.observers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(move |from: IpAddr, p: &wire::Packet<'_>| {
                if p.header.typ != wire::TYPE_REPLY {
                    return;
                }
                let Some(me) = me.upgrade() else { return };
                let node = p.identity().node;
                if !node.is_empty() {
                    me.names
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(from, node);
                }
            }));
    }

    fn dst_node(&self, peer: &crate::peers::Peer) -> String {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer.addr)
            .cloned()
            .or_else(|| peer.name.clone())
            .unwrap_or_else(|| peer.addr.to_string())
    }

    /// The trace request for the probe flow towards `peer`; `None` for
    /// IPv6 peers (tracing is IPv4 only for now).
    fn request(&self, peer: &crate::peers::Peer, reason: &'static str) -> Option<Request> {
        let IpAddr::V4(dst) = peer.addr else {
            return None;
        };
        let dport = peer.udp_port.unwrap_or(self.udp_port);
        let mut payload = Vec::new();
        wire::encode_request(
            &mut payload,
            TRACE_SESSION,
            0,
            wall_ns(),
            &[],
            wire::HEADER_LEN,
        );
        Some(Request {
            flow: Flow {
                src: SocketAddrV4::new(
                    Ipv4Addr::UNSPECIFIED,
                    self.src_port.unwrap_or(FALLBACK_SPORT),
                ),
                dst: SocketAddrV4::new(dst, dport),
            },
            src_node: self.metrics.src_node(),
            dst_node: self.dst_node(peer),
            reason,
            payload,
        })
    }

    /// `/trace?target=ADDR` (start a trace to a skeleton peer) and
    /// `/traces` (the last traces as JSON); `None` for other paths.
    pub fn handle(&self, req: &HttpRequest) -> Option<Reply> {
        use hyper::StatusCode;
        match req.path.as_str() {
            "/traces" => Some(Reply::json(self.tracer.to_json())),
            "/trace" => {
                let target = match parse_target_query(req.query.as_deref()) {
                    Ok(t) => t,
                    Err(e) => return Some(Reply::text(StatusCode::BAD_REQUEST, format!("{e}\n"))),
                };
                // Only skeleton peers: the endpoint must not turn the
                // exporter into a packet generator towards arbitrary hosts.
                let peer = self
                    .peers
                    .snapshot()
                    .into_iter()
                    .find(|p| p.addr == IpAddr::V4(target));
                let Some(peer) = peer else {
                    return Some(Reply::text(
                        StatusCode::NOT_FOUND,
                        format!("{target} is not a skeleton peer of this exporter\n"),
                    ));
                };
                let Some(r) = self.request(&peer, "on_demand") else {
                    return Some(Reply::text(
                        StatusCode::BAD_REQUEST,
                        "only IPv4 peers can be traced\n",
                    ));
                };
                let started = self.tracer.start(r);
                let body = serde_json::json!({
                    "target": target.to_string(),
                    "status": started.as_str(),
                    "results": "/traces",
                });
                let status = match started {
                    Start::Busy => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::ACCEPTED,
                };
                Some(Reply::new(status, "application/json", body.to_string()))
            }
            _ => None,
        }
    }

    /// Wrap the exporter's HTTP handler with the tracing routes.
    pub fn routes(
        self: Arc<Self>,
        inner: impl Fn(HttpRequest) -> Reply + Send + Sync + 'static,
    ) -> impl Fn(HttpRequest) -> Reply + Send + Sync + 'static {
        move |req: HttpRequest| match self.handle(&req) {
            Some(r) => r,
            None => inner(req),
        }
    }

    /// Watch every pair's UDP loss and trace a pair when it turns
    /// anomalous (loss ratio at or above `threshold` over `window` probes),
    /// until `shutdown`.
    pub async fn watch(
        self: Arc<Self>,
        every: Duration,
        window: u64,
        threshold: f64,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut det = AnomalyDetector::new(window, threshold);
        let mut known: Vec<IpAddr> = Vec::new();
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(every) => {}
            }
            let src_node = self.metrics.src_node();
            let peers = self.peers.snapshot();
            for p in &peers {
                let labels = ProbeLabels {
                    src_node: src_node.clone(),
                    dst_node: self.dst_node(p),
                    protocol: Protocol::Udp,
                };
                let sent = self.metrics.sent.get(&labels).map(|c| c.get());
                let lost = self.metrics.lost.get(&labels).map(|c| c.get());
                if let (Some(sent), Some(lost)) = (sent, lost) {
                    if det.update(p.addr, sent, lost) {
                        tracing::info!(peer = %p.addr, dst_node = %labels.dst_node, "pair turned anomalous");
                    }
                    if det.is_anomalous(p.addr) {
                        if let Some(r) = self.request(p, "anomaly") {
                            self.tracer.on_anomaly(r);
                        }
                    }
                }
            }
            // Peers that left: drop their traces and hop series.
            for addr in known.drain(..) {
                if !peers.iter().any(|p| p.addr == addr) {
                    det.forget(addr);
                    self.tracer.forget(addr);
                }
            }
            known = peers.iter().map(|p| p.addr).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            src: "198.18.1.2:40000".parse().unwrap(),
            dst: "198.18.2.2:9970".parse().unwrap(),
        }
    }

    fn ip_checksum_ok(h: &[u8]) -> bool {
        checksum_fold(checksum_add(0, h)) == 0
    }

    #[test]
    fn probe_keeps_the_five_tuple_and_varies_ttl_and_id() {
        let f = flow();
        let a = build_probe(&f, 1, 0x1204, b"hello");
        let b = build_probe(&f, 7, 0x121c, b"hello");
        assert_eq!(a.len(), 20 + 8 + 5);
        assert_eq!(a[8], 1);
        assert_eq!(b[8], 7);
        assert_eq!(&a[4..6], &[0x12, 0x04]);
        // Everything ECMP hashes on is identical.
        assert_eq!(a[9], 17);
        assert_eq!(&a[12..24], &b[12..24]);
        assert_eq!(parse_udp(&a), Some((f.src, f.dst)));
        // UDP checksum verifies over the pseudo-header.
        let mut sum = checksum_add(0, &a[12..20]);
        sum += 17 + (a.len() - 20) as u32;
        sum = checksum_add(sum, &a[20..]);
        assert_eq!(checksum_fold(sum), 0);
        let _ = ip_checksum_ok;
    }

    /// An ICMP message from `from` quoting `probe` (as a router builds it).
    fn icmp_about(from: [u8; 4], typ: u8, code: u8, probe: &[u8]) -> Vec<u8> {
        let mut icmp = vec![typ, code, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&probe[..28]);
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
        p.extend_from_slice(&from);
        p.extend_from_slice(&[198, 18, 1, 2]);
        let total = (20 + icmp.len()) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&icmp);
        p
    }

    #[test]
    fn icmp_time_exceeded_is_matched_by_quote() {
        let f = flow();
        let probe = build_probe(&f, 1, 0x3404, b"x");
        let msg = icmp_about([198, 18, 1, 1], 11, 0, &probe);
        let e = parse_icmp_error(&msg).unwrap();
        assert_eq!(e.from, Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(
            e.quote,
            Quote {
                src: f.src,
                dst: f.dst,
                id: 0x3404
            }
        );
        assert_eq!(
            classify(&f, 0x3404, Some(&e), None),
            Some((Ipv4Addr::new(198, 18, 1, 1), Answer::TimeExceeded))
        );
        // Another probe's id, or another flow, is not ours.
        assert_eq!(classify(&f, 0x3408, Some(&e), None), None);
        let other = Flow {
            dst: "198.18.2.2:9971".parse().unwrap(),
            ..f
        };
        assert_eq!(classify(&other, 0x3404, Some(&e), None), None);
    }

    #[test]
    fn destination_detected_by_port_unreachable_or_reply() {
        let f = flow();
        let probe = build_probe(&f, 2, 0x3408, b"x");
        let msg = icmp_about([198, 18, 2, 2], 3, 3, &probe);
        let e = parse_icmp_error(&msg).unwrap();
        assert_eq!(
            classify(&f, 0x3408, Some(&e), None),
            Some((Ipv4Addr::new(198, 18, 2, 2), Answer::Destination))
        );
        // A router's net unreachable stops the trace as unreachable.
        let msg = icmp_about([198, 18, 1, 1], 3, 0, &probe);
        let e = parse_icmp_error(&msg).unwrap();
        assert_eq!(
            classify(&f, 0x3408, Some(&e), None),
            Some((Ipv4Addr::new(198, 18, 1, 1), Answer::Unreachable))
        );
        // The responder's echo back to our source port.
        let reply = build_probe(
            &Flow {
                src: f.dst,
                dst: f.src,
            },
            64,
            1,
            b"reply",
        );
        assert_eq!(
            classify(&f, 0x3408, None, parse_udp(&reply)),
            Some((Ipv4Addr::new(198, 18, 2, 2), Answer::Destination))
        );
        // Unrelated UDP is ignored.
        let other = build_probe(&f, 64, 1, b"x");
        assert_eq!(classify(&f, 0x3408, None, parse_udp(&other)), None);
    }

    #[test]
    fn garbage_is_never_an_answer() {
        assert_eq!(parse_icmp_error(&[]), None);
        assert_eq!(parse_icmp_error(&[0x45; 30]), None);
        let f = flow();
        let probe = build_probe(&f, 1, 1, b"x");
        let mut msg = icmp_about([198, 18, 1, 1], 11, 0, &probe);
        msg.truncate(20 + 8 + 20 + 4); // quote shorter than IP + 8 bytes
        assert_eq!(parse_icmp_error(&msg), None);
        let echo = icmp_about([198, 18, 1, 1], 0, 0, &probe);
        assert_eq!(parse_icmp_error(&echo), None);
        assert_eq!(parse_udp(&[0x60; 40]), None);
        for n in 0..probe.len() {
            let _ = parse_udp(&probe[..n]);
            let _ = parse_icmp_error(&probe[..n]);
        }
    }

    #[test]
    fn target_query_parsing() {
        assert_eq!(
            parse_target_query(Some("target=198.18.2.2")),
            Ok(Ipv4Addr::new(198, 18, 2, 2))
        );
        assert_eq!(
            parse_target_query(Some("x=1&target=10.0.0.1")),
            Ok(Ipv4Addr::new(10, 0, 0, 1))
        );
        assert!(parse_target_query(None).unwrap_err().contains("target"));
        assert!(parse_target_query(Some("target=nope"))
            .unwrap_err()
            .contains("\"nope\""));
        assert!(parse_target_query(Some("foo=bar")).is_err());
    }

    #[test]
    fn http_routes_validate_before_tracing() {
        use hyper::{Method, StatusCode};
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let ctx = Context::new(
            Tracer::new(TraceConfig::default()),
            metrics,
            PeerSet::new(None),
            7477,
            None,
        );
        let req = |path: &str, query: Option<&str>| HttpRequest {
            method: Method::GET,
            path: path.into(),
            query: query.map(str::to_string),
            accept: None,
        };
        let r = ctx.handle(&req("/trace", Some("target=1.2.3"))).unwrap();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&r.body).contains("1.2.3"));
        let r = ctx
            .handle(&req("/trace", Some("target=198.18.9.9")))
            .unwrap();
        assert_eq!(r.status, StatusCode::NOT_FOUND, "not a peer: never traced");
        let r = ctx.handle(&req("/traces", None)).unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(&r.body[..], br#"{"traces":[]}"#);
        assert!(ctx.handle(&req("/metrics", None)).is_none());
    }

    #[test]
    fn concurrent_traces_are_capped() {
        let t = Tracer::with_family(TraceConfig::default(), Family::default());
        let running = |i: u8| Entry {
            src_node: "a".into(),
            dst_node: format!("n{i}"),
            reason: "anomaly",
            running: true,
            trace: None,
            error: None,
        };
        {
            let mut e = t.entries.lock().unwrap();
            for i in 0..MAX_CONCURRENT as u8 {
                e.insert(IpAddr::V4(Ipv4Addr::new(198, 18, 60, i)), running(i));
            }
        }
        let req = |last: u8| Request {
            flow: Flow {
                src: "198.18.1.2:40000".parse().unwrap(),
                dst: SocketAddrV4::new(Ipv4Addr::new(198, 18, 60, last), 9970),
            },
            src_node: "a".into(),
            dst_node: "b".into(),
            reason: "on_demand",
            payload: Vec::new(),
        };
        // Neither path spawns anything here (no runtime is needed).
        assert_eq!(t.start(req(0)), Start::AlreadyRunning);
        assert_eq!(t.start(req(200)), Start::Busy);
        assert!(!t.on_anomaly(req(200)), "busy: not started");
        assert!(
            t.last_auto.lock().unwrap().is_empty(),
            "a busy anomaly trace is retried at the next check"
        );
    }

    #[test]
    fn anomaly_detector_is_edge_triggered() {
        let mut d = AnomalyDetector::new(10, 0.2);
        let p: IpAddr = "198.18.2.2".parse().unwrap();
        assert!(!d.update(p, 0, 0));
        assert!(!d.update(p, 10, 0), "healthy window");
        assert!(!d.update(p, 15, 5), "window not full yet");
        assert!(d.update(p, 20, 5), "50% loss over the window");
        assert!(d.is_anomalous(p));
        assert!(!d.update(p, 30, 10), "still anomalous: no new trigger");
        assert!(d.is_anomalous(p));
        assert!(!d.update(p, 40, 10), "recovered");
        assert!(!d.is_anomalous(p));
        assert!(d.update(p, 50, 13), "anomalous again");
        // Counters reset (series recreated): restart quietly.
        assert!(!d.update(p, 3, 3));
    }

    #[test]
    fn publish_replaces_stale_hops() {
        let fam: Family<HopLabels, Gauge> = Family::default();
        let t = Tracer::with_family(TraceConfig::default(), fam.clone());
        let mut reg = Registry::default();
        reg.register("skeletonhunter_path_hop_info", "test", fam);
        let dst: IpAddr = "198.18.2.2".parse().unwrap();
        let mk = |addrs: &[Option<[u8; 4]>]| Trace {
            flow: flow(),
            hops: addrs
                .iter()
                .enumerate()
                .map(|(i, a)| Hop {
                    ttl: i as u8 + 1,
                    address: a.map(Ipv4Addr::from),
                    answer: a.map(|_| Answer::TimeExceeded),
                    rtt_seconds: None,
                })
                .collect(),
            reached: true,
            started_unix_seconds: 0.0,
            duration_seconds: 0.0,
        };
        t.publish(
            dst,
            "a",
            "b",
            &mk(&[Some([198, 18, 1, 1]), Some([198, 18, 2, 2])]),
        );
        t.publish(
            dst,
            "a",
            "b",
            &mk(&[Some([198, 18, 1, 9]), None, Some([198, 18, 2, 2])]),
        );
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(!out.contains("198.18.1.1"), "{out}");
        assert!(out.contains(r#"hop="1",address="198.18.1.9""#), "{out}");
        assert!(out.contains(r#"hop="2",address="""#), "{out}");
        assert!(out.contains(r#"hop="3",address="198.18.2.2""#), "{out}");
        t.forget(dst);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(!out.contains("198.18."), "{out}");
    }
}
