//! The host-stack screen: a busy host is not a broken network.
//!
//! A starved (CPU-throttled) or paused exporter sends late, reads its
//! answers late and echoes its peers' requests late. Kernel timestamps
//! keep most of that out of the RTT, but not all of it (an answer read
//! after the timeout is a lost probe; a TCP dial is timed in user space),
//! and what is left lands on every pair of that node: tomography would
//! blame its NIC, or the ToR when two such hosts share one. The exporter
//! measures its own stack's delay (`skeletonhunter_host_stack_delay_seconds`)
//! and how long its CPU quota held it back
//! (`skeletonhunter_host_cpu_throttled_seconds_total`), so the localizer
//! can say where that evidence comes from instead.
//!
//! Rule, per node with evidence: it is *busy* when its delay reaches
//! [`Config::min_host_stack_seconds`] and [`Config::host_stack_ratio`]
//! times the fabric's typical delay (the median over nodes with evidence;
//! a fabric slow everywhere is not one busy host), or when its quota held
//! it back at least [`Config::min_host_throttled_ratio`] of the window (a
//! quota is the host's own; on a loaded machine a starved exporter's
//! delays need not stand out, its throttling does). Every pair with a busy
//! end is explained by that end's stack and kept out of the link stage and
//! the tomography, so it is never NIC, ToR, spine or link evidence. Each
//! host holding a busy node gets one `host_stack` verdict (the node
//! itself when its identity names no host): score `1 - typical / delay`,
//! the share of its delay above the fabric's (as a latency score is the
//! share of the RTT due to the component), or the throttled share, the
//! larger; p-value 0, since the evidence is the host's own measurement
//! rather than an inference; `pairs` and `hit_pairs` the screened pairs
//! that were anomalous.
//!
//! A noisy host that is also a real fault (a bad NIC on a starved host)
//! is reported as `host_stack`: the host is named either way, and no
//! component beyond it is blamed from evidence its own stack spoils.
//! Pure: plain data in, plain data out.

use super::model::{Blame, Config, Fault, HostStack, PairStats, Symptom};
use super::stats::median;
use skeletonhunter_common::topology::{Component, Identity, Kind};
use std::collections::BTreeMap;

/// What the screen decided over one window's pairs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Screen {
    /// Per pair (indexed like the pairs given): explained by an end's
    /// host stack, so kept out of the network's evidence.
    pub explained: Vec<bool>,
    /// One `host_stack` fault per host with a noisy node; `hit_pairs`
    /// index the pairs given.
    pub faults: Vec<Fault>,
    /// The same verdicts as blame.
    pub blame: Vec<Blame>,
}

/// The component a noisy node's verdict names: its host, or the node when
/// the identity has no host.
fn host_of(id: &Identity) -> Component {
    if id.host.is_empty() {
        Component::new(Kind::Node, id.node.clone())
    } else {
        Component::new(Kind::Host, id.host.clone())
    }
}

/// The busy nodes of `stack` among the ends of `pairs`, each with its
/// verdict's score: the share of its delay above the fabric's typical one
/// (busy by delay), or the share of the window its CPU quota held it
/// back (busy by throttling), the larger when both.
pub fn busy_nodes(
    pairs: &[&PairStats],
    stack: &HostStack,
    config: &Config,
) -> BTreeMap<String, f64> {
    let sane = |m: &BTreeMap<String, f64>, node: &str| {
        m.get(node).copied().filter(|v| v.is_finite() && *v >= 0.0)
    };
    let mut seen: BTreeMap<&str, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for p in pairs {
        for end in [&p.src.node, &p.dst.node] {
            let delay = sane(&stack.delay_seconds, end);
            let throttled = sane(&stack.throttled_ratio, end);
            if delay.is_some() || throttled.is_some() {
                seen.insert(end, (delay, throttled));
            }
        }
    }
    let mut delays: Vec<f64> = seen.values().filter_map(|v| v.0).collect();
    let typical = if delays.is_empty() {
        0.0
    } else {
        median(&mut delays)
    };
    let mut busy = BTreeMap::new();
    for (node, (delay, throttled)) in seen {
        let by_delay = delay
            .filter(|d| {
                *d >= config.min_host_stack_seconds && *d >= config.host_stack_ratio * typical
            })
            .map(|d| (1.0 - typical / d).clamp(0.0, 1.0));
        let by_quota = throttled
            .filter(|t| *t >= config.min_host_throttled_ratio)
            .map(|t| t.clamp(0.0, 1.0));
        let score = match (by_delay, by_quota) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(score) = score {
            busy.insert(node.to_string(), score);
        }
    }
    busy
}

