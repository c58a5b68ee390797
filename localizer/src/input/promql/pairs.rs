//! A cycle's per-pair answers turned into the engine's input: sent, lost,
//! dial failures, losses in a row and the RTT median of each pair, summed
//! over the analyzed protocols, a cut pair told from a lossy one.

use super::{PathSamples, QueryResults};
use crate::clients::prometheus::Sample;
use crate::engine::model::{HostStack, PairStats};
use crate::input::paths::{attach_hops, attach_paths};
use skeletonhunter_common::topology::Identity;
use skeletonhunter_common::Protocol;
use std::collections::{BTreeMap, HashMap};

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
    /// Whether every packet protocol that sent is silent now (see
    /// [`CUT_STREAK`]); `None` before the first.
    pkt_silent: Option<bool>,
    /// Whether the dials are silent now.
    dial_silent: Option<bool>,
}

/// Probes (or dials) lost in a row at the latest scrape from which a pair
/// is cut off *now* (`skeletonhunter_probe_consecutive_lost`): five
/// timeouts running is no random loss (30 % loss gives five in a row
/// 0.24 % of the time, and every probing protocol must be silent), and it
/// is known at the first scrape after the cut, where the window's counters
/// need the whole window to say the same.
pub const CUT_STREAK: f64 = 5.0;

/// Fold one protocol's silence into a pair's: silent only if all are.
fn note_silence(slot: &mut Option<bool>, silent: bool) {
    *slot = Some(slot.unwrap_or(true) && silent);
}

impl Acc {
    /// Cut off: nothing got through in the whole window, or every probing
    /// protocol has lost [`CUT_STREAK`] in a row by now.
    fn cut(&self) -> bool {
        self.cut_over_window() || self.cut_now()
    }

    /// Every protocol that probed the pair is silent at the latest scrape.
    fn cut_now(&self) -> bool {
        let has_pkt = self.pkt_sent > 0.0;
        let has_dial = self.tcp_attempts > 0.0;
        (has_pkt || has_dial)
            && (!has_pkt || self.pkt_silent == Some(true))
            && (!has_dial || self.dial_silent == Some(true))
    }

    /// Nothing got through in the whole window: every dial failed and no
    /// packet probe was answered. Answers are counted from the RTT
    /// histograms because lost counters lag sent counters by the probe
    /// timeout (in-flight probes), which would hide a cut in a short window.
    fn cut_over_window(&self) -> bool {
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
    attach_hops(pairs, r.hops.as_deref().unwrap_or_default());
    let none = PathSamples::default();
    let p = r.paths.as_ref().unwrap_or(&none);
    attach_paths(pairs, &p.hops, &p.loss, &p.probes);
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
    let answers = Answers {
        r,
        lost: by_proto_key(&r.lost),
        packet: &packet,
    };
    answers.add_counts(&mut acc);
    answers.add_rtts(&mut acc);
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

/// What both passes into the per-pair accumulators read.
struct Answers<'a, 'p> {
    r: &'a QueryResults,
    /// The lost counters by [`by_proto_key`], read by the counters and the
    /// derived answers alike: built once.
    lost: HashMap<ProtoKey<'a>, f64>,
    /// Whether a protocol is a packet probe the cycle analyzes.
    packet: &'p dyn Fn(Protocol) -> bool,
}

impl<'a> Answers<'a, '_> {
    /// Sent, lost and dial-failure counters, and whether each protocol is
    /// silent now (losses in a row), into the per-pair accumulators.
    fn add_counts(&self, acc: &mut BTreeMap<(&'a str, &'a str), Acc>) {
        let (r, lost_seen, packet) = (self.r, &self.lost, self.packet);
        let streaks = by_proto_key(&r.consecutive_lost);
        for s in &r.sent {
            let Some((a, b, proto)) = proto_key(s) else {
                continue;
            };
            let key = (a, b);
            let e = acc.entry(key).or_default();
            let sent = count(s.value);
            // Noted only for a protocol that probed the pair in the window.
            let silent = streaks
                .get(&(a, b, proto))
                .is_some_and(|&n| n >= CUT_STREAK);
            if proto.is_dial() {
                e.tcp_attempts += sent;
                if sent > 0.0 {
                    note_silence(&mut e.dial_silent, silent);
                }
            } else if packet(proto) {
                match lost_seen.get(&(key.0, key.1, proto)) {
                    Some(&lost) => {
                        e.pkt_sent += sent;
                        e.pkt_lost += lost.min(sent);
                        if sent > 0.0 {
                            note_silence(&mut e.pkt_silent, silent);
                        }
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
    fn answer_counts(&self) -> Vec<(ProtoKey<'a>, f64)> {
        let (r, lost) = (self.r, &self.lost);
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
    fn add_rtts(&self, acc: &mut BTreeMap<(&'a str, &'a str), Acc>) {
        let (r, packet) = (self.r, self.packet);
        let mut counts: HashMap<ProtoKey<'a>, f64> = HashMap::new();
        for ((a, b, proto), n) in self.answer_counts() {
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
            // The median alone is read from the histogram.
            rtt_spread_seconds: None,
            // Counters over a window cannot tell bursts from single drops,
            // nor when their probes were lost.
            lossy_rounds: None,
            lossy_rows: Vec::new(),
            round_seconds: None,
            hops: Vec::new(),
            paths: Vec::new(),
        })
    }
}
