//! `probe.ecmp_width`, `probe.flows`, `probe.flow_window` and
//! `probe.flow_traces_per_minute`: how many UDP flows (source ports) probe
//! each peer, so that every equal-cost path of a pair is crossed by some
//! flow, and how their paths are traced. The coverage formula is here
//! because the flow count's default comes from it.

use super::error::ConfigError;
use super::file::FileProbe;
use std::time::Duration;

/// The most flows: K sockets per address family, shared by every peer.
pub const MAX_FLOWS: u32 = 256;
/// The widest ECMP group accepted; its coverage flow count (255) still
/// fits under [`MAX_FLOWS`].
pub const MAX_ECMP_WIDTH: u32 = 32;
/// Default `probe.ecmp_width`: four equal-cost uplinks per ToR, so the
/// default flow count (21) crosses every path of fabrics up to four wide
/// with probability ≥ 0.99 and most paths of wider ones. Rotating flows
/// costs no extra probes (each probe of a pair leaves from the next flow),
/// only K sockets per family shared by all peers; one flow would leave
/// multi-flow coverage and link blame off on most fabrics.
pub const DEFAULT_ECMP_WIDTH: u32 = 4;
/// Probability with which the default flow count covers every path.
pub const COVERAGE: f64 = 0.99;
/// Default `probe.flow_window`.
pub const DEFAULT_FLOW_WINDOW: Duration = Duration::from_secs(60);
/// Default `probe.flow_traces_per_minute`.
pub const DEFAULT_FLOW_TRACES_PER_MINUTE: u32 = 30;
/// The most `probe.flow_traces_per_minute`.
pub const MAX_FLOW_TRACES_PER_MINUTE: u32 = 6000;

/// The validated multi-flow settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSettings {
    /// Equal-cost paths between two ToRs (`probe.ecmp_width`, default
    /// [`DEFAULT_ECMP_WIDTH`]).
    pub ecmp_width: u32,
    /// UDP flows per peer (`probe.flows`, default from the width).
    pub flows: usize,
    /// Per-flow loss is kept over this recent window (`probe.flow_window`).
    pub window: Duration,
    /// Path traces per minute that map flows to paths (`0`: none).
    pub traces_per_minute: u32,
}

impl Default for FlowSettings {
    /// The shipped default: [`DEFAULT_ECMP_WIDTH`] paths and the flows that
    /// cover them.
    fn default() -> Self {
        FlowSettings {
            ecmp_width: DEFAULT_ECMP_WIDTH,
            flows: flows_for_coverage(DEFAULT_ECMP_WIDTH, COVERAGE) as usize,
            window: DEFAULT_FLOW_WINDOW,
            traces_per_minute: DEFAULT_FLOW_TRACES_PER_MINUTE,
        }
    }
}

/// The smallest `k` with `w·(1 − 1/w)^k ≤ 1 − coverage`: `w·(1 − 1/w)^k`
/// bounds the chance that some path of `w` is hit by none of `k` flows
/// hashed uniformly (union bound), so every path is covered with
/// probability at least `coverage`. `w = 1` needs one flow.
pub fn flows_for_coverage(width: u32, coverage: f64) -> u32 {
    if width <= 1 {
        return 1;
    }
    let w = f64::from(width);
    let miss = (1.0 - coverage).clamp(f64::MIN_POSITIVE, 1.0);
    let mut k = 1u32;
    // Bounded: (1 - 1/w)^k falls below any miss > 0 well before u32::MAX
    // for w ≤ MAX_ECMP_WIDTH; the cap only guards odd inputs.
    while w * (1.0 - 1.0 / w).powi(k as i32) > miss && k < 100_000 {
        k += 1;
    }
    k
}

/// The expected share of `w` paths that `k` uniformly hashed flows cover:
/// `1 − (1 − 1/w)^k`.
pub fn expected_coverage(width: u32, k: u32) -> f64 {
    if width <= 1 {
        return 1.0;
    }
    1.0 - (1.0 - 1.0 / f64::from(width)).powi(k as i32)
}

fn in_range(key: &str, v: u32, lo: u32, hi: u32) -> Result<u32, ConfigError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{v} is out of range ({lo}..={hi})"),
        ))
    }
}

