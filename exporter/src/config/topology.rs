//! The topology map (`identity.topology_file`): host name to topology
//! fields, so one DaemonSet serves every rack. The downward API cannot
//! read node labels; a ConfigMap built from them
//! (deploy/kubernetes/topology-from-nodes.sh) is mounted instead, and each
//! exporter looks up its own `identity.host` (`spec.nodeName`).
//!
//! ```yaml
//! hosts:
//!   gpu-node-1: {tor: asw-a12, spine: dsw-a, pod: pod-1}
//! ```

use super::error::ConfigError;
use super::file::{read_list_file, MAX_LIST_FILE_BYTES};
use super::kinds::{deserialize_section, keys};
use serde::Deserialize;
use skeletonhunter_common::yaml::from_str_or_default;
use skeletonhunter_common::{Identity, Kind};
use std::collections::BTreeMap;
use std::path::Path;

/// The largest topology file read (a ConfigMap holds at most 1 MiB; a
/// file for systemd hosts may be larger, but not unbounded).
pub const MAX_TOPOLOGY_FILE_BYTES: u64 = MAX_LIST_FILE_BYTES;

/// The fields a map entry may set, in [`Kind::ALL`] order.
pub const MAP_FIELDS: [Kind; 5] = [Kind::Nic, Kind::Tor, Kind::Spine, Kind::Pod, Kind::Tenant];

/// The topology file as written.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TopologyMap {
    /// Host (Kubernetes node) name to its topology fields; a host named
    /// twice is an error (YAML would keep the last one silently).
    #[serde(deserialize_with = "unique_hosts")]
    pub hosts: BTreeMap<String, TopologyEntry>,
}

/// `hosts:` as a map that refuses a key given twice.
fn unique_hosts<'de, D>(d: D) -> Result<BTreeMap<String, TopologyEntry>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Hosts;
    impl<'de> serde::de::Visitor<'de> for Hosts {
        type Value = BTreeMap<String, TopologyEntry>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map from host name to {tor, spine, pod, tenant, nic}")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut hosts = BTreeMap::new();
            while let Some((host, entry)) = m.next_entry::<String, TopologyEntry>()? {
                if hosts.contains_key(&host) {
                    return Err(serde::de::Error::custom(format!("duplicate host {host:?}")));
                }
                hosts.insert(host, entry);
            }
            Ok(hosts)
        }
    }
    d.deserialize_map(Hosts)
}

/// One host's topology fields ([`MAP_FIELDS`], by kind name); each is
/// optional, and an empty one sets nothing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TopologyEntry(Identity);

/// The keys of a map entry: the names of [`MAP_FIELDS`].
const MAP_KEYS: [&str; MAP_FIELDS.len()] = keys(&MAP_FIELDS, &[]);

impl TopologyEntry {
    /// The entry's value for `kind`, trimmed ("" for a kind it cannot set).
    pub fn get(&self, kind: Kind) -> &str {
        self.0.get(kind).trim()
    }
}

impl<'de> Deserialize<'de> for TopologyEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Every key is a kind: no other value to read.
        let what = "a host's {tor, spine, pod, tenant, nic}";
        let (id, ()) = deserialize_section(d, what, &MAP_KEYS, &MAP_FIELDS)?;
        Ok(TopologyEntry(id))
    }
}

/// Parse the map's text (errors carry the YAML path, line and column).
pub fn parse_topology(text: &str) -> Result<TopologyMap, String> {
    let map: TopologyMap = from_str_or_default(text).map_err(|e| e.to_string())?;
    if map.hosts.keys().any(|h| h.trim().is_empty()) {
        return Err("hosts: a host name is empty".into());
    }
    Ok(map)
}

/// Read and parse the map at `path`, at most [`MAX_TOPOLOGY_FILE_BYTES`].
pub fn read_topology(path: &Path) -> Result<TopologyMap, ConfigError> {
    Ok(read_list_file("topology file", path, parse_topology)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_read_by_kind() {
        let m = parse_topology(
            "hosts:\n  n1: {tor: \" asw-1 \", spine: dsw-a, pod: p1}\n  n2:\n    tenant: t\n    nic: 10.0.0.2\n",
        )
        .unwrap();
        assert_eq!(m.hosts.len(), 2);
        let n1 = &m.hosts["n1"];
        assert_eq!(n1.get(Kind::Tor), "asw-1");
        assert_eq!(n1.get(Kind::Spine), "dsw-a");
        assert_eq!(n1.get(Kind::Pod), "p1");
        assert_eq!(n1.get(Kind::Tenant), "");
        assert_eq!(n1.get(Kind::Node), "", "not a map field");
        assert_eq!(m.hosts["n2"].get(Kind::Nic), "10.0.0.2");
        assert_eq!(parse_topology("").unwrap(), TopologyMap::default());
        assert_eq!(parse_topology("hosts: {}").unwrap(), TopologyMap::default());
        assert_eq!(parse_topology("hosts:\n").unwrap(), TopologyMap::default());
    }

    #[test]
    fn parse_errors_name_the_key_and_line() {
        for (text, want) in [
            ("hosts:\n  n1: {rack: r1}\n", "rack"),
            ("hosts:\n  n1: {tor: t}\n  n2: {node: x}\n", "line 3"),
            ("racks: {}\n", "racks"),
            ("hosts:\n  n1: {tor: [a, b]}\n", "hosts.n1.tor"),
            ("hosts: [n1, n2]\n", "hosts"),
            ("hosts:\n  n1: {tor: a}\n  n1: {tor: b}\n", "duplicate"),
            ("hosts:\n  \"\": {tor: a}\n", "host name is empty"),
            ("hosts: {n1: {tor: a}\n", "line"),
        ] {
            let e = parse_topology(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn read_is_bounded_and_names_the_file() {
        let dir = std::env::temp_dir().join(format!("shtopo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.yaml");
        let mut text = "hosts:\n".to_string();
        let line = format!("  # {}\n", "x".repeat(1020));
        while (text.len() as u64) <= MAX_TOPOLOGY_FILE_BYTES {
            text.push_str(&line);
        }
        std::fs::write(&big, &text).unwrap();
        let e = read_topology(&big).unwrap_err().to_string();
        assert!(
            e.contains("big.yaml") && e.contains("larger than 16 MiB"),
            "{e}"
        );
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, "hosts:\n  n1: {tor: t, rack: r}\n").unwrap();
        let e = read_topology(&bad).unwrap_err().to_string();
        assert!(
            e.contains("bad.yaml") && e.contains("rack") && e.contains("line 2"),
            "{e}"
        );
        let e = read_topology(&dir.join("absent.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("absent.yaml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
