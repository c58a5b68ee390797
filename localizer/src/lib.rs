//! The SkeletonHunter localizer engine: from per-pair probe aggregates to a
//! short list of blamed components.
//!
//! The pipeline is the same offline (`analyze` over a CSV ping log) and online
//! (`run` over PromQL results):
//!
//! 1. [`detect`]: per-pair statistical tests against the fabric's own
//!    baseline (binomial tests for loss and failed dials against the
//!    background rates; a robust median/MAD baseline per path class for RTT).
//! 2. [`topology`]: the pair × component path matrix from the DESIGN path
//!    model (`skeletonhunter_common::topology::path`), with components that no
//!    observed pair can tell apart merged into one column.
//! 3. [`tomography`]: a non-positive Lasso (coordinate descent) per symptom
//!    selects candidates, a refit without penalty removes the shrinkage, and a
//!    one-sided likelihood-ratio test plus a coverage test per candidate turn
//!    estimates into blame or clear.
//!
//! Everything here is pure; I/O lives in `main.rs`, [`csv`] and the online
//! loop.

pub mod alertmanager;
pub mod bench;
pub mod confirm;
pub mod csv;
pub mod detect;
pub mod prometheus;
pub mod rules;
pub mod run;
pub mod serve;
pub mod sim;
pub mod stats;
pub mod tomography;
pub mod topology;
pub mod voting;

use serde::{Deserialize, Serialize};
use skeletonhunter_common::topology::{Component, Identity, Kind};

/// Aggregated probe results of one (src, dst) pair over the analysis window.
///
/// Counts are `f64` so that PromQL `increase()` results (which extrapolate)
/// can be used as they come; the CSV path fills whole numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairStats {
    /// Prober side (its `node` id must be non-empty).
    pub src: Identity,
    /// Responder side.
    pub dst: Identity,
    /// Probe rounds attempted (CSV rows; online: dial attempts in the window).
    pub rounds: f64,
    /// Rounds whose dial / connection failed (CSV `dial` != `success`;
    /// online: increase of `skeletonhunter_probe_dial_failures_total`).
    pub failed_dials: f64,
    /// Packets sent in connected rounds (online: increase of
    /// `skeletonhunter_probe_sent_total`).
    pub sent: f64,
    /// Packets of those lost (online: increase of
    /// `skeletonhunter_probe_lost_total`).
    pub lost: f64,
    /// Typical RTT in seconds (CSV: median of the rounds' `latency`; online:
    /// `histogram_quantile(0.5, ...)` of the RTT histogram); `None` when no
    /// reply came back.
    pub rtt_seconds: Option<f64>,
    /// How many RTT samples `rtt_seconds` summarizes (0 when none).
    pub rtt_samples: f64,
    /// Router addresses traced on this pair's path (online: from
    /// `skeletonhunter_path_hop_info`); each joins the pair's path as a `hop`
    /// component. Empty when the pair was not traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<String>,
}

