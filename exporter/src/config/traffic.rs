//! The `discovery.ebpf` section: traffic discovery settings as written
//! ([`TrafficConfig`]) and validated ([`TrafficSettings`]). See
//! docs/discovery.md.

use super::error::ConfigError;
use crate::model::traffic::{Cidr, Filter, ParseError, PortRange, Timing};
use serde::Deserialize;
use skeletonhunter_common::duration;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

skeletonhunter_common::labelled_enum! {
    /// Which source to use.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
    #[serde(rename_all = "lowercase")]
    pub enum Mode {
        /// eBPF when it loads, else polling (the log says which and why).
        #[default]
        Auto,
        /// eBPF or fail at startup.
        Ebpf,
        /// Always poll /proc/net/tcp{,6}.
        Poll,
        /// No traffic discovery.
        Off,
    }
}

/// Default `exclude_ports`: the ports of a host's own long-lived
/// connections, which in the host's network namespace (a DaemonSet with
/// `hostNetwork`) would otherwise become skeleton peers that never answer
/// probes — control plane and scrapes, storage clients, CNI and agents.
/// Training traffic uses none of them: torch.distributed's rendezvous is
/// 29500, NCCL's sockets take ephemeral ports (32768-60999 by default) and
/// RoCE's UDP 4791 has no TCP connection to filter (RDMA queue pairs have
/// no ports), so none of those is listed. The table in docs/discovery.md
/// mirrors this list. Setting `exclude_ports` replaces it (`[]`: none).
pub const DEFAULT_EXCLUDE_PORTS: [&str; 24] = [
    // ssh.
    "22",
    // DNS over TCP.
    "53",
    // HTTP: registries, object stores.
    "80",
    // rpcbind: NFSv3 mounts keep their portmapper / lock manager sessions.
    "111",
    // BGP sessions (Calico, MetalLB).
    "179",
    // HTTPS: the API server behind its Service, object stores.
    "443",
    // Lustre LNet (socklnd): clients' connections to MDS and OSS.
    "988",
    // IBM Storage Scale (GPFS) daemons talking to each other.
    "1191",
    // NFS mounts (CSI NFS volumes, shared datasets, home directories).
    "2049",
    // etcd clients and peers.
    "2379-2380",
    // Loki: log agents (Promtail, Alloy) pushing over kept-alive HTTP.
    "3100",
    // iSCSI sessions of CSI block volumes.
    "3260",
    // Ceph monitors (msgr2): RBD/CephFS clients' monitor session.
    "3300",
    // Cilium health: the agents' node-to-node health checks.
    "4240",
    // Hubble server (4244) and Hubble Relay (4245): relay's streams to
    // every node.
    "4244-4245",
    // OpenTelemetry collector, OTLP gRPC and HTTP: agents exporting.
    "4317-4318",
    // Calico Typha: every Felix keeps a watch open to a Typha.
    "5473",
    // Kubernetes API server.
    "6443",
    // Ceph monitors (msgr1).
    "6789",
    // Ceph OSDs, MDS and managers: RBD/CephFS clients' data sessions.
    "6800-7300",
    // Prometheus, Pushgateway, Alertmanager, node-exporter.
    "9090-9100",
    // Cilium agent, operator, Envoy and Hubble metrics (scraped).
    "9962-9965",
    // kubelet, kube-proxy, controller-manager, scheduler.
    "10248-10260",
    // Fluentd / Fluent Bit forward protocol: log agents shipping.
    "24224",
];

/// A configured container cgroup and who it is.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CgroupEntry {
    /// cgroup v2 directory, absolute or relative to the cgroup2 mount.
    pub path: String,
    #[serde(default)]
    /// Node the container is, for the log.
    pub node: Option<String>,
    #[serde(default)]
    /// Tenant the container belongs to, for the log.
    pub tenant: Option<String>,
}