/// Screen `pairs` (`anomalous[i]`: pair `i` shows any symptom) for the
/// `noisy` nodes found by [`busy_nodes`]; see the module docs.
pub fn screen(pairs: &[&PairStats], anomalous: &[bool], noisy: &BTreeMap<String, f64>) -> Screen {
    let mut out = Screen {
        explained: vec![false; pairs.len()],
        ..Screen::default()
    };
    if noisy.is_empty() {
        return out;
    }
    // Host -> (highest score of its busy nodes, anomalous screened pairs).
    let mut hosts: BTreeMap<Component, (f64, Vec<usize>)> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        let ends = [&p.src, &p.dst];
        for end in ends.into_iter().filter(|e| noisy.contains_key(&e.node)) {
            out.explained[i] = true;
            let entry = hosts.entry(host_of(end)).or_insert((0.0, Vec::new()));
            entry.0 = entry.0.max(noisy[&end.node]);
            if anomalous.get(i).copied().unwrap_or(false) && !entry.1.contains(&i) {
                entry.1.push(i);
            }
        }
    }
    for (component, (score, hit)) in hosts {
        out.blame.push(Blame {
            component: component.clone(),
            symptom: Symptom::HostStack,
            score,
            p_value: 0.0,
            faulty: true,
        });
        out.faults.push(Fault {
            kind: component.kind,
            id: component.id,
            score,
            p_value: 0.0,
            symptom: Symptom::HostStack,
            pairs: hit.len(),
            equivalent: Vec::new(),
            hit_pairs: hit,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen of the busy nodes `stack` shows.
    fn screen_of(
        pairs: &[&PairStats],
        anomalous: &[bool],
        stack: &HostStack,
        config: &Config,
    ) -> Screen {
        screen(pairs, anomalous, &busy_nodes(pairs, stack, config))
    }

    fn id(node: &str, host: &str) -> Identity {
        Identity {
            node: node.into(),
            host: host.into(),
            tor: "t1".into(),
            ..Default::default()
        }
    }

    fn pair(src: &str, dst: &str) -> PairStats {
        PairStats {
            src: id(src, &format!("h-{src}")),
            dst: id(dst, &format!("h-{dst}")),
            rounds: 10.0,
            sent: 100.0,
            ..Default::default()
        }
    }

    fn stack(delays: &[(&str, f64)]) -> HostStack {
        HostStack {
            delay_seconds: delays.iter().map(|(n, d)| (n.to_string(), *d)).collect(),
            ..HostStack::default()
        }
    }

    fn mesh(nodes: &[&str]) -> Vec<PairStats> {
        let mut v = Vec::new();
        for a in nodes {
            for b in nodes {
                if a != b {
                    v.push(pair(a, b));
                }
            }
        }
        v
    }

    #[test]
    fn a_noisy_node_explains_its_pairs_and_gets_a_host_verdict() {
        let pairs = mesh(&["a", "b", "c", "d"]);
        let refs: Vec<&PairStats> = pairs.iter().collect();
        // Pairs of b are anomalous, and one pair without b is too.
        let anomalous: Vec<bool> = pairs
            .iter()
            .map(|p| {
                p.src.node == "b" || p.dst.node == "b" || (p.src.node == "a" && p.dst.node == "c")
            })
            .collect();
        let s = stack(&[("a", 0.002), ("b", 0.28), ("c", 0.001), ("d", 0.003)]);
        let out = screen_of(&refs, &anomalous, &s, &Config::default());
        for (p, e) in pairs.iter().zip(&out.explained) {
            assert_eq!(*e, p.src.node == "b" || p.dst.node == "b", "{p:?}");
        }
        assert_eq!(out.faults.len(), 1);
        let f = &out.faults[0];
        assert_eq!((f.kind, f.id.as_str()), (Kind::Host, "h-b"));
        assert_eq!(f.symptom, Symptom::HostStack);
        assert_eq!(f.pairs, 6);
        assert!(f.score > 0.9 && f.score <= 1.0, "{}", f.score);
        assert!(out.blame[0].faulty);
    }

    #[test]
    fn analyze_with_keeps_a_busy_hosts_pairs_out_of_the_network_verdicts() {
        use crate::engine::pipeline::{analyze, analyze_with};
        let nodes = ["a", "b", "c", "d", "e", "f"];
        let mut pairs = mesh(&nodes);
        for p in &mut pairs {
            p.sent = 1000.0;
            p.rtt_seconds = Some(50e-6);
            p.rtt_samples = 100.0;
            if p.src.node == "b" || p.dst.node == "b" {
                p.lost = 120.0;
            }
        }
        let config = Config::default();
        let plain = analyze(&pairs, &config);
        assert!(
            !plain.faults.is_empty(),
            "the lossy node is blamed without evidence"
        );
        // No evidence: the same report.
        assert_eq!(analyze_with(&pairs, &HostStack::default(), &config), plain);
        let quiet: Vec<(&str, f64)> = nodes.iter().map(|n| (*n, 0.002)).collect();
        let mut busy = stack(&quiet);
        busy.delay_seconds.insert("b".into(), 0.3);
        let r = analyze_with(&pairs, &busy, &config);
        let found: Vec<(Kind, &str, Symptom)> = r
            .faults
            .iter()
            .map(|f| (f.kind, f.id.as_str(), f.symptom))
            .collect();
        assert_eq!(found, vec![(Kind::Host, "h-b", Symptom::HostStack)]);
        assert_eq!(r.faults[0].pairs, 10);
        assert_eq!(r.pairs_observed, pairs.len());
        assert_eq!(r.pairs_anomalous, 10);
        // hit_pairs index the pairs given.
        assert!(r.faults[0]
            .hit_pairs
            .iter()
            .all(|&i| pairs[i].src.node == "b" || pairs[i].dst.node == "b"));
    }

    #[test]
    fn a_throttled_node_is_busy_even_when_its_delays_do_not_stand_out() {
        let pairs = mesh(&["a", "b", "c"]);
        let refs: Vec<&PairStats> = pairs.iter().collect();
        // A loaded machine: every delay alike.
        let mut s = stack(&[("a", 0.04), ("b", 0.05), ("c", 0.045)]);
        s.throttled_ratio = [("a", 0.0), ("b", 0.2), ("c", 0.005)]
            .iter()
            .map(|(n, r)| (n.to_string(), *r))
            .collect();
        let out = screen_of(&refs, &[], &s, &Config::default());
        assert_eq!(out.faults.len(), 1);
        assert_eq!(out.faults[0].component(), Component::new(Kind::Host, "h-b"));
        assert!((out.faults[0].score - 0.2).abs() < 1e-12);
    }

    #[test]
    fn a_quiet_fabric_or_one_slow_everywhere_is_screened_of_nothing() {
        let pairs = mesh(&["a", "b", "c"]);
        let refs: Vec<&PairStats> = pairs.iter().collect();
        let anomalous = vec![true; pairs.len()];
        let config = Config::default();
        for s in [
            HostStack::default(),
            stack(&[("a", 0.002), ("b", 0.01), ("c", 0.003)]),
            // Every host at 200 ms: the fabric, not one host.
            stack(&[("a", 0.2), ("b", 0.21), ("c", 0.19)]),
            stack(&[("b", f64::NAN), ("a", -1.0)]),
        ] {
            let out = screen_of(&refs, &anomalous, &s, &config);
            assert!(out.faults.is_empty() && out.blame.is_empty(), "{s:?}");
            assert!(out.explained.iter().all(|e| !e));
        }
    }

    #[test]
    fn a_noisy_node_without_a_host_is_named_itself_and_unseen_nodes_count_nothing() {
        let mut pairs = mesh(&["a", "b", "c"]);
        for p in &mut pairs {
            for end in [&mut p.src, &mut p.dst] {
                if end.node == "c" {
                    end.host.clear();
                }
            }
        }
        let refs: Vec<&PairStats> = pairs.iter().collect();
        // "z" probes nobody here: it neither counts for the typical delay
        // nor gets a verdict.
        let s = stack(&[("a", 0.001), ("b", 0.001), ("c", 0.5), ("z", 9.0)]);
        let out = screen_of(&refs, &[], &s, &Config::default());
        assert_eq!(out.faults.len(), 1);
        assert_eq!(out.faults[0].component(), Component::new(Kind::Node, "c"));
        assert_eq!(out.faults[0].pairs, 0);
        assert_eq!(out.explained.iter().filter(|e| **e).count(), 4);
    }
}