/// Engine tuning. Defaults are what the benchmark is measured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Family-wise significance level for blaming a component; divided by the
    /// number of candidate columns (Bonferroni) before use.
    pub alpha: f64,
    /// Family-wise significance level for calling a single pair anomalous;
    /// divided by the number of pairs before use.
    pub pair_alpha: f64,
    /// Per-pair level used when counting which of a candidate's pairs show
    /// its symptom (coverage test); lenient on purpose.
    pub coverage_alpha: f64,
    /// Floor for the estimated background packet loss rate.
    pub min_background_loss: f64,
    /// Floor for the estimated background dial failure rate.
    pub min_background_dial_failure: f64,
    /// Ceiling for both background rates: when most of a (small) fabric
    /// fails, that is not background.
    pub max_background_rate: f64,
    /// Floor for the latency noise scale (seconds), so a perfectly quiet
    /// fabric does not flag nanosecond jitter.
    pub min_latency_scale_seconds: f64,
    /// Smallest excess RTT (seconds) worth reporting, absolute: a pair or a
    /// component is slow only when it adds at least this much (and at least
    /// `min_latency_excess_ratio` of its path class's baseline RTT). The
    /// test stays statistical; this is the practical effect size below which
    /// a significant shift does not matter. The default (2 µs) suits RoCE
    /// fabrics, where +10 µs already costs training speed; software paths
    /// (veth, virtual switches) wander by tens of µs and need far more.
    pub min_latency_excess_seconds: f64,
    /// Smallest excess RTT worth reporting, relative to the healthy baseline
    /// RTT of the pair's path class (0.25 = a quarter of the baseline).
    pub min_latency_excess_ratio: f64,
    /// A pair's RTT counts only when summarized from at least this many
    /// samples (a median of fewer is not robust to one delayed reply).
    pub min_latency_samples: f64,
    /// Lasso penalty, relative to the largest useful penalty `lambda_max`.
    pub lambda_ratio: f64,
    /// A component is blamed only when at least this many of its pairs show
    /// the symptom (one bad pair is indistinguishable from pair noise).
    pub min_pairs: usize,
    /// Non-ECMP components: observed coverage must reach this share of the
    /// coverage the fitted fault predicts.
    pub min_coverage_ratio: f64,
    /// Spines (ECMP: a fault may hit only some flows): smallest fraction of
    /// their pairs that must show the symptom.
    pub ecmp_min_fraction: f64,
    /// `unreachable` means (nearly) nothing gets through: a component blamed
    /// for loss is `unreachable` when the packet loss it adds reaches this
    /// share, and `loss` below it even when the dial test blames it too.
    pub unreachable_min_loss: f64,
    /// Coordinate-descent sweeps at most.
    pub max_sweeps: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            alpha: 1e-3,
            pair_alpha: 1e-2,
            coverage_alpha: 1e-2,
            min_background_loss: 1e-5,
            min_background_dial_failure: 1e-4,
            max_background_rate: 0.01,
            min_latency_scale_seconds: 0.5e-6,
            min_latency_excess_seconds: 2e-6,
            min_latency_excess_ratio: 0.1,
            unreachable_min_loss: 0.9,
            min_latency_samples: 3.0,
            lambda_ratio: 0.05,
            min_pairs: 2,
            min_coverage_ratio: 0.5,
            ecmp_min_fraction: 0.08,
            max_sweeps: 200,
        }
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
    /// class's baseline RTT (default 0.1; the larger of the two minimums applies).
    #[arg(long, value_parser = parse_ratio, value_name = "RATIO")]
    pub min_latency_excess_ratio: Option<f64>,
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
        c
    }
}

/// Parse a small duration in seconds: `2us` (or `2µs`), `500ns`, `0.2ms`,
/// `1s`, or plain seconds (`2e-6`). Zero is allowed (no minimum).
pub fn parse_latency(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
    ]
    .into_iter()
    .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n, scale)))
    .unwrap_or((t, 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(format!(
            "invalid latency {s:?}: expected a non-negative number with an optional unit ns, us, ms or s (e.g. 2us)"
        )),
    }
}

/// Parse a non-negative finite ratio.
pub fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "invalid ratio {s:?}: expected a non-negative number (e.g. 0.5)"
        )),
    }
}

/// The three symptoms of DESIGN.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Symptom {
    Loss,
    Unreachable,
    Latency,
}

impl Symptom {
    pub const ALL: [Symptom; 3] = [Symptom::Loss, Symptom::Unreachable, Symptom::Latency];

    pub fn as_str(self) -> &'static str {
        match self {
            Symptom::Loss => "loss",
            Symptom::Unreachable => "unreachable",
            Symptom::Latency => "latency",
        }
    }
}

impl std::fmt::Display for Symptom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One blamed component, as in the DESIGN `analyze` JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: Kind,
    pub id: String,
    /// Estimated failure probability in [0, 1]: loss rate for `loss`,
    /// share of failed dials for `unreachable`, share of the RTT due to the
    /// component for `latency`.
    pub score: f64,
    /// One-sided p-value of "this component adds nothing" (before the
    /// Bonferroni correction; compare with `alpha / candidates`).
    pub p_value: f64,
    pub symptom: Symptom,
    /// Anomalous pairs crossing the component that it explains.
    pub pairs: usize,
    /// Components no observed pair can tell apart from this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equivalent: Vec<Component>,
    /// Indices (into the `pairs` given to [`analyze`]) of the anomalous
    /// pairs the fault explains; not serialized. The online loop uses them
    /// to tell a new fault from leftovers of one that just cleared.
    #[serde(skip)]
    pub hit_pairs: Vec<usize>,
}

impl Fault {
    pub fn component(&self) -> Component {
        Component::new(self.kind, self.id.clone())
    }
}

/// A candidate the Lasso selected, blamed or cleared; the online loop turns
/// these into `skeletonhunter_component_blame` / `_faulty`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blame {
    pub component: Component,
    pub symptom: Symptom,
    pub score: f64,
    pub p_value: f64,
    pub faulty: bool,
}

