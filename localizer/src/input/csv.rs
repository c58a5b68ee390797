//! Reader for ping logs in the SkeletonHunter CSV schema.
//!
//! One row is one probe round between two nodes. Required columns:
//! `src_node_id`, `dst_node_id`, `dial`, `latency` (µs, empty when nothing
//! came back), `loss_rate` (share of the round's packets lost, 0..=1),
//! `ping_time` (ns). Topology columns (`*_real_ip`, `*_node_sn`, `*_asw`,
//! `*_dsw`, `*_pod`, `*_tenant_id`) are used when present; unknown columns
//! are ignored; a UTF-8 byte-order mark is tolerated. Rows are aggregated per
//! (src, dst) pair into [`PairStats`].

use crate::PairStats;
use anyhow::Context;
use skeletonhunter_common::topology::{Identity, Kind};
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Packets per probe round assumed when turning `loss_rate` into counts
/// (the simulator writes rounds of this size).
pub const DEFAULT_PACKETS_PER_ROUND: f64 = 100.0;

#[derive(Debug, Clone)]
pub struct CsvOptions {
    pub packets_per_round: f64,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            packets_per_round: DEFAULT_PACKETS_PER_ROUND,
        }
    }
}

/// A malformed input, located by line (1-based, the header is line 1) and
/// column name when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvError {
    pub line: u64,
    pub column: Option<String>,
    pub message: String,
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.column {
            Some(c) => write!(f, "line {}, column `{}`: {}", self.line, c, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

impl std::error::Error for CsvError {}

const REQUIRED: [&str; 6] = [
    "src_node_id",
    "dst_node_id",
    "dial",
    "latency",
    "loss_rate",
    "ping_time",
];

struct Columns {
    src_node: usize,
    dst_node: usize,
    dial: usize,
    latency: usize,
    loss_rate: usize,
    ping_time: usize,
    /// (kind, column index) per side for the identity columns present.
    src_topo: Vec<(Kind, usize, String)>,
    dst_topo: Vec<(Kind, usize, String)>,
}

fn columns(header: &csv::StringRecord) -> Result<Columns, CsvError> {
    let names: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let h = if i == 0 {
                h.trim_start_matches('\u{feff}')
            } else {
                h
            };
            h.trim().to_string()
        })
        .collect();
    let find = |name: &str| names.iter().position(|h| h == name);
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|n| find(n).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(CsvError {
            line: 1,
            column: None,
            message: format!("header lacks required column(s) {}", missing.join(", ")),
        });
    }
    let topo = |side: &str| {
        Kind::ALL
            .into_iter()
            .filter(|k| *k != Kind::Node)
            .filter_map(|k| {
                let name = format!("{side}_{}", k.csv_suffix());
                find(&name).map(|i| (k, i, name))
            })
            .collect::<Vec<_>>()
    };
    Ok(Columns {
        src_node: find("src_node_id").unwrap_or_default(),
        dst_node: find("dst_node_id").unwrap_or_default(),
        dial: find("dial").unwrap_or_default(),
        latency: find("latency").unwrap_or_default(),
        loss_rate: find("loss_rate").unwrap_or_default(),
        ping_time: find("ping_time").unwrap_or_default(),
        src_topo: topo("src"),
        dst_topo: topo("dst"),
    })
}

#[derive(Default)]
struct Acc {
    rounds: f64,
    failed: f64,
    sent: f64,
    lost: f64,
}

/// Read and aggregate a ping log from a file.
pub fn read_pings_file(path: &Path, opts: &CsvOptions) -> anyhow::Result<Vec<PairStats>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    read_pings(std::io::BufReader::with_capacity(1 << 20, file), opts)
        .with_context(|| format!("reading {}", path.display()))
}

