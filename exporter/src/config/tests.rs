use super::*;
use crate::model::{HistogramMode, Protocol};
use std::time::Duration;

fn args() -> Args {
    Args::default()
}

#[test]
fn new_flag_names_parse_and_old_ones_still_work_with_a_warning() {
    use clap::Parser;
    let new = Args::try_parse_from([
        "x",
        "--web.listen-address=127.0.0.1:9100",
        "--web.telemetry-path=/m",
        "--log.level=debug",
        "--log.format=json",
    ])
    .unwrap();
    assert_eq!(new.listen_address(), Some("127.0.0.1:9100"));
    assert_eq!(new.log.directive(), "debug");
    assert!(new.deprecated_flags().is_empty());
    let c = Config::merge(FileConfig::default(), &new).unwrap();
    assert_eq!(c.telemetry_path, "/m");
    assert_eq!(c.listen.to_string(), "127.0.0.1:9100");
    let old = Args::try_parse_from(["x", "--listen=127.0.0.1:9101", "--log-level=warn"]).unwrap();
    assert_eq!(old.listen_address(), Some("127.0.0.1:9101"));
    assert_eq!(old.log.directive(), "warn");
    assert_eq!(
        old.deprecated_flags(),
        [
            ("--listen", "--web.listen-address"),
            ("--log-level", "--log.level")
        ]
    );
    // Both spellings at once is a usage error, as is an unknown level.
    assert!(Args::try_parse_from(["x", "--listen=a", "--web.listen-address=b"]).is_err());
    assert!(Args::try_parse_from(["x", "--log.level=loud"]).is_err());
    assert!(Args::try_parse_from(["x", "--log.format=text"]).is_err());
    for (bad, why) in [
        ("metrics", "absolute"),
        ("/-/ready", "already"),
        ("/", "already"),
    ] {
        let a = Args::try_parse_from(["x", &format!("--web.telemetry-path={bad}")]).unwrap();
        let e = Config::merge(FileConfig::default(), &a)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--web.telemetry-path") && e.contains(why),
            "{bad}: {e}"
        );
    }
}

#[test]
fn check_config_summary_is_readable() {
    let file = parse_file(
        "identity: {node: n1, tor: t1}\nprobe: {interval: 20ms, protocols: [udp, icmp]}\ndiscovery:\n  ebpf: false\n  static:\n    - {address: 10.0.0.2, name: b}\n",
    )
    .unwrap();
    let s = Config::merge(file, &args()).unwrap().summary(None);
    for want in [
        "listen-address: 0.0.0.0:9465",
        "telemetry-path: /metrics",
        "node: n1",
        "tor: t1",
        "protocols: udp, icmp",
        "interval: 20ms",
        "static peers: 1",
        "10.0.0.2 b",
        "traffic: off",
        "histograms: both",
    ] {
        assert!(s.contains(want), "{want:?} missing from\n{s}");
    }
    assert!(!s.contains("Config {"), "not a debug dump");
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
    // Native where the scraper negotiates them, classic where it does not.
    assert_eq!(c.histograms, HistogramMode::Both);
    let classic = parse_file("metrics: {histograms: classic}").unwrap();
    let c = Config::merge(classic, &args()).unwrap();
    assert_eq!(c.histograms, HistogramMode::Classic);
}

