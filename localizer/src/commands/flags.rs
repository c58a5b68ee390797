//! Flags and value parsers shared by several subcommands. clap prefixes a
//! parser's error with the flag it belongs to, so the errors here say only
//! what is wrong with the value.

use crate::engine::model::Config;
use crate::input::histograms::RttForm;
use skeletonhunter_common::duration::{self, DurationError};
use std::time::Duration;

/// A flag value that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlagError {
    /// Not a small non-negative duration.
    #[error(
        "invalid latency {input:?}: expected a non-negative number with an optional unit ns, us, ms or s (e.g. 2us)"
    )]
    Latency {
        /// As given.
        input: String,
        /// What the duration parser objected to.
        reason: DurationError,
    },
    /// Not a non-negative finite number.
    #[error("invalid ratio {0:?}: expected a non-negative number (e.g. 0.5)")]
    Ratio(String),
    /// Not a whole number of at least one.
    #[error("invalid count {0:?}: expected a whole number of at least 1")]
    Count(String),
    /// Not a duration.
    #[error("invalid duration: {0}")]
    Duration(DurationError),
    /// Zero where time must pass.
    #[error("invalid duration {0:?}: must be positive")]
    NotPositive(String),
    /// Not a positive byte size.
    #[error(
        "invalid size {0:?}: expected a positive number of bytes with an optional unit B, KB, KiB, MB, MiB, GB or GiB (e.g. 64MiB)"
    )]
    Size(String),
    /// Neither `auto` nor a shard count in range.
    #[error("invalid shard count {0:?}: expected auto or a whole number from 1 to 64")]
    Shards(String),
}

/// `--pair-shards`: a count, or `auto` (the scrape interval over the
/// cycle interval, so each pair is read about once per scrape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairShards {
    /// `--scrape-interval` / `--interval`, rounded down, 1 to 64.
    Auto,
    /// This many (1 to 64).
    Fixed(u16),
}

/// Most shards `--pair-shards` takes: each is a regex alternation of node
/// name endings, and a pair read every 64 cycles is stale long before.
pub const MAX_PAIR_SHARDS: u16 = 64;

/// Node identities below which `auto` reads every pair every cycle: a
/// fleet this small reads its pairs in a small share of a cycle (8,192
/// nodes and 28,672 pairs took 1.5 s a cycle unsharded, see
/// docs/scaling.md), so it keeps alerting as fast as unsharded instead
/// of paying the shards' extra confirmation cycles.
pub const AUTO_MIN_NODES: usize = 4096;

impl PairShards {
    /// The shard count for a cycle `interval` and the exporters' `scrape`
    /// interval.
    pub fn count(self, interval: Duration, scrape: Duration) -> usize {
        match self {
            PairShards::Fixed(n) => usize::from(n),
            PairShards::Auto => {
                // Whole nanoseconds: exact for sub-second intervals too.
                let per_scrape = scrape.as_nanos() / interval.as_nanos().max(1);
                usize::try_from(per_scrape)
                    .unwrap_or(usize::MAX)
                    .clamp(1, usize::from(MAX_PAIR_SHARDS))
            }
        }
    }

    /// Fewest node identities at which the shards are used (`0`: always).
    pub fn min_nodes(self) -> usize {
        match self {
            PairShards::Fixed(_) => 0,
            PairShards::Auto => AUTO_MIN_NODES,
        }
    }
}

/// `auto` or a whole number from 1 to 64.
pub fn parse_pair_shards(s: &str) -> Result<PairShards, FlagError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(PairShards::Auto);
    }
    match t.parse::<u16>() {
        Ok(n) if (1..=MAX_PAIR_SHARDS).contains(&n) => Ok(PairShards::Fixed(n)),
        _ => Err(FlagError::Shards(s.to_string())),
    }
}

/// Engine flags shared by `analyze` and `run`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EngineArgs {
    /// Smallest RTT excess over the path-class baseline reported as latency
    /// (e.g. 2us, 50us, 0.2ms; plain numbers are seconds). The test stays
    /// statistical; this is the effect size that matters. Default 2us (RoCE:
    /// +10 us already slows training); software fabrics (veth, virtual
    /// switches) whose RTTs wander by tens of us need far more.
    #[arg(long, value_parser = parse_latency, value_name = "DURATION")]
    pub min_latency_excess: Option<f64>,
    /// Smallest RTT excess reported as latency, as a share of the path
    /// class's baseline RTT (default 0.25; the larger of the two minimums applies).
    #[arg(long, value_parser = parse_ratio, value_name = "RATIO")]
    pub min_latency_excess_ratio: Option<f64>,
    /// Smallest extra loss rate (or share of failed dials) a component must
    /// add, on the flows it hits, to be reported (default 0.005 = 0.5%).
    /// Next to the p-value: on a large window a tiny excess is significant
    /// but not worth a page.
    #[arg(long, value_parser = parse_ratio, value_name = "RATE")]
    pub min_loss_excess: Option<f64>,
}

impl EngineArgs {
    /// The engine configuration: defaults with the flags applied.
    pub fn config(&self) -> Config {
        let mut c = Config::default();
        if let Some(s) = self.min_latency_excess {
            c.min_latency_excess_seconds = s;
        }
        if let Some(r) = self.min_latency_excess_ratio {
            c.min_latency_excess_ratio = r;
        }
        if let Some(q) = self.min_loss_excess {
            c.min_loss_excess = q;
        }
        c
    }
}

