//! The `process_*` metrics of client_golang's process collector (CPU,
//! memory, descriptors, start time), read from `/proc` at each scrape so
//! dashboards and alerts written for any Prometheus exporter work here.
//! Parsing is pure; the clock tick and page size come from
//! `/proc/self/auxv`, so no `unsafe` `sysconf` is needed. A reading serves
//! every scrape within a second ([`crate::recent`]).

use crate::recent::Recent;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::time::Duration;

/// The last reading, shared by every registry of the process.
static LAST: Recent<Reading> = Recent::new(Duration::from_secs(1));

/// What one reading of `/proc/self` gave; each field is absent when its
/// file could not be read (the metric is then left out, as client_golang
/// does).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// User + system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<f64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<f64>,
    /// Start time since the epoch, seconds.
    pub start_time_seconds: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<f64>,
    /// The soft limit of open file descriptors.
    pub max_fds: Option<f64>,
}

/// The fields of `/proc/self/stat` we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// starttime, clock ticks after boot.
    pub start_ticks: u64,
    /// vsize, bytes.
    pub vsize: u64,
    /// rss, pages.
    pub rss_pages: u64,
}

/// Parse `/proc/<pid>/stat`. The command name (field 2) may hold spaces
/// and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: field 3 (state) is index 0.
    let f: Vec<&str> = rest.split_whitespace().take(22).collect();
    let num = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some(Stat {
        cpu_ticks: num(11)?.checked_add(num(12)?)?,
        start_ticks: num(19)?,
        vsize: num(20)?,
        rss_pages: num(21)?,
    })
}

/// The soft "Max open files" of `/proc/<pid>/limits` (`None` when
/// unlimited or missing).
pub fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `btime` (boot time, seconds since the epoch) of `/proc/stat`.
pub fn parse_btime(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The value of auxiliary-vector entry `key` (native-endian pairs of
/// machine words, as the kernel hands them to the process).
pub fn auxv_value(auxv: &[u8], key: u64) -> Option<u64> {
    const W: usize = std::mem::size_of::<usize>();
    auxv.chunks_exact(2 * W).find_map(|pair| {
        let word = |b: &[u8]| -> Option<u64> {
            let mut buf = [0u8; W];
            buf.copy_from_slice(b.get(..W)?);
            Some(usize::from_ne_bytes(buf) as u64)
        };
        (word(&pair[..W])? == key).then(|| word(&pair[W..]))?
    })
}

/// `AT_PAGESZ` and `AT_CLKTCK` of `<elf.h>`.
const AT_PAGESZ: u64 = 6;
const AT_CLKTCK: u64 = 17;

/// Read the process's figures from `/proc/self` now.
pub fn read() -> Reading {
    let auxv = std::fs::read("/proc/self/auxv").unwrap_or_default();
    let tick = auxv_value(&auxv, AT_CLKTCK).filter(|t| *t > 0);
    let page = auxv_value(&auxv, AT_PAGESZ).filter(|p| *p > 0);
    let stat = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|t| parse_stat(&t));
    let btime = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| parse_btime(&t));
    let per_tick = |ticks: u64| tick.map(|t| ticks as f64 / t as f64);
    Reading {
        cpu_seconds: stat.and_then(|s| per_tick(s.cpu_ticks)),
        resident_bytes: stat.zip(page).map(|(s, p)| (s.rss_pages * p) as f64),
        virtual_bytes: stat.map(|s| s.vsize as f64),
        start_time_seconds: stat
            .zip(btime)
            .and_then(|(s, b)| per_tick(s.start_ticks).map(|t| b as f64 + t)),
        // Bounded: the count stops at the descriptor limit's order of size.
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.take(1 << 20).count() as f64),
        max_fds: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| parse_max_fds(&t))
            .map(|n| n as f64),
    }
}

/// The collector to register: `registry.register_collector(Box::new(ProcessCollector))`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = LAST.get(read);
        if let Some(v) = r.cpu_seconds {
            let c = ConstCounter::new(v);
            let help = "Total user and system CPU time spent in seconds";
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                help,
                None,
                c.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                r.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                r.virtual_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                r.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                r.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                r.max_fds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A name with spaces and a parenthesis, as a process may choose.
        let line = "4242 (sh (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 123456 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.start_ticks, 123_456);
        assert_eq!(s.vsize, 104_857_600);
        assert_eq!(s.rss_pages, 2560);
        assert_eq!(parse_stat("4242 (sh) S 1 2"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn limits_btime_and_auxv_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        assert_eq!(
            parse_max_fds("Max open files unlimited unlimited files\n"),
            None
        );
        assert_eq!(
            parse_btime("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        let mut auxv = Vec::new();
        for (k, v) in [(6usize, 4096usize), (17, 100), (0, 0)] {
            auxv.extend_from_slice(&k.to_ne_bytes());
            auxv.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(auxv_value(&auxv, AT_PAGESZ), Some(4096));
        assert_eq!(auxv_value(&auxv, AT_CLKTCK), Some(100));
        assert_eq!(auxv_value(&auxv, 99), None);
        assert_eq!(auxv_value(&auxv[..5], AT_PAGESZ), None);
    }

    #[test]
    fn this_process_reads_plausibly() {
        let r = read();
        assert!(r.cpu_seconds.is_some_and(|c| c >= 0.0), "{r:?}");
        assert!(r.resident_bytes.is_some_and(|b| b > 1e5), "{r:?}");
        assert!(r.virtual_bytes >= r.resident_bytes, "{r:?}");
        assert!(r.open_fds.is_some_and(|n| n >= 3.0), "{r:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = r.start_time_seconds.unwrap();
        assert!(
            start <= now + 2.0 && start > now - 86_400.0 * 365.0,
            "{r:?}"
        );
    }
}
