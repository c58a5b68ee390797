//! What the exporters' traces say about a pair's route: its traced router
//! hops ([`attach_hops`], from `skeletonhunter_path_hop_info`), and
//! per-path rows from the multi-flow series: the hop list
//! of each ECMP path of a pair (`skeletonhunter_path_hop_info` with a
//! `path` label, one sample per TTL) joined with the loss of the pair's
//! flows that take it (`skeletonhunter_path_loss_ratio`) and how many
//! probes that ratio is over (`skeletonhunter_path_probes`).
//!
//! Pairs without such series (old exporters, single-flow probing) get no
//! rows and are localized as before; a path whose loss or probe count is
//! missing, not finite or out of range is left out rather than guessed.

use crate::clients::prometheus::Sample;
use crate::engine::model::{PairStats, PathObs};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Highest TTL accepted from the `hop` label (IPv4 TTLs end at 255).
const MAX_TTL: u32 = 255;

/// (src node, dst node, path).
type PathKey<'a> = (&'a str, &'a str, &'a str);

fn key(s: &Sample) -> Option<PathKey<'_>> {
    let get = |k: &str| s.labels.get(k);
    let (src, dst, path) = (get("src_node")?, get("dst_node")?, get("path")?);
    (!src.is_empty() && !dst.is_empty() && !path.is_empty()).then_some((src, dst, path))
}

/// Per path, its hops in TTL order: a TTL with no sample (or an empty
/// address) is a silent hop, "".
fn hop_lists<'a>(hops: &'a [Sample]) -> HashMap<PathKey<'a>, Vec<String>> {
    let mut by_ttl: HashMap<PathKey<'a>, BTreeMap<u32, &'a str>> = HashMap::new();
    for s in hops {
        let Some(k) = key(s) else { continue };
        let ttl = s.labels.get("hop").and_then(|h| h.parse::<u32>().ok());
        let Some(ttl) = ttl.filter(|t| (1..=MAX_TTL).contains(t)) else {
            continue;
        };
        if !(s.value.is_finite() && s.value > 0.0) {
            continue;
        }
        let addr = s.labels.get("address").unwrap_or("");
        by_ttl.entry(k).or_default().insert(ttl, addr);
    }
    by_ttl
        .into_iter()
        .map(|(k, ttls)| {
            let last = ttls.keys().next_back().copied().unwrap_or(0);
            let list = (1..=last)
                .map(|t| {
                    ttls.get(&t)
                        .map_or(String::new(), std::string::ToString::to_string)
                })
                .collect();
            (k, list)
        })
        .collect()
}

fn values(samples: &[Sample]) -> HashMap<PathKey<'_>, f64> {
    samples
        .iter()
        .filter_map(|s| key(s).map(|k| (k, s.value)))
        .collect()
}

/// Set each pair's `paths` from the three path series (see the module
/// docs); none for a pair without any, so pairs kept from an earlier cycle
/// lose the paths they had. Paths are ordered by id, so a cycle's input is
/// deterministic.
pub fn attach_paths(pairs: &mut [PairStats], hops: &[Sample], loss: &[Sample], probes: &[Sample]) {
    let lists = hop_lists(hops);
    let (loss, probes) = (values(loss), values(probes));
    let mut by_pair: HashMap<(&str, &str), Vec<PathObs>> = HashMap::new();
    for (k, list) in &lists {
        let (Some(&ratio), Some(&n)) = (loss.get(k), probes.get(k)) else {
            continue;
        };
        if !(n.is_finite() && n > 0.0 && ratio.is_finite() && (0.0..=1.0).contains(&ratio)) {
            continue;
        }
        by_pair.entry((k.0, k.1)).or_default().push(PathObs {
            id: k.2.to_string(),
            hops: list.clone(),
            probes: n,
            lost: ratio * n,
        });
    }
    for p in pairs {
        match by_pair.remove(&(p.src.node.as_str(), p.dst.node.as_str())) {
            Some(mut paths) => {
                paths.sort_by(|a, b| a.id.cmp(&b.id));
                p.paths = paths;
            }
            None => p.paths.clear(),
        }
    }
}

