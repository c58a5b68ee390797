//! `skeletonhunter-localizer run`: the online loop.
//!
//! Every cycle queries Prometheus (or any PromQL store) for per-pair probe
//! aggregates over a window and for the exporters' topology identities, runs
//! the engine ([`crate::analyze`]), and posts / resolves component alerts.
//! A cycle whose data cannot be trusted — a failed query, a partial answer,
//! no topology — changes nothing: no new alert, no resolution, only the
//! alerts already firing are kept alive. It is logged and counted in
//! `skeletonhunter_localizer_query_errors_total` and the loop goes on.

use crate::alertmanager::{self, context_labels, AlertBook, Finding, Outbox, PostableAlert};
use crate::confirm::{Confirmer, Held};
use crate::prometheus::{self, QueryError, Sample};
use crate::serve::{self, AlertmanagerLabels, Metrics, QueryLabels, ResultLabels};
use crate::{analyze, Config, PairStats, Report, Symptom};
use skeletonhunter_common::topology::{path, Component, Identity, Kind};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Flags of `skeletonhunter-localizer run`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Localize faults online: query Prometheus every cycle, alert via Alertmanager, serve blame metrics",
    long_about = "Every --interval, query the Prometheus HTTP API (Prometheus, VictoriaMetrics, Thanos, Mimir) for \
per-pair probe loss, dial failures and RTT over --window and for skeletonhunter_node_info topology, run the \
tomography engine, and post component alerts (alertname SkeletonHunterComponentFaulty) to every --alertmanager, \
re-posting them while active and resolving them when the fault clears. A cycle with unreachable Prometheus or \
partial data raises and clears nothing; it is logged and counted. Blame and health metrics are served on --listen."
)]
pub struct RunArgs {
    /// Prometheus-compatible API root, e.g. http://prometheus:9090 (VictoriaMetrics: http://vm:8428).
    #[arg(long, env = "SKELETONHUNTER_PROMETHEUS", value_name = "URL")]
    pub prometheus: String,
    /// Alertmanager root, e.g. http://alertmanager:9093; repeat for an HA cluster (each gets every alert).
    /// Without any, the localizer only serves metrics.
    #[arg(
        long,
        env = "SKELETONHUNTER_ALERTMANAGER",
        value_name = "URL",
        value_delimiter = ','
    )]
    pub alertmanager: Vec<String>,
    /// Address of the /metrics, /report and /healthz endpoint.
    #[arg(long, default_value = "0.0.0.0:9479", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Time between cycles (e.g. 10s, 500ms, 1m).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Range of the per-pair aggregates (PromQL increase() window); cover at least two scrapes.
    #[arg(long, default_value = "1m", value_parser = parse_duration, value_name = "DURATION")]
    pub window: Duration,
    /// How far back to look for a node's skeletonhunter_node_info, so a node whose exporter went dark
    /// (e.g. an unreachable container) keeps its place in the topology.
    #[arg(long, default_value = "1h", value_parser = parse_duration, value_name = "DURATION")]
    pub topology_window: Duration,
    /// Timeout of each HTTP request to Prometheus or Alertmanager.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// How long Alertmanager keeps a firing alert without a re-post (its endsAt); default 4 x --interval,
    /// at least 30s. Bounds how long an alert outlives a dead localizer.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub alert_ttl: Option<Duration>,
    /// Packet-probe protocols whose sent/lost counters and RTT histograms are analyzed
    /// (tcp series are dial attempts and always used for the unreachable test).
    #[arg(long = "protocol", default_values = ["udp", "icmp", "rdma"], value_delimiter = ',', value_name = "PROTO")]
    pub protocols: Vec<String>,
    /// Extra PromQL label matchers added to every query, e.g. 'job="skeletonhunter"'.
    #[arg(long, value_name = "MATCHERS")]
    pub matchers: Option<String>,
    /// generatorURL of the alerts (e.g. a Grafana dashboard link).
    #[arg(long, default_value = "", value_name = "URL")]
    pub external_url: String,
    /// Resolved alerts kept per Alertmanager while it is unreachable.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub queue_capacity: usize,
    /// A component not alerting yet fires only when reported in this many consecutive cycles
    /// (1: at once). Partial evidence at the start of a fault lasts about a scrape interval.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100), value_name = "N")]
    pub confirm_cycles: u32,
    /// Prometheus' scrape interval of the exporters: the margin for staggered scrapes. A new
    /// finding whose evidence lies mostly on pairs of a component that cleared less than
    /// --window + this ago is held until then (it may be that fault's leftovers).
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub scrape_interval: Duration,
    #[command(flatten)]
    pub engine: crate::EngineArgs,
    /// Run one cycle, print its report as JSON on stdout and exit (non-zero when the data was unusable).
    #[arg(long)]
    pub once: bool,
    /// Log level when RUST_LOG is unset.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    pub log_level: String,
}

/// Parse `500ms`, `10s`, `1m`, `1h30m`, or plain seconds (`2.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs > 0.0 {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(format!("invalid duration {s:?}: must be positive"));
    }
    crate::rules::validate_duration(s)?;
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: number too large"))?;
        rest = &rest[digits..];
        let (unit, secs) = [
            ("ms", 0.001),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
            ("d", 86_400.0),
            ("w", 604_800.0),
            ("y", 31_536_000.0),
        ]
        .into_iter()
        .find(|(u, _)| rest.starts_with(u))
        .ok_or_else(|| format!("invalid duration {s:?}"))?;
        rest = &rest[unit.len()..];
        total += Duration::from_secs_f64(n as f64 * secs);
    }
    if total.is_zero() {
        return Err(format!("invalid duration {s:?}: must be positive"));
    }
    Ok(total)
}

