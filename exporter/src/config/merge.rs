//! From file, environment and flags to a validated [`Config`]: each section
//! has its own small function, and every error names its key.

use super::args::Args;
use super::ecmp::{flow_settings, FlowSettings};
use super::error::ConfigError;
use super::file::{
    parse_file, read_mesh_list, FileConfig, FileDiscovery, FileMetrics, FileProbe, FileResponder,
};
use super::settings::{
    Config, DnsSource, ResponderPolicy, TorMesh, DEFAULT_LISTEN, DEFAULT_RESPONDER_RATE,
    DEFAULT_TCP_PORT, DEFAULT_UDP_PORT, MAX_DEPARTURE_NOTICE,
};
use super::validate;
use crate::model::{HistogramMode, IdentitySource, Peer, PeerSource, Protocol};
use crate::wire::probe::HEADER_LEN;
use skeletonhunter_common::{duration, Identity, Kind};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

type Result<T> = std::result::Result<T, ConfigError>;

fn duration_key(key: &str, v: &str) -> Result<Duration> {
    duration::parse(v).map_err(|e| ConfigError::invalid(key, e))
}

fn addr_key(key: &str, v: &str) -> Result<SocketAddr> {
    let a: SocketAddr = v.trim().parse().map_err(|_| {
        ConfigError::invalid(
            key,
            format!("{v:?} is not an address:port (e.g. 0.0.0.0:9465)"),
        )
    })?;
    validate::port(key, Some(a.port()))?;
    Ok(a)
}

fn optional_listen(key: &str, v: Option<&str>, default_port: u16) -> Result<Option<SocketAddr>> {
    match v.map(str::trim) {
        None => Ok(Some(SocketAddr::from(([0, 0, 0, 0], default_port)))),
        Some("off" | "") => Ok(None),
        Some(s) => addr_key(key, s).map(Some),
    }
}

fn ip_key(key: &str, v: &str) -> Result<IpAddr> {
    v.trim()
        .parse()
        .map_err(|_| ConfigError::invalid(key, format!("{v:?} is not an IP address")))
}

