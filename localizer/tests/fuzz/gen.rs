//! Structure-aware fuzzing of what the localizer reads from and writes to
//! other services: the Prometheus JSON answer decoder and the Alertmanager
//! JSON handling. Shared by `tests/fuzz_clients.rs` (a few thousand inputs
//! in `cargo test`) and `examples/fuzz.rs` (millions, with figures).
//!
//! Inputs are built from the grammar of a Prometheus answer (envelope,
//! result types, series, samples, special floats, hostile strings), then
//! mutated at the byte level (truncation, flips, splices), so they reach
//! deep into the decoder rather than failing at the first byte.

use skeletonhunter_localizer::clients::alertmanager::{
    rejection_text, rfc3339, Outbox, PostableAlert,
};
use skeletonhunter_localizer::clients::prometheus::decode::{decode_instant, decode_range};
use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

/// SplitMix64: seeded, reproducible, no dependency.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// One of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const STRINGS: &[&str] = &[
    "",
    "a",
    "node-1",
    "tor-7",
    "udp",
    "\\\"",
    "\\\\",
    "\\n\\t",
    "\\u0000",
    "\\ud800",
    "\\uD83D\\uDE00",
    "é",
    "🦀",
    "{",
    "]",
    "\\u00",
    "le",
    "__name__",
    "NaN",
];
const VALUES: &[&str] = &[
    "\"0.25\"",
    "\"NaN\"",
    "\"+Inf\"",
    "\"-Inf\"",
    "\"Inf\"",
    "\"1e309\"",
    "\"-0\"",
    "\"x\"",
    "\"\"",
    "1",
    "-1.5e300",
    "1e999",
    "true",
    "null",
    "[]",
    "{}",
    "\"0x10\"",
    "\" 1\"",
];
const TIMES: &[&str] = &[
    "1700000000",
    "1700000000.5",
    "-1",
    "0",
    "1e400",
    "\"1\"",
    "null",
    "1.7e9",
];

fn string(r: &mut Rng) -> String {
    format!("\"{}\"", r.pick(STRINGS))
}

/// A sample value, valid half of the time.
fn value(r: &mut Rng) -> &'static str {
    if r.below(2) == 0 {
        r.pick(&["\"0.25\"", "\"NaN\"", "\"+Inf\"", "\"-Inf\"", "1"])
    } else {
        r.pick(VALUES)
    }
}

fn sample(r: &mut Rng) -> String {
    if r.below(2) == 0 {
        return format!("[1700000000.5,{}]", value(r));
    }
    match r.below(8) {
        0 => format!("[{}]", r.pick(TIMES)),
        1 => format!("[{},{},{}]", r.pick(TIMES), r.pick(VALUES), r.pick(VALUES)),
        2 => r.pick(VALUES).to_string(),
        _ => format!("[{},{}]", r.pick(TIMES), value(r)),
    }
}

fn labels(r: &mut Rng) -> String {
    match r.below(10) {
        0 => "null".into(),
        1 => r.pick(VALUES).to_string(),
        _ => {
            let n = r.below(4);
            let pairs: Vec<String> = (0..n)
                .map(|_| {
                    let v = if r.below(8) == 0 {
                        r.pick(VALUES).to_string()
                    } else {
                        string(r)
                    };
                    format!("{}:{v}", string(r))
                })
                .collect();
            format!("{{{}}}", pairs.join(","))
        }
    }
}

fn series(r: &mut Rng) -> String {
    let mut fields = Vec::new();
    if r.below(6) != 0 {
        fields.push(format!("\"metric\":{}", labels(r)));
    }
    match r.below(5) {
        0 | 3 => fields.push(format!("\"value\":{}", sample(r))),
        1 | 4 => {
            let n = r.below(4);
            let pts: Vec<String> = (0..n).map(|_| sample(r)).collect();
            fields.push(format!("\"values\":[{}]", pts.join(",")));
        }
        _ => fields.push(format!("\"histogram\":{}", sample(r))),
    }
    format!("{{{}}}", fields.join(","))
}