/// A duration as PromQL writes it (`5s`, `1500ms`).
pub fn promql_duration(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The PromQL of one cycle.
#[derive(Debug, Clone)]
pub struct Queries {
    pub sent: String,
    pub lost: String,
    pub dial_failures: String,
    pub rtt_p50: String,
    pub rtt_count: String,
    pub topology_now: String,
    pub topology_recent: String,
    /// Traced router hops per pair (optional: a failure does not make the
    /// cycle untrusted).
    pub hops: String,
}

const TOPOLOGY_BY: &str = "node, nic, host, tor, spine, pod, tenant";

impl Queries {
    pub fn new(window: Duration, topology_window: Duration, matchers: Option<&str>) -> Queries {
        let w = promql_duration(window);
        let tw = promql_duration(topology_window);
        let sel = |metric: &str| match matchers {
            Some(m) if !m.trim().is_empty() => format!("{metric}{{{}}}", m.trim()),
            _ => metric.to_string(),
        };
        let by_pair = "src_node, dst_node, protocol";
        Queries {
            sent: format!(
                "sum by ({by_pair}) (increase({}[{w}]))",
                sel("skeletonhunter_probe_sent_total")
            ),
            lost: format!(
                "sum by ({by_pair}) (increase({}[{w}]))",
                sel("skeletonhunter_probe_lost_total")
            ),
            dial_failures: format!(
                "sum by (src_node, dst_node) (increase({}[{w}]))",
                sel("skeletonhunter_probe_dial_failures_total")
            ),
            rtt_p50: format!(
                "histogram_quantile(0.5, sum by ({by_pair}, le) (increase({}[{w}])))",
                sel("skeletonhunter_probe_rtt_seconds_bucket")
            ),
            rtt_count: format!(
                "sum by ({by_pair}) (increase({}[{w}]))",
                sel("skeletonhunter_probe_rtt_seconds_count")
            ),
            topology_now: format!(
                "max by ({TOPOLOGY_BY}) ({})",
                sel("skeletonhunter_node_info")
            ),
            topology_recent: format!(
                "max by ({TOPOLOGY_BY}) (last_over_time({}[{tw}]))",
                sel("skeletonhunter_node_info")
            ),
            hops: format!(
                "max by (src_node, dst_node, address) (last_over_time({}[{tw}]))",
                sel("skeletonhunter_path_hop_info")
            ),
        }
    }
}

/// Results of the cycle's queries.
#[derive(Debug, Clone, Default)]
pub struct QueryResults {
    pub sent: Vec<Sample>,
    pub lost: Vec<Sample>,
    pub dial_failures: Vec<Sample>,
    pub rtt_p50: Vec<Sample>,
    pub rtt_count: Vec<Sample>,
    pub topology_now: Vec<Sample>,
    pub topology_recent: Vec<Sample>,
    pub hops: Vec<Sample>,
    /// Why the hop query failed, if it did (the cycle goes on without hops).
    pub hops_error: Option<String>,
}

fn identity_of(s: &Sample) -> Identity {
    let mut id = Identity::default();
    for k in Kind::ALL {
        if let Some(v) = s.labels.get(k.as_str()) {
            id.set(k, v.clone());
        }
    }
    id
}

/// Node id -> identity. Current series win over older ones; when a node has
/// several identities at once (a moved container still in the lookback) the
/// smallest is kept, deterministically, and the node is reported.
pub fn topology_from(
    now: &[Sample],
    recent: &[Sample],
) -> (HashMap<String, Identity>, Vec<String>) {
    let mut out: HashMap<String, Identity> = HashMap::new();
    let mut conflicts = Vec::new();
    for (rank, set) in [now, recent].into_iter().enumerate() {
        let mut this: BTreeMap<String, Vec<Identity>> = BTreeMap::new();
        for s in set {
            let id = identity_of(s);
            if !id.node.is_empty() {
                this.entry(id.node.clone()).or_default().push(id);
            }
        }
        for (node, mut ids) in this {
            if out.contains_key(&node) {
                continue;
            }
            ids.sort_by(|a, b| a.labels().cmp(&b.labels()));
            ids.dedup();
            if ids.len() > 1 && rank == 0 {
                conflicts.push(node.clone());
            }
            out.insert(node, ids.swap_remove(0));
        }
    }
    (out, conflicts)
}

/// Pairs built for the engine, and what had to be left out.
#[derive(Debug, Clone, Default)]
pub struct Assembled {
    pub pairs: Vec<PairStats>,
    /// Pairs with an endpoint missing from the topology.
    pub no_topology: usize,
    /// Pairs whose series were incomplete (sent without lost).
    pub incomplete: usize,
}

/// A count from PromQL: extrapolated `increase()` may be fractional; NaN or
/// negative (counter oddities) count as nothing.
fn count(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 {
        v
    } else {
        0.0
    }
}

#[derive(Default)]
struct Acc {
    pkt_sent: f64,
    pkt_lost: f64,
    incomplete: bool,
    tcp_attempts: f64,
    dial_failures: f64,
    /// Answers received (RTT observations) of the packet probes, when the
    /// histogram exists.
    pkt_received: Option<f64>,
    /// Successful dials (TCP RTT observations), when the histogram exists.
    tcp_ok: Option<f64>,
    /// (preference rank, p50 seconds, samples)
    rtt: Option<(usize, f64, f64)>,
}

impl Acc {
    /// Nothing got through in the whole window: every dial failed and no
    /// packet probe was answered. Answers are counted from the RTT
    /// histograms because lost counters lag sent counters by the probe
    /// timeout (in-flight probes), which would hide a cut in a short window.
    fn cut(&self) -> bool {
        let has_pkt = self.pkt_sent > 0.0;
        let has_dial = self.tcp_attempts > 0.0;
        let pkt_cut = self.pkt_sent >= 3.0
            && match self.pkt_received {
                Some(r) => r <= 0.0,
                None => self.pkt_lost >= self.pkt_sent * 0.999,
            };
        let dial_cut = self.dial_failures > 0.0
            && match self.tcp_ok {
                Some(ok) => ok <= 0.0,
                None => self.dial_failures >= self.tcp_attempts * 0.999,
            };
        (has_pkt || has_dial) && (!has_pkt || pkt_cut) && (!has_dial || dial_cut)
    }
}

/// RTT protocol preference: the closest to what training traffic sees.
fn rtt_rank(protocol: &str) -> usize {
    match protocol {
        "rdma" => 0,
        "udp" => 1,
        "icmp" => 2,
        _ => 3,
    }
}

fn pair_key(s: &Sample) -> Option<(String, String)> {
    let src = s.labels.get("src_node")?;
    let dst = s.labels.get("dst_node")?;
    if src.is_empty() || dst.is_empty() || src == dst {
        return None;
    }
    Some((src.clone(), dst.clone()))
}

/// Build the engine's per-pair input from query results.
///
/// A round is a TCP dial attempt when the exporter dials the pair (the
/// `protocol="tcp"` sent counter) and a failed round a failed dial; packet
/// probes run independently of dials, so their loss is kept as measured.
/// Without dial data a round is a probe packet. A pair through which nothing
/// got in the window (see `Acc::cut`) is all failed rounds: unreachable
/// rather than lossy.
pub fn assemble(
    r: &QueryResults,
    topology: &HashMap<String, Identity>,
    protocols: &[String],
) -> Assembled {
    let mut acc: BTreeMap<(String, String), Acc> = BTreeMap::new();
    let proto_of = |s: &Sample| s.labels.get("protocol").cloned().unwrap_or_default();
    let packet = |p: &str| p != "tcp" && protocols.iter().any(|x| x == p);
    let mut lost_seen: HashMap<(String, String, String), f64> = HashMap::new();
    for s in &r.lost {
        if let Some((a, b)) = pair_key(s) {
            lost_seen.insert((a, b, proto_of(s)), count(s.value));
        }
    }
    for s in &r.sent {
        let Some(key) = pair_key(s) else { continue };
        let proto = proto_of(s);
        let e = acc.entry(key.clone()).or_default();
        if proto == "tcp" {
            e.tcp_attempts += count(s.value);
        } else if packet(&proto) {
            let sent = count(s.value);
            match lost_seen.get(&(key.0, key.1, proto)) {
                Some(&lost) => {
                    e.pkt_sent += sent;
                    e.pkt_lost += lost.min(sent);
                }
                None if sent > 0.0 => e.incomplete = true,
                None => {}
            }
        }
    }
    for s in &r.dial_failures {
        if let Some(key) = pair_key(s) {
            acc.entry(key).or_default().dial_failures += count(s.value);
        }
    }
    let mut counts: HashMap<(String, String, String), f64> = HashMap::new();
    for s in &r.rtt_count {
        if let Some((a, b)) = pair_key(s) {
            let proto = proto_of(s);
            let n = count(s.value);
            let e = acc.entry((a.clone(), b.clone())).or_default();
            if proto == "tcp" {
                *e.tcp_ok.get_or_insert(0.0) += n;
            } else if packet(&proto) {
                *e.pkt_received.get_or_insert(0.0) += n;
            }
            counts.insert((a, b, proto), n);
        }
    }
    for s in &r.rtt_p50 {
        let Some(key) = pair_key(s) else { continue };
        let proto = proto_of(s);
        if !(packet(&proto) || proto == "tcp") || !s.value.is_finite() || s.value <= 0.0 {
            continue;
        }
        let n = counts
            .get(&(key.0.clone(), key.1.clone(), proto.clone()))
            .copied()
            .unwrap_or(0.0);
        if n <= 0.0 {
            continue;
        }
        let rank = rtt_rank(&proto);
        let e = acc.entry(key).or_default();
        if e.rtt.is_none_or(|(r0, _, _)| rank < r0) {
            e.rtt = Some((rank, s.value, n));
        }
    }

    let mut out = Assembled::default();
    for ((src, dst), a) in acc {
        if a.incomplete {
            out.incomplete += 1;
            continue;
        }
        let (Some(si), Some(di)) = (topology.get(&src), topology.get(&dst)) else {
            out.no_topology += 1;
            continue;
        };
        // A cut pair is all failed rounds with no packet data, as in the
        // CSV schema (a round whose dial failed carries no loss_rate), so
        // the engine calls it unreachable rather than lossy. Otherwise dials
        // and packet probes are independent measurements, kept as measured.
        let (rounds, failed, sent, lost) = if a.cut() {
            let rounds = if a.tcp_attempts > 0.0 {
                a.tcp_attempts
            } else {
                a.pkt_sent
            };
            (rounds, rounds, 0.0, 0.0)
        } else if a.tcp_attempts > 0.0 {
            let failed = a.dial_failures.min(a.tcp_attempts);
            (a.tcp_attempts, failed, a.pkt_sent, a.pkt_lost)
        } else if a.pkt_sent > 0.0 {
            let rounds = a.pkt_sent.max(a.dial_failures);
            (rounds, a.dial_failures.min(rounds), a.pkt_sent, a.pkt_lost)
        } else {
            (a.dial_failures, a.dial_failures, 0.0, 0.0)
        };
        if rounds <= 0.0 {
            continue;
        }
        let (rtt_seconds, rtt_samples) = match a.rtt {
            Some((_, p50, n)) if sent > lost => (Some(p50), n),
            _ => (None, 0.0),
        };
        out.pairs.push(PairStats {
            src: si.clone(),
            dst: di.clone(),
            rounds,
            failed_dials: failed,
            sent,
            lost,
            rtt_seconds,
            rtt_samples,
            hops: Vec::new(),
        });
    }
    attach_hops(&mut out.pairs, &r.hops);
    out
}

/// Fill each pair's traced hops from `skeletonhunter_path_hop_info` samples.
/// Silent hops (empty address) and the destination itself (the trace's last
/// hop, its nic or node address) are not routers and are left out.
pub fn attach_hops(pairs: &mut [PairStats], hops: &[Sample]) {
    if hops.is_empty() {
        return;
    }
    let mut by_pair: HashMap<(&str, &str), BTreeSet<&str>> = HashMap::new();
    for s in hops {
        let (Some(src), Some(dst), Some(addr)) = (
            s.labels.get("src_node"),
            s.labels.get("dst_node"),
            s.labels.get("address"),
        ) else {
            continue;
        };
        if !addr.is_empty() && s.value.is_finite() && s.value > 0.0 {
            by_pair.entry((src, dst)).or_default().insert(addr);
        }
    }
    for p in pairs {
        let Some(set) = by_pair.get(&(p.src.node.as_str(), p.dst.node.as_str())) else {
            continue;
        };
        p.hops = set
            .iter()
            .filter(|a| **a != p.dst.nic && **a != p.dst.node)
            .map(|a| a.to_string())
            .collect();
    }
}

/// Up to five pairs crossing `c` that show `symptom` the most, as
/// human-readable lines for the alert.
pub fn evidence(c: &Component, symptom: Symptom, pairs: &[PairStats]) -> Vec<String> {
    let mut scored: Vec<(f64, String)> = pairs
        .iter()
        .filter(|p| {
            if c.kind == Kind::Hop {
                p.hops.contains(&c.id)
            } else {
                path(&p.src, &p.dst).contains(c)
            }
        })
        .filter_map(|p| {
            let name = format!("{} -> {}", p.src.node, p.dst.node);
            match symptom {
                Symptom::Loss if p.sent > 0.0 && p.lost > 0.0 => {
                    let r = p.lost / p.sent;
                    Some((
                        r,
                        format!(
                            "{name}: {:.1}% loss ({:.0} of {:.0} probes)",
                            100.0 * r,
                            p.lost,
                            p.sent
                        ),
                    ))
                }
                Symptom::Unreachable if p.failed_dials > 0.0 => Some((
                    p.failed_dials / p.rounds,
                    format!(
                        "{name}: {:.0} of {:.0} probe rounds got no answer",
                        p.failed_dials, p.rounds
                    ),
                )),
                Symptom::Latency => p
                    .rtt_seconds
                    .map(|r| (r, format!("{name}: median RTT {:.1} us", r * 1e6))),
                _ => None,
            }
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(5).map(|(_, s)| s).collect()
}

/// Turn a report into alert findings.
pub fn findings(
    report: &Report,
    pairs: &[PairStats],
    topology: &HashMap<String, Identity>,
) -> Vec<Finding> {
    report
        .faults
        .iter()
        .map(|f| {
            let c = f.component();
            Finding {
                hit_pairs: f
                    .hit_pairs
                    .iter()
                    .filter_map(|&i| pairs.get(i))
                    .map(|p| (p.src.clone(), p.dst.clone()))
                    .collect(),
                context: context_labels(&c, topology.values()),
                evidence: evidence(&c, f.symptom, pairs),
                symptom: f.symptom.as_str().to_string(),
                score: f.score,
                p_value: f.p_value,
                pairs: f.pairs,
                equivalent: f.equivalent.clone(),
                component: c,
            }
        })
        .collect()
}

/// Blame per component for the metrics: max score over symptoms, faulty if
/// any symptom blames it; components with zero blame are left out.
pub fn blame_map(report: &Report) -> BTreeMap<Component, (f64, bool)> {
    let mut out: BTreeMap<Component, (f64, bool)> = BTreeMap::new();
    let mut put = |c: Component, score: f64, faulty: bool| {
        let e = out.entry(c).or_insert((0.0, false));
        if score.is_finite() {
            e.0 = e.0.max(score);
        }
        e.1 |= faulty;
    };
    for b in &report.blame {
        put(b.component.clone(), b.score, b.faulty);
    }
    for f in &report.faults {
        put(f.component(), f.score, true);
    }
    // Components with no blame at all stay out: on a large fabric they
    // would be tens of thousands of all-zero series.
    out.retain(|_, (score, faulty)| *faulty || *score > 0.0);
    out
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

struct Target {
    client: alertmanager::Client,
    outbox: Outbox,
    labels: AlertmanagerLabels,
    failing: bool,
}

/// The loop's state.
struct Localizer {
    prom: prometheus::Client,
    queries: Queries,
    protocols: Vec<String>,
    targets: Vec<Target>,
    book: AlertBook,
    /// Which findings may alert (confirmation, hold after a clear).
    confirmer: Confirmer,
    metrics: Arc<Metrics>,
    config: Config,
    failed_cycles: u64,
    /// (no topology, incomplete) pairs of the previous cycle, for logging.
    last_dropped: (usize, usize),
    /// Whether the hop query failed last cycle (warned once per outage).
    hops_failing: bool,
}

/// What one cycle concluded.
#[derive(Debug)]
enum Outcome {
    Ok(Box<Report>),
    QueryFailed,
    NoData(&'static str),
}

impl Localizer {
    async fn query_all(&self, time: f64) -> Result<QueryResults, Vec<(&'static str, QueryError)>> {
        let q = &self.queries;
        let p = &self.prom;
        let t = Some(time);
        let (sent, lost, dial, p50, cnt, tnow, trecent, hops) = tokio::join!(
            p.instant(&q.sent, t),
            p.instant(&q.lost, t),
            p.instant(&q.dial_failures, t),
            p.instant(&q.rtt_p50, t),
            p.instant(&q.rtt_count, t),
            p.instant(&q.topology_now, t),
            p.instant(&q.topology_recent, t),
            p.instant(&q.hops, t),
        );
        // Hops are optional: without them paths come from labels alone.
        let (hops, hops_error) = match hops {
            Ok(v) => (v, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let mut errors = Vec::new();
        let mut take = |name: &'static str, r: Result<Vec<Sample>, QueryError>| match r {
            Ok(v) => v,
            Err(e) => {
                errors.push((name, e));
                Vec::new()
            }
        };
        let out = QueryResults {
            sent: take("sent", sent),
            lost: take("lost", lost),
            dial_failures: take("dial_failures", dial),
            rtt_p50: take("rtt_p50", p50),
            rtt_count: take("rtt_count", cnt),
            topology_now: take("topology_now", tnow),
            topology_recent: take("topology_recent", trecent),
            hops,
            hops_error,
        };
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    /// Query, analyze and decide; returns the outcome and the alerts to post.
    async fn evaluate(&mut self) -> (Outcome, Vec<PostableAlert>) {
        let time = unix_now();
        let now = SystemTime::now();
        let results = match self.query_all(time).await {
            Ok(r) => r,
            Err(errors) => {
                // One line per distinct problem: all queries usually fail alike.
                let mut seen = std::collections::BTreeSet::new();
                for (name, e) in &errors {
                    self.metrics
                        .query_errors
                        .get_or_create(&QueryLabels {
                            query: name.to_string(),
                            reason: e.reason().to_string(),
                        })
                        .inc();
                    let msg = e.to_string();
                    if seen.insert(msg.clone()) {
                        tracing::warn!(
                            "query {name} failed: {msg}; this cycle raises and clears no alert"
                        );
                    }
                }
                return (Outcome::QueryFailed, self.book.firing(now));
            }
        };
        match (&results.hops_error, self.hops_failing) {
            (Some(e), false) => tracing::warn!(
                "hop query failed: {e}; localizing from topology labels only until it answers"
            ),
            (Some(e), true) => tracing::debug!("hop query failed: {e}"),
            (None, true) => tracing::info!("hop query answers again"),
            (None, false) => {}
        }
        self.hops_failing = results.hops_error.is_some();
        let (topology, conflicts) = topology_from(&results.topology_now, &results.topology_recent);
        if !conflicts.is_empty() {
            tracing::warn!(
                "{} node(s) report several identities in skeletonhunter_node_info (e.g. {}); using one deterministically",
                conflicts.len(),
                conflicts[0]
            );
        }
        self.metrics.nodes_known.set(topology.len() as i64);
        let assembled = assemble(&results, &topology, &self.protocols);
        self.metrics
            .pairs_dropped
            .set((assembled.no_topology + assembled.incomplete) as i64);
        // Logged when it changes, not every cycle.
        let dropped = (assembled.no_topology, assembled.incomplete);
        if dropped != self.last_dropped && dropped != (0, 0) {
            tracing::warn!(
                "left out {} pair(s) without skeletonhunter_node_info for an endpoint and {} with incomplete series",
                assembled.no_topology,
                assembled.incomplete
            );
        }
        self.last_dropped = dropped;
        if assembled.pairs.is_empty() {
            let why = if results.sent.is_empty() && results.dial_failures.is_empty() {
                "no probe series in the window"
            } else if topology.is_empty() {
                "no skeletonhunter_node_info topology"
            } else {
                "no pair with complete data and topology"
            };
            return (Outcome::NoData(why), self.book.firing(now));
        }
        let config = self.config.clone();
        let pairs = assembled.pairs;
        let started = Instant::now();
        let (report, pairs) = match tokio::task::spawn_blocking(move || {
            let r = analyze(&pairs, &config);
            (r, pairs)
        })
        .await
        {
            Ok(x) => x,
            Err(e) => {
                tracing::error!("analysis failed: {e}");
                return (Outcome::NoData("analysis failed"), self.book.firing(now));
            }
        };
        self.metrics
            .analysis_duration
            .set(started.elapsed().as_secs_f64());
        let (found, held) = self
            .confirmer
            .admit(findings(&report, &pairs, &topology), now);
        for (f, why) in &held {
            match why {
                Held::Unconfirmed { seen } => tracing::debug!(
                    "unconfirmed: {} ({}) seen in {seen} consecutive cycle(s)",
                    f.component,
                    f.symptom
                ),
                Held::AfterClear { cleared } => tracing::info!(
                    "held: {} ({}) until leftovers of the cleared {cleared} are out of the window",
                    f.component,
                    f.symptom
                ),
            }
        }
        let before: Vec<_> = self.book.active_keys().cloned().collect();
        let alerts = self.book.update(found, now);
        for a in &alerts {
            let key = (
                a.labels.get("kind").cloned().unwrap_or_default(),
                a.labels.get("component").cloned().unwrap_or_default(),
                a.labels.get("symptom").cloned().unwrap_or_default(),
            );
            let was_active = before.iter().any(|k| {
                (k.kind.as_str(), k.id.as_str(), k.symptom.as_str())
                    == (key.0.as_str(), key.1.as_str(), key.2.as_str())
            });
            if a.resolved {
                tracing::info!("resolved: {} {} ({})", key.0, key.1, key.2);
            } else if !was_active {
                tracing::warn!(
                    "fault: {}",
                    a.annotations.get("summary").cloned().unwrap_or_default()
                );
            }
        }
        (Outcome::Ok(Box::new(report)), alerts)
    }

    /// Post `alerts` to every Alertmanager through its outbox, concurrently.
    async fn deliver(&mut self, alerts: &[PostableAlert]) {
        let mut set = tokio::task::JoinSet::new();
        for (i, t) in self.targets.iter_mut().enumerate() {
            let batch = t.outbox.batch(alerts);
            if batch.is_empty() {
                continue;
            }
            let client = t.client.clone();
            set.spawn(async move {
                let r = client.post(&batch).await;
                (i, batch.len(), r)
            });
        }
        while let Some(joined) = set.join_next().await {
            let Ok((i, n, result)) = joined else { continue };
            let t = &mut self.targets[i];
            match result {
                Ok(()) => {
                    t.outbox.delivered();
                    self.metrics
                        .alerts_posted
                        .get_or_create(&t.labels)
                        .inc_by(n as u64);
                    self.metrics
                        .last_alert_post_success
                        .get_or_create(&t.labels)
                        .set(unix_now());
                    if t.failing {
                        tracing::info!("Alertmanager {} accepts alerts again", t.client.base());
                        t.failing = false;
                    }
                }
                Err(e) => {
                    self.metrics
                        .alert_post_errors
                        .get_or_create(&t.labels)
                        .inc();
                    tracing::warn!(
                        "posting {n} alert(s) failed: {e}; {} resolution(s) queued, retrying next cycle",
                        t.outbox.pending_len()
                    );
                    t.failing = true;
                }
            }
        }
        for t in &self.targets {
            self.metrics
                .alert_queue
                .get_or_create(&t.labels)
                .set(t.outbox.pending_len() as i64);
            self.metrics
                .alerts_dropped
                .get_or_create(&t.labels)
                .inner()
                .store(t.outbox.dropped, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// One full cycle; returns the report when the data was usable.
    async fn cycle(&mut self) -> Option<Report> {
        let started = Instant::now();
        let (outcome, alerts) = self.evaluate().await;
        self.deliver(&alerts).await;
        self.metrics
            .alerts_firing
            .set(self.book.active_len() as i64);
        let (result, report) = match outcome {
            Outcome::Ok(report) => {
                if self.failed_cycles > 0 {
                    tracing::info!(
                        "Prometheus data usable again after {} cycle(s)",
                        self.failed_cycles
                    );
                }
                self.failed_cycles = 0;
                self.metrics.last_success.set(unix_now());
                self.metrics
                    .pairs_observed
                    .set(report.pairs_observed as i64);
                self.metrics
                    .pairs_anomalous
                    .set(report.pairs_anomalous as i64);
                self.metrics.set_blame(&blame_map(&report));
                self.metrics.set_report(report_json(&report));
                ("ok", Some(*report))
            }
            Outcome::QueryFailed => {
                self.failed_cycles += 1;
                ("query_failed", None)
            }
            Outcome::NoData(why) => {
                self.failed_cycles += 1;
                tracing::warn!(
                    "{why} at {}; this cycle raises and clears no alert",
                    self.prom.base()
                );
                ("no_data", None)
            }
        };
        self.metrics
            .cycles
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        self.metrics
            .cycle_duration
            .observe(started.elapsed().as_secs_f64());
        report
    }
}

fn report_json(report: &Report) -> String {
    serde_json::to_string(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Validate flags that clap cannot.
fn check_args(args: &RunArgs) -> anyhow::Result<()> {
    if args.window < Duration::from_secs(1) {
        anyhow::bail!("--window {:?}: must be at least 1s", args.window);
    }
    if args.protocols.is_empty() {
        anyhow::bail!("--protocol: give at least one of udp, icmp, rdma");
    }
    for p in &args.protocols {
        if !["udp", "icmp", "rdma", "tcp"].contains(&p.as_str()) {
            anyhow::bail!("--protocol {p:?}: expected udp, icmp, rdma or tcp");
        }
    }
    if let Some(m) = &args.matchers {
        if m.contains('{') || m.contains('}') {
            anyhow::bail!(
                "--matchers {m:?}: give label matchers without braces, e.g. job=\"skeletonhunter\""
            );
        }
    }
    Ok(())
}

/// Entry point of `skeletonhunter-localizer run`.
pub fn main(args: RunArgs) -> anyhow::Result<()> {
    skeletonhunter_common::logging::init(&args.log_level);
    check_args(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    rt.block_on(run(args))
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let prom = prometheus::Client::new(&args.prometheus, args.timeout)
        .map_err(|e| anyhow::anyhow!("--prometheus: {e}"))?;
    let mut targets = Vec::new();
    for url in &args.alertmanager {
        let client = alertmanager::Client::new(url, args.timeout)
            .map_err(|e| anyhow::anyhow!("--alertmanager: {e}"))?;
        targets.push(Target {
            labels: AlertmanagerLabels {
                alertmanager: client.base().to_string(),
            },
            client,
            outbox: Outbox::new(args.queue_capacity),
            failing: false,
        });
    }
    let ttl = args
        .alert_ttl
        .unwrap_or_else(|| (args.interval * 4).max(Duration::from_secs(30)));
    let metrics = Arc::new(Metrics::new());
    let mut loc = Localizer {
        queries: Queries::new(args.window, args.topology_window, args.matchers.as_deref()),
        prom,
        protocols: args.protocols.clone(),
        targets,
        book: AlertBook::new(ttl, &args.external_url),
        confirmer: Confirmer::new(args.confirm_cycles, args.window + args.scrape_interval),
        metrics: metrics.clone(),
        config: args.engine.config(),
        failed_cycles: 0,
        last_dropped: (0, 0),
        hops_failing: false,
    };

    if args.once {
        let report = loc.cycle().await;
        return match report {
            Some(r) => {
                println!("{}", report_json(&r));
                Ok(())
            }
            None => anyhow::bail!(
                "no usable data from {} this cycle (see the log above)",
                args.prometheus
            ),
        };
    }

    let listener = skeletonhunter_common::http::bind(args.listen).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut server_stop = stop_rx.clone();
    let server = tokio::spawn(skeletonhunter_common::http::serve(
        listener,
        serve::handler(metrics),
        async move {
            let _ = server_stop.wait_for(|s| *s).await;
        },
    ));
    tracing::info!(
        "localizing every {:?} over {} from {} ({} Alertmanager(s)); metrics on http://{}/metrics",
        args.interval,
        promql_duration(args.window),
        loc.prom.base(),
        loc.targets.len(),
        args.listen
    );
    if loc.targets.is_empty() {
        tracing::warn!("no --alertmanager given: faults are only exported as metrics");
    }

    let mut ticker = tokio::time::interval(args.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = ticker.tick() => {
                // A cycle is bounded by the HTTP timeouts; shutdown still wins.
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = loc.cycle() => {}
                }
            }
        }
    }
    tracing::info!("shutting down; firing alerts expire in Alertmanager after {ttl:?} unless a localizer re-posts them");
    let _ = stop_tx.send(true);
    let _ = server.await;
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::Labels;

    fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Labels>(),
            timestamp: 0.0,
            value,
        }
    }

    fn pair(src: &str, dst: &str, proto: &str, v: f64) -> Sample {
        sample(
            &[("src_node", src), ("dst_node", dst), ("protocol", proto)],
            v,
        )
    }

    fn info(node: &str, tor: &str) -> Sample {
        sample(
            &[
                ("node", node),
                ("host", &format!("h-{node}")),
                ("tor", tor),
                ("spine", "s1"),
            ],
            1.0,
        )
    }

    fn protos() -> Vec<String> {
        vec!["udp".into(), "icmp".into(), "rdma".into()]
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2.5").unwrap(), Duration::from_millis(2500));
        for bad in ["", "0", "-1", "10x", "s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(promql_duration(Duration::from_secs(60)), "60s");
        assert_eq!(promql_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn queries_use_window_and_matchers() {
        let q = Queries::new(
            Duration::from_secs(30),
            Duration::from_secs(3600),
            Some("job=\"sh\""),
        );
        assert_eq!(
            q.sent,
            "sum by (src_node, dst_node, protocol) (increase(skeletonhunter_probe_sent_total{job=\"sh\"}[30s]))"
        );
        assert!(q
            .topology_recent
            .contains("last_over_time(skeletonhunter_node_info{job=\"sh\"}[3600s])"));
        assert_eq!(
            q.hops,
            "max by (src_node, dst_node, address) (last_over_time(skeletonhunter_path_hop_info{job=\"sh\"}[3600s]))"
        );
        let q = Queries::new(Duration::from_secs(30), Duration::from_secs(60), None);
        assert!(q
            .rtt_p50
            .contains("skeletonhunter_probe_rtt_seconds_bucket[30s]"));
    }

    #[test]
    fn traced_hops_fill_pairs_without_silent_hops_or_the_destination() {
        let b_info = sample(&[("node", "b"), ("nic", "198.18.0.2"), ("tor", "t2")], 1.0);
        let (topo, _) = topology_from(&[info("a", "t1"), b_info], &[]);
        let hop = |s: &str, d: &str, addr: &str| {
            sample(&[("src_node", s), ("dst_node", d), ("address", addr)], 1.0)
        };
        let r = QueryResults {
            sent: vec![pair("a", "b", "udp", 100.0), pair("b", "a", "udp", 100.0)],
            lost: vec![pair("a", "b", "udp", 0.0), pair("b", "a", "udp", 0.0)],
            hops: vec![
                hop("a", "b", "10.0.0.2"),
                hop("a", "b", "10.0.0.1"),
                hop("a", "b", ""),
                hop("a", "b", "198.18.0.2"),
                hop("c", "b", "10.0.0.9"),
            ],
            ..Default::default()
        };
        let out = assemble(&r, &topo, &protos());
        let ab = out.pairs.iter().find(|p| p.src.node == "a").unwrap();
        assert_eq!(ab.hops, vec!["10.0.0.1", "10.0.0.2"]);
        let ba = out.pairs.iter().find(|p| p.src.node == "b").unwrap();
        assert!(ba.hops.is_empty());
        // Evidence for a hop lists the pairs that crossed it.
        let mut lossy = ab.clone();
        lossy.lost = 20.0;
        let ev = evidence(
            &Component::new(Kind::Hop, "10.0.0.1"),
            Symptom::Loss,
            &[lossy, ba.clone()],
        );
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert!(ev[0].starts_with("a -> b"), "{ev:?}");
    }

    #[test]
    fn topology_prefers_current_identities() {
        let now = [info("a", "t1")];
        let recent = [info("a", "t-old"), info("b", "t2")];
        let (t, conflicts) = topology_from(&now, &recent);
        assert_eq!(t["a"].tor, "t1");
        assert_eq!(t["b"].tor, "t2");
        assert!(conflicts.is_empty());
        let (t, conflicts) = topology_from(&[info("a", "t2"), info("a", "t1")], &[]);
        assert_eq!(t["a"].tor, "t1");
        assert_eq!(conflicts, vec!["a".to_string()]);
    }

    #[test]
    fn assemble_combines_protocols_and_drops_what_it_cannot_place() {
        let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t2")], &[]);
        let r = QueryResults {
            sent: vec![
                pair("a", "b", "udp", 100.0),
                pair("a", "b", "icmp", 50.0),
                pair("b", "a", "udp", 100.0),
                pair("a", "x", "udp", 100.0), // x has no topology
            ],
            lost: vec![
                pair("a", "b", "udp", 30.0),
                pair("a", "b", "icmp", 15.0),
                pair("a", "x", "udp", 0.0),
                // b -> a lost series missing: incomplete
            ],
            rtt_p50: vec![pair("a", "b", "udp", 20e-6), pair("a", "b", "icmp", 40e-6)],
            rtt_count: vec![pair("a", "b", "udp", 70.0), pair("a", "b", "icmp", 35.0)],
            ..Default::default()
        };
        let out = assemble(&r, &topo, &protos());
        assert_eq!(out.incomplete, 1);
        assert_eq!(out.no_topology, 1);
        assert_eq!(out.pairs.len(), 1);
        let p = &out.pairs[0];
        assert_eq!((p.src.node.as_str(), p.dst.node.as_str()), ("a", "b"));
        assert_eq!(p.src.tor, "t1");
        assert_eq!(
            (p.rounds, p.failed_dials, p.sent, p.lost),
            (150.0, 0.0, 150.0, 45.0)
        );
        assert_eq!(p.rtt_seconds, Some(20e-6), "udp preferred over icmp");
        assert_eq!(p.rtt_samples, 70.0);
    }

    #[test]
    fn total_loss_is_unreachable_and_dials_count_as_rounds() {
        let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t1"), info("c", "t1")], &[]);
        let r = QueryResults {
            sent: vec![
                pair("a", "b", "udp", 40.0),
                pair("a", "c", "udp", 40.0),
                pair("a", "c", "tcp", 10.0),
            ],
            lost: vec![pair("a", "b", "udp", 40.0), pair("a", "c", "udp", 20.0)],
            dial_failures: vec![sample(&[("src_node", "a"), ("dst_node", "c")], 5.0)],
            rtt_p50: vec![pair("a", "b", "udp", f64::NAN)],
            ..Default::default()
        };
        let out = assemble(&r, &topo, &protos());
        let ab = out.pairs.iter().find(|p| p.dst.node == "b").unwrap();
        assert_eq!(
            (ab.rounds, ab.failed_dials, ab.sent, ab.lost),
            (40.0, 40.0, 0.0, 0.0)
        );
        assert_eq!(ab.rtt_seconds, None);
        let ac = out.pairs.iter().find(|p| p.dst.node == "c").unwrap();
        // Half the dials failed; packet loss is kept as measured.
        assert_eq!(
            (ac.rounds, ac.failed_dials, ac.sent, ac.lost),
            (10.0, 5.0, 40.0, 20.0)
        );
    }

    #[test]
    fn a_cut_pair_is_found_from_answers_despite_lagging_lost_counters() {
        let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t1")], &[]);
        // 1000 probes sent, only 800 counted lost yet (200 in flight), no
        // answer; 50 dials, 45 failures counted, none succeeded.
        let mut r = QueryResults {
            sent: vec![pair("a", "b", "udp", 1000.0), pair("a", "b", "tcp", 50.0)],
            lost: vec![pair("a", "b", "udp", 800.0), pair("a", "b", "tcp", 45.0)],
            dial_failures: vec![sample(&[("src_node", "a"), ("dst_node", "b")], 45.0)],
            rtt_count: vec![pair("a", "b", "udp", 0.0), pair("a", "b", "tcp", 0.0)],
            ..Default::default()
        };
        let p = &assemble(&r, &topo, &protos()).pairs[0];
        assert_eq!(
            (p.rounds, p.failed_dials, p.sent, p.lost),
            (50.0, 50.0, 0.0, 0.0)
        );
        // One answer came back: lossy, not cut; counts as measured.
        r.rtt_count[0].value = 1.0;
        let p = &assemble(&r, &topo, &protos()).pairs[0];
        assert_eq!(
            (p.rounds, p.failed_dials, p.sent, p.lost),
            (50.0, 45.0, 1000.0, 800.0)
        );
    }

    #[test]
    fn evidence_lists_worst_pairs_crossing_the_component() {
        let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t2"), info("c", "t2")], &[]);
        let mk = |s: &str, d: &str, lost: f64| PairStats {
            src: topo[s].clone(),
            dst: topo[d].clone(),
            rounds: 100.0,
            sent: 100.0,
            lost,
            ..Default::default()
        };
        let pairs = [mk("a", "b", 30.0), mk("b", "c", 50.0), mk("a", "c", 10.0)];
        let ev = evidence(&Component::new(Kind::Tor, "t1"), Symptom::Loss, &pairs);
        assert_eq!(
            ev,
            vec![
                "a -> b: 30.0% loss (30 of 100 probes)".to_string(),
                "a -> c: 10.0% loss (10 of 100 probes)".to_string()
            ]
        );
    }

    /// The engine's hit pairs (indices into the analyzed pairs) reach the
    /// alert logic as the pairs' identities.
    #[test]
    fn findings_carry_the_pairs_they_explain() {
        let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t2"), info("c", "t2")], &[]);
        let mk = |s: &str, d: &str| PairStats {
            src: topo[s].clone(),
            dst: topo[d].clone(),
            rounds: 100.0,
            sent: 100.0,
            ..Default::default()
        };
        let pairs = [mk("a", "b"), mk("b", "c"), mk("a", "c")];
        let report = Report {
            faults: vec![crate::Fault {
                kind: Kind::Tor,
                id: "t1".into(),
                score: 0.3,
                p_value: 1e-9,
                symptom: Symptom::Loss,
                pairs: 2,
                equivalent: vec![],
                hit_pairs: vec![0, 2, 99],
            }],
            ..Default::default()
        };
        let f = findings(&report, &pairs, &topo);
        let got: Vec<(&str, &str)> = f[0]
            .hit_pairs
            .iter()
            .map(|(a, b)| (a.node.as_str(), b.node.as_str()))
            .collect();
        assert_eq!(got, [("a", "b"), ("a", "c")]);
    }

    #[test]
    fn blame_map_takes_max_and_marks_faults() {
        let report = Report {
            faults: vec![crate::Fault {
                kind: Kind::Tor,
                id: "t1".into(),
                score: 0.3,
                p_value: 1e-9,
                symptom: Symptom::Loss,
                pairs: 4,
                equivalent: vec![],
                hit_pairs: vec![],
            }],
            blame: vec![crate::Blame {
                component: Component::new(Kind::Node, "a"),
                symptom: Symptom::Latency,
                score: 0.05,
                p_value: 0.3,
                faulty: false,
            }],
            ..Default::default()
        };
        let m = blame_map(&report);
        assert_eq!(m[&Component::new(Kind::Tor, "t1")], (0.3, true));
        assert_eq!(m[&Component::new(Kind::Node, "a")], (0.05, false));
        let mut zero = report.clone();
        zero.blame[0].score = 0.0;
        assert!(!blame_map(&zero).contains_key(&Component::new(Kind::Node, "a")));
    }
}