#[test]
fn errors_name_the_key() {
    let e = |yaml: &str| {
        let r = parse_file(yaml).and_then(|f| Config::merge(f, &args()));
        format!("{:#}", r.unwrap_err())
    };
    assert!(e("probe: {interval: soon}").contains("probe.interval"));
    assert!(e("probe: {protocols: [udp, nosuch]}").contains("probe.protocols[1]"));
    assert!(
        e("discovery: {static: [{address: 10.0.0.300}]}").contains("discovery.static[0].address")
    );
    assert!(e("listen: nowhere").contains("listen"));
    assert!(e("probe: {udp_size: 9000}").contains("probe.udp_size"));
    assert!(e("peers: {dns: [{name: x, record: mx}]}").contains("discovery.dns[0].record"));
    assert!(e("identity: {rack: r1}").contains("rack"));
    let mode = e("metrics: {histograms: sparse}");
    assert!(
        mode.contains("metrics.histograms") && mode.contains("classic, native or both"),
        "{mode}"
    );
    let unknown = e("probe: {intervall: 1s}");
    assert!(unknown.contains("intervall"), "{unknown}");
    assert!(e("discovery: {tor_mesh: {peers: []}}").contains("identity.tor"));
    let mut a = args();
    a.peers = Some("10.0.0.2,bogus".into());
    let r = Config::merge(FileConfig::default(), &a).unwrap_err();
    assert!(r.to_string().contains("--peers entry 2"), "{r}");
}

#[test]
fn the_departure_notice_covers_a_probe_round_and_is_bounded() {
    let merge = |yaml: &str| parse_file(yaml).and_then(|f| Config::merge(f, &args()));
    let c = merge("probe: {interval: 200ms, timeout: 400ms}").unwrap();
    assert_eq!(c.departure_notice, Duration::from_millis(600));
    let c = merge("probe: {interval: 20s, timeout: 10s}").unwrap();
    assert_eq!(c.departure_notice, Duration::from_secs(25), "capped");
    let c = merge("responder: {departure_notice: 0s}").unwrap();
    assert!(c.departure_notice.is_zero());
    let e = format!(
        "{:#}",
        merge("responder: {departure_notice: 1m}").unwrap_err()
    );
    assert!(
        e.contains("responder.departure_notice") && e.contains("25s"),
        "{e}"
    );
}

#[test]
fn duration_errors_name_the_key_and_the_unit() {
    let mut a = args();
    a.interval = Some("10x".into());
    let e = Config::merge(FileConfig::default(), &a)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("probe.interval: \"10x\": unknown unit"),
        "{e}"
    );
}

#[test]
fn configs_that_must_not_run_are_refused_with_the_key() {
    let e = |yaml: &str| {
        let r = parse_file(yaml).and_then(|f| Config::merge(f, &args()));
        format!("{:#}", r.expect_err(yaml))
    };
    let cases = [
        (
            "discovery: {dns: [{name: x, refresh: 0s}]}",
            "discovery.dns[0].refresh",
        ),
        (
            "discovery: {dns: [{name: x, refresh: 500ms}]}",
            "discovery.dns[0].refresh",
        ),
        (
            "identity: {tor: t}\ndiscovery: {tor_mesh: {refresh: 0s}}",
            "discovery.tor_mesh.refresh",
        ),
        (
            "discovery: {static: [{address: 255.255.255.255}]}",
            "discovery.static[0].address",
        ),
        (
            "discovery: {static: [{address: 0.0.0.0}]}",
            "discovery.static[0].address",
        ),
        (
            "discovery: {static: [{address: \"::\"}]}",
            "discovery.static[0].address",
        ),
        (
            "discovery: {static: [{address: 239.1.1.1}]}",
            "discovery.static[0].address",
        ),
        (
            "discovery: {static: [{address: 10.0.0.2, udp_port: 0}]}",
            "discovery.static[0].udp_port",
        ),
        (
            "discovery: {static: [{address: 10.0.0.2, tcp_port: 0}]}",
            "discovery.static[0].tcp_port",
        ),
        ("probe: {udp_port: 0}", "probe.udp_port"),
        ("probe: {tcp_port: 0}", "probe.tcp_port"),
        ("listen: 0.0.0.0:0", "listen"),
        ("responder: {udp: \"0.0.0.0:0\"}", "responder.udp"),
        ("probe: {protocols: []}", "probe.protocols"),
        (
            "discovery: {static: [{address: 10.0.0.2}, {address: 10.0.0.3}, {address: 10.0.0.2}]}",
            "discovery.static[2]: 10.0.0.2 duplicates discovery.static[0]",
        ),
        (
            "identity: {tor: t}\ndiscovery: {tor_mesh: {peers: [{address: 224.0.0.5, tor: t}]}}",
            "discovery.tor_mesh.peers[0].address",
        ),
    ];
    for (yaml, key) in cases {
        let msg = e(yaml);
        assert!(msg.starts_with(key), "{yaml}: {msg}");
    }
    let flag = |f: fn(&mut Args)| {
        let mut a = args();
        f(&mut a);
        Config::merge(FileConfig::default(), &a)
            .unwrap_err()
            .to_string()
    };
    assert!(flag(|a| a.protocols = Some(" , ".into())).starts_with("--protocols"));
    assert!(flag(|a| a.peers = Some("10.0.0.2:0".into())).starts_with("--peers entry 1"));
    assert!(flag(|a| a.peers = Some("ff02::1".into())).starts_with("--peers entry 1"));
    assert!(
        flag(|a| a.peers = Some("10.0.0.2,10.0.0.2:7000".into())).starts_with("--peers entry 2")
    );
    assert!(flag(|a| a.http_max_connections = Some(0)).starts_with("--http-max-connections"));
    assert!(
        flag(|a| a.http_header_timeout = Some("0s".into())).starts_with("--http-header-timeout")
    );
}

