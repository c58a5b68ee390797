//! Configuration: YAML file, then environment, then flags (each overrides
//! the one before). Environment names follow the Kubernetes downward-API
//! style (`SKELETONHUNTER_NODE` from `metadata.name`, `SKELETONHUNTER_HOST`
//! from `spec.nodeName`, ...). Every error names the key and the problem.

use crate::peers::{Peer, PeerSource};
use crate::probe::Protocol;
use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use serde::Deserialize;
use skeletonhunter_common::Identity;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_LISTEN: &str = "0.0.0.0:9465";
pub const DEFAULT_UDP_PORT: u16 = 9466;
pub const DEFAULT_TCP_PORT: u16 = 9467;

/// Command line; every flag also reads an environment variable.
#[derive(Debug, Parser, Default)]
#[command(
    name = "skeletonhunter-exporter",
    version,
    about = "Probe this host's skeleton peers (UDP echo, TCP dial, ICMP, RDMA UD) and serve /metrics.",
    long_about = "Probe this host's skeleton peers (UDP echo, TCP dial, ICMP, RDMA UD) and serve /metrics.\n\n\
Settings come from the YAML file (-c), overridden by environment variables (Kubernetes \
downward-API style), overridden by flags. See exporter/config.example.yaml and docs/exporter.md."
)]
pub struct Args {
    /// YAML configuration file (see config.example.yaml).
    #[arg(long, short = 'c', env = "SKELETONHUNTER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address for /metrics and /healthz.
    #[arg(long, env = "SKELETONHUNTER_LISTEN")]
    pub listen: Option<String>,
    /// UDP echo responder bind address ("off" disables it).
    #[arg(long, env = "SKELETONHUNTER_UDP_LISTEN")]
    pub udp_listen: Option<String>,
    /// TCP dial acceptor bind address ("off" disables it).
    #[arg(long, env = "SKELETONHUNTER_TCP_LISTEN")]
    pub tcp_listen: Option<String>,
    /// This exporter's node (training container) name. Default: hostname.
    #[arg(long, env = "SKELETONHUNTER_NODE")]
    pub node: Option<String>,
    /// NIC / RNIC address. Default: the address of the default route.
    #[arg(long, env = "SKELETONHUNTER_NIC")]
    pub nic: Option<String>,
    /// Physical host. Default: hostname.
    #[arg(long, env = "SKELETONHUNTER_HOST")]
    pub host: Option<String>,
    /// Top-of-rack switch.
    #[arg(long, env = "SKELETONHUNTER_TOR")]
    pub tor: Option<String>,
    /// Spine / aggregation block.
    #[arg(long, env = "SKELETONHUNTER_SPINE")]
    pub spine: Option<String>,
    /// Network pod.
    #[arg(long, env = "SKELETONHUNTER_POD")]
    pub pod: Option<String>,
    /// Tenant / job.
    #[arg(long, env = "SKELETONHUNTER_TENANT")]
    pub tenant: Option<String>,
    /// Probe interval per peer and protocol (e.g. 1s, 200ms).
    #[arg(long, env = "SKELETONHUNTER_INTERVAL")]
    pub interval: Option<String>,
    /// Time after which a probe counts as lost.
    #[arg(long, env = "SKELETONHUNTER_TIMEOUT")]
    pub timeout: Option<String>,
    /// Comma-separated protocols: udp,tcp,icmp,rdma. Default: udp,tcp plus
    /// rdma when built in (it turns itself off without an RDMA device).
    #[arg(long, env = "SKELETONHUNTER_PROTOCOLS")]
    pub protocols: Option<String>,
    /// Comma-separated static peers: ADDR[:UDPPORT][=NAME].
    #[arg(long, env = "SKELETONHUNTER_PEERS")]
    pub peers: Option<String>,
    /// Headless-service DNS name to resolve for peers (A/AAAA, or SRV
    /// when prefixed with srv:).
    #[arg(long, env = "SKELETONHUNTER_DNS")]
    pub dns: Option<String>,
    /// Peer list file for ToR-mesh mode.
    #[arg(long, env = "SKELETONHUNTER_TOR_MESH_FILE")]
    pub tor_mesh_file: Option<PathBuf>,
    /// Log level when RUST_LOG is unset.
    #[arg(long, env = "SKELETONHUNTER_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Validate the configuration, print it, and exit.
    #[arg(long)]
    pub check_config: bool,
}

