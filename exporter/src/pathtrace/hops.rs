//! `skeletonhunter_path_hop_info`: one series per hop of the last trace
//! towards each destination, replaced as a whole when the path changes
//! (a stale hop is worse than none) and removed when the peer leaves.

use super::Trace;
use crate::model::HopLabels;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// The published hop series, by destination.
#[derive(Debug)]
pub struct HopSeries {
    family: Family<HopLabels, Gauge>,
    published: Mutex<HashMap<IpAddr, Vec<HopLabels>>>,
}

impl HopSeries {
    /// Publish into `family`.
    pub fn new(family: Family<HopLabels, Gauge>) -> HopSeries {
        HopSeries {
            family,
            published: Mutex::new(HashMap::new()),
        }
    }

    /// Replace the hops of `dst` with those of `t`.
    pub fn publish(&self, dst: IpAddr, src_node: &str, dst_node: &str, t: &Trace) {
        let labels: Vec<HopLabels> = t
            .hops
            .iter()
            .map(|h| HopLabels {
                src_node: src_node.to_string(),
                dst_node: dst_node.to_string(),
                hop: h.ttl.to_string(),
                address: h.address.map(|a| a.to_string()).unwrap_or_default(),
            })
            .collect();
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(old) = published.remove(&dst) {
            for l in old {
                self.family.remove(&l);
            }
        }
        for l in &labels {
            self.family.get_or_create(l).set(1);
        }
        published.insert(dst, labels);
    }

    /// Remove the hops of `dst` (the peer left).
    pub fn forget(&self, dst: IpAddr) {
        let old = self
            .published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&dst);
        for l in old.into_iter().flatten() {
            self.family.remove(&l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Answer, Flow, Hop};
    use super::*;
    use prometheus_client::registry::Registry;
    use std::net::Ipv4Addr;

    fn flow() -> Flow {
        Flow {
            src: "198.18.1.2:40000".parse().unwrap(),
            dst: "198.18.2.2:9970".parse().unwrap(),
        }
    }

    #[test]
    fn publish_replaces_stale_hops() {
        let fam: Family<HopLabels, Gauge> = Family::default();
        let t = HopSeries::new(fam.clone());
        let mut reg = Registry::default();
        reg.register("skeletonhunter_path_hop_info", "test", fam);
        let dst: IpAddr = "198.18.2.2".parse().unwrap();
        let mk = |addrs: &[Option<[u8; 4]>]| Trace {
            flow: flow(),
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
            reached: true,
            started_unix_seconds: 0.0,
            duration_seconds: 0.0,
        };
        t.publish(
            dst,
            "a",
            "b",
            &mk(&[Some([198, 18, 1, 1]), Some([198, 18, 2, 2])]),
        );
        t.publish(
            dst,
            "a",
            "b",
            &mk(&[Some([198, 18, 1, 9]), None, Some([198, 18, 2, 2])]),
        );
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(!out.contains("198.18.1.1"), "{out}");
        assert!(out.contains(r#"hop="1",address="198.18.1.9""#), "{out}");
        assert!(out.contains(r#"hop="2",address="""#), "{out}");
        assert!(out.contains(r#"hop="3",address="198.18.2.2""#), "{out}");
        t.forget(dst);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(!out.contains("198.18."), "{out}");
    }
}