/// The `traffic` section of the discovery configuration (see
/// docs/discovery.md). Durations are strings like `500ms`, `10s`, `5m` or
/// plain numbers of seconds.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficConfig {
    /// Source selection.
    pub mode: Mode,
    /// Window length of the skeleton rule.
    pub window: DurationStr,
    /// Distinct windows a remote must be seen in.
    pub min_windows: u32,
    /// A connection open this long makes a peer.
    pub long_lived: DurationStr,
    /// How long an idle remote is remembered.
    pub ttl: DurationStr,
    /// How often the polling fallback reads /proc/net/tcp{,6}.
    pub poll_interval: DurationStr,
    /// Watch sockets of every network namespace (a host-network exporter
    /// serving all pods); default: only the exporter's own namespace.
    pub all_namespaces: bool,
    /// libibverbs to attach the RDMA uprobes to; default: the system's.
    pub libibverbs: Option<PathBuf>,
    /// Only remotes in these prefixes count.
    pub include_cidrs: Vec<String>,
    /// Remotes in these prefixes never count.
    pub exclude_cidrs: Vec<String>,
    /// Only these ports (or ranges) count.
    pub ports: Vec<String>,
    /// These ports (or ranges) never count (default
    /// [`DEFAULT_EXCLUDE_PORTS`]).
    pub exclude_ports: Vec<String>,
    /// Only sockets of these containers count.
    pub cgroups: Vec<CgroupEntry>,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        let t = Timing::default();
        TrafficConfig {
            mode: Mode::Auto,
            window: DurationStr(t.window),
            min_windows: t.min_windows,
            long_lived: DurationStr(t.long_lived),
            ttl: DurationStr(t.ttl),
            poll_interval: DurationStr(Duration::from_secs(2)),
            all_namespaces: false,
            libibverbs: None,
            include_cidrs: Vec::new(),
            exclude_cidrs: Vec::new(),
            ports: Vec::new(),
            exclude_ports: DEFAULT_EXCLUDE_PORTS.map(String::from).to_vec(),
            cgroups: Vec::new(),
        }
    }
}

/// A duration read from `"250ms"`, `"10s"`, `"5m"`, `"1h"` or a number of
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationStr(pub Duration);

impl<'de> Deserialize<'de> for DurationStr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        let s = match Raw::deserialize(d)? {
            Raw::N(n) => n.to_string(),
            Raw::S(s) => s,
        };
        duration::parse(&s)
            .map(DurationStr)
            .map_err(serde::de::Error::custom)
    }
}

/// The `peers.ebpf` key: `false` turns traffic discovery off, `true` (or
/// leaving it out) keeps the defaults, a mapping is a [`TrafficConfig`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EbpfSection(pub TrafficConfig);