/// Read and aggregate a ping log.
pub fn read_pings<R: Read>(reader: R, opts: &CsvOptions) -> Result<Vec<PairStats>, CsvError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .buffer_capacity(1 << 20)
        .from_reader(reader);
    let header = rdr.headers().map_err(|e| csv_err(&e, 1))?.clone();
    let cols = columns(&header)?;
    let col_name = |i: usize| {
        header
            .get(i)
            .unwrap_or("?")
            .trim_start_matches('\u{feff}')
            .to_string()
    };

    let mut node_ids: HashMap<Box<[u8]>, u32> = HashMap::new();
    let mut identities: Vec<Identity> = Vec::new();
    let mut pair_ids: HashMap<(u32, u32), u32> = HashMap::new();
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut acc: Vec<Acc> = Vec::new();
    let mut rtts: Vec<(u32, f32)> = Vec::new();
    let ppr = opts.packets_per_round;

    let mut rec = csv::ByteRecord::new();
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(csv_err(&e, 0)),
        }
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        let field = |i: usize| rec.get(i).unwrap_or(b"");
        let err = |i: usize, message: String| CsvError {
            line,
            column: Some(col_name(i)),
            message,
        };
        let mut node = |side_col: usize, topo: &[(Kind, usize, String)]| -> Result<u32, CsvError> {
            let id = field(side_col);
            if id.is_empty() {
                return Err(err(side_col, "empty node id".into()));
            }
            if let Some(&n) = node_ids.get(id) {
                return Ok(n);
            }
            let mut ident = Identity {
                node: utf8(id).map_err(|m| err(side_col, m))?.to_string(),
                ..Default::default()
            };
            for (kind, i, _) in topo {
                ident.set(*kind, utf8(field(*i)).map_err(|m| err(*i, m))?.trim());
            }
            let n = identities.len() as u32;
            identities.push(ident);
            node_ids.insert(id.into(), n);
            Ok(n)
        };
        let s = node(cols.src_node, &cols.src_topo)?;
        let d = node(cols.dst_node, &cols.dst_topo)?;
        let connected = field(cols.dial) == b"success";
        let loss = parse_f64(field(cols.loss_rate)).map_err(|m| err(cols.loss_rate, m))?;
        let loss = match loss {
            Some(l) if (0.0..=1.0).contains(&l) => l,
            Some(l) => return Err(err(cols.loss_rate, format!("{l} is not a share in [0, 1]"))),
            None if connected => {
                return Err(err(cols.loss_rate, "empty for a connected round".into()))
            }
            None => 1.0,
        };
        let latency = parse_f64(field(cols.latency)).map_err(|m| err(cols.latency, m))?;
        if let Some(l) = latency {
            if l < 0.0 {
                return Err(err(cols.latency, format!("negative latency {l}")));
            }
        }
        let pt = field(cols.ping_time);
        if pt.is_empty() || !pt.iter().all(u8::is_ascii_digit) || pt.len() > 20 {
            return Err(err(
                cols.ping_time,
                format!(
                    "{:?} is not a timestamp in nanoseconds",
                    String::from_utf8_lossy(pt)
                ),
            ));
        }
        let next = pairs.len() as u32;
        let p = *pair_ids.entry((s, d)).or_insert_with(|| {
            pairs.push((s, d));
            acc.push(Acc::default());
            next
        });
        let a = &mut acc[p as usize];
        a.rounds += 1.0;
        if connected {
            a.sent += ppr;
            a.lost += (loss * ppr).round();
            if let Some(l) = latency {
                rtts.push((p, l as f32));
            }
        } else {
            a.failed += 1.0;
        }
    }

    // Median RTT per pair.
    rtts.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut median: Vec<(Option<f64>, f64)> = vec![(None, 0.0); pairs.len()];
    let mut start = 0;
    while start < rtts.len() {
        let p = rtts[start].0;
        let mut end = start;
        while end < rtts.len() && rtts[end].0 == p {
            end += 1;
        }
        let v = &rtts[start..end];
        let n = v.len();
        let med = if n % 2 == 1 {
            v[n / 2].1 as f64
        } else {
            (v[n / 2 - 1].1 as f64 + v[n / 2].1 as f64) / 2.0
        };
        median[p as usize] = (Some(med * 1e-6), n as f64);
        start = end;
    }

    Ok(pairs
        .iter()
        .zip(acc)
        .zip(median)
        .map(|((&(s, d), a), (rtt, samples))| PairStats {
            src: identities[s as usize].clone(),
            dst: identities[d as usize].clone(),
            rounds: a.rounds,
            failed_dials: a.failed,
            sent: a.sent,
            lost: a.lost,
            rtt_seconds: rtt,
            rtt_samples: samples,
            hops: Vec::new(),
        })
        .collect())
}

