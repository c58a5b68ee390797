//! How many probes a CSV row carries, inferred from the data.
//!
//! A row's `loss_rate` is `lost / N` for the round's probe count `N`, so the
//! printed rates of a log lie on the lattice `k / N`. The inference keeps
//! every distinct printed rate strictly between 0 and 1 (one pass, a small
//! set), then takes the smallest `N` for which every rate is `k / N` within
//! the rounding of how it was printed: exact for short decimals (`0.1`,
//! `0.03`, as `%g` or a shortest-round-trip printer writes `k / N`), to
//! half a unit of the last digit for long ones (`0.333333`), and for every
//! value when the log pads decimals with zeros (`0.10`: a fixed-point
//! printer). It is sure when several rows carry a fraction and either a
//! one-probe loss (`1 / N`) or three distinct rates were seen.

use serde::Serialize;
use std::collections::HashMap;

/// Largest probe count the lattice search considers.
pub const MAX_PROBES: u32 = 10_000;

/// Distinct rates kept; beyond this the log is not on a small lattice.
const MAX_DISTINCT: usize = 4096;

/// Where the probe count came from (the `source` of the analyze JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeSource {
    /// The lattice of the `loss_rate` values.
    Inferred,
    /// A per-row count column (`probe_count`, `probes`, `sent`, ...).
    Column,
    /// `--packets-per-round`.
    Flag,
    /// Nothing to infer from: the default.
    Default,
}

/// What the reader used as the probes per row, and how sure it is; the
/// `probes_per_row` object of the analyze JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbesPerRow {
    /// Probes per row used for rows without a count column.
    pub value: f64,
    /// Where `value` came from.
    pub source: ProbeSource,
    /// Distinct `loss_rate` values strictly between 0 and 1.
    pub distinct_rates: usize,
    /// Whether the count is known (flag, column) or the lattice is clear.
    pub confident: bool,
    /// Whether the count changes anything: some connected row lost
    /// probes. When it does and `confident` is false, `analyze` warns.
    #[serde(skip)]
    pub matters: bool,
}

/// The distinct printed rates of a log, collected row by row.
#[derive(Debug, Default)]
pub struct Lattice {
    /// Rate bits -> (rate, decimals printed, significant digits printed).
    rates: HashMap<u64, (f64, i32, u32)>,
    /// Connected rows whose rate is strictly between 0 and 1.
    fractional_rows: u64,
    /// Connected rows that lost every probe.
    full_rows: u64,
    /// More distinct rates than kept.
    overflow: bool,
    /// A rate was printed with trailing zeros (`0.10`): fixed point.
    padded: bool,
}

impl Lattice {
    /// Record one connected row's rate as printed (`text`) and parsed.
    pub fn add(&mut self, text: &[u8], rate: f64) {
        if rate <= 0.0 || rate >= 1.0 {
            self.full_rows += u64::from(rate >= 1.0);
            if rate == 0.0 && has_padded_fraction(text) {
                self.padded = true;
            }
            return;
        }
        self.fractional_rows += 1;
        let key = rate.to_bits();
        if self.rates.contains_key(&key) {
            return;
        }
        if self.rates.len() >= MAX_DISTINCT {
            self.overflow = true;
            return;
        }
        let (decimals, sig) = printed_precision(text);
        self.padded |= has_padded_fraction(text);
        self.rates.insert(key, (rate, decimals, sig));
    }

    /// Whether any connected row lost probes (the count then matters).
    pub fn matters(&self) -> bool {
        self.fractional_rows + self.full_rows > 0
    }

    /// Distinct fractional rates seen.
    pub fn distinct(&self) -> usize {
        self.rates.len()
    }