/// The YAML file as written; strings are validated into [`Config`].
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub identity: FileIdentity,
    pub responder: FileResponder,
    pub probe: FileProbe,
    /// Where peers come from (`peers` is accepted as an older name).
    #[serde(alias = "peers")]
    pub discovery: FileDiscovery,
}

/// `identity:` (the topology vocabulary of DESIGN.md; unknown keys are
/// errors, so a typo like `rack:` does not silently leave `tor` empty).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileIdentity {
    pub node: String,
    pub nic: String,
    pub host: String,
    pub tor: String,
    pub spine: String,
    pub pod: String,
    pub tenant: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileResponder {
    pub udp: Option<String>,
    pub tcp: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileProbe {
    pub interval: Option<String>,
    pub timeout: Option<String>,
    pub protocols: Option<Vec<String>>,
    pub udp_port: Option<u16>,
    pub tcp_port: Option<u16>,
    pub udp_size: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileDiscovery {
    #[serde(rename = "static")]
    pub static_peers: Vec<FilePeer>,
    pub dns: Vec<FileDns>,
    pub tor_mesh: Option<FileTorMesh>,
    /// Traffic discovery (eBPF, with /proc polling fallback); `false`
    /// turns it off. See docs/discovery.md.
    pub ebpf: crate::discovery::traffic::EbpfSection,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default, deny_unknown_fields)]
pub struct FilePeer {
    pub address: String,
    pub name: Option<String>,
    pub udp_port: Option<u16>,
    pub tcp_port: Option<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileDns {
    pub name: String,
    /// `a` (A/AAAA, the default) or `srv`.
    pub record: Option<String>,
    pub refresh: Option<String>,
    /// Resolver to ask (`IP:PORT`); default: /etc/resolv.conf.
    pub nameserver: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileTorMesh {
    /// A YAML file: a list of entries with `address`, `tor`, optional `node`
    /// and ports. Re-read every `refresh`.
    pub file: Option<PathBuf>,
    /// Or an inline list.
    pub peers: Vec<MeshEntry>,
    pub refresh: Option<String>,
}

/// One entry of a ToR-mesh peer list.
#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct MeshEntry {
    pub address: String,
    pub tor: String,
    pub node: Option<String>,
    pub udp_port: Option<u16>,
    pub tcp_port: Option<u16>,
}

/// A DNS source, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSource {
    pub name: String,
    pub srv: bool,
    pub refresh: Duration,
    pub nameserver: Option<SocketAddr>,
}

/// ToR-mesh settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorMesh {
    pub file: Option<PathBuf>,
    pub peers: Vec<MeshEntry>,
    pub refresh: Duration,
}

/// The validated configuration the exporter runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub udp_listen: Option<SocketAddr>,
    pub tcp_listen: Option<SocketAddr>,
    pub identity: Identity,
    pub interval: Duration,
    pub timeout: Duration,
    pub protocols: Vec<Protocol>,
    pub udp_port: u16,
    pub tcp_port: u16,
    pub udp_size: usize,
    pub static_peers: Vec<Peer>,
    pub dns: Vec<DnsSource>,
    pub tor_mesh: Option<TorMesh>,
    /// Traffic (eBPF / polling) discovery settings.
    pub ebpf: crate::discovery::traffic::Settings,
}

/// Parse `500us`, `20ms`, `1s`, `2m`, `1.5s` (or a bare number of seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (use e.g. 500ms, 1s, 2m)"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" => 60.0,
        "h" => 3600.0,
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?} (use ns, us, ms, s, m or h)"
            ))
        }
    };
    let secs = v * scale;
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("{s:?} is out of range (0 to 24h)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn duration_key(key: &str, v: &str) -> Result<Duration> {
    parse_duration(v).map_err(|e| anyhow!("{key}: {e}"))
}

fn addr_key(key: &str, v: &str) -> Result<SocketAddr> {
    v.trim()
        .parse()
        .map_err(|_| anyhow!("{key}: {v:?} is not an address:port (e.g. 0.0.0.0:9465)"))
}