fn utf8(b: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(b).map_err(|_| "not valid UTF-8".to_string())
}

fn parse_f64(b: &[u8]) -> Result<Option<f64>, String> {
    let s = utf8(b)?.trim();
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(Some(v)),
        _ => Err(format!("{s:?} is not a number")),
    }
}

fn csv_err(e: &csv::Error, default_line: u64) -> CsvError {
    let line = e.position().map(|p| p.line()).unwrap_or(default_line);
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields where the header has {expected_len}"),
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".to_string(),
        csv::ErrorKind::Io(io) => format!("read error: {io}"),
        _ => e.to_string(),
    };
    CsvError {
        line,
        column: None,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "\u{feff}src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,src_asw,dst_asw,extra";

    fn read(body: &str) -> Result<Vec<PairStats>, CsvError> {
        read_pings(
            format!("{HEADER}\n{body}").as_bytes(),
            &CsvOptions::default(),
        )
    }

    #[test]
    fn aggregates_rounds_per_pair() {
        let pairs = read(
            "a,b,success,10.0,0.02,1,t1,t2,x\n\
             a,b,success,12.0,0,2,t1,t2,x\n\
             a,b,timeout,,,3,t1,t2,x\n\
             b,a,success,30.0,0.5,4,t2,t1,\n",
        )
        .unwrap();
        assert_eq!(pairs.len(), 2);
        let ab = &pairs[0];
        assert_eq!((ab.src.node.as_str(), ab.dst.node.as_str()), ("a", "b"));
        assert_eq!(ab.src.tor, "t1");
        assert_eq!(ab.dst.tor, "t2");
        assert_eq!(ab.rounds, 3.0);
        assert_eq!(ab.failed_dials, 1.0);
        assert_eq!(ab.sent, 200.0);
        assert_eq!(ab.lost, 2.0);
        assert!((ab.rtt_seconds.unwrap() - 11e-6).abs() < 1e-9);
        assert_eq!(ab.rtt_samples, 2.0);
        assert_eq!(pairs[1].lost, 50.0);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = read("a,b,success,10.0,0,1,t,t,x\na,b,success,abc,0,2,t,t,x\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.column.as_deref(), Some("latency"));
        assert!(e.to_string().contains("line 3, column `latency`"), "{e}");

        let e = read("a,b,success,10.0,1.5,1,t,t,x\n").unwrap_err();
        assert_eq!((e.line, e.column.as_deref()), (2, Some("loss_rate")));

        let e = read("a,b,success,10.0,0,yesterday,t,t,x\n").unwrap_err();
        assert_eq!(e.column.as_deref(), Some("ping_time"));

        let e = read(",b,success,10.0,0,1,t,t,x\n").unwrap_err();
        assert_eq!(e.column.as_deref(), Some("src_node_id"));

        let e = read("a,b,success,10.0,0,1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("6 fields"), "{e}");
    }

    #[test]
    fn missing_required_column_is_reported() {
        let e = read_pings(
            "src_node_id,dst_node_id,dial\na,b,success\n".as_bytes(),
            &CsvOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("latency"), "{e}");
        assert!(e.message.contains("ping_time"), "{e}");
    }

    #[test]
    fn optional_columns_may_be_absent() {
        let pairs = read_pings(
            "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time\na,b,success,5,0,1\n"
                .as_bytes(),
            &CsvOptions::default(),
        )
        .unwrap();
        assert_eq!(pairs.len(), 1);
        assert_eq!(pairs[0].src.tor, "");
    }
}
