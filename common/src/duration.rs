//! The one duration parser of the project.
//!
//! Configs, flags and generated rules all speak durations. Operators write
//! them the way Prometheus does (`30s`, `1m`, `1h30m`), and probe settings
//! need sub-millisecond values (`500us`, `1.5ms`), so one grammar covers
//! both: one or more `<number><unit>` terms, or a bare number of seconds.
//! [`parse_promql`] additionally insists on what PromQL itself accepts, for
//! text that is pasted into rules.

use std::time::Duration;

/// Why a duration was refused. The `Display` text names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing (or only white space) was given.
    #[error("empty duration (use e.g. 500ms, 10s, 1m)")]
    Empty,
    /// A term does not start with a number.
    #[error("{input:?} is not a duration: expected a number at {at:?} (use e.g. 500ms, 10s, 1m)")]
    Number {
        /// The whole text.
        input: String,
        /// Where the number was expected.
        at: String,
    },
    /// A term's unit is not known.
    #[error("{input:?}: unknown unit {unit:?} (use {allowed})")]
    Unit {
        /// The whole text.
        input: String,
        /// The unit as written.
        unit: String,
        /// The units accepted here.
        allowed: &'static str,
    },
    /// PromQL durations take whole numbers only.
    #[error("{0:?}: PromQL durations take whole numbers (e.g. 1500ms, not 1.5s)")]
    Fraction(String),
    /// Negative, non-finite or longer than [`MAX`].
    #[error("{0:?} is out of range (0 to 1 year)")]
    Range(String),
}

/// The longest duration accepted anywhere: one year.
pub const MAX: Duration = Duration::from_secs(365 * 86_400);

const UNITS: [(&str, f64); 10] = [
    ("ns", 1e-9),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
    ("d", 86_400.0),
    ("w", 604_800.0),
    ("y", 31_536_000.0),
];
const ALL_UNITS: &str = "ns, us, ms, s, m, h, d, w or y";
const PROMQL_UNITS: &str = "ms, s, m, h, d, w or y";

/// Parse `500us`, `20ms`, `1.5s`, `2m`, `1h30m` or a bare number of seconds
/// (`2.5`). Zero is allowed; callers that need a positive value say so in
/// their own error.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    parse_with(s, false)
}

/// Parse a duration that must also be valid PromQL (`30s`, `1h30m`; whole
/// numbers, units `ms` to `y`), so a typo fails before promtool or Prometheus
/// sees the generated file.
pub fn parse_promql(s: &str) -> Result<Duration, DurationError> {
    parse_with(s, true)
}

fn parse_with(s: &str, promql: bool) -> Result<Duration, DurationError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    if !promql {
        if let Ok(secs) = t.parse::<f64>() {
            return checked(s, secs);
        }
    }
    let mut rest = t;
    let mut total = 0.0_f64;
    // Each pass consumes at least one character, so this ends.
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().map_err(|_| DurationError::Number {
            input: s.to_string(),
            at: rest.to_string(),
        })?;
        if promql && rest[..digits].contains('.') {
            return Err(DurationError::Fraction(s.to_string()));
        }
        rest = &rest[digits..];
        let (unit, scale) = UNITS
            .iter()
            // Longest match first: "ms" before "m", "ns"/"us" before "s".
            .filter(|(u, _)| rest.starts_with(u))
            .max_by_key(|(u, _)| u.len())
            .filter(|(u, _)| !promql || !matches!(*u, "ns" | "us" | "µs"))
            .ok_or_else(|| DurationError::Unit {
                input: s.to_string(),
                unit: rest.chars().take_while(|c| !c.is_ascii_digit()).collect(),
                allowed: if promql { PROMQL_UNITS } else { ALL_UNITS },
            })?;
        rest = &rest[unit.len()..];
        total += number * scale;
    }
    checked(s, total)
}

fn checked(s: &str, secs: f64) -> Result<Duration, DurationError> {
    if !secs.is_finite() || secs < 0.0 || secs > MAX.as_secs_f64() {
        return Err(DurationError::Range(s.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Render a duration as PromQL text: whole milliseconds, in the largest unit
/// that divides it (`90s` → `90s`, `120s` → `2m`, `1.5s` → `1500ms`).
pub fn to_promql(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, unit_ms) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms > 0 && ms.is_multiple_of(unit_ms) {
            return format!("{}{unit}", ms / unit_ms);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_unit_and_compound_terms() {
        assert_eq!(parse("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse("500µs"), Ok(Duration::from_micros(500)));
        assert_eq!(parse("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse(" 2.5 "), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("100ns"), Ok(Duration::from_nanos(100)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn refuses_bad_text_with_the_reason() {
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert!(matches!(parse("abc"), Err(DurationError::Number { .. })));
        assert!(matches!(parse("10x"), Err(DurationError::Unit { .. })));
        assert!(matches!(parse("10s5"), Err(DurationError::Unit { .. })));
        assert!(matches!(parse("-1"), Err(DurationError::Range(_))));
        assert!(matches!(parse("2y"), Err(DurationError::Range(_))));
        assert!(matches!(parse("NaN"), Err(DurationError::Range(_))));
        let msg = parse("10x").unwrap_err().to_string();
        assert!(msg.contains("10x") && msg.contains("\"x\""), "{msg}");
    }

    #[test]
    fn promql_flavour_is_stricter() {
        assert_eq!(parse_promql("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_promql("500ms"), Ok(Duration::from_millis(500)));
        assert!(matches!(
            parse_promql("1.5s"),
            Err(DurationError::Fraction(_))
        ));
        assert!(matches!(
            parse_promql("500us"),
            Err(DurationError::Unit { .. })
        ));
        assert!(matches!(
            parse_promql("30"),
            Err(DurationError::Unit { .. })
        ));
    }

    #[test]
    fn renders_promql_text_that_parses_back() {
        for d in [
            Duration::from_millis(1500),
            Duration::from_secs(90),
            Duration::from_secs(120),
            Duration::from_secs(7200),
        ] {
            assert_eq!(parse_promql(&to_promql(d)), Ok(d));
        }
        assert_eq!(to_promql(Duration::from_secs(120)), "2m");
    }
}
