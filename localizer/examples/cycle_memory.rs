//! Peak memory and time of one online cycle's input side at fleet scale,
//! without a store: `cargo run -p skeletonhunter-localizer --example
//! cycle_memory -- [PAIRS] [--analyze]` (default 100,000 pairs). It writes
//! the answers a Prometheus would give the cycle's queries for PAIRS pairs
//! (100 peers a node, 25 nodes a ToR, udp and tcp probes), decodes them
//! with the localizer's decoder one at a time as the cycle holds them,
//! builds the topology and the engine's pairs (`assemble`), and with
//! `--analyze` runs the engine on them. Prints the peak RSS (VmHWM) after
//! each step.

use skeletonhunter_common::Protocol;
use skeletonhunter_localizer::clients::prometheus::decode::decode_instant;
use skeletonhunter_localizer::input::promql::{assemble, topology_from, QueryResults};
use skeletonhunter_localizer::sim::bench::peak_rss_bytes;
use std::fmt::Write as _;
use std::time::Instant;

const PEERS: usize = 100;
const PER_TOR: usize = 25;

fn mib() -> String {
    peak_rss_bytes().map_or("n/a".into(), |b| format!("{} MiB", b >> 20))
}

/// A vector answer with one sample per (src, dst, protocol) from `value`.
fn answer(nodes: usize, protocols: &[&str], value: impl Fn(usize, usize) -> f64) -> Vec<u8> {
    let mut s = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    let mut first = true;
    for src in 0..nodes {
        for k in 1..=PEERS {
            let dst = (src + k) % nodes;
            for p in protocols {
                if !first {
                    s.push(',');
                }
                first = false;
                let _ = write!(
                    s,
                    r#"{{"metric":{{"src_node":"node-{src:06}","dst_node":"node-{dst:06}","protocol":"{p}"}},"value":[1700000000.000,"{}"]}}"#,
                    value(src, dst)
                );
            }
        }
    }
    s.push_str("]}}");
    s.into_bytes()
}

fn topology_answer(nodes: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    for n in 0..nodes {
        if n > 0 {
            s.push(',');
        }
        let tor = n / PER_TOR;
        let _ = write!(
            s,
            r#"{{"metric":{{"node_id":"node-{n:06}","nic":"nic-{n:06}","host":"host-{n:06}","tor":"tor-{tor:04}","spine":"spine-{:02}"}},"value":[1700000000.000,"1"]}}"#,
            tor / 8
        );
    }
    s.push_str("]}}");
    s.into_bytes()
}

fn decode(body: Vec<u8>) -> Vec<skeletonhunter_localizer::clients::prometheus::Sample> {
    decode_instant("bench", 200, &body).expect("a valid answer")
}

fn main() {
    let mut pairs = 100_000usize;
    let mut run_engine = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--analyze" => run_engine = true,
            n => pairs = n.parse().expect("PAIRS: a number"),
        }
    }
    let nodes = (pairs / PEERS).max(PEERS + 1);
    let pairs = nodes * PEERS;
    println!(
        "{pairs} pairs over {nodes} nodes; start: peak RSS {}",
        mib()
    );
    let started = Instant::now();
    let udp_tcp = ["udp", "tcp"];
    let r = QueryResults {
        sent: decode(answer(nodes, &udp_tcp, |_, _| 600.0)),
        lost: decode(answer(nodes, &["udp"], |s, d| ((s + d) % 3) as f64)),
        dial_failures: Vec::new(),
        consecutive_lost: Vec::new(),
        rtt_p50: decode(answer(nodes, &udp_tcp, |s, _| 2e-5 + s as f64 * 1e-9)),
        rtt_count: Some(decode(answer(nodes, &udp_tcp, |_, _| 598.0))),
        ..Default::default()
    };
    let topology_now = decode(topology_answer(nodes));
    let samples =
        r.sent.len() + r.lost.len() + r.rtt_p50.len() + r.rtt_count.as_ref().map_or(0, Vec::len);
    println!(
        "decoded {samples} samples in {:.2?}: peak RSS {}",
        started.elapsed(),
        mib()
    );
    let t = Instant::now();
    let (topology, _) = topology_from(&topology_now, &[]);
    let assembled = assemble(&r, &topology, &[Protocol::Udp]);
    println!(
        "assembled {} pairs ({} with RTT) in {:.2?}: peak RSS {}",
        assembled.pairs.len(),
        assembled
            .pairs
            .iter()
            .filter(|p| p.rtt_seconds.is_some())
            .count(),
        t.elapsed(),
        mib()
    );
    drop(r);
    if run_engine {
        let t = Instant::now();
        let report = skeletonhunter_localizer::analyze(&assembled.pairs, &Default::default());
        println!(
            "analyzed: {} faults, {} pairs anomalous in {:.2?}: peak RSS {}",
            report.faults.len(),
            report.pairs_anomalous,
            t.elapsed(),
            mib()
        );
    }
}
