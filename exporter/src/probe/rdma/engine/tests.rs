//! The engine over a fake fabric of RNICs that delivers UD sends
//! between them with GRH slots and (optionally) hardware stamps.
use super::*;
use crate::model::{Peer, PeerSource};
use crate::probe::Ports;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

const MASK32: u64 = (1 << 32) - 1;

/// Completions (with the received bytes) waiting for one NIC's poll.
type Queue = VecDeque<(Completion, Vec<u8>)>;

struct Wire {
    /// Per NIC (by GID): its completion queue.
    queues: Vec<([u8; 16], Queue)>,
    /// Drop sends whose packet kind is in this list.
    drop_kinds: Vec<Kind>,
}

struct FakeNic {
    name: String,
    ep: RdmaEndpoint,
    /// Offset added to wall time to make this NIC's raw counter, so
    /// every NIC has its own clock; `None` = software stamps.
    clock_offset: Option<u64>,
    wire: Rc<RefCell<Wire>>,
    slots: Vec<Vec<u8>>,
    reposted: usize,
}

fn gid(last: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&[198, 18, 50, last]);
    g
}

impl FakeNic {
    fn new(last: u8, qpn: u32, clock_offset: Option<u64>, wire: &Rc<RefCell<Wire>>) -> FakeNic {
        wire.borrow_mut().queues.push((gid(last), VecDeque::new()));
        FakeNic {
            name: format!("fake{last}"),
            ep: RdmaEndpoint {
                gid: gid(last),
                qpn,
                qkey: packet::DEFAULT_QKEY,
            },
            clock_offset,
            wire: wire.clone(),
            slots: Vec::new(),
            reposted: 0,
        }
    }

    fn raw_now(&self) -> Option<u64> {
        self.clock_offset
            .map(|o| wall_ns().wrapping_add(o) & MASK32)
    }

    fn push(&self, to: [u8; 16], c: Completion, buf: Vec<u8>) {
        let mut w = self.wire.borrow_mut();
        if let Some((_, q)) = w.queues.iter_mut().find(|(g, _)| *g == to) {
            q.push_back((c, buf));
        }
    }
}