/// A small duration in seconds: `2us` (or `2µs`), `500ns`, `0.2ms`, `1s`,
/// or plain seconds (`2e-6`). Zero is allowed (no minimum).
pub fn parse_latency(s: &str) -> Result<f64, FlagError> {
    duration::parse(s)
        .map(|d| d.as_secs_f64())
        .map_err(|reason| FlagError::Latency {
            input: s.to_string(),
            reason,
        })
}

/// A non-negative finite ratio.
pub fn parse_ratio(s: &str) -> Result<f64, FlagError> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(FlagError::Ratio(s.to_string())),
    }
}

/// A whole number of at least one: a capacity of 0 would silently drop
/// everything it exists to keep.
pub fn positive_count(s: &str) -> Result<usize, FlagError> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(FlagError::Count(s.to_string())),
    }
}

/// A positive duration (`500ms`, `10s`, `1m`, `1h30m`, or plain seconds).
pub fn positive_duration(s: &str) -> Result<Duration, FlagError> {
    let d = duration::parse(s).map_err(FlagError::Duration)?;
    if d.is_zero() {
        return Err(FlagError::NotPositive(s.trim().to_string()));
    }
    Ok(d)
}

/// A positive byte size: `64MiB`, `500KB`, `1GiB`, `1048576` (bytes).
/// Decimal units are powers of 1000, binary ones (`KiB`, ...) of 1024.
pub fn parse_size(s: &str) -> Result<usize, FlagError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "ki" | "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mi" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gi" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(FlagError::Size(s.to_string())),
    };
    let bytes = num.parse::<f64>().ok().map(|n| (n * factor).round());
    match bytes {
        Some(b) if b >= 1.0 && b <= usize::MAX as f64 => Ok(b as usize),
        _ => Err(FlagError::Size(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_and_at_least_one() {
        assert_eq!(positive_count("1").unwrap(), 1);
        assert_eq!(positive_count(" 10000 ").unwrap(), 10_000);
        for bad in ["0", "-1", "", "1.5", "many"] {
            let e = positive_count(bad).unwrap_err().to_string();
            assert!(e.contains("at least 1"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn latency_flags_parse_with_units_and_reject_garbage() {
        assert_eq!(parse_latency("2us").unwrap(), 2e-6);
        assert_eq!(parse_latency("2µs").unwrap(), 2e-6);
        assert!((parse_latency("0.2ms").unwrap() - 2e-4).abs() < 1e-15);
        assert!((parse_latency("500ns").unwrap() - 5e-7).abs() < 1e-18);
        assert_eq!(parse_latency("2e-6").unwrap(), 2e-6);
        assert_eq!(parse_latency("0").unwrap(), 0.0);
        for bad in ["", "fast", "-1us", "2 parsecs", "nanus", "inf"] {
            let e = parse_latency(bad).unwrap_err().to_string();
            assert!(e.contains("invalid latency"), "{bad}: {e}");
        }
        assert_eq!(parse_ratio("0.5").unwrap(), 0.5);
        assert!(parse_ratio("-0.5").is_err() && parse_ratio("NaN").is_err());
        let c = EngineArgs {
            min_latency_excess: Some(2e-4),
            min_latency_excess_ratio: None,
            min_loss_excess: Some(0.01),
        }
        .config();
        assert_eq!(c.min_latency_excess_seconds, 2e-4);
        assert_eq!(c.min_loss_excess, 0.01);
        assert_eq!(
            c.min_latency_excess_ratio,
            Config::default().min_latency_excess_ratio
        );
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("64mib").unwrap(), 64 << 20);
        assert_eq!(parse_size("500KB").unwrap(), 500_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size(" 2 MB ").unwrap(), 2_000_000);
        for bad in ["", "0", "-1MiB", "MiB", "10XB", "1e9", "0.1B", "1..2MB"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains("invalid size"), "{bad}: {e}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(positive_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(
            positive_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(positive_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            positive_duration("2.5").unwrap(),
            Duration::from_millis(2500)
        );
        for bad in ["", "0", "-1", "10x", "s"] {
            assert!(positive_duration(bad).is_err(), "{bad}");
        }
    }
}

/// Bad input found after clap (a flag's value, a file it names): `main`
/// exits with status 2 for it, as for clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// The endpoint settings a `--*.http-config-file` flag names (the default
/// — system roots, no credentials — without one); errors name the flag.
pub fn endpoint_config(
    flag: &str,
    path: Option<&std::path::Path>,
) -> Result<crate::clients::EndpointConfig, BadInput> {
    match path {
        None => Ok(Default::default()),
        Some(p) => {
            crate::clients::EndpointConfig::load(p).map_err(|e| BadInput(format!("{flag}: {e}")))
        }
    }
}

/// `--histograms` of `run` and `rules`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistogramsArg {
    /// Native where the store evaluates it, classic otherwise.
    Auto,
    /// The classic `_bucket` / `_count` series.
    Classic,
    /// The native histogram series.
    Native,
}

impl HistogramsArg {
    /// The form of `run`, `None` for `auto` (decided by asking the store).
    pub fn run_form(self) -> Option<RttForm> {
        match self {
            HistogramsArg::Auto => None,
            HistogramsArg::Classic => Some(RttForm::Classic),
            HistogramsArg::Native => Some(RttForm::Native),
        }
    }

    /// The form of generated rules: nobody is asked, so `auto` is the
    /// per-series fallback, which every store evaluates.
    pub fn rules_form(self) -> RttForm {
        self.run_form().unwrap_or(RttForm::NativeOrClassic)
    }
}