fn result(r: &mut Rng) -> String {
    match r.below(6) {
        0 => sample(r),
        1 => r.pick(VALUES).to_string(),
        _ => {
            let n = r.below(5);
            let items: Vec<String> = (0..n).map(|_| series(r)).collect();
            format!("[{}]", items.join(","))
        }
    }
}

/// A well-formed answer: a vector or matrix of series with string labels.
fn valid_answer(r: &mut Rng) -> String {
    let matrix = r.below(2) == 0;
    let items: Vec<String> = (0..r.below(6))
        .map(|_| {
            let labels: Vec<String> = (0..r.below(4))
                .map(|_| format!("{}:{}", string(r), string(r)))
                .collect();
            let v = if matrix {
                let pts: Vec<String> = (0..r.below(4))
                    .map(|_| {
                        format!(
                            "[1700000000.5,{}]",
                            r.pick(&["\"1\"", "\"NaN\"", "\"-Inf\"", "2.5"])
                        )
                    })
                    .collect();
                format!("\"values\":[{}]", pts.join(","))
            } else {
                format!(
                    "\"value\":[1700000000,{}]",
                    r.pick(&["\"0.25\"", "\"+Inf\""])
                )
            };
            format!("{{\"metric\":{{{}}},{v}}}", labels.join(","))
        })
        .collect();
    let rt = if matrix { "matrix" } else { "vector" };
    format!(
        "{{\"status\":\"success\",\"data\":{{\"resultType\":\"{rt}\",\"result\":[{}]}}}}",
        items.join(",")
    )
}

/// A Prometheus answer body, often almost valid.
pub fn prom_answer(r: &mut Rng) -> Vec<u8> {
    if r.below(4) == 0 {
        let mut body = valid_answer(r).into_bytes();
        mutate(r, &mut body);
        return body;
    }
    let mut fields = vec![format!(
        "\"status\":\"{}\"",
        r.pick(&["success", "success", "success", "error", ""])
    )];
    if r.below(8) != 0 {
        let rt = r.pick(&["vector", "matrix", "scalar", "string", "", "VECTOR"]);
        let data = match r.below(6) {
            0 => format!("{{\"result\":{}}}", result(r)),
            1 => format!("{{\"result\":{},\"resultType\":\"{rt}\"}}", result(r)),
            2 => r.pick(VALUES).to_string(),
            _ => format!("{{\"resultType\":\"{rt}\",\"result\":{}}}", result(r)),
        };
        fields.push(format!("\"data\":{data}"));
    }
    if r.below(5) == 0 {
        fields.push(format!(
            "\"errorType\":{},\"error\":{}",
            string(r),
            string(r)
        ));
    }
    if r.below(5) == 0 {
        let w = r.pick(&["\"PromQL warning: x\"", "\"store down\"", "1", "null"]);
        fields.push(format!("\"warnings\":[{w}]"));
    }
    if r.below(6) == 0 {
        fields.push(format!(
            "\"isPartial\":{}",
            r.pick(&["true", "false", "1", "\"yes\""])
        ));
    }
    if r.below(10) == 0 {
        let f = fields[r.below(fields.len())].clone();
        fields.push(f); // a duplicate key
    }
    let mut body = format!("{{{}}}", fields.join(",")).into_bytes();
    mutate(r, &mut body);
    body
}

/// Byte-level damage to a third of the inputs.
pub fn mutate(r: &mut Rng, body: &mut Vec<u8>) {
    if r.below(3) != 0 {
        return;
    }
    for _ in 0..1 + r.below(3) {
        if body.is_empty() {
            return;
        }
        let at = r.below(body.len());
        match r.below(5) {
            0 => body.truncate(at),
            1 => body[at] ^= 1 << r.below(8),
            2 => body.insert(at, r.next() as u8),
            3 => {
                let end = (at + r.below(16)).min(body.len());
                let piece = body[at..end].to_vec();
                body.splice(at..at, piece);
            }
            _ => {
                body.remove(at);
            }
        }
    }
}