impl Rnic for FakeNic {
    fn name(&self) -> &str {
        &self.name
    }
    fn endpoint(&self) -> RdmaEndpoint {
        self.ep
    }
    fn hw_clock(&self) -> Option<(u64, u64)> {
        self.clock_offset.map(|_| (MASK32, 1_000_000)) // 1 GHz
    }
    fn send(&mut self, to: &RdmaEndpoint, payload: &[u8], wr_id: u64) -> Result<(), VerbsError> {
        let kind = Packet::decode(payload)
            .map_err(|e| VerbsError::Failed(e.to_string()))?
            .kind;
        let dropped = self.wire.borrow().drop_kinds.contains(&kind);
        // The send completes on our CQ...
        let done = Completion {
            wr_id,
            ok: true,
            status: 0,
            is_recv: false,
            byte_len: 0,
            src_qp: 0,
            hw_ts: self.raw_now(),
        };
        self.push(self.ep.gid, done, Vec::new());
        if dropped {
            return Ok(());
        }
        // ...and arrives at the peer with a RoCE v2 (IPv4) GRH slot.
        let mut buf = vec![0u8; packet::GRH_LEN];
        buf[20] = 0x45;
        buf[32..36].copy_from_slice(&self.ep.gid[12..16]);
        buf.extend_from_slice(payload);
        let arrived = Completion {
            wr_id: 0,
            ok: true,
            status: 0,
            is_recv: true,
            byte_len: buf.len() as u32,
            src_qp: self.ep.qpn,
            hw_ts: None, // stamped by the receiver at poll
        };
        self.push(to.gid, arrived, buf);
        Ok(())
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<(), VerbsError> {
        let mut w = self.wire.borrow_mut();
        let q = &mut w
            .queues
            .iter_mut()
            .find(|(g, _)| *g == self.ep.gid)
            .ok_or("no queue")?
            .1;
        while out.len() < max {
            let Some((mut c, buf)) = q.pop_front() else {
                break;
            };
            if c.is_recv {
                c.wr_id = self.slots.len() as u64;
                c.hw_ts = self
                    .clock_offset
                    .map(|o| wall_ns().wrapping_add(o) & MASK32);
                self.slots.push(buf);
            }
            out.push(c);
        }
        Ok(())
    }
    fn recv_slot(&self, c: &Completion) -> Option<&[u8]> {
        self.slots.get(c.wr_id as usize).map(|v| &v[..])
    }
    fn repost(&mut self, _c: &Completion) -> Result<(), VerbsError> {
        self.reposted += 1;
        Ok(())
    }
    fn ack_events(&mut self) -> Result<(), VerbsError> {
        Ok(())
    }
    fn clock_sample(&self) -> Option<ClockSample> {
        Some(ClockSample {
            raw: self.raw_now()?,
            wall_ns: wall_ns(),
            uncertainty_ns: 0,
        })
    }
}

fn target(metrics: &Arc<Metrics>) -> Arc<Target> {
    let peer = Peer::new("198.18.50.2".parse().unwrap(), PeerSource::Static).with_name("node-b");
    let info = crate::probe::PeerInfo::new(metrics.clone(), None);
    Arc::new(Target::new(
        peer,
        Ports { udp: 1, tcp: 2 },
        metrics.clone(),
        info,
    ))
}

/// Run `n` probes from A to B over the fake wire.
fn run(
    clock_a: Option<u64>,
    clock_b: Option<u64>,
    drop: &[Kind],
    n: usize,
) -> (Arc<Metrics>, Arc<Target>) {
    let wire = Rc::new(RefCell::new(Wire {
        queues: Vec::new(),
        drop_kinds: drop.to_vec(),
    }));
    let a = FakeNic::new(1, 0x11, clock_a, &wire);
    let b = FakeNic::new(2, 0x22, clock_b, &wire);
    let b_ep = b.endpoint();
    let metrics = Arc::new(Metrics::new(&Default::default()));
    let config = RdmaConfig {
        timeout: Duration::from_millis(50),
        ..RdmaConfig::default()
    };
    let mut ea = Engine::new(vec![a], 0, &config, metrics.clone());
    let mut eb = Engine::new(
        vec![b],
        0,
        &config,
        Arc::new(Metrics::new(&Default::default())),
    );
    let t = target(&metrics);
    for _ in 0..n {
        ea.probe(t.clone(), b_ep);
        // Time on the wire, so an exchange can span a counter wrap.
        std::thread::sleep(Duration::from_micros(300));
        // Probe reaches B; B's ACK and detail come back to A.
        for _ in 0..3 {
            ea.process(&[true]);
            eb.process(&[true]);
        }
        ea.process(&[true]);
    }
    std::thread::sleep(Duration::from_millis(60));
    ea.expire(wall_ns());
    (metrics, t)
}

fn hist(metrics: &Metrics, t: &Target) -> (u64, f64, u64, u64) {
    let s = t.series(Protocol::Rdma).unwrap();
    let mut out = String::new();
    let r = metrics.render(None);
    out.push_str(&String::from_utf8_lossy(&r.body));
    let count = |name: &str| -> u64 {
        out.lines()
            .find(|l| l.starts_with(name) && l.contains("node-b"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(-1.0) as u64
    };
    let sum = out
        .lines()
        .find(|l| l.starts_with("skeletonhunter_probe_rtt_seconds_sum") && l.contains("rdma"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or(-1.0);
    let _ = s;
    (
        count("skeletonhunter_probe_rtt_seconds_count{src_node=\"\",dst_node=\"node-b\",protocol=\"rdma\"}"),
        sum,
        count("skeletonhunter_probe_sent_total{src_node=\"\",dst_node=\"node-b\",protocol=\"rdma\"}"),
        count("skeletonhunter_probe_lost_total{src_node=\"\",dst_node=\"node-b\",protocol=\"rdma\"}"),
    )
}

#[test]
fn probes_are_measured_with_software_stamps() {
    let (m, t) = run(None, None, &[], 5);
    let (count, sum, sent, lost) = hist(&m, &t);
    assert_eq!((count, sent, lost), (5, 5, 0));
    assert!((0.0..5.0 * 50e-3).contains(&sum), "rtt sum {sum}");
    let out = String::from_utf8_lossy(&m.render(None).body).into_owned();
    // Software stamps are taken at poll time, after the 300 µs sleep
    // between posting and polling: that wait is prober delay.
    let prober_sum: f64 = out
        .lines()
        .find(|l| l.starts_with("skeletonhunter_rdma_prober_delay_seconds_sum"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(-1.0);
    assert!(prober_sum >= 5.0 * 300e-6, "prober delay sum {prober_sum}");
    assert!(!out.contains("reason=\"rdma_"), "probe errors:\n{out}");
    assert!(out.contains("skeletonhunter_rdma_responder_delay_seconds_count{src_node=\"\",dst_node=\"node-b\"} 5"), "{out}");
    assert!(
        out.contains(
            "skeletonhunter_rdma_prober_delay_seconds_count{src_node=\"\",dst_node=\"node-b\"} 5"
        ),
        "{out}"
    );
}

#[test]
fn hardware_stamps_on_separate_wrapping_clocks() {
    // A's counter wraps (32 bits at 1 GHz) ~2 ms into the run, in the
    // middle of the probes; B's clock is far off A's: only same-clock
    // intervals may be subtracted, and across the wrap.
    let off_a = (MASK32 - 2_000_000).wrapping_sub(wall_ns() & MASK32);
    let (m, t) = run(Some(off_a), Some(0x1234_5678_9abc), &[], 20);
    let (count, sum, sent, lost) = hist(&m, &t);
    assert_eq!((count, sent, lost), (20, 20, 0));
    // Each exchange spends >= 300 µs between T2 and T5.
    assert!(
        (20.0 * 300e-6..20.0 * 50e-3).contains(&sum),
        "rtt sum {sum} (a wrap bug shows as seconds)"
    );
    let out = String::from_utf8_lossy(&m.render(None).body).into_owned();
    assert!(!out.contains("reason=\"rdma_"), "probe errors:\n{out}");
}

#[test]
fn lost_probe_and_lost_detail() {
    let (m, t) = run(None, None, &[Kind::Probe], 3);
    assert_eq!(hist(&m, &t), (0, 0.0, 3, 3));
    // Without the detail the probe is answered (fallback RTT) and the
    // reason is counted; nothing is lost.
    let (m, t) = run(None, None, &[Kind::AckDetail], 2);
    let (count, _, sent, lost) = hist(&m, &t);
    assert_eq!((count, sent, lost), (2, 2, 0));
    let out = String::from_utf8_lossy(&m.render(None).body).into_owned();
    assert!(out.contains("reason=\"rdma_no_ack_detail\"} 2"), "{out}");
}
