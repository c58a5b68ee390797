//! The PromQL side of an online cycle: the query texts, and their results
//! turned into the engine's per-pair input and the node topology.
//!
//! Probe series carry only `src_node` / `dst_node` (and `protocol`); where a
//! node sits comes from the exporters' `skeletonhunter_node_info`, and the
//! traced router hops of a pair from `skeletonhunter_path_hop_info`, and
//! its per-path rows (multi-flow exporters) from the `path`-labelled hop
//! series with `skeletonhunter_path_loss_ratio` and `_probes`
//! ([`crate::input::paths`]).

use crate::clients::prometheus::{QueryError, Sample};
use crate::engine::model::{HostStack, PairStats};
use crate::input::histograms::{rtt_queries, RttForm};
use crate::input::hoststack;
use crate::input::paths::{attach_hops, attach_paths};
use skeletonhunter_common::duration;
use skeletonhunter_common::topology::{Identity, Kind};
use skeletonhunter_common::Protocol;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A duration as PromQL writes it (`30s`, `1m`, `1500ms`); never zero.
pub fn promql_duration(d: Duration) -> String {
    duration::to_promql(d.max(Duration::from_millis(1)))
}

/// The PromQL of one cycle.
#[derive(Debug, Clone)]
pub struct Queries {
    /// Probe packets sent per pair and protocol over the window.
    pub sent: String,
    /// Probe packets lost per pair and protocol.
    pub lost: String,
    /// Failed dials per pair.
    pub dial_failures: String,
    /// Median RTT per pair and protocol.
    pub rtt_p50: String,
    /// RTT observations (answers) per pair and protocol; `None` where the
    /// histogram form has no cheap count (native: answers are derived, see
    /// [`assemble`]).
    pub rtt_count: Option<String>,
    /// Node identities exported now.
    pub topology_now: String,
    /// Node identities seen within the topology window.
    pub topology_recent: String,
    /// Traced router hops per pair (optional: a failure does not make the
    /// cycle untrusted).
    pub hops: String,
    /// Hop lists per ECMP path of a pair (multi-flow exporters; optional
    /// like `hops`, as are the two below).
    pub paths: String,
    /// Loss of a pair's flows per path.
    pub path_loss: String,
    /// Probes that loss is over.
    pub path_probes: String,
    /// Each node's host-stack delay ([`crate::input::hoststack`]; optional).
    pub host_stack: String,
}

/// One of the cycle's queries: the `query` label of
/// `skeletonhunter_localizer_query_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryKind {
    /// [`Queries::sent`].
    Sent,
    /// [`Queries::lost`].
    Lost,
    /// [`Queries::dial_failures`].
    DialFailures,
    /// [`Queries::rtt_p50`].
    RttP50,
    /// [`Queries::rtt_count`].
    RttCount,
    /// [`Queries::topology_now`].
    TopologyNow,
    /// [`Queries::topology_recent`].
    TopologyRecent,
    /// [`Queries::hops`].
    Hops,
    /// [`Queries::paths`], [`Queries::path_loss`], [`Queries::path_probes`].
    Paths,
    /// [`Queries::host_stack`].
    HostStack,
}

impl QueryKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryKind::Sent => "sent",
            QueryKind::Lost => "lost",
            QueryKind::DialFailures => "dial_failures",
            QueryKind::RttP50 => "rtt_p50",
            QueryKind::RttCount => "rtt_count",
            QueryKind::TopologyNow => "topology_now",
            QueryKind::TopologyRecent => "topology_recent",
            QueryKind::Hops => "hops",
            QueryKind::Paths => "paths",
            QueryKind::HostStack => "host_stack",
        }
    }
}

const TOPOLOGY_BY: &str = "node_id, nic, host, tor, spine, network_pod, tenant";

