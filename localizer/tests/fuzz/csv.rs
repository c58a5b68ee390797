//! Structure-aware fuzzing of the ping-log reader (`analyze`'s input):
//! headers with the required columns in any order, missing or doubled,
//! topology and count columns, a BOM; rows with edge values (empty,
//! negative, NaN, huge, hex, quoted with newlines, CRLF), wrong field
//! counts and a small line cap; then byte damage to a third. Every input
//! is read and, when accepted, analyzed by the engine.

use super::gen::{mutate, Rng, Verdict};
use skeletonhunter_localizer::engine::model::Config;
use skeletonhunter_localizer::engine::pipeline::analyze;
use skeletonhunter_localizer::input::csv::{read_pings_counted, CsvOptions, REQUIRED_COLUMNS};

const OPTIONAL: &[&str] = &[
    "src_real_ip",
    "dst_real_ip",
    "src_node_sn",
    "dst_node_sn",
    "src_asw",
    "dst_asw",
    "src_dsw",
    "dst_dsw",
    "src_pod",
    "dst_tenant_id",
    "probe_count",
    "sent",
    "task_type",
    "extra",
    "",
];
const NODES: &[&str] = &["a", "b", "c", "", " ", "\"q,\"\"x\"\"\"", "é", "\"l\nf\""];
const DIALS: &[&str] = &["success", "success", "timeout", "", "SUCCESS"];
const NUMBERS: &[&str] = &[
    "", "0", "0.01", "0.5", "1", "1.5", "-1", "-0", "NaN", "inf", "1e308", "1e400", "0x10", " 2 ",
    "12.5", "100", "\"3\"",
];
const TIMES: &[&str] = &[
    "1700000000000000000",
    "1",
    "",
    "abc",
    "-5",
    "99999999999999999999999",
];

/// A field for column `name`: a valid value most of the time (so rows get
/// through to the engine), an edge token otherwise.
fn field(r: &mut Rng, name: &str) -> String {
    if r.below(20) != 0 {
        let valid = match name {
            "src_node_id" | "dst_node_id" => r.pick(&["a", "b", "c", "d"]),
            "dial" => r.pick(&["success", "success", "timeout"]),
            "ping_time" => "1700000000000000000",
            "latency" => r.pick(&["10", "12.5", "3000", ""]),
            "loss_rate" => r.pick(&["0", "0", "0.01", "0.3", "1"]),
            "probe_count" | "sent" => r.pick(&["100", "10", ""]),
            "task_type" => r.pick(&["RDMA_PING", "TCP_PING", "TRACEROUTE", ""]),
            _ => r.pick(&["t1", "t2", "s1", "10.0.0.1"]),
        };
        return valid.to_string();
    }
    let f = match name {
        "src_node_id" | "dst_node_id" => r.pick(NODES),
        "dial" => r.pick(DIALS),
        "ping_time" => r.pick(TIMES),
        "latency" | "loss_rate" | "probe_count" | "sent" => r.pick(NUMBERS),
        "task_type" => r.pick(&["rdma", "HTTP", "trace", "\"TCP\"", "\u{0}"]),
        _ => r.pick(&["t1", "t2", "10.0.0.1", "", "\"x\ny\""]),
    };
    f.to_string()
}

/// A ping log, often almost valid.
pub fn ping_log(r: &mut Rng) -> Vec<u8> {
    let mut cols: Vec<&str> = REQUIRED_COLUMNS.to_vec();
    if r.below(10) == 0 {
        cols.remove(r.below(cols.len()));
    }
    for _ in 0..r.below(4) {
        cols.push(r.pick(OPTIONAL));
    }
    for i in (1..cols.len()).rev() {
        cols.swap(i, r.below(i + 1));
    }
    let eol = if r.below(4) == 0 { "\r\n" } else { "\n" };
    let mut text = String::new();
    if r.below(4) == 0 {
        text.push('\u{feff}');
    }
    text.push_str(&cols.join(","));
    for _ in 0..r.below(9) {
        text.push_str(eol);
        let mut row: Vec<String> = cols.iter().map(|c| field(r, c)).collect();
        if r.below(12) == 0 {
            row.pop();
        }
        if r.below(12) == 0 {
            row.push(String::new());
        }
        text.push_str(&row.join(","));
    }
    if r.below(2) == 0 {
        text.push_str(eol);
    }
    let mut body = text.into_bytes();
    mutate(r, &mut body);
    body
}

/// Read one log with a random packets-per-round and line cap; on success
/// analyze it. Panics (the failure) on a reader or engine panic, an error
/// naming a line the input does not have, an error message longer than
/// its input + 1 KiB, or pairs whose counts are not finite and ordered.
pub fn check_csv(r: &mut Rng, body: &[u8]) -> Verdict {
    let opts = CsvOptions {
        packets_per_round: [None, None, Some(1.0), Some(100.0)][r.below(4)],
        max_line_length: [65_536, 65_536, 65_536, 65_536, 65_536, 65_536, 16, 64][r.below(8)],
        max_pairs: [250_000, 250_000, 250_000, 2][r.below(4)],
    };
    let lines = body.iter().filter(|b| **b == b'\n').count() as u64 + 1;
    match read_pings_counted(body, &opts) {
        Err(e) => {
            assert!(
                (1..=lines).contains(&e.line),
                "an error at line {} of {lines}: {e}",
                e.line
            );
            let msg = e.to_string();
            assert!(msg.len() <= body.len() + 1024, "{} bytes: {msg}", msg.len());
            Verdict::Refused
        }
        Ok((pairs, summary)) => {
            let probes = &summary.probes;
            assert!(
                probes.value.is_finite() && probes.value >= 1.0,
                "{probes:?}"
            );
            for p in &pairs {
                let ok = p.rounds >= 1.0
                    && (0.0..=p.rounds).contains(&p.failed_dials)
                    && p.sent.is_finite()
                    && (0.0..=p.sent).contains(&p.lost)
                    && p.rtt_seconds.is_none_or(|s| s.is_finite() && s >= 0.0);
                assert!(ok, "implausible pair {p:?}");
            }
            let report = analyze(&pairs, &Config::default());
            assert!(report.pairs_observed <= pairs.len());
            Verdict::Accepted
        }
    }
}
