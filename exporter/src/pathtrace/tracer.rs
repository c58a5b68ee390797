//! The traces by flow: starting them within the budget of concurrent
//! traces, rate-limiting anomaly traces (a global budget per minute and a
//! per-peer back-off, [`super::budget`]; mapping traces have their own,
//! [`super::mapper`]), aggregating repeated log lines, keeping the last
//! result per flow, handing it to the path series, and serving them as
//! JSON.

use super::budget::{AutoPolicy, Refusal, TRACES_PER_MINUTE};
use super::hops::PathSeries;
use super::{paris, Flow, Trace, TraceConfig};
use crate::telemetry::{PathFamilies, Repeats, Verdict};
use serde::Serialize;
use skeletonhunter_common::sync::lock;
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

skeletonhunter_common::labelled_enum! {
    /// Why a path is traced; serialized as `on_demand` / `anomaly` /
    /// `mapping` / `lossy_flow`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum TraceReason {
        /// `/trace?target=` asked for it.
        OnDemand,
        /// The pair turned anomalous (its worst flow is traced).
        Anomaly,
        /// Mapping a flow to its path: at start and on the refresh timer.
        Mapping,
        /// The flow started losing probes.
        LossyFlow,
    }
}

impl TraceReason {
    /// Whether the flow mapper started it (and its concurrency cap holds).
    pub fn is_mapping(self) -> bool {
        matches!(self, TraceReason::Mapping | TraceReason::LossyFlow)
    }
}

/// The last trace of one flow, or the one running.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// The flow's index among the prober's flows.
    pub flow: usize,
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
/// Of those, at most this many map flows, so anomaly and on-demand
/// traces always find room.
pub const MAX_MAPPING_CONCURRENT: usize = 4;

skeletonhunter_common::labelled_enum! {
    /// Outcome of [`Tracer::start`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Start {
        /// A trace is running now.
        Started,
        /// One to the same destination already runs.
        AlreadyRunning,
        /// [`MAX_CONCURRENT`] traces run (or, for mapping,
        /// [`MAX_MAPPING_CONCURRENT`]).
        Busy,
    }
}

/// Traces by flow, the path series, and the anomaly trigger.
pub struct Tracer {
    config: TraceConfig,
    entries: Mutex<HashMap<Flow, Entry>>,
    paths: PathSeries,
    /// Raw sockets were refused: mapping stops (anomaly and on-demand
    /// traces still say why in `/traces`).
    denied: AtomicBool,
    auto: Mutex<AutoPolicy>,
    logs: Mutex<Repeats>,
}

/// Log messages of path tracing, each aggregated over a minute.
const MSG_TRACING: &str = "tracing the path of an anomalous pair";
const MSG_TRACED: &str = "path traced";
const MSG_FAILED: &str = "path trace failed";
const MSG_BUDGET: &str = "automatic path trace skipped: the budget of traces per minute is spent";
const MSG_DENIED: &str =
    "path tracing needs raw sockets (root or CAP_NET_RAW); flows are not mapped to paths";

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

/// What the caller knows about the flow to trace.
#[derive(Debug, Clone)]
pub struct Request {
    /// The probe flow to follow (source address unspecified: the route's).
    pub flow: Flow,
    /// Its index among the prober's flows.
    pub flow_index: usize,
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
    /// A tracer publishing its paths into `families` (the exporter's
    /// `skeletonhunter_path_*`; tests use private families).
    pub fn new(config: TraceConfig, families: PathFamilies) -> Arc<Tracer> {
        Arc::new(Tracer {
            config,
            entries: Mutex::new(HashMap::new()),
            paths: PathSeries::new(families),
            denied: AtomicBool::new(false),
            auto: Mutex::new(AutoPolicy::new(Instant::now())),
            logs: Mutex::new(Repeats::new(Duration::from_secs(60))),
        })
    }

    /// The path series (the watch loop feeds them the flows' counts).
    pub fn paths(&self) -> &PathSeries {
        &self.paths
    }

    /// Whether raw sockets were refused (mapping is pointless then).
    pub fn denied(&self) -> bool {
        self.denied.load(Ordering::Relaxed)
    }