impl Queries {
    /// The queries over `window` (topology and hops over `topology_window`),
    /// each selector narrowed by `matchers` (e.g. `job="x"`), RTT read in
    /// `rtt` form.
    pub fn new(
        window: Duration,
        topology_window: Duration,
        matchers: Option<&str>,
        rtt: RttForm,
    ) -> Queries {
        let w = promql_duration(window);
        let tw = promql_duration(topology_window);
        let sel = |metric: &str| match matchers {
            Some(m) if !m.trim().is_empty() => format!("{metric}{{{}}}", m.trim()),
            _ => metric.to_string(),
        };
        let by_pair = "src_node, dst_node, protocol";
        let (rtt_p50, rtt_count) = rtt_queries(rtt, &w, &sel);
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
            rtt_p50,
            rtt_count,
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
            paths: format!(
                "max by (src_node, dst_node, path, hop, address) (last_over_time({}[{tw}]))",
                with_path(&sel("skeletonhunter_path_hop_info"))
            ),
            path_loss: format!(
                "max by (src_node, dst_node, path) (last_over_time({}[{w}]))",
                sel("skeletonhunter_path_loss_ratio")
            ),
            path_probes: format!(
                "max by (src_node, dst_node, path) (last_over_time({}[{w}]))",
                sel("skeletonhunter_path_probes")
            ),
            host_stack: hoststack::query(rtt, &w, &sel),
        }
    }
}

/// `selector` narrowed to series with a `path` label.
fn with_path(selector: &str) -> String {
    match selector.strip_suffix('}') {
        Some(open) => format!("{open}, path!=\"\"}}"),
        None => format!("{selector}{{path!=\"\"}}"),
    }
}

/// Results of the cycle's queries.
#[derive(Debug, Default)]
pub struct QueryResults {
    /// See [`Queries::sent`].
    pub sent: Vec<Sample>,
    /// See [`Queries::lost`].
    pub lost: Vec<Sample>,
    /// See [`Queries::dial_failures`].
    pub dial_failures: Vec<Sample>,
    /// See [`Queries::rtt_p50`].
    pub rtt_p50: Vec<Sample>,
    /// See [`Queries::rtt_count`]; `None` when not queried.
    pub rtt_count: Option<Vec<Sample>>,
    /// See [`Queries::hops`].
    pub hops: Vec<Sample>,
    /// Why the hop query failed, if it did (the cycle goes on without hops).
    pub hops_error: Option<QueryError>,
    /// See [`Queries::paths`].
    pub paths: Vec<Sample>,
    /// See [`Queries::path_loss`].
    pub path_loss: Vec<Sample>,
    /// See [`Queries::path_probes`].
    pub path_probes: Vec<Sample>,
    /// Why a path query failed, if one did (the cycle goes on without
    /// per-path rows).
    pub paths_error: Option<QueryError>,
    /// See [`Queries::host_stack`].
    pub host_stack: Vec<Sample>,
    /// Why it failed, if it did (the cycle goes on without the evidence).
    pub host_stack_error: Option<QueryError>,
}