/// `ADDR[:UDPPORT][=NAME]` from `--peers`.
fn parse_flag_peer(key: &str, s: &str) -> Result<Peer> {
    let (addr, name) = match s.split_once('=') {
        Some((a, n)) => (a.trim(), Some(n.trim().to_string())),
        None => (s.trim(), None),
    };
    let mut peer = if let Ok(sa) = addr.parse::<SocketAddr>() {
        let mut p = Peer::new(validate::peer_address(key, sa.ip())?, PeerSource::Static);
        p.udp_port = validate::port(key, Some(sa.port()))?;
        p
    } else {
        let ip = addr.trim_matches(['[', ']']).parse().map_err(|_| {
            ConfigError::invalid(
                key,
                format!("{addr:?} is not an IP address or IP:PORT (e.g. 10.0.0.2 or 10.0.0.2:9466=node-b)"),
            )
        })?;
        Peer::new(validate::peer_address(key, ip)?, PeerSource::Static)
    };
    peer.name = name.filter(|n| !n.is_empty());
    Ok(peer)
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

impl Config {
    /// Load from process arguments and the environment.
    pub fn load(args: &Args) -> Result<Config> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                parse_file(&text).map_err(|e| ConfigError::Parse {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
            None => FileConfig::default(),
        };
        Config::merge(file, args)
    }

    /// Combine the file with flag/env values (which win) and validate.
    pub fn merge(file: FileConfig, args: &Args) -> Result<Config> {
        let Listeners { listen, udp, tcp } = listeners(&file, args)?;
        let (identity, mut identity_origin) = super::identity::resolve(&file.identity, args)?;
        let probe = probe_section(&file.probe, args, udp, tcp)?;
        let static_peers = static_peers(&file.discovery, args)?;
        let dns = dns_sources(&file.discovery, args)?;
        // Connections on our own ports are probes and scrapes, not training
        // traffic.
        let own_ports: Vec<u16> = [Some(listen), tcp]
            .into_iter()
            .flatten()
            .map(|a| a.port())
            .collect();
        let ebpf = file.discovery.ebpf.0.build("discovery.ebpf", &own_ports)?;
        // No ToR because the map lacks this host: no mesh until a reload
        // finds one, rather than a crash loop.
        let tor_waits = identity_origin.source(Kind::Tor) == IdentitySource::Missing;
        let mesh_asked = file.discovery.tor_mesh.is_some() || args.tor_mesh_file.is_some();
        if let Some(t) = identity_origin.topology.as_mut() {
            t.tor_mesh_off = tor_waits && mesh_asked;
        }
        let tor_mesh = tor_mesh(file.discovery, args, &identity, tor_waits)?;
        Ok(Config {
            listen,
            telemetry_path: super::server::telemetry_path(args)?,
            http: super::server::http_limits(args)?,
            web: super::server::web_config(args)?,
            udp_listen: udp,
            tcp_listen: tcp,
            responder: responder_policy(&file.responder)?,
            departure_notice: departure_notice(&file.responder, probe.interval + probe.timeout)?,
            identity,
            identity_origin,
            interval: probe.interval,
            timeout: probe.timeout,
            protocols: probe.protocols,
            udp_port: probe.udp_port,
            tcp_port: probe.tcp_port,
            udp_size: probe.udp_size,
            flows: probe.flows,
            static_peers,
            dns,
            tor_mesh,
            ebpf,
            histograms: histogram_mode(&file.metrics)?,
            containers: file.containers.build()?,
        })
    }
}

/// `metrics.histograms`.
fn histogram_mode(fm: &FileMetrics) -> Result<HistogramMode> {
    fm.histograms
        .as_deref()
        .map_or(Ok(HistogramMode::default()), |v| {
            v.parse()
                .map_err(|e| ConfigError::invalid("metrics.histograms", e))
        })
}

struct Listeners {
    listen: SocketAddr,
    udp: Option<SocketAddr>,
    tcp: Option<SocketAddr>,
}

/// `listen` and `responder.{udp,tcp}`.
fn listeners(file: &FileConfig, args: &Args) -> Result<Listeners> {
    let listen = addr_key(
        "listen",
        args.listen_address()
            .or(file.listen.as_deref())
            .unwrap_or(DEFAULT_LISTEN),
    )?;
    let udp = optional_listen(
        "responder.udp",
        args.udp_listen.as_deref().or(file.responder.udp.as_deref()),
        DEFAULT_UDP_PORT,
    )?;
    let tcp = optional_listen(
        "responder.tcp",
        args.tcp_listen.as_deref().or(file.responder.tcp.as_deref()),
        DEFAULT_TCP_PORT,
    )?;
    Ok(Listeners { listen, udp, tcp })
}

/// `responder.departure_notice`: by default one probe interval and a
/// timeout (every peer's next probe sees the notice), at most
/// [`MAX_DEPARTURE_NOTICE`].
fn departure_notice(fr: &FileResponder, round: Duration) -> Result<Duration> {
    const KEY: &str = "responder.departure_notice";
    let Some(v) = fr.departure_notice.as_deref() else {
        return Ok(round.min(MAX_DEPARTURE_NOTICE));
    };
    let d = duration_key(KEY, v)?;
    if d > MAX_DEPARTURE_NOTICE {
        return Err(ConfigError::invalid(
            KEY,
            format!(
                "{v} is longer than {}s: Kubernetes kills a pod 30 s after asking it to stop",
                MAX_DEPARTURE_NOTICE.as_secs()
            ),
        ));
    }
    Ok(d)
}

/// `responder.{allow,allow_peers,rate_limit}`.
fn responder_policy(fr: &FileResponder) -> Result<ResponderPolicy> {
    Ok(ResponderPolicy {
        allow: super::traffic::list("responder", "allow", &fr.allow)?,
        allow_peers: fr.allow_peers,
        rate_limit: fr.rate_limit.unwrap_or(DEFAULT_RESPONDER_RATE),
    })
}

struct ProbeSection {
    interval: Duration,
    timeout: Duration,
    protocols: Vec<Protocol>,
    udp_port: u16,
    tcp_port: u16,
    udp_size: usize,
    flows: FlowSettings,
}

/// `probe:` (timing, protocols, ports, request size).
fn probe_section(
    fp: &FileProbe,
    args: &Args,
    udp_listen: Option<SocketAddr>,
    tcp_listen: Option<SocketAddr>,
) -> Result<ProbeSection> {
    let (interval, timeout) = probe_timing(fp, args)?;
    let protocols = protocols(fp, args)?;
    let udp_port = validate::port("probe.udp_port", fp.udp_port)?
        .unwrap_or(udp_listen.map_or(DEFAULT_UDP_PORT, |a| a.port()));
    let tcp_port = validate::port("probe.tcp_port", fp.tcp_port)?
        .unwrap_or(tcp_listen.map_or(DEFAULT_TCP_PORT, |a| a.port()));
    let udp_size = fp.udp_size.unwrap_or(256);
    if !(HEADER_LEN..=1472).contains(&udp_size) {
        return Err(ConfigError::invalid(
            "probe.udp_size",
            format!("{udp_size} is out of range ({HEADER_LEN}..=1472 bytes)"),
        ));
    }
    let flows = flow_settings(fp, interval)?;
    Ok(ProbeSection {
        interval,
        timeout,
        protocols,
        udp_port,
        tcp_port,
        udp_size,
        flows,
    })
}

/// `probe.interval` and `probe.timeout`.
fn probe_timing(fp: &FileProbe, args: &Args) -> Result<(Duration, Duration)> {
    let interval = match args.interval.as_deref().or(fp.interval.as_deref()) {
        Some(v) => duration_key("probe.interval", v)?,
        None => Duration::from_secs(1),
    };
    if interval < Duration::from_millis(1) {
        return Err(ConfigError::invalid(
            "probe.interval",
            "must be at least 1ms",
        ));
    }
    let timeout = match args.timeout.as_deref().or(fp.timeout.as_deref()) {
        Some(v) => duration_key("probe.timeout", v)?,
        None => interval.min(Duration::from_secs(1)),
    };
    if timeout < Duration::from_micros(100) {
        return Err(ConfigError::invalid(
            "probe.timeout",
            "must be at least 100us",
        ));
    }
    Ok((interval, timeout))
}

/// `probe.protocols` (or `--protocols`), deduplicated in order.
fn protocols(fp: &FileProbe, args: &Args) -> Result<Vec<Protocol>> {
    let names: Vec<String> = match &args.protocols {
        Some(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
        None => fp.protocols.clone().unwrap_or_else(default_protocols),
    };
    let mut protocols = Vec::new();
    for (i, s) in names.iter().enumerate() {
        if s.is_empty() {
            continue;
        }
        let p: Protocol = s
            .parse()
            .map_err(|e| ConfigError::invalid(format!("probe.protocols[{i}]"), e))?;
        if !protocols.contains(&p) {
            protocols.push(p);
        }
    }
    if protocols.is_empty() {
        let key = if args.protocols.is_some() {
            "--protocols"
        } else {
            "probe.protocols"
        };
        let all = Protocol::LABELS.join(", ");
        return Err(ConfigError::invalid(
            key,
            format!("is empty: name at least one of {all}"),
        ));
    }
    Ok(protocols)
}

/// `discovery.static` plus `--peers`.
fn static_peers(fd: &FileDiscovery, args: &Args) -> Result<Vec<Peer>> {
    let mut peers = Vec::new();
    let mut keys = Vec::new();
    for (i, p) in fd.static_peers.iter().enumerate() {
        let key = format!("discovery.static[{i}]");
        let addr_key = format!("{key}.address");
        let ip = validate::peer_address(&addr_key, ip_key(&addr_key, &p.address)?)?;
        let mut peer = Peer::new(ip, PeerSource::Static);
        peer.name = p.name.clone().filter(|n| !n.is_empty());
        peer.udp_port = validate::port(&format!("{key}.udp_port"), p.udp_port)?;
        peer.tcp_port = validate::port(&format!("{key}.tcp_port"), p.tcp_port)?;
        peers.push(peer);
        keys.push(key);
    }
    if let Some(list) = &args.peers {
        for (i, s) in list.split(',').filter(|s| !s.trim().is_empty()).enumerate() {
            let key = format!("--peers entry {}", i + 1);
            peers.push(parse_flag_peer(&key, s)?);
            keys.push(key);
        }
    }
    validate::unique_peers(&peers, &keys)?;
    Ok(peers)
}

/// `discovery.dns` plus `--dns`.
fn dns_sources(fd: &FileDiscovery, args: &Args) -> Result<Vec<DnsSource>> {
    let mut dns = Vec::new();
    for (i, d) in fd.dns.iter().enumerate() {
        let key = format!("discovery.dns[{i}]");
        if d.name.trim().is_empty() {
            return Err(ConfigError::invalid(
                format!("{key}.name"),
                "must not be empty",
            ));
        }
        let srv = match d.record.as_deref().map(str::trim) {
            None | Some("a" | "A") => false,
            Some("srv" | "SRV") => true,
            Some(o) => {
                return Err(ConfigError::invalid(
                    format!("{key}.record"),
                    format!("{o:?} is not a record type (use a or srv)"),
                ))
            }
        };
        dns.push(DnsSource {
            name: d.name.trim().to_string(),
            srv,
            refresh: match &d.refresh {
                Some(r) => {
                    let k = format!("{key}.refresh");
                    validate::refresh(&k, duration_key(&k, r)?)?
                }
                None => Duration::from_secs(30),
            },
            nameserver: match &d.nameserver {
                Some(n) => Some(addr_key(&format!("{key}.nameserver"), n)?),
                None => None,
            },
        });
    }
    if let Some(name) = &args.dns {
        let (srv, name) = match name.trim().strip_prefix("srv:") {
            Some(n) => (true, n.trim()),
            None => (false, name.trim()),
        };
        if name.is_empty() {
            // An empty SKELETONHUNTER_DNS would otherwise resolve nothing,
            // every refresh, without a word.
            return Err(ConfigError::invalid(
                "--dns",
                "must name a DNS name (or srv:NAME); leave the flag out for no DNS peers",
            ));
        }
        dns.push(DnsSource {
            name: name.to_string(),
            srv,
            refresh: Duration::from_secs(30),
            nameserver: None,
        });
    }
    Ok(dns)
}

/// `discovery.tor_mesh` plus `--tor-mesh-file`; needs `identity.tor`
/// off (no error) while `tor_waits` for the topology map.
fn tor_mesh(
    fd: FileDiscovery,
    args: &Args,
    identity: &Identity,
    tor_waits: bool,
) -> Result<Option<TorMesh>> {
    let mut tor_mesh = match fd.tor_mesh {
        Some(t) => {
            mesh_entries(&t.peers)?;
            Some(TorMesh {
                file: t.file,
                peers: t.peers,
                refresh: match &t.refresh {
                    Some(r) => {
                        let k = "discovery.tor_mesh.refresh";
                        validate::refresh(k, duration_key(k, r)?)?
                    }
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
    if let Some(f) = tor_mesh.as_ref().and_then(|t| t.file.as_deref()) {
        // Read now, as the topology map and the web config are: a missing
        // or broken list is refused at start (and by a reload), not found
        // by the first refresh. Its entries are checked as they are read.
        let key = match args.tor_mesh_file {
            Some(_) => "--tor-mesh-file",
            None => "discovery.tor_mesh.file",
        };
        read_mesh_list(f).map_err(|e| ConfigError::invalid(key, e))?;
    }
    if tor_mesh.is_some() && identity.tor.is_empty() {
        if tor_waits {
            return Ok(None);
        }
        return Err(ConfigError::invalid(
            "discovery.tor_mesh",
            "needs this exporter's identity.tor (or --tor / SKELETONHUNTER_TOR, or its host's entry in identity.topology_file)",
        ));
    }
    Ok(tor_mesh)
}

/// Inline `discovery.tor_mesh.peers`: unicast addresses, no port 0, no
/// address twice.
fn mesh_entries(entries: &[super::MeshEntry]) -> Result<()> {
    let mut peers = Vec::new();
    let mut keys = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let key = format!("discovery.tor_mesh.peers[{i}]");
        let addr_key = format!("{key}.address");
        let ip = validate::peer_address(&addr_key, ip_key(&addr_key, &e.address)?)?;
        validate::port(&format!("{key}.udp_port"), e.udp_port)?;
        validate::port(&format!("{key}.tcp_port"), e.tcp_port)?;
        peers.push(Peer::new(ip, PeerSource::TorMesh));
        keys.push(key);
    }
    validate::unique_peers(&peers, &keys)
}
