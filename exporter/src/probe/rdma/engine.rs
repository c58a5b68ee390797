//! The RDMA engine: joins RNICs (anything implementing [`Rnic`]) with the
//! exchange state machines and the metrics. The libibverbs device is one
//! [`Rnic`]; tests drive the same engine with a fake one — an RNIC cannot
//! exist on a test host, everything else here is the real code.

use super::clock::{ClockSample, ClockSync};
use super::exchange::{Outcome, Prober as ExProber, Received, Responder, RESPONDER_WR_BIT};
use super::RdmaConfig;
use crate::model::{ProbeErrorReason, Protocol};
use crate::probe::Target;
use crate::sys::time::wall_ns;
use crate::telemetry::Metrics;
use crate::wire::rdma::{self as packet, Kind, Packet, RdmaEndpoint};

pub use crate::sys::completion::{Completion, VerbsError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the engine needs from one RNIC port with its UD queue pair.
pub trait Rnic {
    /// Device name, for logs.
    fn name(&self) -> &str;
    /// This port's UD endpoint.
    fn endpoint(&self) -> RdmaEndpoint;
    /// (timestamp mask, core clock kHz) when completions carry hardware
    /// timestamps.
    fn hw_clock(&self) -> Option<(u64, u64)>;
    /// Send `payload` to `to` as work request `wr_id`.
    fn send(&mut self, to: &RdmaEndpoint, payload: &[u8], wr_id: u64) -> Result<(), VerbsError>;
    /// Read up to `max` completions into `out`.
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<(), VerbsError>;
    /// The bytes of a receive completion's buffer (GRH slot included).
    fn recv_slot(&self, c: &Completion) -> Option<&[u8]>;
    /// Give a receive buffer back after its completion was handled.
    fn repost(&mut self, c: &Completion) -> Result<(), VerbsError>;
    /// Consume completion events and re-arm (then the CQ is drained).
    fn ack_events(&mut self) -> Result<(), VerbsError>;
    /// A (NIC counter, wall clock) reading, when the device offers one.
    fn clock_sample(&self) -> Option<ClockSample>;
}

/// Per-RNIC engine state.
struct Port<D> {
    nic: D,
    responder: Responder<RdmaEndpoint>,
    clock: Option<ClockSync>,
    local_ipv4: bool,
}

impl<D: Rnic> Port<D> {
    /// Wall-time ns of a completion: its converted CQE stamp, or now.
    fn stamp(&mut self, c: &Completion) -> u64 {
        let now = wall_ns();
        match (c.hw_ts, self.nic.hw_clock()) {
            (Some(raw), Some((mask, khz))) => {
                if self.clock.is_none() {
                    // No rt-values op: anchor the counter at this
                    // completion; intervals are still exact.
                    let s = self.nic.clock_sample().unwrap_or(ClockSample {
                        raw,
                        wall_ns: now,
                        uncertainty_ns: 0,
                    });
                    self.clock = ClockSync::new(mask, khz, s);
                }
                self.clock.map(|c| c.wall_ns_of(raw)).unwrap_or(now)
            }
            _ => now,
        }
    }

    fn refresh_clock(&mut self) {
        if let Some(c) = self.clock.as_mut() {
            if c.needs_refresh(wall_ns()) {
                if let Some(s) = self.nic.clock_sample() {
                    c.update(s);
                }
            }
        }
    }
}

/// All RNICs of the host: each answers probes; the primary one also sends
/// them (the one training traffic uses).
pub struct Engine<D> {
    ports: Vec<Port<D>>,
    primary: usize,
    prober: ExProber<Arc<Target>>,
    metrics: Arc<Metrics>,
    comps: Vec<Completion>,
    last_housekeeping: Instant,
    reported_overflow: u64,
}

/// Record a finished probe in the target's series.
fn record(metrics: &Metrics, o: Outcome<Arc<Target>>) {
    match o {
        Outcome::Measured {
            peer,
            network_ns,
            prober_delay_ns,
            responder_delay_ns,
            ..
        } => {
            if let Some(s) = peer.series(Protocol::Rdma) {
                s.answered(network_ns as f64 / 1e9);
            }
            if let Some(r) = peer.rdma_series() {
                r.prober_delay.observe(prober_delay_ns as f64 / 1e9);
                r.responder_delay.observe(responder_delay_ns as f64 / 1e9);
            }
        }
        Outcome::Lost { peer, .. } => {
            if let Some(s) = peer.series(Protocol::Rdma) {
                s.lost_one();
            }
        }
        Outcome::Unusable {
            peer,
            reason,
            fallback_rtt_ns,
            ..
        } => {
            metrics.probe_error(Protocol::Rdma, reason);
            if let Some(s) = peer.series(Protocol::Rdma) {
                match fallback_rtt_ns {
                    Some(ns) => s.answered(ns as f64 / 1e9),
                    None => {
                        s.lost_one();
                    }
                }
            }
        }
    }
}

impl<D: Rnic> Engine<D> {
    /// `nics` must not be empty; `primary` indexes the sending one.
    pub fn new(nics: Vec<D>, primary: usize, config: &RdmaConfig, metrics: Arc<Metrics>) -> Self {
        let ports: Vec<Port<D>> = nics
            .into_iter()
            .map(|nic| {
                let hw = nic.hw_clock().is_some();
                let clock = nic.hw_clock().and_then(|(mask, khz)| {
                    nic.clock_sample()
                        .and_then(|s| ClockSync::new(mask, khz, s))
                });
                let ep = nic.endpoint();
                tracing::info!(
                    device = %nic.name(),
                    gid = %ep.gid_addr(),
                    qpn = ep.qpn,
                    hardware_timestamps = hw,
                    "RDMA UD queue pair ready"
                );
                Port {
                    local_ipv4: packet::gid_is_ipv4(&ep.gid),
                    responder: Responder::new(4096, hw),
                    clock,
                    nic,
                }
            })
            .collect();
        let primary = primary.min(ports.len().saturating_sub(1));
        let primary_hw = ports
            .get(primary)
            .is_some_and(|p| p.nic.hw_clock().is_some());
        let session: u32 = (wall_ns() as u32) ^ std::process::id().rotate_left(16);
        Engine {
            prober: ExProber::new(session, config.timeout.as_nanos() as u64, primary_hw),
            ports,
            primary,
            metrics,
            comps: Vec::with_capacity(64),
            last_housekeeping: Instant::now(),
            reported_overflow: 0,
        }
    }

    /// RNIC `i`, if there is one.
    pub fn nic(&self, i: usize) -> Option<&D> {
        self.ports.get(i).map(|p| &p.nic)
    }

    /// Send one probe to `target` at `to` now. Counted as sent only once
    /// the RNIC accepted it; a refused post is an error, not loss.
    pub fn probe(&mut self, target: Arc<Target>, to: RdmaEndpoint) {
        let t1 = wall_ns();
        let pkt = self.prober.start(target.clone(), t1);
        match self.ports[self.primary]
            .nic
            .send(&to, &pkt.encode(), pkt.seq)
        {
            Ok(()) => {
                if let Some(s) = target.series(Protocol::Rdma) {
                    s.sent.inc();
                }
            }
            Err(e) => {
                self.prober.on_send_failed(pkt.seq);
                self.metrics
                    .probe_error(Protocol::Rdma, ProbeErrorReason::RdmaPostFailed.as_str());
                tracing::debug!("RDMA post to {}: {e}", to.gid_addr());
            }
        }
    }

    /// Handle everything the RNICs completed. `events[i]` says whether
    /// port i's completion channel fired (its events are acknowledged and
    /// the CQ re-armed first); every CQ is drained either way.
    pub fn process(&mut self, events: &[bool]) {
        for i in 0..self.ports.len() {
            if events.get(i).copied().unwrap_or(false) {
                if let Err(e) = self.ports[i].nic.ack_events() {
                    tracing::warn!(device = %self.ports[i].nic.name(), "RDMA CQ re-arm failed: {e}");
                }
            }
            loop {
                let mut comps = std::mem::take(&mut self.comps);
                comps.clear();
                if let Err(e) = self.ports[i].nic.poll(&mut comps, 64) {
                    tracing::warn!(device = %self.ports[i].nic.name(), "RDMA CQ poll failed: {e}");
                    self.comps = comps;
                    break;
                }
                let empty = comps.is_empty();
                for c in &comps {
                    self.completion(i, c);
                }
                self.comps = comps;
                if empty {
                    break;
                }
            }
            self.ports[i].refresh_clock();
        }
    }

    fn completion(&mut self, i: usize, c: &Completion) {
        let ts = self.ports[i].stamp(c);
        if c.is_recv {
            self.receive(i, c, ts);
            if let Err(e) = self.ports[i].nic.repost(c) {
                tracing::warn!(device = %self.ports[i].nic.name(), "RDMA receive re-post failed: {e}");
            }
        } else if c.wr_id & RESPONDER_WR_BIT != 0 {
            let port = &mut self.ports[i];
            if !c.ok {
                tracing::debug!(device = %port.nic.name(), status = c.status, "RDMA ACK send failed");
                port.responder.on_send_failed(c.wr_id);
                self.metrics
                    .probe_error(Protocol::Rdma, ProbeErrorReason::RdmaAckSendFailed.as_str());
            } else if let Some(d) = port.responder.on_send_complete(c.wr_id, ts) {
                if port.nic.send(&d.to, &d.packet.encode(), d.wr_id).is_err() {
                    self.metrics
                        .probe_error(Protocol::Rdma, ProbeErrorReason::RdmaPostFailed.as_str());
                }
            }
        } else if i == self.primary {
            let o = if c.ok {
                self.prober.on_send_complete(c.wr_id, ts)
            } else {
                tracing::debug!(status = c.status, "RDMA probe send failed");
                self.prober.on_send_failed(c.wr_id)
            };
            if let Some(o) = o {
                record(&self.metrics, o);
            }
        }
    }

    fn receive(&mut self, i: usize, c: &Completion, ts: u64) {
        if !c.ok {
            // Flushed or failed receive: nothing arrived.
            return;
        }
        let metrics = &self.metrics;
        let port = &mut self.ports[i];
        let Some(buf) = port.nic.recv_slot(c) else {
            return;
        };
        let Some(payload) = packet::ud_payload(buf, c.byte_len as usize) else {
            let short = packet::PacketError::Short {
                len: c.byte_len as usize,
            };
            metrics.probe_error(Protocol::Rdma, short.reason());
            return;
        };
        let pkt = match Packet::decode(payload) {
            Ok(p) => p,
            Err(e) => {
                metrics.probe_error(Protocol::Rdma, e.reason());
                return;
            }
        };
        match pkt.kind {
            Kind::Probe => {
                let Some(gid) = packet::source_gid(buf, port.local_ipv4) else {
                    metrics.probe_error(Protocol::Rdma, ProbeErrorReason::RdmaNoSourceGid.as_str());
                    return;
                };
                let to = RdmaEndpoint {
                    gid,
                    qpn: c.src_qp,
                    qkey: port.nic.endpoint().qkey,
                };
                if let Some(ack) = port.responder.on_probe(&pkt, ts, to) {
                    if port
                        .nic
                        .send(&ack.to, &ack.packet.encode(), ack.wr_id)
                        .is_err()
                    {
                        port.responder.on_send_failed(ack.wr_id);
                        metrics
                            .probe_error(Protocol::Rdma, ProbeErrorReason::RdmaPostFailed.as_str());
                    }
                }
            }
            Kind::Ack | Kind::AckDetail if i == self.primary => {
                match self.prober.on_receive(&pkt, ts, wall_ns()) {
                    Received::Done(o) => record(metrics, o),
                    Received::Pending => {}
                    Received::Stray(reason) => metrics.probe_error(Protocol::Rdma, reason),
                }
            }
            _ => metrics.probe_error(
                Protocol::Rdma,
                ProbeErrorReason::RdmaAckOnWrongPort.as_str(),
            ),
        }
    }

    /// Count probes past their deadline, and every 10 s drop state of
    /// retired peers and report responder-table overflows.
    pub fn expire(&mut self, now_wall_ns: u64) {
        for o in self.prober.expire(now_wall_ns) {
            record(&self.metrics, o);
        }
        if self.last_housekeeping.elapsed() > Duration::from_secs(10) {
            self.prober.retain_peers(|t| !t.is_retired());
            let mut dropped = 0;
            for p in &mut self.ports {
                p.responder.compact();
                dropped += p.responder.dropped();
            }
            for _ in self.reported_overflow..dropped {
                self.metrics.probe_error(
                    Protocol::Rdma,
                    ProbeErrorReason::RdmaResponderOverflow.as_str(),
                );
            }
            self.reported_overflow = self.reported_overflow.max(dropped);
            self.last_housekeeping = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests;