fn identity_of(s: &Sample) -> Identity {
    let mut id = Identity::default();
    for k in Kind::ALL {
        if let Some(v) = s.labels.get(k.label_name()) {
            id.set(k, v.to_string());
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
    /// The engine's input.
    pub pairs: Vec<PairStats>,
    /// Pairs with an endpoint missing from the topology.
    pub no_topology: usize,
    /// Pairs whose series were incomplete (sent without lost).
    pub incomplete: usize,
    /// The nodes' host-stack delays (empty without the evidence).
    pub host_stack: HostStack,
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
    /// ([`Protocol::rtt_preference`], p50 seconds, samples)
    rtt: Option<(u8, f64, f64)>,
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

/// (source, destination) of a pair's sample, borrowed from it: at
/// 100,000 pairs a copy per sample is ~1.4 million strings a cycle.
fn pair_key(s: &Sample) -> Option<(&str, &str)> {
    let src = s.labels.get("src_node")?;
    let dst = s.labels.get("dst_node")?;
    if src.is_empty() || dst.is_empty() || src == dst {
        return None;
    }
    Some((src, dst))
}

/// Build the engine's per-pair input from query results: the per-pair
/// counters and medians ([`assemble_pairs`]) with each pair's traced hops
/// and per-path rows attached ([`attach_traces`]).
pub fn assemble(
    r: &QueryResults,
    topology: &HashMap<String, Identity>,
    protocols: &[Protocol],
) -> Assembled {
    let mut out = assemble_pairs(r, topology, protocols);
    attach_traces(&mut out.pairs, r);
    out
}

/// Set every pair's traced hops and per-path rows from the hop and path
/// answers of `r` (replacing what a pair kept from an earlier cycle had).
pub fn attach_traces(pairs: &mut [PairStats], r: &QueryResults) {
    attach_hops(pairs, &r.hops);
    attach_paths(pairs, &r.paths, &r.path_loss, &r.path_probes);
}

/// The engine's pairs from the per-pair queries of `r` alone (sent, lost,
/// dial failures, RTT), without hops or paths: what `--pair-shards` can
/// build one shard at a time, since a pair's series all fall in its
/// source node's shard.
///
/// A round is a TCP dial attempt when the exporter dials the pair (the
/// `protocol="tcp"` sent counter) and a failed round a failed dial; packet
/// probes run independently of dials, so their loss is kept as measured.
/// Without dial data a round is a probe packet. A pair through which nothing
/// got in the window (see `Acc::cut`) is all failed rounds: unreachable
/// rather than lossy.
pub fn assemble_pairs(
    r: &QueryResults,
    topology: &HashMap<String, Identity>,
    protocols: &[Protocol],
) -> Assembled {
    let mut acc: BTreeMap<(&str, &str), Acc> = BTreeMap::new();
    let packet = |p: Protocol| !p.is_dial() && protocols.contains(&p);
    // Read by both the counters and the derived answers: built once.
    let lost = by_proto_key(&r.lost);
    add_counts(&mut acc, r, &lost, &packet);
    add_rtts(&mut acc, r, &lost, &packet);
    let mut out = Assembled::default();
    for ((src, dst), a) in acc {
        if a.incomplete {
            out.incomplete += 1;
            continue;
        }
        let (Some(si), Some(di)) = (topology.get(src), topology.get(dst)) else {
            out.no_topology += 1;
            continue;
        };
        if let Some(p) = a.pair(si, di) {
            out.pairs.push(p);
        }
    }
    out
}

/// The protocol of a sample; `None` (the sample is not read) for a label
/// value this build does not know, e.g. from a newer exporter.
fn proto_of(s: &Sample) -> Option<Protocol> {
    s.labels.get("protocol")?.parse().ok()
}

/// (source, destination, protocol) of a sample.
type ProtoKey<'a> = (&'a str, &'a str, Protocol);

fn proto_key(s: &Sample) -> Option<ProtoKey<'_>> {
    let (a, b) = pair_key(s)?;
    Some((a, b, proto_of(s)?))
}

/// Counts by (source, destination, protocol); of a repeated key the last
/// sample counts.
fn by_proto_key(v: &[Sample]) -> HashMap<ProtoKey<'_>, f64> {
    v.iter()
        .filter_map(|s| Some((proto_key(s)?, count(s.value))))
        .collect()
}

/// Sent, lost (`lost_seen`, by [`by_proto_key`]) and dial-failure counters
/// into the per-pair accumulators.
fn add_counts<'a>(
    acc: &mut BTreeMap<(&'a str, &'a str), Acc>,
    r: &'a QueryResults,
    lost_seen: &HashMap<ProtoKey<'a>, f64>,
    packet: &dyn Fn(Protocol) -> bool,
) {
    for s in &r.sent {
        let Some((a, b, proto)) = proto_key(s) else {
            continue;
        };
        let key = (a, b);
        let e = acc.entry(key).or_default();
        if proto.is_dial() {
            e.tcp_attempts += count(s.value);
        } else if packet(proto) {
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
}

/// Answers per pair and protocol, in sample order: counted by the
/// `rtt_count` query, or where the cycle did not ask (native histograms),
/// derived. A median sample says the histogram exists; NaN means it got no
/// answer in the window (so a cut pair is still told from a lossy one
/// while its lost counter lags), a number means at least one: the probes
/// not lost (the dials that did not fail), which counts in-flight probes as
/// answered, at least 1.
fn answer_counts<'a>(
    r: &'a QueryResults,
    lost: &HashMap<ProtoKey<'a>, f64>,
) -> Vec<(ProtoKey<'a>, f64)> {
    if let Some(counted) = &r.rtt_count {
        return counted
            .iter()
            .filter_map(|s| Some((proto_key(s)?, count(s.value))))
            .collect();
    }
    let sent = by_proto_key(&r.sent);
    let dial_failures: HashMap<(&str, &str), f64> = r
        .dial_failures
        .iter()
        .filter_map(|s| Some((pair_key(s)?, count(s.value))))
        .collect();
    r.rtt_p50
        .iter()
        .filter_map(|s| {
            let key = proto_key(s)?;
            if s.value.is_nan() {
                return Some((key, 0.0));
            }
            let failed = if key.2.is_dial() {
                dial_failures.get(&(key.0, key.1))
            } else {
                lost.get(&key)
            };
            let n = sent.get(&key).copied().unwrap_or(0.0) - failed.copied().unwrap_or(0.0);
            Some((key, n.max(1.0)))
        })
        .collect()
}

/// Answer counts and the preferred protocol's median RTT per pair.
fn add_rtts<'a>(
    acc: &mut BTreeMap<(&'a str, &'a str), Acc>,
    r: &'a QueryResults,
    lost: &HashMap<ProtoKey<'a>, f64>,
    packet: &dyn Fn(Protocol) -> bool,
) {
    let mut counts: HashMap<ProtoKey<'a>, f64> = HashMap::new();
    for ((a, b, proto), n) in answer_counts(r, lost) {
        let e = acc.entry((a, b)).or_default();
        if proto.is_dial() {
            *e.tcp_ok.get_or_insert(0.0) += n;
        } else if packet(proto) {
            *e.pkt_received.get_or_insert(0.0) += n;
        }
        counts.insert((a, b, proto), n);
    }
    for s in &r.rtt_p50 {
        let Some((a, b, proto)) = proto_key(s) else {
            continue;
        };
        let key = (a, b);
        if !(packet(proto) || proto.is_dial()) || !s.value.is_finite() || s.value <= 0.0 {
            continue;
        }
        let n = counts.get(&(key.0, key.1, proto)).copied().unwrap_or(0.0);
        if n <= 0.0 {
            continue;
        }
        let rank = proto.rtt_preference();
        let e = acc.entry(key).or_default();
        if e.rtt.is_none_or(|(r0, _, _)| rank < r0) {
            e.rtt = Some((rank, s.value, n));
        }
    }
}

impl Acc {
    /// The engine's view of one placed pair; `None` without any round.
    fn pair(&self, si: &Identity, di: &Identity) -> Option<PairStats> {
        let a = self;
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
            return None;
        }
        let (rtt_seconds, rtt_samples) = match a.rtt {
            Some((_, p50, n)) if sent > lost => (Some(p50), n),
            _ => (None, 0.0),
        };
        Some(PairStats {
            src: si.clone(),
            dst: di.clone(),
            rounds,
            failed_dials: failed,
            sent,
            lost,
            rtt_seconds,
            rtt_samples,
            hops: Vec::new(),
            paths: Vec::new(),
        })
    }
}

/// Quote a string for use inside a PromQL double-quoted label matcher.
pub fn quote_label_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Escape RE2 metacharacters so a value matches literally inside `=~`.
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
