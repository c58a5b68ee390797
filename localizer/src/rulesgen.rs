//! Recording rules generated for the topology the localizer sees.
//!
//! Per-component aggregates need to know which probe pairs cross a
//! component, and that is topology: the exporters' `skeletonhunter_node_info`
//! says which nodes sit under which ToR, spine and tenant, while probe series
//! carry only `src_node` / `dst_node`. Rather than asking Prometheus to join
//! on every evaluation, `skeletonhunter-localizer rules` resolves the
//! membership once and writes plain label matchers, following the shared path
//! model (`skeletonhunter_common::topology::path`):
//!
//! - a ToR carries every pair with an endpoint beneath it;
//! - a spine carries the pairs that leave one of its ToRs (one endpoint
//!   beneath the ToR, the other not);
//! - a tenant's aggregate covers pairs with both endpoints in the tenant.
//!
//! Names follow `level:metric:operation`, e.g.
//! `tor:skeletonhunter_probe_loss:ratio_rate1m{tor="asw-1", protocol="udp"}`,
//! and match the join-based `rules/pair-detail/skeletonhunter.aggregates.yml`
//! series for series (same names, labels and pair sets; part of the opt-in
//! per-pair detail): load one of the two files, not both. Re-run the command when the topology changes (new ToRs, new jobs).

