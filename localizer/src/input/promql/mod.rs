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
use crate::input::histograms::{rtt_queries, RttForm};
use crate::input::hoststack;
use skeletonhunter_common::duration;
use skeletonhunter_common::ranks::{Ranks, RANK_INFO};
use skeletonhunter_common::topology::{Identity, Kind};
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
    /// Probes lost in a row per pair and protocol, at the latest scrape.
    pub consecutive_lost: String,
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
    /// Each training container's ranks in its job (read with the node
    /// identities; optional: without them jobs count containers).
    pub ranks: String,
}

skeletonhunter_common::labelled_enum! {
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
        /// [`Queries::consecutive_lost`].
        ConsecutiveLost,
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
        /// [`Queries::ranks`].
        Ranks,
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
            consecutive_lost: format!(
                "max by ({by_pair}) (last_over_time({}[{w}]))",
                sel("skeletonhunter_probe_consecutive_lost")
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
            ranks: format!(
                "max by (node_id, first_rank, ranks, world_size) ({})",
                sel(RANK_INFO)
            ),
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
#[derive(Debug)]
pub struct QueryResults {
    /// See [`Queries::sent`].
    pub sent: Vec<Sample>,
    /// See [`Queries::lost`].
    pub lost: Vec<Sample>,
    /// See [`Queries::dial_failures`].
    pub dial_failures: Vec<Sample>,
    /// See [`Queries::consecutive_lost`] (empty from exporters without it).
    pub consecutive_lost: Vec<Sample>,
    /// See [`Queries::rtt_p50`].
    pub rtt_p50: Vec<Sample>,
    /// See [`Queries::rtt_count`]; `None` when not queried.
    pub rtt_count: Option<Vec<Sample>>,
    /// See [`Queries::hops`]; the cycle goes on without hops when it failed.
    pub hops: OptionalAnswer<Vec<Sample>>,
    /// The per-path queries; the cycle goes on without per-path rows when
    /// one failed.
    pub paths: OptionalAnswer<PathSamples>,
    /// See [`Queries::host_stack`]; the cycle goes on without that evidence
    /// when it failed.
    pub host_stack: OptionalAnswer<Vec<Sample>>,
}

/// The answer of a query the cycle can do without, or why it failed: one
/// value, so there is never an error beside a stale answer.
pub type OptionalAnswer<T> = Result<T, QueryError>;

impl Default for QueryResults {
    fn default() -> Self {
        QueryResults {
            sent: Vec::new(),
            lost: Vec::new(),
            dial_failures: Vec::new(),
            consecutive_lost: Vec::new(),
            rtt_p50: Vec::new(),
            rtt_count: None,
            hops: Ok(Vec::new()),
            paths: Ok(PathSamples::default()),
            host_stack: Ok(Vec::new()),
        }
    }
}

/// The answers of the three per-path queries, taken together (a pair's
/// per-path rows need all three).
#[derive(Debug, Default)]
pub struct PathSamples {
    /// See [`Queries::paths`].
    pub hops: Vec<Sample>,
    /// See [`Queries::path_loss`].
    pub loss: Vec<Sample>,
    /// See [`Queries::path_probes`].
    pub probes: Vec<Sample>,
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

mod pairs;
pub use pairs::{assemble, assemble_pairs, attach_traces, Assembled, CUT_STREAK};

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

/// Each node's ranks from the rank query's answer; series whose labels are
/// not ranks are left out, and of several for one node (a container
/// restarted with other ranks within the lookback) the lowest is kept.
pub fn ranks_from(samples: &[Sample]) -> HashMap<String, Ranks> {
    let mut out: HashMap<String, Ranks> = HashMap::new();
    for s in samples {
        let get = |name: &str| s.labels.get(name).unwrap_or("");
        let node = get(Kind::Node.label_name());
        let Some(r) = Ranks::from_labels(get("first_rank"), get("ranks"), get("world_size")) else {
            continue;
        };
        if node.is_empty() {
            continue;
        }
        let slot = out.entry(node.to_string()).or_insert(r);
        *slot = (*slot).min(r);
    }
    out
}

#[cfg(test)]
mod tests;
