//! The bench's knobs, from the environment, and the ways of storing the
//! fleet it compares.

use crate::rules::RuleSet;
use anyhow::{bail, Context, Result};
use skeletonhunter_common::duration;
use skeletonhunter_exporter::model::HistogramMode;
use std::time::Duration;

/// One way of scraping and storing the fleet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Config {
    ClassicPrometheus,
    NativePrometheus,
    ClassicVmagent,
    BothPrometheus,
}

impl Config {
    pub const ALL: [Config; 4] = [
        Config::ClassicPrometheus,
        Config::NativePrometheus,
        Config::ClassicVmagent,
        Config::BothPrometheus,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Config::ClassicPrometheus => "classic-prometheus",
            Config::NativePrometheus => "native-prometheus",
            Config::ClassicVmagent => "classic-vmagent",
            Config::BothPrometheus => "both-prometheus",
        }
    }

    pub fn histograms(self) -> HistogramMode {
        match self {
            Config::NativePrometheus => HistogramMode::Native,
            Config::BothPrometheus => HistogramMode::Both,
            _ => HistogramMode::Classic,
        }
    }
}

/// The knobs, from the environment.
pub struct Knobs {
    pub pairs: usize,
    pub configs: Vec<Config>,
    pub scrape: Duration,
    pub interval: Duration,
    pub window: Duration,
    pub cycles: usize,
    pub probe_rate: f64,
    /// The rule files the store evaluates (`FLEET_RULES`).
    pub rules: RuleSet,
    /// The localizer's `--pair-shards`.
    pub pair_shards: String,
    /// Only the shipped Deployment's flags (`FLEET_LOCALIZER=shipped`).
    pub shipped_localizer: bool,
}

fn env_duration(name: &str, default: &str) -> Result<Duration> {
    let v = std::env::var(name).unwrap_or_else(|_| default.to_string());
    duration::parse(&v).with_context(|| format!("{name}={v}"))
}

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v}: not a number")),
        Err(_) => Ok(default),
    }
}

impl Knobs {
    pub fn from_env() -> Result<Knobs> {
        let configs = match std::env::var("FLEET_CONFIGS") {
            Ok(list) => list
                .split(',')
                .map(|s| {
                    Config::ALL
                        .into_iter()
                        .find(|c| c.name() == s.trim())
                        .with_context(|| format!("FLEET_CONFIGS: unknown {s:?}"))
                })
                .collect::<Result<Vec<_>>>()?,
            Err(_) => Config::ALL.to_vec(),
        };
        Ok(Knobs {
            pairs: env_num("FLEET_PAIRS", 2000)?,
            configs,
            scrape: env_duration("FLEET_SCRAPE", "10s")?,
            interval: env_duration("FLEET_INTERVAL", "10s")?,
            window: env_duration("FLEET_WINDOW", "1m")?,
            cycles: env_num("FLEET_CYCLES", 5usize)?.max(1),
            probe_rate: env_num("FLEET_PROBE_RATE", 1.0)?,
            rules: RuleSet::from_env()?,
            pair_shards: std::env::var("FLEET_PAIR_SHARDS").unwrap_or_else(|_| "1".into()),
            shipped_localizer: match std::env::var("FLEET_LOCALIZER").as_deref() {
                Err(_) | Ok("bench") => false,
                Ok("shipped") => true,
                Ok(v) => bail!("FLEET_LOCALIZER={v}: want bench or shipped"),
            },
        })
    }
}
