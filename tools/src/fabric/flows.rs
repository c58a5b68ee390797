//! Reading an exporter's multi-flow view of the fabric: each probe flow's
//! last trace (`/traces`), the spine it crossed, and the share of a
//! pair's equal-cost paths its flows cover.

use super::ports;
use super::topology::{Fabric, Node};
use crate::process::http_get;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// One flow's last trace as `/traces` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowTrace {
    /// The traced peer.
    pub dst: Ipv4Addr,
    /// The flow's index.
    pub flow: usize,
    /// Why it was traced (`mapping`, `lossy_flow`, ...).
    pub reason: String,
    /// Whether a trace of it runs now.
    pub running: bool,
    /// The id of the path the flow is counted under.
    pub path: Option<String>,
    /// The hops of the last finished trace (`None`: silent).
    pub hops: Vec<Option<Ipv4Addr>>,
    /// Whether that trace reached the peer.
    pub reached: bool,
    /// Whether there is a finished trace at all.
    pub finished: bool,
    /// When the last finished trace started (Unix seconds; 0 without one).
    pub started_unix_seconds: f64,
}

/// GET `path` from `node`'s exporter (through the management network).
pub fn exporter_get(fabric: &Fabric, node: &Node, path: &'static str) -> Result<String> {
    let addr = SocketAddr::from((node.mgmt_ip, ports::EXPORTER_METRICS));
    let (status, body) = fabric
        .mon
        .run_in(move || http_get(addr, path, Duration::from_secs(5)))??;
    if status != 200 {
        bail!("{} {path}: HTTP {status}", node.identity.node);
    }
    Ok(body)
}

/// Every flow trace `node`'s exporter holds.
pub fn flow_traces(fabric: &Fabric, node: &Node) -> Result<Vec<FlowTrace>> {
    let body = exporter_get(fabric, node, "/traces")?;
    let v: serde_json::Value = serde_json::from_str(&body).context("/traces is not JSON")?;
    let list = v["traces"].as_array().context("/traces without traces")?;
    let mut out = Vec::new();
    for t in list {
        let addr = |h: &serde_json::Value| h["address"].as_str().and_then(|a| a.parse().ok());
        out.push(FlowTrace {
            dst: t["destination"]
                .as_str()
                .and_then(|a| a.parse().ok())
                .context("trace without destination")?,
            flow: t["flow"].as_u64().context("trace without flow")? as usize,
            reason: t["reason"].as_str().unwrap_or_default().to_string(),
            running: t["running"] == true,
            path: t["path"].as_str().map(str::to_string),
            hops: t["trace"]["hops"]
                .as_array()
                .map(|hs| hs.iter().map(addr).collect())
                .unwrap_or_default(),
            reached: t["trace"]["reached"] == true,
            finished: t["trace"].is_object(),
            started_unix_seconds: t["trace"]["started_unix_seconds"].as_f64().unwrap_or(0.0),
        });
    }
    Ok(out)
}

impl Fabric {
    /// The spine a trace crossed: the first hop that is a spine's address.
    pub fn spine_of_trace(&self, t: &FlowTrace) -> Option<usize> {
        t.hops
            .iter()
            .flatten()
            .find_map(|a| self.spine_of_address(*a))
    }
}

/// The spine each of flows `0..k` of every traced pair crossed, from
/// complete traces: `(src, dst) -> spines`. Pairs with a flow below `k`
/// not yet mapped are left out.
pub fn spines_by_pair(
    fabric: &Fabric,
    traces: &[(String, Vec<FlowTrace>)],
    k: usize,
) -> BTreeMap<(String, Ipv4Addr), BTreeSet<usize>> {
    let mut out = BTreeMap::new();
    for (src, ts) in traces {
        let mut by_dst: BTreeMap<Ipv4Addr, BTreeMap<usize, usize>> = BTreeMap::new();
        for t in ts.iter().filter(|t| t.reached && t.flow < k) {
            if let Some(s) = fabric.spine_of_trace(t) {
                by_dst.entry(t.dst).or_default().insert(t.flow, s);
            }
        }
        for (dst, flows) in by_dst {
            if flows.len() == k {
                out.insert((src.clone(), dst), flows.into_values().collect());
            }
        }
    }
    out
}
