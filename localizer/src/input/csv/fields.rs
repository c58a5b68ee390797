//! Field-level parsing shared by the reader: numbers, UTF-8, the csv
//! crate's errors placed on their line, and the per-key RTT medians and
//! spreads; the errors of a field and of a line.

use crate::engine::stats::quantile_sorted;
use crate::input::lines::line_too_long;

/// A field that is not what its column needs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    /// Bytes that are not UTF-8.
    #[error("not valid UTF-8")]
    NotUtf8,
    /// Text that is not a finite number.
    #[error("{0:?} is not a number")]
    NotANumber(String),
}

/// A malformed input, located by line (1-based, the header is line 1) and
/// column name when there is one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}{}: {message}", .column.as_ref().map(|c| format!(", column `{c}`")).unwrap_or_default())]
pub struct CsvError {
    /// 1-based line of the problem (the header is line 1).
    pub line: u64,
    /// Header name of the offending column, when one is to blame.
    pub column: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// One pair's RTT samples, summarized.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RttSummary {
    /// Median in seconds; `None` without samples.
    pub median: Option<f64>,
    /// Samples summarized.
    pub samples: f64,
    /// Robust spread in seconds (interquartile range / 1.349, a standard
    /// deviation for Gaussian samples); `None` below [`SPREAD_SAMPLES`].
    pub spread: Option<f64>,
}

/// Fewest samples whose quartiles say anything about a pair's spread.
pub const SPREAD_SAMPLES: usize = 4;

/// [`RttSummary`] per pair from (pair, µs) samples.
pub fn median_rtts(rtts: &mut [(u32, f32)], npairs: usize) -> Vec<RttSummary> {
    rtts.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out = vec![RttSummary::default(); npairs];
    // One buffer for every pair's (sorted) samples.
    let mut us: Vec<f64> = Vec::new();
    for v in rtts.chunk_by(|a, b| a.0 == b.0) {
        us.clear();
        us.extend(v.iter().map(|s| s.1 as f64));
        let n = us.len();
        out[v[0].0 as usize] = RttSummary {
            median: Some(quantile_sorted(&us, 0.5) * 1e-6),
            samples: n as f64,
            spread: (n >= SPREAD_SAMPLES)
                .then(|| (quantile_sorted(&us, 0.75) - quantile_sorted(&us, 0.25)) / 1.349 * 1e-6),
        };
    }
    out
}

pub fn utf8(b: &[u8]) -> Result<&str, FieldError> {
    std::str::from_utf8(b).map_err(|_| FieldError::NotUtf8)
}

/// A number field: `None` when empty, an error unless finite.
pub fn parse_f64(b: &[u8]) -> Result<Option<f64>, FieldError> {
    let s = utf8(b)?.trim();
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(Some(v)),
        _ => Err(FieldError::NotANumber(s.to_string())),
    }
}

pub fn csv_err(e: &csv::Error, default_line: u64) -> CsvError {
    if let Some(long) = match e.kind() {
        csv::ErrorKind::Io(io) => line_too_long(io),
        _ => None,
    } {
        return CsvError {
            line: long.line,
            column: None,
            message: long.to_string(),
        };
    }
    let line = e
        .position()
        .map(csv::Position::line)
        .unwrap_or(default_line);
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
