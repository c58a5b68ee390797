//! Reader for ping logs in the SkeletonHunter CSV schema.
//!
//! One row is one probe round between two nodes. Required columns:
//! `src_node_id`, `dst_node_id`, `dial`, `latency` (µs, empty when nothing
//! came back), `loss_rate` (share of the round's packets lost, 0..=1),
//! `ping_time` (ns). Topology columns (`*_real_ip`, `*_node_sn`, `*_asw`,
//! `*_dsw`, `*_pod`, `*_tenant_id`) are used when present; unknown columns
//! are ignored, a name twice is refused; a UTF-8 byte-order mark is tolerated. Rows are aggregated per
//! (src, dst) pair into [`PairStats`].
//!
//! Probes per row: a count column (`probe_count`, `probes`, `probe_num`,
//! `packet_count`, `packets`, `sent`) when there is one and the row fills
//! it; otherwise `--packets-per-round` when given; otherwise inferred from
//! the lattice of the `loss_rate` values ([`super::probes`]). Rows are
//! aggregated per pair as connected rows and a sum of rates, and multiplied
//! by the count at the end, so the inference needs one pass. Rows that lost
//! any packet are counted and kept with their times ([`lossy`]).
//!
//! A container that leaves mid-window costs its pairs their last failed
//! round, not a verdict ([`departures`]).
//!
//! A line longer than [`CsvOptions::max_line_length`] is an error at that
//! line, found without reading the line into memory ([`super::lines`]).

use super::lines::{LineCapped, DEFAULT_MAX_LINE_LENGTH};
use super::probes::{Lattice, ProbeSource, ProbesPerRow};
use crate::engine::model::PairStats;
use departures::Timeline;
pub use error::ReadError;
use fields::{csv_err, median_rtts, parse_f64, utf8};
pub use fields::{CsvError, FieldError};
use header::{columns, Columns};
pub use header::{COUNT_COLUMNS, REQUIRED_COLUMNS};
use lossy::LossyRounds;
use skeletonhunter_common::topology::{Identity, Plane};
use skeletonhunter_common::Protocol;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use task::{Task, TaskRows};

/// Packets per probe round assumed when nothing else tells (no count
/// column, no flag, no fractional `loss_rate` to infer from).
pub const DEFAULT_PACKETS_PER_ROUND: f64 = 100.0;

/// Largest `latency` accepted (µs; one hour). Anything above is a broken
/// export, and would not survive the `f32` the RTT samples are kept in.
const MAX_LATENCY_US: f64 = 3.6e9;

/// Largest per-row probe count accepted: far above any real round, and
/// small enough that sums over billions of rows stay exact and finite.
const MAX_PROBE_COUNT: f64 = 1e9;

/// Distinct (source, destination) pairs read unless told otherwise: each
/// costs about 700 bytes through the analysis (250,000 pairs, about
/// 180 MiB), and a log with more is more likely a mistake than a fabric.
pub const DEFAULT_MAX_PAIRS: usize = 250_000;

/// How rows become counts, how long a line may be, how many pairs.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    /// Packets per probe round (a row's `loss_rate` is a share of them);
    /// `None` infers it (count column, else the lattice of the rates).
    pub packets_per_round: Option<f64>,
    /// Longest line accepted, in bytes (newline excluded); a longer one is
    /// an error naming it, and is never held in memory.
    pub max_line_length: usize,
    /// Most distinct (source, destination) pairs; the row that brings one
    /// more is an error naming its line, so memory is bounded by this.
    pub max_pairs: usize,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            packets_per_round: None,
            max_line_length: DEFAULT_MAX_LINE_LENGTH,
            max_pairs: DEFAULT_MAX_PAIRS,
        }
    }
}

/// One pair's rounds of one protocol (`None`: rows that do not say).
#[derive(Default)]
struct Acc {
    /// The pair (index into the distinct pairs) and the protocol.
    pair: u32,
    protocol: Option<Protocol>,
    /// The pair's next protocol's rounds, if any.
    next: Option<u32>,
    rounds: f64,
    failed: f64,
    /// Connected rows without a count of their own, and their rates' sum.
    connected: f64,
    rate_sum: f64,
    /// Rows with a count column value: packets sent and lost.
    sent: f64,
    lost: f64,
    /// Connected rows that lost any packet.
    lossy: LossyRounds,
    /// When its rounds ran, for the departures of containers that left.
    timeline: Timeline,
}