fn optional_listen(key: &str, v: Option<&str>, default_port: u16) -> Result<Option<SocketAddr>> {
    match v.map(str::trim) {
        None => Ok(Some(SocketAddr::from(([0, 0, 0, 0], default_port)))),
        Some("off") | Some("") => Ok(None),
        Some(s) => addr_key(key, s).map(Some),
    }
}

fn ip_key(key: &str, v: &str) -> Result<IpAddr> {
    v.trim()
        .parse()
        .map_err(|_| anyhow!("{key}: {v:?} is not an IP address"))
}

/// `ADDR[:UDPPORT][=NAME]` from `--peers`.
fn parse_flag_peer(key: &str, s: &str) -> Result<Peer> {
    let (addr, name) = match s.split_once('=') {
        Some((a, n)) => (a.trim(), Some(n.trim().to_string())),
        None => (s.trim(), None),
    };
    let mut peer = if let Ok(sa) = addr.parse::<SocketAddr>() {
        let mut p = Peer::new(sa.ip(), PeerSource::Static);
        p.udp_port = Some(sa.port());
        p
    } else {
        Peer::new(
            addr.trim_matches(['[', ']']).parse().map_err(|_| {
                anyhow!("{key}: {addr:?} is not an IP address or IP:PORT (e.g. 10.0.0.2 or 10.0.0.2:9466=node-b)")
            })?,
            PeerSource::Static,
        )
    };
    peer.name = name.filter(|n| !n.is_empty());
    Ok(peer)
}

/// The hostname, for identity defaults.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The source address the kernel would use for the default route, found
/// by connecting a UDP socket (no packet is sent). Empty when there is no
/// route.
pub fn default_route_address() -> String {
    let Ok(s) = std::net::UdpSocket::bind("0.0.0.0:0") else {
        return String::new();
    };
    // A TEST-NET-2 address: connect() only does a route lookup.
    if s.connect("198.51.100.1:9").is_err() {
        return String::new();
    }
    s.local_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default()
}