/// Set each pair's traced hops from `skeletonhunter_path_hop_info` samples
/// (none for a pair without any: pairs kept from an earlier cycle lose
/// the hops they had). Silent hops (empty address) and the destination
/// itself (the trace's last hop, its nic or node address) are not routers
/// and are left out.
pub fn attach_hops(pairs: &mut [PairStats], hops: &[Sample]) {
    let mut by_pair: HashMap<(&str, &str), BTreeSet<&str>> = HashMap::new();
    for s in hops {
        let (Some(src), Some(dst), Some(addr)) = (
            s.labels.get("src_node"),
            s.labels.get("dst_node"),
            s.labels.get("address"),
        ) else {
            continue;
        };
        if !addr.is_empty() && s.value.is_finite() && s.value > 0.0 {
            by_pair.entry((src, dst)).or_default().insert(addr);
        }
    }
    for p in pairs {
        let Some(set) = by_pair.get(&(p.src.node.as_str(), p.dst.node.as_str())) else {
            p.hops.clear();
            continue;
        };
        p.hops = set
            .iter()
            .filter(|a| **a != p.dst.nic && **a != p.dst.node)
            .map(std::string::ToString::to_string)
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::prometheus::decode::decode_instant;
    use skeletonhunter_common::topology::Identity;

    /// What Prometheus answers to the three path queries of a cycle, as
    /// the HTTP API returns it: two ECMP paths of a -> b (the second with
    /// a silent TTL 2), one path of b -> a without a loss series, and a
    /// sample with a TTL that is not a number.
    const HOPS: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"src_node":"a","dst_node":"b","path":"1f2e3d4c","hop":"1","address":"198.18.1.1"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"1f2e3d4c","hop":"2","address":"198.19.0.2"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"1f2e3d4c","hop":"3","address":"198.19.0.9"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"99aa00bb","hop":"3","address":"198.19.1.9"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"99aa00bb","hop":"1","address":"198.18.1.1"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"99aa00bb","hop":"x","address":"10.0.0.1"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"b","dst_node":"a","path":"77777777","hop":"1","address":"198.18.2.1"},"value":[1700000000,"1"]}
    ]}}"#;
    const LOSS: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"src_node":"a","dst_node":"b","path":"1f2e3d4c"},"value":[1700000000,"1"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"99aa00bb"},"value":[1700000000,"0.02"]}
    ]}}"#;
    const PROBES: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"src_node":"a","dst_node":"b","path":"1f2e3d4c"},"value":[1700000000,"150"]},
      {"metric":{"src_node":"a","dst_node":"b","path":"99aa00bb"},"value":[1700000000,"250"]},
      {"metric":{"src_node":"b","dst_node":"a","path":"77777777"},"value":[1700000000,"100"]}
    ]}}"#;

    fn pair(src: &str, dst: &str) -> PairStats {
        let id = |n: &str| Identity {
            node: n.into(),
            ..Default::default()
        };
        PairStats {
            src: id(src),
            dst: id(dst),
            rounds: 1.0,
            ..Default::default()
        }
    }

    #[test]
    fn a_captured_response_becomes_ordered_path_rows() {
        let decode =
            |body: &str| decode_instant("http://prom/api/v1/query", 200, body.as_bytes()).unwrap();
        let mut pairs = vec![pair("a", "b"), pair("b", "a"), pair("c", "a")];
        attach_paths(&mut pairs, &decode(HOPS), &decode(LOSS), &decode(PROBES));
        let ab = &pairs[0].paths;
        assert_eq!(ab.len(), 2);
        assert_eq!(ab[0].id, "1f2e3d4c");
        assert_eq!(ab[0].hops, ["198.18.1.1", "198.19.0.2", "198.19.0.9"]);
        assert_eq!((ab[0].probes, ab[0].lost), (150.0, 150.0));
        assert_eq!(ab[1].hops, ["198.18.1.1", "", "198.19.1.9"]);
        assert!((ab[1].lost - 5.0).abs() < 1e-9);
        // No loss series for b -> a's path; nothing for c -> a.
        assert!(pairs[1].paths.is_empty() && pairs[2].paths.is_empty());
        // Pairs kept from an earlier cycle (`--pair-shards`) lose the
        // paths an answer no longer has, with or without other rows.
        attach_paths(&mut pairs, &decode(HOPS), &[], &decode(PROBES));
        assert!(pairs[0].paths.is_empty(), "no loss rows now");
        pairs[0].paths.push(PathObs::default());
        attach_paths(&mut pairs, &[], &[], &[]);
        assert!(pairs[0].paths.is_empty(), "no path rows at all");
    }

    #[test]
    fn out_of_range_values_leave_the_path_out() {
        let s = |labels: &[(&str, &str)], value: f64| Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            timestamp: 0.0,
            value,
        };
        let k = [("src_node", "a"), ("dst_node", "b"), ("path", "p")];
        let hop = s(
            &[k[0], k[1], k[2], ("hop", "1"), ("address", "10.0.0.1")],
            1.0,
        );
        for (ratio, probes) in [
            (1.5, 10.0),
            (0.1, 0.0),
            (f64::NAN, 10.0),
            (0.1, f64::INFINITY),
        ] {
            let mut pairs = vec![pair("a", "b")];
            attach_paths(
                &mut pairs,
                std::slice::from_ref(&hop),
                &[s(&k, ratio)],
                &[s(&k, probes)],
            );
            assert!(pairs[0].paths.is_empty(), "{ratio} {probes}");
        }
        let mut pairs = vec![pair("a", "b")];
        attach_paths(&mut pairs, &[hop], &[s(&k, 0.5)], &[s(&k, 10.0)]);
        assert_eq!(pairs[0].paths[0].lost, 5.0);
    }
}
