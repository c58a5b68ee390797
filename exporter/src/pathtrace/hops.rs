//! The path series of each pair: `skeletonhunter_path_hop_info` (the hops
//! of each distinct path its probe flows take), and per path
//! `skeletonhunter_path_loss_ratio` and `skeletonhunter_path_probes` (the
//! loss of the flows taking it over the flow window). A pair's series are
//! replaced as a whole when its paths change (a stale hop is worse than
//! none) and removed when the peer leaves. Their number is bounded by the
//! distinct paths of a pair (at most the ECMP width), never by the flows.

use super::paths::{group, merge, FlowPath, PathView};
use super::Trace;
use crate::model::{HopLabels, PathLabels};
use crate::probe::FlowCount;
use crate::telemetry::PathFamilies;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

#[derive(Debug, Default)]
struct Pair {
    src_node: String,
    dst_node: String,
    /// Each traced flow's path (after [`merge`]).
    flows: BTreeMap<usize, FlowPath>,
    /// The flows' recent counts, by flow index.
    counts: Vec<FlowCount>,
    /// What is on `/metrics` now.
    hops: Vec<HopLabels>,
    paths: Vec<PathLabels>,
}

/// The published path series, by destination.
#[derive(Debug)]
pub struct PathSeries {
    families: PathFamilies,
    pairs: Mutex<HashMap<IpAddr, Pair>>,
}