    /// Start a trace unless one of the same flow is running or
    /// [`MAX_CONCURRENT`] traces are (mapping: [`MAX_MAPPING_CONCURRENT`]).
    /// Needs a tokio runtime.
    pub fn start(self: &Arc<Self>, req: Request) -> Start {
        let dst = IpAddr::V4(*req.flow.dst.ip());
        {
            let mut entries = lock(&self.entries);
            if entries.get(&req.flow).is_some_and(|e| e.running) {
                return Start::AlreadyRunning;
            }
            let running = entries.values().filter(|e| e.running);
            let mapping = running.clone().filter(|e| e.reason.is_mapping()).count();
            if running.count() >= MAX_CONCURRENT
                || (req.reason.is_mapping() && mapping >= MAX_MAPPING_CONCURRENT)
            {
                return Start::Busy;
            }
            let previous = entries.remove(&req.flow);
            entries.insert(
                req.flow,
                Entry {
                    flow: req.flow_index,
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

    /// Trace an anomalous pair, within the global budget
    /// ([`TRACES_PER_MINUTE`]) and the pair's back-off (while it stays
    /// anomalous it is re-traced after 1, 2, 4, … minutes, at most an hour).
    /// When the tracer is busy or the budget spent, the pair is simply
    /// tried again at the next check.
    pub fn on_anomaly(self: &Arc<Self>, req: Request) -> bool {
        self.on_anomaly_at(req, Instant::now())
    }

    /// [`Tracer::on_anomaly`] at a given time.
    pub fn on_anomaly_at(self: &Arc<Self>, req: Request, now: Instant) -> bool {
        let dst = IpAddr::V4(*req.flow.dst.ip());
        let mut auto = lock(&self.auto);
        match auto.check(dst, now) {
            Ok(()) => {}
            Err(Refusal::BackingOff) => return false,
            Err(Refusal::OverBudget) => {
                if self.should_log(MSG_BUDGET, now) {
                    tracing::warn!(per_minute = TRACES_PER_MINUTE, dst = %dst, "{MSG_BUDGET}");
                }
                return false;
            }
        }
        let dst_node = req.dst_node.clone();
        match self.start(Request {
            reason: TraceReason::Anomaly,
            ..req
        }) {
            Start::Started => {
                auto.started(dst, now);
                if self.should_log(MSG_TRACING, now) {
                    tracing::info!(dst = %dst, dst_node = %dst_node, "{MSG_TRACING}");
                }
                true
            }
            Start::AlreadyRunning | Start::Busy => false,
        }
    }

    /// The pair of `dst` is no longer anomalous: its next anomaly is traced
    /// without back-off.
    pub fn recovered(&self, dst: IpAddr) {
        lock(&self.auto).backoff.reset(dst);
    }

    /// Whether to log an occurrence of `msg` now: the first of a minute
    /// is logged (after a summary of the previous minute's repeats), the
    /// rest only counted. Used for every per-peer line of path tracing.
    pub fn should_log(&self, msg: &'static str, now: Instant) -> bool {
        let mut logs = lock(&self.logs);
        match logs.hit(msg, now) {
            Verdict::Suppress => false,
            Verdict::Log { repeated } => {
                if repeated > 0 {
                    let secs = logs.window().as_secs();
                    tracing::info!("\"{msg}\" repeated {repeated} times in the last {secs} s");
                }
                true
            }
        }
    }

    /// Log the summaries of messages that repeated and then went quiet.
    pub fn flush_logs(&self, now: Instant) {
        let mut logs = lock(&self.logs);
        let secs = logs.window().as_secs();
        for (msg, repeated) in logs.flush(now) {
            tracing::info!("\"{msg}\" repeated {repeated} times in the last {secs} s");
        }
    }

    fn finish(&self, dst: IpAddr, req: &Request, result: io::Result<Trace>) {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.get_mut(&req.flow) else {
            return; // forgotten meanwhile
        };
        entry.running = false;
        let now = Instant::now();
        match result {
            Ok(t) => {
                if self.should_log(MSG_TRACED, now) {
                    tracing::info!(
                        dst = %dst,
                        hops = %t.hops.iter().map(|h| h.address.map(|a| a.to_string()).unwrap_or_else(|| "*".into())).collect::<Vec<_>>().join(" "),
                        reached = t.reached,
                        "{MSG_TRACED}"
                    );
                }
                self.paths
                    .traced(dst, req.flow_index, &req.src_node, &req.dst_node, &t);
                entry.trace = Some(t);
                entry.error = None;
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                if !self.denied.swap(true, Ordering::Relaxed) {
                    tracing::warn!("{MSG_DENIED}: {e}");
                }
                entry.error = Some(e.to_string());
            }
            Err(e) => {
                if self.should_log(MSG_FAILED, now) {
                    tracing::warn!(dst = %dst, "{MSG_FAILED}: {e}");
                }
                entry.error = Some(e.to_string());
            }
        }
    }

    /// Drop a destination's traces and series (the peer left).
    pub fn forget(&self, dst: IpAddr) {
        lock(&self.entries).retain(|f, _| IpAddr::V4(*f.dst.ip()) != dst);
        self.paths.forget(dst);
        self.recovered(dst);
    }

    /// All entries as JSON, by destination address and flow, each with the
    /// id of the path its flow is counted under.
    pub fn to_json(&self) -> String {
        let entries = lock(&self.entries);
        let mut v: Vec<(IpAddr, &Entry)> = entries
            .iter()
            .map(|(f, e)| (IpAddr::V4(*f.dst.ip()), e))
            .collect();
        v.sort_by_key(|(a, e)| (*a, e.flow));
        let mut paths: HashMap<IpAddr, Vec<super::paths::PathView>> = HashMap::new();
        let list: Vec<serde_json::Value> = v
            .into_iter()
            .map(|(a, e)| {
                let views = paths.entry(a).or_insert_with(|| self.paths.paths(a));
                let path = views.iter().find(|p| p.flows.contains(&e.flow));
                let mut j = serde_json::to_value(e).unwrap_or_default();
                if let Some(o) = j.as_object_mut() {
                    o.insert("destination".into(), a.to_string().into());
                    o.insert("path".into(), path.map(|p| p.id.clone()).into());
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
        let t = Tracer::new(TraceConfig::default(), PathFamilies::default());
        let flow = |last: u8| Flow {
            src: "0.0.0.0:40000".parse().unwrap(),
            dst: SocketAddrV4::new(Ipv4Addr::new(198, 18, 60, last), 9970),
        };
        let running = |i: u8| Entry {
            flow: 0,
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
                e.insert(flow(i), running(i));
            }
        }
        let req = |last: u8| Request {
            flow: flow(last),
            flow_index: 0,
            src_node: "a".into(),
            dst_node: "b".into(),
            reason: TraceReason::OnDemand,
            payload: Vec::new(),
        };
        // Neither path spawns anything here (no runtime is needed).
        assert_eq!(t.start(req(0)), Start::AlreadyRunning);
        // Mapping gets at most its share: with that many mapping traces
        // running, another mapping trace waits even though room is left.
        let m = Tracer::new(TraceConfig::default(), PathFamilies::default());
        for i in 0..MAX_MAPPING_CONCURRENT as u8 {
            let mut e = running(i);
            e.reason = TraceReason::Mapping;
            m.entries.lock().unwrap().insert(flow(i), e);
        }
        let mapping = Request {
            reason: TraceReason::LossyFlow,
            ..req(100)
        };
        assert_eq!(m.start(mapping), Start::Busy);
        assert_eq!(t.start(req(200)), Start::Busy);
        let now = Instant::now();
        assert!(!t.on_anomaly_at(req(200), now), "busy: not started");
        let dst = IpAddr::V4(Ipv4Addr::new(198, 18, 60, 200));
        assert_eq!(
            t.auto.lock().unwrap().check(dst, now),
            Ok(()),
            "a busy anomaly trace is retried at the next check, no token or back-off spent"
        );
    }
}
