//! The fabric at a glance, from the pairs a cycle analyzed: loss, pairs,
//! unreachable pairs and the spread of the pairs' RTT, for the fabric and
//! per ToR, spine and tenant; the lossiest and slowest pairs; the fabric's
//! pairs by RTT. This is what the dashboards draw. The localizer reads every
//! pair anyway (sharded or not), so serving these costs the store nothing,
//! where recording rules would read every pair's series again each round.
//!
//! Which pairs count for an area follows the path model: a ToR, every pair
//! with an end beneath it; a spine, pairs between two ToRs with an end
//! beneath it; a tenant (job), pairs with both ends in it.
//!
//! Pure: pairs in, figures out; the metrics writer turns them into series.

#[cfg(test)]
mod tests;

use crate::engine::model::PairStats;
use std::collections::{BTreeMap, HashMap};

/// A pair counts as unreachable from this loss on (a round without any
/// answer counts as all its probes lost), as the shipped pair rules do.
pub const UNREACHABLE_LOSS: f64 = 0.95;
/// The lossiest and the slowest pairs kept fabric-wide.
pub const WORST_PAIRS: usize = 50;
/// The lossiest and the slowest pairs kept per tenant besides.
pub const WORST_PAIRS_PER_TENANT: usize = 5;
/// Most pairs served in all (a fleet of many tenants).
pub const WORST_PAIRS_CAP: usize = 1000;
/// The quantiles of the pairs' median RTT served per area.
pub const RTT_QUANTILES: [f64; 2] = [0.5, 0.99];

skeletonhunter_common::labelled_enum! {
    /// What an area of the overview is: the `scope` label.
    #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Scope {
        /// Every pair.
        Fabric,
        /// The pairs with an end beneath a ToR.
        Tor,
        /// The pairs between ToRs with an end beneath a spine.
        Spine,
        /// The pairs with both ends in a tenant (job).
        Tenant,
    }
}

/// One area's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Area {
    /// What it is.
    pub scope: Scope,
    /// The component's id ("" for the fabric).
    pub id: String,
    /// Lost / sent probes over its pairs (so busy pairs weigh by what they
    /// sent, as in the pair rules); `None` when nothing was sent.
    pub loss: Option<f64>,
    /// Its pairs.
    pub pairs: usize,
    /// Of those, losing at least [`UNREACHABLE_LOSS`].
    pub unreachable: usize,
    /// [`RTT_QUANTILES`] of its pairs' median RTTs (empty without RTT).
    pub rtt: Vec<(f64, f64)>,
}

/// A pair among the lossiest or slowest.
#[derive(Debug, Clone, PartialEq)]
pub struct WorstPair {
    /// The prober's node.
    pub src: String,
    /// The responder's node.
    pub dst: String,
    /// The prober's ToR.
    pub src_tor: String,
    /// The responder's ToR.
    pub dst_tor: String,
    /// The tenant both ends are in ("" when they differ).
    pub tenant: String,
    /// Its loss (unanswered dials counted as lost rounds).
    pub loss: f64,
    /// Its median RTT, when a reply came back.
    pub rtt: Option<f64>,
}

/// What the dashboards draw, for one cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overview {
    /// The fabric first, then ToRs, spines and tenants by id.
    pub areas: Vec<Area>,
    /// The lossiest and slowest pairs (at most [`WORST_PAIRS_CAP`]).
    pub worst: Vec<WorstPair>,
    /// Pairs whose median RTT is at most each bound (cumulative, the last
    /// bound infinite): the fabric's RTT distribution.
    pub rtt_buckets: Vec<(f64, usize)>,
}

/// The upper bounds of the RTT distribution: the exporter's classic RTT
/// buckets (1 µs doubling to ~8 s), then +Inf.
pub fn rtt_bounds() -> impl Iterator<Item = f64> {
    (0..24)
        .map(|k| 1e-6 * f64::from(1u32 << k))
        .chain(std::iter::once(f64::INFINITY))
}

/// Loss of probes and of whole rounds together (a round without any answer
/// counts as all its probes lost): `lost` of `sent` probes, `failed` of
/// `rounds` dials. `None` when nothing was sent or dialled.
pub fn combined_loss(lost: f64, sent: f64, failed: f64, rounds: f64) -> Option<f64> {
    let share = |n: f64, d: f64| {
        if d > 0.0 {
            (n.max(0.0) / d).min(1.0)
        } else {
            0.0
        }
    };
    if sent <= 0.0 && rounds <= 0.0 {
        return None;
    }
    let (lost, unanswered) = (share(lost, sent), share(failed, rounds));
    Some(lost + unanswered - lost * unanswered)
}

/// A pair's [`combined_loss`].
fn pair_loss(p: &PairStats) -> Option<f64> {
    combined_loss(p.lost, p.sent, p.failed_dials, p.rounds)
}

/// Running sums of one area.
#[derive(Default)]
struct Sums {
    lost: f64,
    sent: f64,
    pairs: usize,
    unreachable: usize,
    rtts: Vec<f64>,
}

impl Sums {
    fn add(&mut self, p: &PairStats, loss: Option<f64>) {
        self.sent += p.sent.max(0.0);
        self.lost += p.lost.max(0.0);
        self.pairs += 1;
        if loss.is_some_and(|l| l >= UNREACHABLE_LOSS) {
            self.unreachable += 1;
        }
        self.rtts.extend(p.rtt_seconds.filter(|r| r.is_finite()));
    }