/// What one input did, for every target.
pub enum Verdict {
    /// Decoded or read (and, for a ping log, analyzed).
    Accepted,
    /// Refused with an error.
    Refused,
}

const URL: &str = "http://prom:9090/api/v1/query";

/// Feed one body to both decoders under a random status; panics (the
/// failure) if a decoder panics or an error message outgrows its input.
pub fn check_prom(r: &mut Rng, body: &[u8]) -> Verdict {
    let status = [200u16, 200, 200, 206, 400, 422, 500, 503][r.below(8)];
    let a = decode_instant(URL, status, body);
    let b = decode_range(URL, status, body);
    for e in [a.as_ref().err(), b.as_ref().err()].into_iter().flatten() {
        let msg = e.to_string();
        assert!(
            msg.len() <= body.len() + 1024,
            "an error of {} bytes for a {}-byte body: {msg}",
            msg.len(),
            body.len()
        );
        let _ = e.reason().as_str();
    }
    if a.is_ok() || b.is_ok() {
        Verdict::Accepted
    } else {
        Verdict::Refused
    }
}

fn any_string(r: &mut Rng) -> String {
    let n = r.below(12);
    (0..n)
        .map(|_| match r.below(5) {
            0 => char::from_u32(r.below(0x20) as u32).unwrap_or('?'),
            1 => ['"', '\\', '/', '\u{7f}', '\u{2028}', '\u{feff}'][r.below(6)],
            2 => char::from_u32(r.below(0x11_0000) as u32).unwrap_or('\u{fffd}'),
            _ => (b'a' + r.below(26) as u8) as char,
        })
        .collect()
}

fn map(r: &mut Rng) -> BTreeMap<String, String> {
    (0..r.below(5))
        .map(|_| (any_string(r), any_string(r)))
        .collect()
}

/// A posted alert with hostile label and annotation text.
pub fn alert(r: &mut Rng) -> PostableAlert {
    let t = UNIX_EPOCH + Duration::from_millis(r.next() % 253_402_300_800_000);
    PostableAlert {
        labels: map(r),
        annotations: map(r),
        starts_at: rfc3339(t),
        ends_at: rfc3339(t),
        generator_url: if r.below(2) == 0 {
            String::new()
        } else {
            any_string(r)
        },
        resolved: r.below(3) == 0,
    }
}

/// The Alertmanager side: a batch of hostile alerts serializes to JSON
/// that reads back to the same labels and annotations, timestamps are
/// RFC 3339 of fixed length, a refusal's text is one short line, and an
/// outbox never holds more than its capacity. Panics on a violation.
pub fn check_alertmanager(r: &mut Rng, outbox: &mut Outbox, capacity: usize) {
    let batch: Vec<PostableAlert> = (0..r.below(4)).map(|_| alert(r)).collect();
    let json = serde_json::to_vec(&batch).expect("alerts serialize");
    let back: serde_json::Value = serde_json::from_slice(&json).expect("valid JSON");
    let arr = back.as_array().expect("an array");
    assert_eq!(arr.len(), batch.len());
    for (a, v) in batch.iter().zip(arr) {
        let labels: BTreeMap<String, String> =
            serde_json::from_value(v["labels"].clone()).expect("labels read back");
        assert_eq!(labels, a.labels);
        let ann: BTreeMap<String, String> =
            serde_json::from_value(v["annotations"].clone()).expect("annotations read back");
        assert_eq!(ann, a.annotations);
        assert_eq!(a.starts_at.len(), 24, "{}", a.starts_at);
        assert_eq!(v.get("generatorURL").is_some(), !a.generator_url.is_empty());
    }
    let mut body = json.clone();
    mutate(r, &mut body);
    let text = rejection_text(&String::from_utf8_lossy(&body));
    assert!(text.chars().count() <= 300 && !text.chars().any(char::is_control));
    let out = outbox.batch(&batch);
    assert!(outbox.pending_len() <= capacity);
    assert!(out.len() <= capacity + batch.len());
    if r.below(3) == 0 {
        outbox.delivered();
    }
}