/// The `analyze` output. Serializes exactly to the DESIGN JSON; `blame` is
/// for the online loop and is not serialized.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Most-blamed first; empty when healthy.
    pub faults: Vec<Fault>,
    pub pairs_observed: usize,
    pub pairs_anomalous: usize,
    #[serde(skip)]
    pub blame: Vec<Blame>,
}

/// Run detection and localization over one window of pair aggregates.
///
/// Pairs with the same (src node, dst node) are expected at most once; pairs
/// with an empty src or dst node id, or without any round, are ignored.
pub fn analyze(pairs: &[PairStats], config: &Config) -> Report {
    analyze_timed(pairs, config).0
}

/// Wall-clock split of one [`analyze`] call (for the benchmark).
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    pub matrix: std::time::Duration,
    pub detect: std::time::Duration,
    pub localize: std::time::Duration,
}

/// [`analyze`], also returning how long each stage took.
pub fn analyze_timed(pairs: &[PairStats], config: &Config) -> (Report, Timings) {
    let t0 = std::time::Instant::now();
    let (index, usable): (Vec<usize>, Vec<&PairStats>) = pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.src.node.is_empty() && !p.dst.node.is_empty() && p.rounds > 0.0)
        .unzip();
    let matrix = topology::PathMatrix::build(&usable);
    let t1 = std::time::Instant::now();
    let evidence = detect::detect(&usable, &matrix, config);
    let t2 = std::time::Instant::now();
    let mut report = tomography::localize(&matrix, &evidence, config);
    for f in &mut report.faults {
        for i in &mut f.hit_pairs {
            *i = index[*i];
        }
    }
    report.pairs_observed = usable.len();
    report.pairs_anomalous = evidence.anomalous_pairs();
    let t3 = std::time::Instant::now();
    (
        report,
        Timings {
            matrix: t1 - t0,
            detect: t2 - t1,
            localize: t3 - t2,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_serializes_to_the_design_json() {
        let report = Report {
            faults: vec![Fault {
                kind: Kind::Tor,
                id: "asw-1".into(),
                score: 0.5,
                p_value: 1e-9,
                symptom: Symptom::Loss,
                pairs: 17,
                equivalent: vec![Component::new(Kind::Nic, "10.0.3.1")],
                hit_pairs: vec![3, 4],
            }],
            pairs_observed: 1234,
            pairs_anomalous: 40,
            blame: vec![Blame {
                component: Component::new(Kind::Tor, "asw-1"),
                symptom: Symptom::Loss,
                score: 0.5,
                p_value: 1e-9,
                faulty: true,
            }],
        };
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "faults": [{"kind": "tor", "id": "asw-1", "score": 0.5, "p_value": 1e-9,
                            "symptom": "loss", "pairs": 17,
                            "equivalent": [{"kind": "nic", "id": "10.0.3.1"}]}],
                "pairs_observed": 1234, "pairs_anomalous": 40
            })
        );
        // No equivalent: the key is left out.
        let mut r = report.clone();
        r.faults[0].equivalent.clear();
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["faults"][0].get("equivalent").is_none());
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
            let e = parse_latency(bad).unwrap_err();
            assert!(e.contains("invalid latency"), "{bad}: {e}");
        }
        assert_eq!(parse_ratio("0.5").unwrap(), 0.5);
        assert!(parse_ratio("-0.5").is_err() && parse_ratio("NaN").is_err());
        let c = EngineArgs {
            min_latency_excess: Some(2e-4),
            min_latency_excess_ratio: None,
        }
        .config();
        assert_eq!(c.min_latency_excess_seconds, 2e-4);
        assert_eq!(
            c.min_latency_excess_ratio,
            Config::default().min_latency_excess_ratio
        );
    }

    #[test]
    fn unusable_pairs_are_ignored() {
        let good = PairStats {
            src: Identity {
                node: "a".into(),
                ..Default::default()
            },
            dst: Identity {
                node: "b".into(),
                ..Default::default()
            },
            rounds: 3.0,
            sent: 300.0,
            ..Default::default()
        };
        let no_rounds = PairStats {
            rounds: 0.0,
            ..good.clone()
        };
        let no_id = PairStats {
            src: Identity::default(),
            ..good.clone()
        };
        let r = analyze(&[good, no_rounds, no_id], &Config::default());
        assert_eq!(r.pairs_observed, 1);
        assert!(r.faults.is_empty());
    }

    fn endpoint(node: &str, tor: &str, spine: &str) -> Identity {
        Identity {
            node: node.into(),
            nic: format!("nic-{node}"),
            host: format!("host-{node}"),
            tor: tor.into(),
            spine: spine.into(),
            ..Default::default()
        }
    }

    fn probed(src: &Identity, dst: &Identity, lost: f64, hops: &[&str]) -> PairStats {
        PairStats {
            src: src.clone(),
            dst: dst.clone(),
            rounds: 10.0,
            sent: 1000.0,
            lost,
            hops: hops.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        }
    }

    fn named(r: &Report) -> Vec<String> {
        r.faults
            .iter()
            .map(|f| format!("{}:{}", f.component(), f.symptom.as_str()))
            .collect()
    }

    /// ToR t1 under spine s1 and t2 under s2: every cross pair crosses both
    /// spines, so labels cannot tell them apart. The traces show two routers
    /// (ECMP) and only the pairs through 10.0.0.1 lose packets: that router
    /// is blamed, not a spine.
    #[test]
    fn traced_hops_single_out_the_router_the_lossy_pairs_cross() {
        let a: Vec<Identity> = (0..4)
            .map(|i| endpoint(&format!("a{i}"), "t1", "s1"))
            .collect();
        let b: Vec<Identity> = (0..4)
            .map(|i| endpoint(&format!("b{i}"), "t2", "s2"))
            .collect();
        let mut pairs = Vec::new();
        for i in 0..4 {
            pairs.push(probed(&a[i], &a[(i + 1) % 4], 0.0, &[]));
            pairs.push(probed(&b[i], &b[(i + 1) % 4], 0.0, &[]));
            for (j, bj) in b.iter().enumerate() {
                let (router, lost) = if (i + j) % 2 == 0 {
                    ("10.0.0.1", 200.0)
                } else {
                    ("10.0.0.2", 0.0)
                };
                pairs.push(probed(&a[i], bj, lost, &["10.0.1.1", router]));
            }
        }
        let r = analyze(&pairs, &Config::default());
        assert_eq!(named(&r), vec!["hop/10.0.0.1:loss"]);
        let f = &r.faults[0];
        assert!((f.score - 0.2).abs() < 0.05, "{}", f.score);
        assert_eq!(f.pairs, 8);
        assert!(f.equivalent.is_empty(), "{:?}", f.equivalent);

        // Without the traces the spines are one column (s1 reported, s2
        // equivalent) and no hop can be named.
        for p in &mut pairs {
            p.hops.clear();
        }
        let r = analyze(&pairs, &Config::default());
        assert!(r.faults.iter().all(|f| f.kind != Kind::Hop));
        let m = topology::PathMatrix::build(&pairs.iter().collect::<Vec<_>>());
        let j = m.find(&Component::new(Kind::Spine, "s2")).unwrap();
        assert_eq!(m.columns[j], Component::new(Kind::Spine, "s1"));
    }

    /// A hop seen on exactly the pairs crossing a ToR (its own address) is
    /// indistinguishable from it: the ToR is reported, the hop listed.
    #[test]
    fn a_hop_that_always_goes_with_a_tor_is_listed_as_its_equivalent() {
        let tors = ["t1", "t2", "t3"];
        let nodes: Vec<Identity> = (0..9)
            .map(|i| endpoint(&format!("n{i}"), tors[i / 3], "s1"))
            .collect();
        let tor_hop = |t: &str| format!("10.1.0.{}", &t[1..]);
        let mut pairs = Vec::new();
        for i in 0..9 {
            for j in i + 1..9 {
                let (x, y) = (&nodes[i], &nodes[j]);
                let mut hops = vec![tor_hop(&x.tor)];
                if y.tor != x.tor {
                    hops.push(tor_hop(&y.tor));
                }
                let lost = if x.tor == "t1" || y.tor == "t1" {
                    150.0
                } else {
                    0.0
                };
                let hops: Vec<&str> = hops.iter().map(String::as_str).collect();
                pairs.push(probed(x, y, lost, &hops));
            }
        }
        let r = analyze(&pairs, &Config::default());
        assert_eq!(named(&r), vec!["tor/t1:loss"]);
        assert_eq!(
            r.faults[0].equivalent,
            vec![Component::new(Kind::Hop, "10.1.0.1")]
        );
    }
}