    /// The smallest probe count fitting every rate, and whether it is sure.
    pub fn infer(&self) -> Option<(u32, bool)> {
        if self.rates.is_empty() || self.overflow {
            return None;
        }
        let mut rates: Vec<(f64, f64)> = self
            .rates
            .values()
            .map(|&(r, d, sig)| {
                let tol = if self.padded || sig >= 5 {
                    0.5 * 10f64.powi(-d)
                } else {
                    0.0
                };
                (r, tol)
            })
            .collect();
        rates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n = (1..=MAX_PROBES).find(|&n| rates.iter().all(|&(r, tol)| fits(r, tol, n)))?;
        let one_probe = rates
            .first()
            .is_some_and(|&(r, _)| (r * f64::from(n)).round() == 1.0);
        let sure = self.fractional_rows >= 3 && (one_probe || rates.len() >= 3);
        Some((n, sure))
    }
}

/// `rate` is `k / n` (0 < k < n) within `tol` (the printing's rounding).
fn fits(rate: f64, tol: f64, n: u32) -> bool {
    let n = f64::from(n);
    let k = (rate * n).round();
    k >= 1.0 && k < n && (k / n - rate).abs() <= tol + 1e-9 * rate.max(1e-300) + 1e-12
}

/// (decimals after the point, significant digits) of a printed number,
/// counting an exponent (`1e-05` has 5 decimals, 1 significant digit).
fn printed_precision(text: &[u8]) -> (i32, u32) {
    let s = std::str::from_utf8(text).unwrap_or("").trim();
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let frac = mantissa.split_once('.').map_or("", |(_, f)| f);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sig = digits.trim_start_matches('0').len() as u32;
    (frac.len() as i32 - exp, sig.max(1))
}

/// A fraction with a trailing zero (`0.10`, `0.00`): decimals are padded.
fn has_padded_fraction(text: &[u8]) -> bool {
    let s = std::str::from_utf8(text).unwrap_or("").trim();
    if s.contains(['e', 'E']) {
        return false;
    }
    s.split_once('.')
        .is_some_and(|(_, f)| f.len() >= 2 && f.ends_with('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lattice(values: &[&str]) -> Lattice {
        let mut l = Lattice::default();
        for v in values {
            l.add(v.as_bytes(), v.parse().unwrap());
        }
        l
    }

    #[test]
    fn tenths_are_ten_probes_and_hundredths_a_hundred() {
        assert_eq!(
            lattice(&["0", "0.1", "0.1", "0.2", "1"]).infer(),
            Some((10, true))
        );
        assert_eq!(
            lattice(&["0.01", "0.01", "0.03", "0.1"]).infer(),
            Some((100, true))
        );
        // %g of k/N with N = 3 and of 1/8.
        assert_eq!(
            lattice(&["0.333333", "0.666667", "0.333333"]).infer(),
            Some((3, true))
        );
        assert_eq!(
            lattice(&["0.125", "0.25", "0.125"]).infer(),
            Some((8, true))
        );
        assert_eq!(
            lattice(&["1e-04", "2e-04", "1e-04"]).infer(),
            Some((10_000, true))
        );
    }

    #[test]
    fn padded_decimals_are_rounded_values() {
        // %.2f of k/3: 0.33, 0.67; the padding (0.50) says fixed point.
        let l = lattice(&["0.33", "0.67", "0.33", "0.00"]);
        assert_eq!(l.infer(), Some((3, true)));
    }

    #[test]
    fn little_evidence_is_not_sure() {
        assert_eq!(lattice(&["0", "1"]).infer(), None);
        assert_eq!(lattice(&["0.5", "0.5"]).infer(), Some((2, false)));
        assert_eq!(lattice(&["0.1"]).infer(), Some((10, false)));
    }

    #[test]
    fn precision_counts_the_exponent() {
        assert_eq!(printed_precision(b"0.25"), (2, 2));
        assert_eq!(printed_precision(b"1e-05"), (5, 1));
        assert_eq!(printed_precision(b"0.333333"), (6, 6));
        assert!(has_padded_fraction(b"0.10") && !has_padded_fraction(b"0.1"));
    }
}