use crate::input::histograms::RttForm;
use crate::input::promql::{quote_label_value, regex_escape};
use skeletonhunter_common::duration::{self, DurationError};
use skeletonhunter_common::topology::{Identity, Kind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Why options were refused; each names its flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RulesError {
    /// `--window` is not a PromQL duration.
    #[error("--window: {0}")]
    Window(DurationError),
    /// `--evaluation-interval` is not a PromQL duration.
    #[error("--evaluation-interval: {0}")]
    Interval(DurationError),
    /// `--matchers` with braces or a newline.
    #[error("--matchers {0:?}: give label matchers without braces, e.g. job=\"skeletonhunter-exporter\"")]
    Matchers(String),
    /// A quantile outside (0, 1).
    #[error("--quantile {0}: must be strictly between 0 and 1")]
    Quantile(f64),
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct RulesOptions {
    /// PromQL range of the rates, e.g. `1m`.
    pub window: String,
    /// Evaluation interval of the groups (`None`: Prometheus' global one).
    pub interval: Option<String>,
    /// RTT quantiles to record (each becomes `p<100 q>`).
    pub quantiles: Vec<f64>,
    /// Extra label matchers for every selector (e.g. `job="x"`).
    pub matchers: Option<String>,
    /// Which RTT histogram series the quantile rules read.
    pub histograms: RttForm,
}

impl Default for RulesOptions {
    fn default() -> Self {
        RulesOptions {
            window: "1m".into(),
            interval: None,
            quantiles: vec![0.5, 0.9, 0.99],
            matchers: None,
            histograms: RttForm::Classic,
        }
    }
}

/// The series selector of one aggregate: a union of label-matcher sets.
#[derive(Debug, Clone, PartialEq)]
struct Selector {
    /// Each entry is one matcher list, e.g. `src_node=~"a|b",dst_node!~"a|b"`.
    alternatives: Vec<String>,
}

fn node_regex(nodes: &BTreeSet<&str>) -> String {
    let parts: Vec<String> = nodes.iter().map(|n| regex_escape(n)).collect();
    quote_label_value(&parts.join("|"))
}

impl Selector {
    /// Prefix every alternative with `matchers` (none when empty).
    fn with_matchers(&self, matchers: Option<&str>) -> Selector {
        match matchers.map(str::trim).filter(|m| !m.is_empty()) {
            None => self.clone(),
            Some(m) => Selector {
                alternatives: self
                    .alternatives
                    .iter()
                    .map(|a| format!("{m},{a}"))
                    .collect(),
            },
        }
    }

    /// `or` of `rate(metric{...}[window])` over the alternatives. `or` keeps a
    /// series once even when several alternatives match it.
    fn rates(&self, metric: &str, window: &str) -> String {
        let parts: Vec<String> = self
            .alternatives
            .iter()
            .map(|m| format!("rate({metric}{{{m}}}[{window}])"))
            .collect();
        parts.join(" or ")
    }
}

/// Nodes grouped by the id of `kind` (unknown ids skipped).
fn members(nodes: &[Identity], kind: Kind) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut out: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for n in nodes {
        let id = n.get(kind);
        if !id.is_empty() && !n.node.is_empty() {
            out.entry(id).or_default().insert(n.node.as_str());
        }
    }
    out
}

fn tor_selector(nodes: &BTreeSet<&str>) -> Selector {
    let r = node_regex(nodes);
    Selector {
        alternatives: vec![format!("src_node=~{r}"), format!("dst_node=~{r}")],
    }
}

/// Pairs leaving any ToR under the spine.
fn spine_selector(tors: &BTreeMap<&str, BTreeSet<&str>>) -> Selector {
    let mut alternatives = Vec::new();
    for nodes in tors.values() {
        let r = node_regex(nodes);
        alternatives.push(format!("src_node=~{r},dst_node!~{r}"));
        alternatives.push(format!("dst_node=~{r},src_node!~{r}"));
    }
    Selector { alternatives }
}

fn tenant_selector(nodes: &BTreeSet<&str>) -> Selector {
    let r = node_regex(nodes);
    Selector {
        alternatives: vec![format!("src_node=~{r},dst_node=~{r}")],
    }
}

/// One recording rule.
struct Rule {
    record: String,
    expr: String,
    labels: Vec<(String, String)>,
}

/// YAML double-quoted scalar (JSON string syntax is a subset of it).
fn yq(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn quantile_name(q: f64) -> String {
    // 0.5 -> p50, 0.99 -> p99, 0.999 -> p999.
    let digits = format!("{q}");
    let frac = digits.trim_start_matches("0.").trim_start_matches('.');
    if frac.len() == 1 {
        format!("p{frac}0")
    } else {
        format!("p{frac}")
    }
}

fn rules_for(level: &str, id: &str, sel: &Selector, opts: &RulesOptions) -> Vec<Rule> {
    let sel = &sel.with_matchers(opts.matchers.as_deref());
    let w = &opts.window;
    let labels = vec![(level.to_string(), id.to_string())];
    let mut out = Vec::new();
    for (what, metric) in [
        ("sent", "skeletonhunter_probe_sent_total"),
        ("lost", "skeletonhunter_probe_lost_total"),
    ] {
        out.push(Rule {
            record: format!("{level}:skeletonhunter_probe_{what}:rate{w}"),
            expr: format!("sum by (protocol) ({})", sel.rates(metric, w)),
            labels: labels.clone(),
        });
    }
    out.push(Rule {
        record: format!("{level}:skeletonhunter_probe_loss:ratio_rate{w}"),
        expr: format!(
            "sum by (protocol) ({})\n/\nsum by (protocol) ({})",
            sel.rates("skeletonhunter_probe_lost_total", w),
            sel.rates("skeletonhunter_probe_sent_total", w)
        ),
        labels: labels.clone(),
    });
    for &q in &opts.quantiles {
        out.push(Rule {
            record: format!(
                "{level}:skeletonhunter_probe_rtt_seconds:{}_rate{w}",
                quantile_name(q)
            ),
            expr: rtt_quantile(q, sel, w, opts.histograms),
            labels: labels.clone(),
        });
    }
    out
}

/// The `q` quantile of RTT over `sel` in `form`.
fn rtt_quantile(q: f64, sel: &Selector, w: &str, form: RttForm) -> String {
    let classic = format!(
        "histogram_quantile({q}, sum by (protocol, le) ({}))",
        sel.rates("skeletonhunter_probe_rtt_seconds_bucket", w)
    );
    let native = format!(
        "histogram_quantile({q}, sum by (protocol) ({}))",
        sel.rates("skeletonhunter_probe_rtt_seconds", w)
    );
    match form {
        RttForm::Classic => classic,
        RttForm::Native => native,
        RttForm::NativeOrClassic => format!("{native}\nor\n{classic}"),
    }
}

/// Refuse options that would give an invalid file, before any network.
pub fn check(opts: &RulesOptions) -> Result<(), RulesError> {
    duration::parse_promql(&opts.window).map_err(RulesError::Window)?;
    if let Some(i) = &opts.interval {
        duration::parse_promql(i).map_err(RulesError::Interval)?;
    }
    if let Some(m) = &opts.matchers {
        if m.contains('{') || m.contains('}') || m.contains('\n') {
            return Err(RulesError::Matchers(m.clone()));
        }
    }
    if let Some(&q) = opts.quantiles.iter().find(|&&q| !(q > 0.0 && q < 1.0)) {
        return Err(RulesError::Quantile(q));
    }
    Ok(())
}

/// The rule group of `level` (`tor`, `spine`, `tenant`): each member id's
/// rules, over the series `selector` picks from what the id holds.
fn group<M>(
    level: &str,
    members: &BTreeMap<&str, M>,
    selector: impl Fn(&M) -> Selector,
    opts: &RulesOptions,
) -> (String, Vec<Rule>) {
    let rules = members
        .iter()
        .flat_map(|(id, m)| rules_for(level, id, &selector(m), opts))
        .collect();
    (format!("skeletonhunter_generated_{level}"), rules)
}

/// Generate the rule file for `nodes` (the identities seen in
/// `skeletonhunter_node_info`). Levels without any known id are left out;
/// an empty topology gives a valid file with no groups.
pub fn generate(nodes: &[Identity], opts: &RulesOptions) -> Result<String, RulesError> {
    check(opts)?;
    let mut groups: Vec<(String, Vec<Rule>)> = Vec::new();

    let tors = members(nodes, Kind::Tor);
    groups.push(group("tor", &tors, tor_selector, opts));

    // Spine -> its ToRs -> their nodes.
    let mut spines: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for n in nodes {
        if !n.spine.is_empty() && !n.tor.is_empty() && !n.node.is_empty() {
            spines
                .entry(n.spine.as_str())
                .or_default()
                .entry(n.tor.as_str())
                .or_default()
                .insert(n.node.as_str());
        }
    }
    groups.push(group("spine", &spines, spine_selector, opts));

    let tenants = members(nodes, Kind::Tenant);
    groups.push(group("tenant", &tenants, tenant_selector, opts));

    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Generated by `skeletonhunter-localizer rules` for {} node(s), {} ToR(s), {} spine(s), {} tenant(s).\n# Re-generate when the topology changes; do not edit by hand.",
        nodes.iter().filter(|n| !n.node.is_empty()).count(),
        tors.len(),
        spines.len(),
        tenants.len()
    );
    let groups: Vec<_> = groups.into_iter().filter(|(_, r)| !r.is_empty()).collect();
    if groups.is_empty() {
        out.push_str("groups: []\n");
        return Ok(out);
    }
    out.push_str("groups:\n");
    for (name, rules) in groups {
        let _ = writeln!(out, "  - name: {}", yq(&name));
        if let Some(i) = &opts.interval {
            let _ = writeln!(out, "    interval: {i}");
        }
        out.push_str("    rules:\n");
        for r in rules {
            let _ = writeln!(out, "      - record: {}", yq(&r.record));
            // A literal block keeps PromQL readable: no YAML escaping inside
            // (label values in the expression are PromQL-quoted, so they
            // contain no raw newline).
            out.push_str("        expr: |-\n");
            for line in r.expr.lines() {
                let _ = writeln!(out, "          {line}");
            }
            if !r.labels.is_empty() {
                out.push_str("        labels:\n");
                for (k, v) in &r.labels {
                    let _ = writeln!(out, "          {k}: {}", yq(v));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(node: &str, tor: &str, spine: &str, tenant: &str) -> Identity {
        Identity {
            node: node.into(),
            tor: tor.into(),
            spine: spine.into(),
            tenant: tenant.into(),
            ..Default::default()
        }
    }

    #[test]
    fn durations_are_checked() {
        let with = |w: &str| RulesOptions {
            window: w.into(),
            ..Default::default()
        };
        for ok in ["1m", "30s", "1h30m", "500ms"] {
            check(&with(ok)).unwrap();
        }
        for bad in ["", "1", "m", "1x", "1.5m", "-1m"] {
            assert!(check(&with(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn quantile_names() {
        assert_eq!(quantile_name(0.5), "p50");
        assert_eq!(quantile_name(0.99), "p99");
        assert_eq!(quantile_name(0.999), "p999");
        assert_eq!(quantile_name(0.9), "p90");
    }

    #[test]
    fn generates_per_tor_spine_tenant_rules() {
        let nodes = [
            n("a", "t1", "s1", "job"),
            n("b", "t1", "s1", "job"),
            n("c", "t2", "s1", "job"),
            n("d", "t2", "s1", ""),
        ];
        let y = generate(&nodes, &RulesOptions::default()).unwrap();
        assert!(
            y.contains("- record: \"tor:skeletonhunter_probe_loss:ratio_rate1m\""),
            "{y}"
        );
        assert!(y.contains("tor: \"t1\"") && y.contains("tor: \"t2\""));
        assert!(y.contains("spine: \"s1\"") && y.contains("tenant: \"job\""));
        assert!(y.contains("spine:skeletonhunter_probe_rtt_seconds:p99_rate1m"));
        // The ToR t1 selector names exactly its nodes.
        assert!(
            y.contains(r#"rate(skeletonhunter_probe_lost_total{src_node=~"a|b"}[1m])"#),
            "{y}"
        );
        // The spine carries pairs leaving t2 and excludes those inside it.
        assert!(y.contains(r#"src_node=~"c|d",dst_node!~"c|d""#), "{y}");
        // The tenant covers pairs with both ends inside.
        assert!(y.contains(r#"src_node=~"a|b|c",dst_node=~"a|b|c""#), "{y}");
    }

    #[test]
    fn node_names_are_escaped_for_regex_and_yaml() {
        let nodes = [n("10.0.0.1", "t\"1", "", "")];
        let y = generate(&nodes, &RulesOptions::default()).unwrap();
        // Regex-escaped dot, then PromQL-escaped backslash.
        assert!(y.contains(r#"src_node=~"10\\.0\\.0\\.1""#), "{y}");
        assert!(y.contains(r#"tor: "t\"1""#), "{y}");
        assert!(!y.contains("skeletonhunter_generated_spine"));
    }

    #[test]
    fn matchers_reach_every_selector() {
        let opts = RulesOptions {
            matchers: Some("job=\"sh\"".into()),
            ..Default::default()
        };
        let y = generate(&[n("a", "t1", "s1", "")], &opts).unwrap();
        assert!(y.contains(r#"{job="sh",src_node=~"a"}"#), "{y}");
        assert!(!y.contains("{src_node"), "{y}");
        let bad = RulesOptions {
            matchers: Some("{job=\"sh\"}".into()),
            ..Default::default()
        };
        assert!(generate(&[], &bad)
            .unwrap_err()
            .to_string()
            .contains("--matchers"));
    }

    #[test]
    fn rtt_rules_read_the_histograms_asked_for() {
        let nodes = [n("a", "t1", "s1", ""), n("b", "t2", "s1", "")];
        let with = |histograms| RulesOptions {
            histograms,
            quantiles: vec![0.5],
            ..Default::default()
        };
        let classic = generate(&nodes, &with(RttForm::Classic)).unwrap();
        assert_eq!(
            classic,
            generate(
                &nodes,
                &RulesOptions {
                    quantiles: vec![0.5],
                    ..Default::default()
                }
            )
            .unwrap()
        );
        assert!(
            classic
                .contains("sum by (protocol, le) (rate(skeletonhunter_probe_rtt_seconds_bucket{"),
            "{classic}"
        );
        let native = generate(&nodes, &with(RttForm::Native)).unwrap();
        assert!(
            native.contains(
                "histogram_quantile(0.5, sum by (protocol) (rate(skeletonhunter_probe_rtt_seconds{"
            ),
            "{native}"
        );
        assert!(!native.contains("_bucket"), "{native}");
        let both = generate(&nodes, &with(RttForm::NativeOrClassic)).unwrap();
        assert!(
            both.contains("rate(skeletonhunter_probe_rtt_seconds{"),
            "{both}"
        );
        assert!(
            both.contains("rate(skeletonhunter_probe_rtt_seconds_bucket{"),
            "{both}"
        );
    }

    #[test]
    fn empty_topology_gives_an_empty_valid_file() {
        let y = generate(&[], &RulesOptions::default()).unwrap();
        assert!(y.trim_end().ends_with("groups: []"), "{y}");
    }

    #[test]
    fn bad_options_are_rejected() {
        let mut o = RulesOptions {
            window: "5x".into(),
            ..Default::default()
        };
        assert!(generate(&[], &o)
            .unwrap_err()
            .to_string()
            .contains("--window"));
        o.window = "1m".into();
        o.quantiles = vec![1.5];
        assert!(generate(&[], &o).unwrap_err().to_string().contains("1.5"));
    }
}