    fn area(mut self, scope: Scope, id: String) -> Area {
        let loss = (self.sent > 0.0).then(|| (self.lost / self.sent).clamp(0.0, 1.0));
        let rtt = RTT_QUANTILES
            .iter()
            .filter_map(|&q| Some((q, quantile(&mut self.rtts, q)?)))
            .collect();
        Area {
            scope,
            id,
            loss,
            pairs: self.pairs,
            unreachable: self.unreachable,
            rtt,
        }
    }
}

/// The `q` quantile of `xs` (nearest rank); `None` when empty.
fn quantile(xs: &mut [f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    let (_, x, _) = xs.select_nth_unstable_by(rank, f64::total_cmp);
    Some(*x)
}

/// The areas a pair counts for, besides the fabric: each ToR of its ends
/// (once when they share it), each spine of its ends when the ToRs differ
/// (once when they share it), and the tenant both ends are in.
fn areas_of(p: &PairStats) -> [Option<(Scope, &str)>; 5] {
    let (s, d) = (&p.src, &p.dst);
    let cross = !s.tor.is_empty() && !d.tor.is_empty() && s.tor != d.tor;
    fn area(scope: Scope, id: &str, counts: bool) -> Option<(Scope, &str)> {
        (counts && !id.is_empty()).then_some((scope, id))
    }
    [
        area(Scope::Tor, &s.tor, true),
        area(Scope::Tor, &d.tor, d.tor != s.tor),
        area(Scope::Spine, &s.spine, cross),
        area(Scope::Spine, &d.spine, cross && d.spine != s.spine),
        area(Scope::Tenant, tenant_of(p), true),
    ]
}

/// The overview of `pairs`.
pub fn overview(pairs: &[PairStats]) -> Overview {
    let mut fabric = Sums::default();
    let mut areas: HashMap<(Scope, &str), Sums> = HashMap::new();
    let mut bounds: Vec<(f64, usize)> = rtt_bounds().map(|b| (b, 0)).collect();
    let losses: Vec<Option<f64>> = pairs.iter().map(pair_loss).collect();
    for (p, &loss) in pairs.iter().zip(&losses) {
        fabric.add(p, loss);
        for key in areas_of(p).into_iter().flatten() {
            areas.entry(key).or_default().add(p, loss);
        }
        if let Some(r) = p.rtt_seconds.filter(|r| r.is_finite()) {
            let i = bounds.partition_point(|&(b, _)| b < r);
            if let Some(b) = bounds.get_mut(i) {
                b.1 += 1;
            }
        }
    }
    let mut running = 0;
    for b in &mut bounds {
        running += b.1;
        b.1 = running;
    }
    let mut sorted: Vec<((Scope, &str), Sums)> = areas.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = vec![fabric.area(Scope::Fabric, String::new())];
    out.extend(
        sorted
            .into_iter()
            .map(|((scope, id), s)| s.area(scope, id.to_string())),
    );
    Overview {
        areas: out,
        worst: worst(pairs, &losses),
        rtt_buckets: bounds,
    }
}

/// The tenant both ends of `p` are in ("" when they differ).
fn tenant_of(p: &PairStats) -> &str {
    if p.src.tenant == p.dst.tenant {
        &p.src.tenant
    } else {
        ""
    }
}

/// The lossiest (with any loss) and the slowest pairs, fabric-wide and per
/// tenant, at most [`WORST_PAIRS_CAP`], lossiest first.
fn worst(pairs: &[PairStats], losses: &[Option<f64>]) -> Vec<WorstPair> {
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        groups.entry("").or_default().push(i);
        let t = tenant_of(p);
        if !t.is_empty() {
            groups.entry(t).or_default().push(i);
        }
    }
    let loss = |i: usize| losses.get(i).copied().flatten().unwrap_or(0.0);
    let rtt = |i: usize| pairs.get(i).and_then(|p| p.rtt_seconds).unwrap_or(0.0);
    let mut chosen: Vec<usize> = Vec::new();
    for (t, mut members) in groups {
        let n = if t.is_empty() {
            WORST_PAIRS
        } else {
            WORST_PAIRS_PER_TENANT
        };
        members.sort_by(|&a, &b| loss(b).total_cmp(&loss(a)).then(a.cmp(&b)));
        chosen.extend(members.iter().copied().filter(|&i| loss(i) > 0.0).take(n));
        members.sort_by(|&a, &b| rtt(b).total_cmp(&rtt(a)).then(a.cmp(&b)));
        chosen.extend(members.iter().copied().filter(|&i| rtt(i) > 0.0).take(n));
    }
    chosen.sort_by(|&a, &b| {
        loss(b)
            .total_cmp(&loss(a))
            .then(rtt(b).total_cmp(&rtt(a)))
            .then(a.cmp(&b))
    });
    // Equal indexes sort next to each other.
    chosen.dedup();
    chosen
        .into_iter()
        .take(WORST_PAIRS_CAP)
        .filter_map(|i| {
            let p = pairs.get(i)?;
            Some(WorstPair {
                src: p.src.node.clone(),
                dst: p.dst.node.clone(),
                src_tor: p.src.tor.clone(),
                dst_tor: p.dst.tor.clone(),
                tenant: tenant_of(p).to_string(),
                loss: loss(i),
                rtt: p.rtt_seconds,
            })
        })
        .collect()
}