impl Config {
    /// Load from process arguments and the environment.
    pub fn load(args: &Args) -> Result<Config> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?;
                parse_file(&text).with_context(|| format!("config file {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        Config::merge(file, args)
    }

    /// Combine the file with flag/env values (which win) and validate.
    pub fn merge(file: FileConfig, args: &Args) -> Result<Config> {
        let listen = addr_key(
            "listen",
            args.listen
                .as_deref()
                .or(file.listen.as_deref())
                .unwrap_or(DEFAULT_LISTEN),
        )?;
        let udp_listen = optional_listen(
            "responder.udp",
            args.udp_listen.as_deref().or(file.responder.udp.as_deref()),
            DEFAULT_UDP_PORT,
        )?;
        let tcp_listen = optional_listen(
            "responder.tcp",
            args.tcp_listen.as_deref().or(file.responder.tcp.as_deref()),
            DEFAULT_TCP_PORT,
        )?;

        let fi = file.identity;
        let mut identity = Identity {
            node: fi.node,
            nic: fi.nic,
            host: fi.host,
            tor: fi.tor,
            spine: fi.spine,
            pod: fi.pod,
            tenant: fi.tenant,
        };
        for (v, field) in [
            (&args.node, &mut identity.node),
            (&args.nic, &mut identity.nic),
            (&args.host, &mut identity.host),
            (&args.tor, &mut identity.tor),
            (&args.spine, &mut identity.spine),
            (&args.pod, &mut identity.pod),
            (&args.tenant, &mut identity.tenant),
        ] {
            if let Some(v) = v {
                *field = v.trim().to_string();
            }
        }
        if identity.node.is_empty() {
            identity.node = hostname();
        }
        if identity.host.is_empty() {
            identity.host = hostname();
        }
        if identity.nic.is_empty() {
            identity.nic = default_route_address();
        }

        let interval = match args.interval.as_deref().or(file.probe.interval.as_deref()) {
            Some(v) => duration_key("probe.interval", v)?,
            None => Duration::from_secs(1),
        };
        if interval < Duration::from_millis(1) {
            bail!("probe.interval: must be at least 1ms");
        }
        let timeout = match args.timeout.as_deref().or(file.probe.timeout.as_deref()) {
            Some(v) => duration_key("probe.timeout", v)?,
            None => interval.min(Duration::from_secs(1)),
        };
        if timeout < Duration::from_micros(100) {
            bail!("probe.timeout: must be at least 100us");
        }
        let proto_strs: Vec<String> = match &args.protocols {
            Some(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
            None => file
                .probe
                .protocols
                .clone()
                .unwrap_or_else(default_protocols),
        };
        let mut protocols = Vec::new();
        for (i, s) in proto_strs.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            let p: Protocol = s
                .parse()
                .map_err(|e| anyhow!("probe.protocols[{i}]: {e}"))?;
            if !protocols.contains(&p) {
                protocols.push(p);
            }
        }
        let udp_port = file
            .probe
            .udp_port
            .unwrap_or(udp_listen.map(|a| a.port()).unwrap_or(DEFAULT_UDP_PORT));
        let tcp_port = file
            .probe
            .tcp_port
            .unwrap_or(tcp_listen.map(|a| a.port()).unwrap_or(DEFAULT_TCP_PORT));
        let udp_size = file.probe.udp_size.unwrap_or(256);
        if !(crate::probe::wire::HEADER_LEN..=1472).contains(&udp_size) {
            bail!(
                "probe.udp_size: {udp_size} is out of range ({}..=1472 bytes)",
                crate::probe::wire::HEADER_LEN
            );
        }

        let mut static_peers = Vec::new();
        for (i, p) in file.discovery.static_peers.iter().enumerate() {
            let key = format!("discovery.static[{i}]");
            let mut peer = Peer::new(
                ip_key(&format!("{key}.address"), &p.address)?,
                PeerSource::Static,
            );
            peer.name = p.name.clone().filter(|n| !n.is_empty());
            peer.udp_port = p.udp_port;
            peer.tcp_port = p.tcp_port;
            static_peers.push(peer);
        }
        if let Some(list) = &args.peers {
            for (i, s) in list.split(',').filter(|s| !s.trim().is_empty()).enumerate() {
                static_peers.push(parse_flag_peer(&format!("--peers entry {}", i + 1), s)?);
            }
        }

        let mut dns = Vec::new();
        for (i, d) in file.discovery.dns.iter().enumerate() {
            let key = format!("discovery.dns[{i}]");
            if d.name.trim().is_empty() {
                bail!("{key}.name: must not be empty");
            }
            let srv = match d.record.as_deref().map(str::trim) {
                None | Some("a") | Some("A") => false,
                Some("srv") | Some("SRV") => true,
                Some(o) => bail!("{key}.record: {o:?} is not a record type (use a or srv)"),
            };
            dns.push(DnsSource {
                name: d.name.trim().to_string(),
                srv,
                refresh: match &d.refresh {
                    Some(r) => duration_key(&format!("{key}.refresh"), r)?,
                    None => Duration::from_secs(30),
                },
                nameserver: match &d.nameserver {
                    Some(n) => Some(addr_key(&format!("{key}.nameserver"), n)?),
                    None => None,
                },
            });
        }
        if let Some(name) = &args.dns {
            let (srv, name) = match name.strip_prefix("srv:") {
                Some(n) => (true, n),
                None => (false, name.as_str()),
            };
            dns.push(DnsSource {
                name: name.to_string(),
                srv,
                refresh: Duration::from_secs(30),
                nameserver: None,
            });
        }

        // Connections on our own ports are probes and scrapes, not training
        // traffic.
        let own_ports: Vec<u16> = [Some(listen), tcp_listen]
            .into_iter()
            .flatten()
            .map(|a| a.port())
            .collect();
        let ebpf = file.discovery.ebpf.0.build("discovery.ebpf", &own_ports)?;
        let mut tor_mesh = match file.discovery.tor_mesh {
            Some(t) => {
                for (i, e) in t.peers.iter().enumerate() {
                    ip_key(
                        &format!("discovery.tor_mesh.peers[{i}].address"),
                        &e.address,
                    )?;
                }
                Some(TorMesh {
                    file: t.file,
                    peers: t.peers,
                    refresh: match &t.refresh {
                        Some(r) => duration_key("discovery.tor_mesh.refresh", r)?,
                        None => Duration::from_secs(30),
                    },
                })
            }
            None => None,
        };
        if let Some(f) = &args.tor_mesh_file {
            let t = tor_mesh.get_or_insert(TorMesh {
                file: None,
                peers: Vec::new(),
                refresh: Duration::from_secs(30),
            });
            t.file = Some(f.clone());
        }
        if tor_mesh.is_some() && identity.tor.is_empty() {
            bail!("discovery.tor_mesh: needs this exporter's identity.tor (or --tor / SKELETONHUNTER_TOR)");
        }

        Ok(Config {
            listen,
            udp_listen,
            tcp_listen,
            identity,
            interval,
            timeout,
            protocols,
            udp_port,
            tcp_port,
            udp_size,
            static_peers,
            dns,
            tor_mesh,
            ebpf,
        })
    }
}

/// Parse the YAML text (errors carry the YAML path and line).
pub fn parse_file(text: &str) -> Result<FileConfig> {
    if text.trim().is_empty() {
        return Ok(FileConfig::default());
    }
    yaml_serde::from_str(text).map_err(|e| anyhow!("{e}"))
}

/// Protocols probed when the config names none: UDP and TCP everywhere,
/// plus RDMA when built in (it disables itself, once and with a log line,
/// on hosts without an RDMA device).
fn default_protocols() -> Vec<String> {
    let mut p = vec!["udp".to_string(), "tcp".to_string()];
    if cfg!(feature = "rdma") {
        p.push("rdma".to_string());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> Args {
        Args {
            log_level: "info".into(),
            ..Default::default()
        }
    }

    #[test]
    fn durations_parse_and_reject() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("20ms").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("fast")
            .unwrap_err()
            .contains("not a duration"));
        assert!(parse_duration("3d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999h")
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn file_flags_and_defaults_combine() {
        let file = parse_file(
            "listen: 127.0.0.1:9000\nidentity: {node: n1, tor: t1}\nprobe: {interval: 20ms, protocols: [udp, icmp]}\ndiscovery:\n  ebpf: false\n  static:\n    - {address: 10.0.0.2, name: b}\n",
        )
        .unwrap();
        let mut a = args();
        a.node = Some("flag-node".into());
        a.peers = Some("10.0.0.3:7000=c, 10.0.0.4".into());
        let c = Config::merge(file, &a).unwrap();
        assert_eq!(c.listen, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(c.identity.node, "flag-node");
        assert_eq!(c.identity.tor, "t1");
        assert!(!c.identity.host.is_empty());
        assert_eq!(c.interval, Duration::from_millis(20));
        assert_eq!(c.timeout, Duration::from_millis(20));
        assert_eq!(c.protocols, vec![Protocol::Udp, Protocol::Icmp]);
        assert_eq!(c.static_peers.len(), 3);
        assert_eq!(c.static_peers[1].udp_port, Some(7000));
        assert_eq!(c.static_peers[1].name.as_deref(), Some("c"));
        assert_eq!(c.udp_port, DEFAULT_UDP_PORT);
    }

    #[test]
    fn errors_name_the_key() {
        let e = |yaml: &str| {
            let r = parse_file(yaml).and_then(|f| Config::merge(f, &args()));
            format!("{:#}", r.unwrap_err())
        };
        assert!(e("probe: {interval: soon}").contains("probe.interval"));
        assert!(e("probe: {protocols: [udp, sctp]}").contains("probe.protocols[1]"));
        assert!(e("discovery: {static: [{address: 10.0.0.300}]}")
            .contains("discovery.static[0].address"));
        assert!(e("listen: nowhere").contains("listen"));
        assert!(e("probe: {udp_size: 9000}").contains("probe.udp_size"));
        assert!(e("peers: {dns: [{name: x, record: mx}]}").contains("discovery.dns[0].record"));
        assert!(e("identity: {rack: r1}").contains("rack"));
        let unknown = e("probe: {intervall: 1s}");
        assert!(unknown.contains("intervall"), "{unknown}");
        assert!(e("discovery: {tor_mesh: {peers: []}}").contains("identity.tor"));
        let mut a = args();
        a.peers = Some("10.0.0.2,bogus".into());
        let r = Config::merge(FileConfig::default(), &a).unwrap_err();
        assert!(r.to_string().contains("--peers entry 2"), "{r}");
    }
}