impl<'de> Deserialize<'de> for EbpfSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match yaml_serde::Value::deserialize(d)? {
            yaml_serde::Value::Bool(true) | yaml_serde::Value::Null => Ok(EbpfSection::default()),
            yaml_serde::Value::Bool(false) => Ok(EbpfSection(TrafficConfig {
                mode: Mode::Off,
                ..TrafficConfig::default()
            })),
            v => TrafficConfig::deserialize(v)
                .map(EbpfSection)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Parse every entry of the list at `prefix.key`, naming the index of a
/// bad one.
pub(super) fn list<T>(prefix: &str, key: &str, v: &[String]) -> Result<Vec<T>, ConfigError>
where
    T: std::str::FromStr<Err = ParseError>,
{
    v.iter()
        .enumerate()
        .map(|(i, s)| {
            s.parse::<T>()
                .map_err(|e| ConfigError::invalid(format!("{prefix}.{key}[{i}]"), e))
        })
        .collect()
}

/// The validated form of [`TrafficConfig`].
#[derive(Debug, Clone)]
pub struct TrafficSettings {
    /// Source selection.
    pub mode: Mode,
    /// The skeleton rule's timing.
    pub timing: Timing,
    /// Which connections count.
    pub filter: Filter,
    /// Polling interval of the fallback.
    pub poll_interval: Duration,
    /// Watch every network namespace.
    pub all_namespaces: bool,
    /// libibverbs for the RDMA uprobes.
    pub libibverbs: Option<PathBuf>,
    /// Configured container cgroups.
    pub cgroups: Vec<CgroupEntry>,
}

impl TrafficConfig {
    /// Validate, naming the offending key under `prefix` (e.g.
    /// `discovery.traffic`). `own_ports` are the exporter's own TCP ports
    /// (metrics, dial responder): connections on them are probes and
    /// scrapes, never training traffic.
    pub fn build(&self, prefix: &str, own_ports: &[u16]) -> Result<TrafficSettings, ConfigError> {
        let timing = Timing {
            window: self.window.0,
            min_windows: self.min_windows,
            long_lived: self.long_lived.0,
            ttl: self.ttl.0,
        };
        timing
            .validate()
            .map_err(|e| ConfigError::invalid(prefix, e))?;
        if self.poll_interval.0.is_zero() {
            return Err(ConfigError::invalid(
                format!("{prefix}.poll_interval"),
                "must be > 0",
            ));
        }
        let mut exclude_ports: Vec<PortRange> = list(prefix, "exclude_ports", &self.exclude_ports)?;
        exclude_ports.extend(
            own_ports
                .iter()
                .filter(|&&p| p != 0)
                .map(|&p| PortRange { lo: p, hi: p }),
        );
        let filter = Filter {
            include_cidrs: list::<Cidr>(prefix, "include_cidrs", &self.include_cidrs)?,
            exclude_cidrs: list::<Cidr>(prefix, "exclude_cidrs", &self.exclude_cidrs)?,
            ports: list(prefix, "ports", &self.ports)?,
            exclude_ports,
            cgroups: HashSet::new(),
        };
        for (i, c) in self.cgroups.iter().enumerate() {
            if c.path.trim().is_empty() {
                return Err(ConfigError::invalid(
                    format!("{prefix}.cgroups[{i}].path"),
                    "must not be empty",
                ));
            }
        }
        Ok(TrafficSettings {
            mode: self.mode,
            timing,
            filter,
            poll_interval: self.poll_interval.0,
            all_namespaces: self.all_namespaces,
            libibverbs: self.libibverbs.clone(),
            cgroups: self.cgroups.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ebpf_section_accepts_bool_or_mapping() {
        let off: EbpfSection = yaml_serde::from_str("false").unwrap();
        assert_eq!(off.0.mode, Mode::Off);
        let on: EbpfSection = yaml_serde::from_str("true").unwrap();
        assert_eq!(on.0, TrafficConfig::default());
        let m: EbpfSection = yaml_serde::from_str("mode: poll\nttl: 90s\n").unwrap();
        assert_eq!((m.0.mode, m.0.ttl.0), (Mode::Poll, Duration::from_secs(90)));
        let e = yaml_serde::from_str::<EbpfSection>("mode: sometimes\n").unwrap_err();
        assert!(e.to_string().contains("sometimes"), "{e}");
        let e = yaml_serde::from_str::<EbpfSection>("ttl: 3 days\n").unwrap_err();
        assert!(e.to_string().contains("unknown unit"), "{e}");
    }

    #[test]
    fn host_machinery_ports_are_left_out_by_default() {
        let s = TrafficConfig::default().build("t", &[9465]).unwrap();
        let out = |p: u16| s.filter.exclude_ports.iter().any(|r| r.contains(p));
        // API server, kubelet, Prometheus, node-exporter, the exporter.
        assert!([6443, 10250, 9090, 9100, 443, 9465].into_iter().all(out));
        // Storage clients (NFS, Lustre, iSCSI, Ceph, GPFS), CNI agents
        // (Calico Typha, Cilium health, Hubble), log and telemetry agents.
        let storage = [111, 988, 1191, 2049, 3260, 3300, 6789, 6800, 7300];
        assert!(storage.into_iter().all(out));
        let agents = [2379, 2380, 3100, 4240, 4244, 4245, 4317, 4318, 5473];
        assert!(agents.into_iter().all(out));
        assert!([9962, 9965, 24224].into_iter().all(out));
        // torch.distributed, NCCL's ephemeral ports (the whole default
        // range) and RoCE's UDP port still count.
        assert!(!out(29500) && !out(4791));
        assert!((32768..=60999).all(|p| !out(p)));
        // Sorted, without overlaps (so the doc's table reads in order).
        let ranges: Vec<PortRange> = DEFAULT_EXCLUDE_PORTS
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        assert!(ranges.windows(2).all(|w| w[0].hi < w[1].lo), "{ranges:?}");
        // A list of one's own replaces the defaults.
        let own: TrafficConfig = yaml_serde::from_str("exclude_ports: []\n").unwrap();
        assert!(own.build("t", &[]).unwrap().filter.exclude_ports.is_empty());
    }

    #[test]
    fn config_builds_and_names_bad_keys() {
        let c: TrafficConfig = yaml_serde::from_str(
            "mode: poll\nwindow: 1s\nttl: 4s\nlong_lived: 2s\ninclude_cidrs: [198.18.0.0/15]\nports: ['29500-29600']\n",
        )
        .unwrap();
        let s = c.build("discovery.traffic", &[9100]).unwrap();
        assert_eq!(s.mode, Mode::Poll);
        assert_eq!(s.timing.window, Duration::from_secs(1));
        assert!(s
            .filter
            .exclude_ports
            .contains(&PortRange { lo: 9100, hi: 9100 }));
        let bad = TrafficConfig {
            include_cidrs: vec!["198.18.0.0/15".into(), "nope".into()],
            ..TrafficConfig::default()
        };
        let e = bad.build("discovery.traffic", &[]).unwrap_err().to_string();
        assert!(e.starts_with("discovery.traffic.include_cidrs[1]:"), "{e}");
        let e = yaml_serde::from_str::<TrafficConfig>("windw: 1s\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("windw"), "{e}");
        let bad = TrafficConfig {
            min_windows: 1,
            ..TrafficConfig::default()
        };
        assert!(bad
            .build("t", &[])
            .unwrap_err()
            .to_string()
            .contains("min_windows"));
    }
}