impl PathSeries {
    /// Publish into `families`.
    pub fn new(families: PathFamilies) -> PathSeries {
        PathSeries {
            families,
            pairs: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Pair>> {
        self.pairs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A trace of flow `flow` towards `dst` finished: keep its path (see
    /// [`merge`]) and publish the pair's paths again.
    pub fn traced(&self, dst: IpAddr, flow: usize, src_node: &str, dst_node: &str, t: &Trace) {
        let mut pairs = self.lock();
        let pair = pairs.entry(dst).or_default();
        let kept = merge(pair.flows.get(&flow), FlowPath::of(t));
        pair.flows.insert(flow, kept);
        pair.src_node = src_node.to_string();
        pair.dst_node = dst_node.to_string();
        self.publish(pair);
    }

    /// The flows' recent counts towards `dst` (and its current `dst_node`):
    /// refresh the path loss series. Pairs never traced publish nothing.
    pub fn counts(&self, dst: IpAddr, dst_node: &str, counts: Vec<FlowCount>) {
        let mut pairs = self.lock();
        let Some(pair) = pairs.get_mut(&dst) else {
            return;
        };
        pair.counts = counts;
        pair.dst_node = dst_node.to_string();
        self.publish(pair);
    }

    /// The paths of `dst` now.
    pub fn paths(&self, dst: IpAddr) -> Vec<PathView> {
        self.lock()
            .get(&dst)
            .map(|p| group(&p.flows))
            .unwrap_or_default()
    }

    /// Remove the series of `dst` (the peer left).
    pub fn forget(&self, dst: IpAddr) {
        let old = self.lock().remove(&dst);
        if let Some(p) = old {
            for l in &p.hops {
                self.families.hops.remove(l);
            }
            for l in &p.paths {
                self.families.loss.remove(l);
                self.families.probes.remove(l);
            }
        }
    }

    /// Bring `/metrics` in line with `pair`: series of paths (or hops, or
    /// names) that are gone are removed, the others set.
    fn publish(&self, pair: &mut Pair) {
        let views = group(&pair.flows);
        let mut hops = Vec::new();
        let mut paths = Vec::new();
        for v in &views {
            for (i, h) in v.hops.iter().enumerate() {
                hops.push(HopLabels {
                    src_node: pair.src_node.clone(),
                    dst_node: pair.dst_node.clone(),
                    path: v.id.clone(),
                    hop: (i + 1).to_string(),
                    address: h.map(|a| a.to_string()).unwrap_or_default(),
                });
            }
            paths.push(PathLabels {
                src_node: pair.src_node.clone(),
                dst_node: pair.dst_node.clone(),
                path: v.id.clone(),
            });
        }
        let keep: HashSet<&HopLabels> = hops.iter().collect();
        for l in pair.hops.iter().filter(|l| !keep.contains(l)) {
            self.families.hops.remove(l);
        }
        let keep: HashSet<&PathLabels> = paths.iter().collect();
        for l in pair.paths.iter().filter(|l| !keep.contains(l)) {
            self.families.loss.remove(l);
            self.families.probes.remove(l);
        }
        for l in &hops {
            self.families.hops.get_or_create(l).set(1);
        }
        for (v, l) in views.iter().zip(&paths) {
            let c = v.loss(&pair.counts);
            self.families.loss.get_or_create(l).set(c.ratio());
            self.families
                .probes
                .get_or_create(l)
                .set(i64::try_from(c.sent).unwrap_or(i64::MAX));
        }
        pair.hops = hops;
        pair.paths = paths;
    }
}

#[cfg(test)]
mod tests {
    use super::super::paths::path_id;
    use super::super::{Answer, Flow, Hop};
    use super::*;
    use prometheus_client::registry::Registry;
    use std::net::Ipv4Addr;

    fn trace(addrs: &[Option<[u8; 4]>], reached: bool) -> Trace {
        Trace {
            flow: Flow {
                src: "198.18.1.2:40000".parse().unwrap(),
                dst: "198.18.2.2:9970".parse().unwrap(),
            },
            hops: addrs
                .iter()
                .enumerate()
                .map(|(i, a)| Hop {
                    ttl: i as u8 + 1,
                    address: a.map(Ipv4Addr::from),
                    answer: a.map(|_| Answer::TimeExceeded),
                    rtt_seconds: None,
                })
                .collect(),
            reached,
            started_unix_seconds: 0.0,
            duration_seconds: 0.0,
        }
    }

    fn render(reg: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, reg).unwrap();
        out
    }

    fn setup() -> (PathSeries, Registry) {
        let fam = PathFamilies::default();
        let mut reg = Registry::default();
        reg.register("skeletonhunter_path_hop_info", "t", fam.hops.clone());
        reg.register("skeletonhunter_path_loss_ratio", "t", fam.loss.clone());
        reg.register("skeletonhunter_path_probes", "t", fam.probes.clone());
        (PathSeries::new(fam), reg)
    }

    #[test]
    fn publish_replaces_stale_hops() {
        let (t, reg) = setup();
        let dst: IpAddr = "198.18.2.2".parse().unwrap();
        let a = [Some([198, 18, 1, 1]), Some([198, 18, 2, 2])];
        t.traced(dst, 0, "a", "b", &trace(&a, true));
        let b = [Some([198, 18, 1, 9]), None, Some([198, 18, 2, 2])];
        t.traced(dst, 0, "a", "b", &trace(&b, true));
        let out = render(&reg);
        let id = path_id(
            &trace(&b, true)
                .hops
                .iter()
                .map(|h| h.address)
                .collect::<Vec<_>>(),
        );
        assert!(!out.contains("198.18.1.1"), "{out}");
        let hop = |n: u8, addr: &str| {
            format!(r#"{{src_node="a",dst_node="b",path="{id}",hop="{n}",address="{addr}"}} 1"#)
        };
        assert!(out.contains(&hop(1, "198.18.1.9")), "{out}");
        assert!(out.contains(&hop(2, "")), "{out}");
        assert!(out.contains(&hop(3, "198.18.2.2")), "{out}");
        t.forget(dst);
        assert!(!render(&reg).contains("198.18."));
    }

    #[test]
    fn flows_on_one_path_share_its_series_and_its_loss() {
        let (t, reg) = setup();
        let dst: IpAddr = "198.18.2.2".parse().unwrap();
        let via1 = [Some([198, 19, 1, 1]), Some([198, 18, 2, 2])];
        let via2 = [Some([198, 19, 2, 1]), Some([198, 18, 2, 2])];
        for (f, hops) in [(0, &via1), (1, &via2), (2, &via1), (3, &via1)] {
            t.traced(dst, f, "a", "b", &trace(hops, true));
        }
        let c = |sent, lost| FlowCount { sent, lost };
        t.counts(dst, "b", vec![c(4, 0), c(4, 4), c(4, 1), c(0, 0)]);
        let out = render(&reg);
        let hop_lines = out
            .lines()
            .filter(|l| l.starts_with("skeletonhunter_path_hop_info{"))
            .count();
        assert_eq!(
            hop_lines, 4,
            "two paths of two hops, not one per flow:\n{out}"
        );
        let id1 = path_id(&via1.map(|a| a.map(Ipv4Addr::from)));
        let id2 = path_id(&via2.map(|a| a.map(Ipv4Addr::from)));
        let series = |name: &str, id: &str, v: &str| {
            format!(r#"{name}{{src_node="a",dst_node="b",path="{id}"}} {v}"#)
        };
        assert!(
            out.contains(&series("skeletonhunter_path_loss_ratio", &id1, "0.125")),
            "{out}"
        );
        assert!(
            out.contains(&series("skeletonhunter_path_probes", &id1, "8")),
            "{out}"
        );
        assert!(
            out.contains(&series("skeletonhunter_path_loss_ratio", &id2, "1.0")),
            "{out}"
        );
        // Flow 1 moves onto path 1: path 2's series go.
        t.traced(dst, 1, "a", "b", &trace(&via1, true));
        let out = render(&reg);
        assert!(!out.contains(&id2), "{out}");
        // The peer is renamed: every series moves to the new name.
        t.counts(dst, "b2", vec![c(4, 0)]);
        let out = render(&reg);
        assert!(!out.contains(r#"dst_node="b""#), "{out}");
        assert!(
            out.contains(
                &series("skeletonhunter_path_probes", &id1, "4").replace("\"b\"", "\"b2\"")
            ),
            "{out}"
        );
    }
}
