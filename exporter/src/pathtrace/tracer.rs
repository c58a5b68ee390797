//! The traces by destination: starting them within the budget of
//! concurrent traces, rate-limiting automatic ones, keeping the last
//! result, and serving them as JSON.

use super::hops::HopSeries;
use super::{paris, Flow, Trace, TraceConfig};
use crate::model::HopLabels;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::Serialize;
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a path is traced; serialized as `on_demand` / `anomaly`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceReason {
    /// `/trace?target=` asked for it.
    OnDemand,
    /// The pair turned anomalous.
    Anomaly,
}

impl TraceReason {
    /// The JSON value.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceReason::OnDemand => "on_demand",
            TraceReason::Anomaly => "anomaly",
        }
    }
}

/// The last trace towards one destination, or the one running.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// This exporter's node.
    pub src_node: String,
    /// The traced peer's node.
    pub dst_node: String,
    /// Why it was traced.
    pub reason: TraceReason,
    /// Whether a trace to it runs now.
    pub running: bool,
    /// The last finished trace.
    pub trace: Option<Trace>,
    /// Why the last trace failed.
    pub error: Option<String>,
}

/// At most this many traces run at once (each holds a blocking thread and
/// three raw sockets); a fabric-wide fault makes many pairs anomalous at
/// the same moment.
pub const MAX_CONCURRENT: usize = 8;

/// Outcome of [`Tracer::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A trace is running now.
    Started,
    /// One to the same destination already runs.
    AlreadyRunning,
    /// [`MAX_CONCURRENT`] traces run.
    Busy,
}

impl Start {
    /// The `status` of the `/trace` response.
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
    hops: HopSeries,
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
    /// The probe flow to follow.
    pub flow: Flow,
    /// This exporter's node.
    pub src_node: String,
    /// The peer's node.
    pub dst_node: String,
    /// Why it is traced.
    pub reason: TraceReason,
    /// UDP payload of the probes (a valid echo request makes the peer's
    /// responder answer, which marks the destination).
    pub payload: Vec<u8>,
}

impl Tracer {
    /// A tracer publishing its hops into `hop_info` (the exporter's
    /// `skeletonhunter_path_hop_info`; tests use a private family).
    pub fn new(config: TraceConfig, hop_info: Family<HopLabels, Gauge>) -> Arc<Tracer> {
        Arc::new(Tracer {
            config,
            entries: Mutex::new(HashMap::new()),
            hops: HopSeries::new(hop_info),
            last_auto: Mutex::new(HashMap::new()),
            auto_interval: Duration::from_secs(60),
        })
    }

    /// Start a trace unless one to the same destination is running or
    /// [`MAX_CONCURRENT`] traces are. Needs a tokio runtime.
    pub fn start(self: &Arc<Self>, req: Request) -> Start {
        let dst = IpAddr::V4(*req.flow.dst.ip());
        {
            let mut entries = self
                .entries
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
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
            let result = paris::trace(req.flow, &me.config, &req.payload);
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
        let mut last = self
            .last_auto
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last
            .get(&dst)
            .is_some_and(|t| t.elapsed() < self.auto_interval)
        {
            return false;
        }
        let dst_node = req.dst_node.clone();
        match self.start(Request {
            reason: TraceReason::Anomaly,
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
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
                self.hops.publish(dst, &req.src_node, &req.dst_node, &t);
                entry.trace = Some(t);
                entry.error = None;
            }
            Err(e) => {
                tracing::warn!(dst = %dst, "path trace failed: {e}");
                entry.error = Some(e.to_string());
            }
        }
    }

    /// Drop a destination's trace and series (the peer left).
    pub fn forget(&self, dst: IpAddr) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&dst);
        self.hops.forget(dst);
    }

    /// All entries as JSON, keyed by destination address.
    pub fn to_json(&self) -> String {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    #[test]
    fn concurrent_traces_are_capped() {
        let t = Tracer::new(TraceConfig::default(), Family::default());
        let running = |i: u8| Entry {
            src_node: "a".into(),
            dst_node: format!("n{i}"),
            reason: TraceReason::Anomaly,
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
            reason: TraceReason::OnDemand,
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
}