/// A topology map in a fresh directory; the directory is removed on drop.
struct MapFile(std::path::PathBuf);

impl MapFile {
    fn new(tag: &str, text: &str) -> MapFile {
        let dir = std::env::temp_dir().join(format!("shid-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("topology.yaml"), text).unwrap();
        MapFile(dir)
    }
    fn path(&self) -> String {
        self.0.join("topology.yaml").display().to_string()
    }
    /// A config file whose identity has `fields` (each followed by `, `)
    /// and names this map, then `more` YAML.
    fn config(&self, fields: &str, more: &str) -> FileConfig {
        parse_file(&format!(
            "identity: {{{fields}topology_file: {:?}}}\n{more}",
            self.path()
        ))
        .unwrap()
    }
}

impl Drop for MapFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn topology_map_fills_what_is_empty_and_explicit_values_win() {
    use crate::model::IdentitySource as S;
    use skeletonhunter_common::Kind;
    let map = MapFile::new(
        "fill",
        "hosts:\n  h1: {tor: map-tor, spine: map-spine, pod: map-pod, tenant: map-tenant}\n  h2: {tor: other}\n",
    );
    let file = map.config("node: n1, host: h1, spine: file-spine, ", "");
    let mut a = args();
    a.pod = Some("flag-pod".into());
    // An empty value (a downward-API variable of an absent label) is not
    // given: the map still fills it.
    a.tor = Some(" ".into());
    let c = Config::merge(file, &a).unwrap();
    let id = &c.identity;
    assert_eq!(
        (
            id.tor.as_str(),
            id.spine.as_str(),
            id.pod.as_str(),
            id.tenant.as_str()
        ),
        ("map-tor", "file-spine", "flag-pod", "map-tenant")
    );
    let o = &c.identity_origin;
    for (kind, want) in [
        (Kind::Node, S::ConfigFile),
        (Kind::Host, S::ConfigFile),
        (Kind::Tor, S::TopologyFile),
        (Kind::Spine, S::ConfigFile),
        (Kind::Pod, S::FlagOrEnv),
        (Kind::Tenant, S::TopologyFile),
    ] {
        assert_eq!(o.source(kind), want, "{kind}");
    }
    assert!(o.topology.as_ref().unwrap().found);
    assert_eq!(o.warning(), None);
    let s = c.summary(None);
    assert!(s.contains("tor: map-tor (topology_file)"), "{s}");
    assert!(s.contains("(entry for host \"h1\": found)"), "{s}");
    // --topology-file wins over the key; the host comes from the flag.
    let other = MapFile::new("flag", "hosts: {h9: {tor: flag-map-tor}}\n");
    let mut a = args();
    a.host = Some("h9".into());
    a.topology_file = Some(other.path().into());
    let file = map.config("", "");
    assert_eq!(
        Config::merge(file, &a).unwrap().identity.tor,
        "flag-map-tor"
    );
}

#[test]
fn a_host_missing_from_the_map_starts_with_empty_fields_and_a_warning() {
    use crate::model::IdentitySource as S;
    use skeletonhunter_common::Kind;
    let map = MapFile::new("missing", "hosts: {h2: {tor: t2}}\n");
    let file = map.config("host: h1, tenant: job-1, ", "");
    let c = Config::merge(file, &args()).unwrap();
    assert_eq!(
        (c.identity.tor.as_str(), c.identity.spine.as_str()),
        ("", "")
    );
    let o = &c.identity_origin;
    assert_eq!(o.source(Kind::Tor), S::Missing);
    assert_eq!(o.source(Kind::Pod), S::Missing);
    assert_eq!(o.source(Kind::Tenant), S::ConfigFile);
    let w = o.warning().unwrap();
    assert!(
        w.contains(&map.path()) && w.contains("\"h1\"") && w.contains("tor, spine, pod"),
        "{w}"
    );
    assert!(!w.contains("tenant"), "{w}");
    let s = c.summary(None);
    assert!(
        s.contains("tor: - (missing)") && s.contains("MISSING"),
        "{s}"
    );
    // A ToR mesh waits for the map's tor instead of refusing to start.
    let file = map.config("host: h1, ", "discovery: {tor_mesh: {peers: []}}\n");
    let c = Config::merge(file, &args()).unwrap();
    assert!(c.tor_mesh.is_none());
    let w = c.identity_origin.warning().unwrap();
    assert!(w.contains("discovery.tor_mesh is off"), "{w}");
    // An entry without a spine: the spine is unset, not missing.
    let map = MapFile::new("partial", "hosts: {h1: {tor: t1}}\n");
    let file = map.config("host: h1, ", "");
    let c = Config::merge(file, &args()).unwrap();
    assert_eq!(c.identity_origin.source(Kind::Spine), S::Unset);
    assert_eq!(c.identity_origin.warning(), None);
}

#[test]
fn a_bad_topology_map_is_refused_with_file_and_line() {
    let map = MapFile::new("bad", "hosts:\n  h1: {tor: t1}\n  h2: {rack: r2}\n");
    let file = map.config("host: h1, ", "");
    let e = format!("{:#}", Config::merge(file, &args()).unwrap_err());
    assert!(
        e.contains(&map.path()) && e.contains("rack") && e.contains("line 3"),
        "{e}"
    );
    let file = parse_file("identity: {topology_file: /nonexistent/topology.yaml}\n").unwrap();
    let e = format!("{:#}", Config::merge(file, &args()).unwrap_err());
    assert!(e.contains("/nonexistent/topology.yaml"), "{e}");
}

#[test]
fn a_reload_applies_the_topology_fields_only() {
    use super::identity::{apply_reloadable, restart_fields_differ};
    let load = |yaml: &str| Config::merge(parse_file(yaml).unwrap(), &args()).unwrap();
    let old = load("identity: {node: n1, host: h1, nic: 10.0.0.1, tor: t1, pod: p1}\n");
    let new = load("identity: {node: n2, host: h1, nic: 10.0.0.1, tor: t2}\n");
    assert!(restart_fields_differ(&old.identity, &new.identity));
    let (id, origin) = apply_reloadable(
        (&old.identity, &old.identity_origin),
        (&new.identity, &new.identity_origin),
    );
    assert_eq!(
        (id.node.as_str(), id.tor.as_str(), id.pod.as_str()),
        ("n1", "t2", "")
    );
    assert_eq!(
        origin.source(skeletonhunter_common::Kind::Pod),
        crate::model::IdentitySource::Unset
    );
    let same = load("identity: {node: n1, host: h1, nic: 10.0.0.1, spine: s9}\n");
    assert!(!restart_fields_differ(&old.identity, &same.identity));
    assert_eq!(
        crate::reload::needs_restart(&old, &same),
        Vec::<&str>::new()
    );
}

#[test]
fn a_node_name_longer_than_a_reply_carries_is_refused_naming_the_key() {
    use crate::wire::probe::MAX_LABEL_LEN;
    let long = "n".repeat(200_000);
    let yaml = format!("identity: {{node: {long}}}");
    let e = parse_file(&yaml)
        .and_then(|f| Config::merge(f, &args()))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("identity.node: "),
        "{}",
        &e[..200.min(e.len())]
    );
    assert!(e.contains("200000 bytes"), "{}", &e[..200.min(e.len())]);
    let mut a = args();
    a.node = Some("n".repeat(MAX_LABEL_LEN + 1));
    let e = Config::merge(FileConfig::default(), &a)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--node"), "{e}");
    // The longest name a reply carries whole is accepted.
    a.node = Some("n".repeat(MAX_LABEL_LEN));
    let c = Config::merge(FileConfig::default(), &a).unwrap();
    assert_eq!(c.identity.node.len(), MAX_LABEL_LEN);
}

#[test]
fn a_missing_or_broken_tor_mesh_file_is_refused_like_every_other_file() {
    let dir = std::env::temp_dir().join(format!("sh-mesh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("nonexistent.yaml");
    let broken = dir.join("broken.yaml");
    std::fs::write(&broken, "- {address: 10.0.0.2, rack: x}\n").unwrap();
    let good = dir.join("good.yaml");
    std::fs::write(&good, "- {address: 10.0.0.2, tor: t}\n").unwrap();
    let from_file = |p: &std::path::Path| {
        let yaml = format!("identity: {{tor: t}}\ndiscovery: {{tor_mesh: {{file: {p:?}}}}}");
        parse_file(&yaml).and_then(|f| Config::merge(f, &args()))
    };
    let from_flag = |p: &std::path::Path| {
        let mut a = args();
        a.tor = Some("t".into());
        a.tor_mesh_file = Some(p.to_path_buf());
        Config::merge(FileConfig::default(), &a)
    };
    for bad in [&missing, &broken] {
        let e = from_file(bad).unwrap_err().to_string();
        assert!(e.starts_with("discovery.tor_mesh.file: "), "{e}");
        assert!(e.contains(&bad.display().to_string()), "{e}");
        let e = from_flag(bad).unwrap_err().to_string();
        assert!(e.starts_with("--tor-mesh-file: "), "{e}");
    }
    assert!(from_file(&good).is_ok());
    assert!(from_flag(&good).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_config_prints_the_connection_limit_in_force_and_why() {
    let mut a = args();
    a.http_max_connections = Some(99_999_999_999);
    let c = Config::merge(FileConfig::default(), &a).unwrap();
    let s = c.summary(Some(20_000));
    assert!(
        s.contains(
            "limits: 5000 connections (--http-max-connections 99999999999 lowered to a \
             quarter of the open-file limit 20000),"
        ),
        "{s}"
    );
    a.http_max_connections = Some(100);
    let c = Config::merge(FileConfig::default(), &a).unwrap();
    assert!(c.summary(Some(20_000)).contains("limits: 100 connections,"));
    assert!(c.summary(None).contains("limits: 100 connections,"));
}

#[test]
fn an_empty_dns_flag_is_refused() {
    for v in ["", " ", "srv:", "srv: "] {
        let mut a = args();
        a.dns = Some(v.into());
        let e = Config::merge(FileConfig::default(), &a)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--dns: "), "{v:?}: {e}");
    }
    let mut a = args();
    a.dns = Some("srv:peers.example".into());
    let c = Config::merge(FileConfig::default(), &a).unwrap();
    assert_eq!(c.dns[0].name, "peers.example");
    assert!(c.dns[0].srv);
}