/// Validate the multi-flow keys of `probe:`; `interval` is the probe
/// interval (the window must hold a few rounds).
pub fn flow_settings(fp: &FileProbe, interval: Duration) -> Result<FlowSettings, ConfigError> {
    let ecmp_width = match fp.ecmp_width {
        Some(w) => in_range("probe.ecmp_width", w, 1, MAX_ECMP_WIDTH)?,
        None => DEFAULT_ECMP_WIDTH,
    };
    let flows = match fp.flows {
        Some(k) => in_range("probe.flows", k, 1, MAX_FLOWS)?,
        None => flows_for_coverage(ecmp_width, COVERAGE),
    };
    let window = match fp.flow_window.as_deref() {
        Some(v) => skeletonhunter_common::duration::parse(v)
            .map_err(|e| ConfigError::invalid("probe.flow_window", e))?,
        None => DEFAULT_FLOW_WINDOW,
    };
    if window < Duration::from_secs(1) || window > Duration::from_secs(3600) {
        return Err(ConfigError::invalid(
            "probe.flow_window",
            format!("{window:?} is out of range (1s..=1h)"),
        ));
    }
    if window < interval * 2 {
        return Err(ConfigError::invalid(
            "probe.flow_window",
            format!("{window:?} is shorter than two probe intervals ({interval:?} each)"),
        ));
    }
    let traces_per_minute = match fp.flow_traces_per_minute {
        Some(r) => in_range(
            "probe.flow_traces_per_minute",
            r,
            0,
            MAX_FLOW_TRACES_PER_MINUTE,
        )?,
        None => DEFAULT_FLOW_TRACES_PER_MINUTE,
    };
    Ok(FlowSettings {
        ecmp_width,
        flows: flows as usize,
        window,
        traces_per_minute,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_flow_counts() {
        assert_eq!(flows_for_coverage(1, COVERAGE), 1);
        assert_eq!(flows_for_coverage(2, COVERAGE), 8);
        assert_eq!(flows_for_coverage(3, COVERAGE), 15);
        assert_eq!(flows_for_coverage(4, COVERAGE), 21);
        assert_eq!(flows_for_coverage(8, COVERAGE), 51);
        assert!(flows_for_coverage(MAX_ECMP_WIDTH, COVERAGE) <= MAX_FLOWS);
        // The smallest: one flow fewer misses the bound.
        for w in 2..=MAX_ECMP_WIDTH {
            let k = flows_for_coverage(w, COVERAGE);
            let f = f64::from(w);
            assert!(f * (1.0 - 1.0 / f).powi(k as i32) <= 0.01, "w={w}");
            assert!(f * (1.0 - 1.0 / f).powi(k as i32 - 1) > 0.01, "w={w}");
        }
    }

    #[test]
    fn expected_share_grows_with_flows() {
        assert_eq!(expected_coverage(1, 1), 1.0);
        assert!((expected_coverage(2, 1) - 0.5).abs() < 1e-12);
        assert!((expected_coverage(3, 2) - (1.0 - 4.0 / 9.0)).abs() < 1e-12);
        assert!(expected_coverage(3, 15) > 0.99);
    }

    fn probe(yaml: &str) -> Result<FlowSettings, ConfigError> {
        let fp: FileProbe = yaml_serde::from_str(yaml).unwrap();
        flow_settings(&fp, Duration::from_secs(1))
    }

    #[test]
    fn defaults_and_refusals_name_the_key() {
        assert_eq!(probe("{}").unwrap(), FlowSettings::default());
        // The shipped default rotates several flows, so multi-flow coverage
        // and link blame are on without an operator setting a width.
        let d = probe("{}").unwrap();
        assert_eq!((d.ecmp_width, d.flows), (4, 21));
        // One flow stays available by choice.
        let one = probe("{ecmp_width: 1}").unwrap();
        assert_eq!((one.ecmp_width, one.flows), (1, 1));
        let s = probe("{ecmp_width: 4}").unwrap();
        assert_eq!((s.ecmp_width, s.flows), (4, 21));
        assert_eq!(probe("{ecmp_width: 4, flows: 3}").unwrap().flows, 3);
        for (yaml, key) in [
            ("{flows: 0}", "probe.flows"),
            ("{flows: 257}", "probe.flows"),
            ("{ecmp_width: 0}", "probe.ecmp_width"),
            ("{ecmp_width: 33}", "probe.ecmp_width"),
            ("{flow_window: 10x}", "probe.flow_window"),
            ("{flow_window: 500ms}", "probe.flow_window"),
            ("{flow_window: 1s}", "probe.flow_window"),
            (
                "{flow_traces_per_minute: 6001}",
                "probe.flow_traces_per_minute",
            ),
        ] {
            let e = probe(yaml).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{key}: ")), "{yaml}: {e}");
        }
        assert_eq!(
            probe("{flow_traces_per_minute: 0}")
                .unwrap()
                .traces_per_minute,
            0
        );
    }
}