/// A pair as the reader keys it: (source, destination) interned, and the
/// plane its rows measured (`None`: they do not say).
type PairKey = (u32, u32, Option<Plane>);

/// A plane as one byte of a hash key.
fn plane_byte(plane: Option<Plane>) -> u8 {
    plane.map_or(0, |p| p as u8 + 1)
}

/// What the reader made of a log beside its pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSummary {
    /// What was used as the probes per row.
    pub probes: ProbesPerRow,
    /// Rows per task (`task_type`): probes per protocol, traces skipped.
    pub tasks: TaskRows,
    /// The plane (`agent_type`) of each pair, in the order of the pairs;
    /// empty when the log has no `agent_type` column.
    pub planes: Vec<Option<Plane>>,
}

impl Acc {
    fn new(pair: u32, protocol: Option<Protocol>) -> Acc {
        Acc {
            pair,
            protocol,
            ..Acc::default()
        }
    }
}

/// Read and aggregate a ping log from a file, also saying what was used
/// as the probes per row and which tasks the rows were.
pub fn read_pings_file_counted(
    path: &Path,
    opts: &CsvOptions,
) -> Result<(Vec<PairStats>, LogSummary), ReadError> {
    let file = std::fs::File::open(path).map_err(|source| ReadError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    read_pings_counted(std::io::BufReader::with_capacity(1 << 20, file), opts).map_err(|source| {
        ReadError::Parse {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// [`read_pings_counted`] on standard input.
pub fn read_pings_stdin_counted(
    opts: &CsvOptions,
) -> Result<(Vec<PairStats>, LogSummary), ReadError> {
    read_pings_counted(std::io::stdin().lock(), opts).map_err(|source| ReadError::Stdin { source })
}

/// Read and aggregate a ping log.
pub fn read_pings<R: Read>(reader: R, opts: &CsvOptions) -> Result<Vec<PairStats>, CsvError> {
    read_pings_counted(reader, opts).map(|(p, _)| p)
}

/// [`read_pings`], also saying what was used as the probes per row and
/// which tasks the rows were.
pub fn read_pings_counted<R: Read>(
    reader: R,
    opts: &CsvOptions,
) -> Result<(Vec<PairStats>, LogSummary), CsvError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .buffer_capacity(1 << 20)
        .from_reader(LineCapped::new(reader, opts.max_line_length));
    let header = rdr.headers().map_err(|e| csv_err(&e, 1))?.clone();
    let cols = columns(&header).map_err(|e| CsvError {
        line: 1,
        column: e.column().map(str::to_string),
        message: e.to_string(),
    })?;
    let mut agg = Aggregator::new(&header, cols, opts.max_pairs);
    let mut rec = csv::ByteRecord::new();
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(csv_err(&e, 0)),
        }
        agg.row(&rec)?;
    }
    let probes = agg.probes_per_row(opts.packets_per_round);
    let tasks = std::mem::take(&mut agg.tasks);
    let planes = agg.planes();
    Ok((
        agg.finish(probes.value),
        LogSummary {
            probes,
            tasks,
            planes,
        },
    ))
}

/// One validated row.
struct Round {
    connected: bool,
    loss: f64,
    latency: Option<f64>,
    /// The row's own probe count (count column), when it has one.
    count: Option<f64>,
    /// `ping_time` (ns).
    at: u64,
}

/// Per-pair accumulation over the rows, with node identities interned.
struct Aggregator<'h> {
    header: &'h csv::StringRecord,
    cols: Columns,
    max_pairs: usize,
    lattice: Lattice,
    /// Rows that gave their own probe count, and the sum of those counts.
    counted_rows: u64,
    counted_sum: f64,
    node_ids: HashMap<Box<[u8]>, u32>,
    identities: Vec<Identity>,
    /// Distinct (source, destination, plane) pairs, which `max_pairs`
    /// bounds.
    /// Keyed with the plane as one byte ([`plane_byte`]): the derived
    /// hash of the `Option` writes two words a row, which cost the
    /// 172k-row speed case 9 % more CPU (farm-bench, side by side).
    pair_ids: HashMap<(u32, u32, u8), u32>,
    pairs: Vec<PairKey>,
    /// Each pair's first protocol's rounds in `acc`; a pair's further
    /// protocols chain on from there ([`Acc::next`]): one hash lookup per
    /// row, as without protocols, and a log has one to three of them.
    first: Vec<u32>,
    acc: Vec<Acc>,
    /// (index into `acc`, µs) of every answered round.
    rtts: Vec<(u32, f32)>,
    tasks: TaskRows,
    /// The latest `ping_time`: where the log ends.
    end: u64,
}

impl<'h> Aggregator<'h> {
    fn new(header: &'h csv::StringRecord, cols: Columns, max_pairs: usize) -> Self {
        Aggregator {
            header,
            cols,
            max_pairs,
            lattice: Lattice::default(),
            counted_rows: 0,
            counted_sum: 0.0,
            node_ids: HashMap::new(),
            identities: Vec::new(),
            pair_ids: HashMap::new(),
            pairs: Vec::new(),
            first: Vec::new(),
            acc: Vec::new(),
            rtts: Vec::new(),
            tasks: TaskRows::default(),
            end: 0,
        }
    }

    fn err(&self, line: u64, i: usize, message: String) -> CsvError {
        CsvError {
            line,
            column: Some(
                self.header
                    .get(i)
                    .unwrap_or("?")
                    .trim_start_matches('\u{feff}')
                    .to_string(),
            ),
            message,
        }
    }

    #[inline(always)]
    fn row(&mut self, rec: &csv::ByteRecord) -> Result<(), CsvError> {
        let line = rec.position().map(csv::Position::line).unwrap_or(0);
        let task = match self.cols.task {
            Some(i) => Task::parse(rec.get(i).unwrap_or(b""))
                .map_err(|e| self.err(line, i, e.to_string()))?,
            None => Task::Probe(None),
        };
        self.tasks.add(task);
        let Task::Probe(protocol) = task else {
            return Ok(());
        };
        let plane = match self.cols.plane {
            Some(i) => task::plane(rec.get(i).unwrap_or(b""))
                .map_err(|e| self.err(line, i, e.to_string()))?,
            None => None,
        };
        let s = self.node(rec, line, true)?;
        let d = self.node(rec, line, false)?;
        let round = self.round(rec, line)?;
        let p = self.key((s, d, plane), protocol, line)?;
        self.end = self.end.max(round.at);
        let a = &mut self.acc[p as usize];
        a.timeline.add(round.at, round.connected);
        a.rounds += 1.0;
        if round.connected {
            if round.loss > 0.0 {
                a.lossy.add(round.at, round.loss, round.count);
            }
            match round.count {
                Some(c) => {
                    a.sent += c;
                    a.lost += (round.loss * c).round();
                    self.counted_rows += 1;
                    self.counted_sum += c;
                }
                None => {
                    a.connected += 1.0;
                    a.rate_sum += round.loss;
                    self.lattice
                        .add(rec.get(self.cols.loss_rate).unwrap_or(b""), round.loss);
                }
            }
            if let Some(l) = round.latency {
                self.rtts.push((p, l as f32));
            }
        } else {
            a.failed += 1.0;
        }
        Ok(())
    }

    /// Where the rounds of a pair's `protocol` add up, made room for when
    /// first seen at `line`; a new pair counts against `max_pairs`.
    #[inline(always)]
    fn key(
        &mut self,
        sdp: PairKey,
        protocol: Option<Protocol>,
        line: u64,
    ) -> Result<u32, CsvError> {
        let next = self.pairs.len() as u32;
        let pair = match self.pair_ids.entry((sdp.0, sdp.1, plane_byte(sdp.2))) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(_) if self.pairs.len() >= self.max_pairs => {
                return Err(self.too_many_pairs(line));
            }
            Entry::Vacant(e) => {
                e.insert(next);
                let k = self.acc.len() as u32;
                self.pairs.push(sdp);
                self.first.push(k);
                self.acc.push(Acc::new(next, protocol));
                return Ok(k);
            }
        };
        let mut k = self.first[pair as usize];
        while self.acc[k as usize].protocol != protocol {
            match self.acc[k as usize].next {
                Some(n) => k = n,
                None => {
                    let n = self.acc.len() as u32;
                    self.acc[k as usize].next = Some(n);
                    self.acc.push(Acc::new(pair, protocol));
                    return Ok(n);
                }
            }
        }
        Ok(k)
    }

    fn too_many_pairs(&self, line: u64) -> CsvError {
        CsvError {
            line,
            column: None,
            message: format!(
                "more than {} distinct (src_node_id, dst_node_id) pairs (--max-pairs); raise the limit or split the log",
                self.max_pairs
            ),
        }
    }

    /// The interned id of the row's source (`src`) or destination node.
    #[inline(always)]
    fn node(&mut self, rec: &csv::ByteRecord, line: u64, src: bool) -> Result<u32, CsvError> {
        let (col, topo) = if src {
            (self.cols.src_node, &self.cols.src_topo)
        } else {
            (self.cols.dst_node, &self.cols.dst_topo)
        };
        let field = |i: usize| rec.get(i).unwrap_or(b"");
        let id = field(col);
        if id.is_empty() {
            return Err(self.err(line, col, "empty node id".into()));
        }
        if let Some(&n) = self.node_ids.get(id) {
            return Ok(n);
        }
        let mut ident = Identity {
            node: utf8(id)
                .map_err(|m| self.err(line, col, m.to_string()))?
                .to_string(),
            ..Default::default()
        };
        for (kind, i, _) in topo {
            ident.set(
                *kind,
                utf8(field(*i))
                    .map_err(|m| self.err(line, *i, m.to_string()))?
                    .trim(),
            );
        }
        let n = self.identities.len() as u32;
        self.identities.push(ident);
        self.node_ids.insert(id.into(), n);
        Ok(n)
    }

    /// Validate the measurement columns of a row.
    #[inline(always)]
    fn round(&self, rec: &csv::ByteRecord, line: u64) -> Result<Round, CsvError> {
        let cols = &self.cols;
        let field = |i: usize| rec.get(i).unwrap_or(b"");
        let connected = field(cols.dial) == b"success";
        let loss = parse_f64(field(cols.loss_rate))
            .map_err(|m| self.err(line, cols.loss_rate, m.to_string()))?;
        let loss = match loss {
            Some(l) if (0.0..=1.0).contains(&l) => l,
            Some(l) => {
                return Err(self.err(
                    line,
                    cols.loss_rate,
                    format!("{l} is not a share in [0, 1]"),
                ))
            }
            None if connected => {
                return Err(self.err(line, cols.loss_rate, "empty for a connected round".into()))
            }
            None => 1.0,
        };
        let latency = parse_f64(field(cols.latency))
            .map_err(|m| self.err(line, cols.latency, m.to_string()))?;
        if let Some(l) = latency {
            if l < 0.0 {
                return Err(self.err(line, cols.latency, format!("negative latency {l}")));
            }
            if l > MAX_LATENCY_US {
                let m = format!("latency {l} µs is more than an hour");
                return Err(self.err(line, cols.latency, m));
            }
        }
        let pt = field(cols.ping_time);
        if pt.is_empty() || !pt.iter().all(u8::is_ascii_digit) || pt.len() > 20 {
            return Err(self.err(
                line,
                cols.ping_time,
                format!(
                    "{:?} is not a timestamp in nanoseconds",
                    String::from_utf8_lossy(pt)
                ),
            ));
        }
        let count = match cols.count {
            Some(i) => match parse_f64(field(i)).map_err(|m| self.err(line, i, m.to_string()))? {
                Some(c) if (1.0..=MAX_PROBE_COUNT).contains(&c) => Some(c.round()),
                Some(c) => {
                    let m = format!("{c} is not a probe count (1 to {MAX_PROBE_COUNT:e})");
                    return Err(self.err(line, i, m));
                }
                None => None,
            },
            None => None,
        };
        // Digits only, at most 20: saturates rather than overflows.
        let at = pt.iter().fold(0u64, |t, d| {
            t.saturating_mul(10).saturating_add(u64::from(d - b'0'))
        });
        Ok(Round {
            connected,
            loss,
            latency,
            count,
            at,
        })
    }

    /// Each pair's plane, when the log has an `agent_type` column.
    fn planes(&self) -> Vec<Option<Plane>> {
        if self.cols.plane.is_none() {
            return Vec::new();
        }
        self.pairs.iter().map(|&(_, _, plane)| plane).collect()
    }

    /// The probes per row for rows without a count of their own: the flag,
    /// else the lattice of their rates, else the default.
    fn probes_per_row(&self, flag: Option<f64>) -> ProbesPerRow {
        let distinct_rates = self.lattice.distinct();
        let inferred = self.lattice.infer();
        let (value, source, confident) = match (flag, inferred) {
            (Some(v), _) => (v, ProbeSource::Flag, true),
            (None, _) if self.counted_rows > 0 && self.acc.iter().all(|a| a.connected == 0.0) => {
                let mean = self.counted_sum / self.counted_rows as f64;
                (mean, ProbeSource::Column, true)
            }
            (None, Some((n, sure))) => (f64::from(n), ProbeSource::Inferred, sure),
            (None, None) => (DEFAULT_PACKETS_PER_ROUND, ProbeSource::Default, false),
        };
        ProbesPerRow {
            value,
            source,
            distinct_rates,
            confident,
            matters: self.lattice.matters(),
        }
    }

    /// The pairs, each protocol's rounds summed and the RTT (median) of
    /// the protocol it prefers; `ppr` probes per row for rows without a
    /// count of their own.
    fn finish(mut self, ppr: f64) -> Vec<PairStats> {
        let median = median_rtts(&mut self.rtts, self.acc.len());
        let identities = &self.identities;
        let mut out: Vec<PairStats> = self
            .pairs
            .iter()
            .map(|&(s, d, _)| PairStats {
                src: identities[s as usize].clone(),
                dst: identities[d as usize].clone(),
                ..Default::default()
            })
            .collect();
        let pairs = &self.pairs;
        // A container that left mid-window: its last failed rounds are its
        // departure (`departures.rs`), protocol by protocol.
        let departed = departures::departed(
            self.acc.iter().map(|a| {
                let (src, dst, _) = pairs[a.pair as usize];
                (src, dst, &a.timeline)
            }),
            self.end,
        );
        // The preference of the protocol whose median each pair's RTT is.
        let mut rtt_pref = vec![None::<u8>; out.len()];
        for ((a, rtt), departed) in self.acc.iter().zip(median).zip(departed) {
            let p = &mut out[a.pair as usize];
            let departed = departed as f64;
            p.rounds += a.rounds - departed;
            p.failed_dials += a.failed - departed;
            p.sent += a.sent + a.connected * ppr;
            p.lost += a.lost + (a.rate_sum * ppr).round();
            p.lossy_rounds = Some(p.lossy_rounds.unwrap_or(0.0) + a.lossy.len());
            p.lossy_rows.extend(a.lossy.rows(self.end, ppr));
            if let Some(r) = a.timeline.interval().map(|ns| ns * 1e-9) {
                p.round_seconds = Some(p.round_seconds.map_or(r, |o| o.max(r)));
            }
            let pref = task::rtt_preference(a.protocol);
            let best = &mut rtt_pref[a.pair as usize];
            if rtt.median.is_some() && best.is_none_or(|b| pref < b) {
                *best = Some(pref);
                p.rtt_seconds = rtt.median;
                p.rtt_samples = rtt.samples;
                p.rtt_spread_seconds = rtt.spread;
            }
        }
        out
    }
}

mod departures;
mod error;
mod fields;
mod header;
mod lossy;
pub mod task;
#[cfg(test)]
mod tests;
