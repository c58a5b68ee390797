//! The topology map (`identity.topology_file`, the DaemonSet's ConfigMap
//! `skeletonhunter-topology`) run by a real exporter in a network
//! namespace: the map fills `tor`, `spine` and `network_pod` of
//! `skeletonhunter_node_info`; an updated map plus SIGHUP changes them in
//! the running process; a malformed map on reload keeps the running
//! identity and sets `skeletonhunter_config_last_reload_successful` to 0;
//! a host missing from the map starts, warns and probes; a malformed map at
//! start exits 2 naming the file and line. See docs/deploy.md, "Topology".

use skeletonhunter_tests::exporter::{pair, scrape, start, Pair, METRICS, TCP, UDP};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::http::http_request;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::sys::kill;
use skeletonhunter_tools::{bin_path, wait_until, Netns};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The Kubernetes node name the exporter runs on (`identity.host`).
const HOST: &str = "gpu-node-1";

/// An exporter config for namespace `a` that takes its topology from
/// `dir/topology.yaml` and probes a silent static peer.
fn config(dir: &Path) -> String {
    format!(
        "listen: \"{METRICS}\"\n\
         identity: {{node: \"a\", host: \"{HOST}\", topology_file: \"{}\"}}\n\
         responder: {{udp: \"198.18.1.1:{UDP}\", tcp: \"198.18.1.1:{TCP}\"}}\n\
         probe: {{interval: 50ms, timeout: 500ms, protocols: [udp], udp_port: {UDP}, tcp_port: {TCP}}}\n\
         discovery:\n  ebpf: false\n  static:\n    - {{address: \"198.18.1.2\"}}\n",
        dir.join("topology.yaml").display()
    )
}

fn write_map(dir: &Path, text: &str) {
    std::fs::write(dir.join("topology.yaml"), text).unwrap();
}

/// `skeletonhunter_node_info`'s lines.
fn node_info(body: &str) -> Vec<&str> {
    body.lines()
        .filter(|l| l.starts_with("skeletonhunter_node_info{"))
        .collect()
}

/// Whether `skeletonhunter_identity_source{field, source}` is 1.
fn source_is(body: &str, field: &str, source: &str) -> bool {
    sample(
        body,
        "skeletonhunter_identity_source",
        &[
            &format!("field=\"{field}\""),
            &format!("source=\"{source}\""),
        ],
    ) == Some(1.0)
}

fn post_reload(p: &Pair) -> (u16, String) {
    let addr: SocketAddr = METRICS.parse().unwrap();
    p.a.run_in(move || http_request(addr, "POST", "/-/reload", None, Duration::from_secs(5)))
        .unwrap()
        .unwrap()
}

/// The first scrape that satisfies `ok`, within 20 s.
fn scrape_until(p: &Pair, what: &str, ok: impl Fn(&str) -> bool) -> String {
    wait_until(
        what,
        Duration::from_secs(20),
        Duration::from_millis(100),
        || scrape(&p.a).ok().filter(|b| ok(b)),
    )
    .unwrap()
}

#[test]
fn the_map_sets_the_topology_and_a_reload_applies_its_update() {
    if !require_privileges("the_map_sets_the_topology_and_a_reload_applies_its_update") {
        return;
    }
    let p = pair("extopo").unwrap();
    let dir = TempDir::new("extopo").unwrap();
    write_map(
        dir.path(),
        &format!("hosts:\n  {HOST}: {{tor: asw-a1, spine: dsw-a, pod: pod-1}}\n  gpu-node-2: {{tor: asw-a2}}\n"),
    );
    let mut a = start(&p.a, dir.path(), "a", &config(dir.path())).unwrap();
    let body = scrape(&p.a).unwrap();
    let info = node_info(&body);
    assert_eq!(info.len(), 1, "{info:?}");
    for want in [
        "tor=\"asw-a1\"",
        "spine=\"dsw-a\"",
        "network_pod=\"pod-1\"",
        "node_id=\"a\"",
        "host=\"gpu-node-1\"",
    ] {
        assert!(info[0].contains(want), "{want} missing: {}", info[0]);
    }
    assert!(source_is(&body, "tor", "topology_file"), "{body}");
    assert!(source_is(&body, "node", "config_file"), "{body}");
    assert!(!a.log().contains("has no entry"), "{}", a.log());

    // The ConfigMap changes (the kubelet rewrites the file) and SIGHUP:
    // the same process publishes the new topology, as one series.
    write_map(
        dir.path(),
        &format!("hosts:\n  {HOST}: {{tor: asw-b2, spine: dsw-b, pod: pod-2}}\n"),
    );
    let pid = a.pid();
    kill(pid as i32, libc::SIGHUP).unwrap();
    let body = scrape_until(&p, "node_info with the new ToR", |b| {
        node_info(b).iter().any(|l| l.contains("tor=\"asw-b2\""))
    });
    let info = node_info(&body);
    assert_eq!(info.len(), 1, "the old identity must go: {info:?}");
    assert!(
        info[0].contains("spine=\"dsw-b\"") && info[0].contains("network_pod=\"pod-2\""),
        "{}",
        info[0]
    );
    a.check_running().unwrap();
    assert_eq!(a.pid(), pid);
    assert_eq!(
        sample(&body, "skeletonhunter_config_last_reload_successful", &[]),
        Some(1.0)
    );

    // A malformed map: refused with the file and line, the running
    // identity kept, the reload gauge at 0; SIGHUP does the same.
    write_map(
        dir.path(),
        &format!("hosts:\n  {HOST}: {{tor: asw-c3, rack: r3}}\n"),
    );
    let (status, text) = post_reload(&p);
    assert_eq!(status, 500, "{text}");
    assert!(
        text.contains("topology.yaml") && text.contains("rack") && text.contains("line 2"),
        "{text}"
    );
    kill(pid as i32, libc::SIGHUP).unwrap();
    let body = scrape_until(&p, "reload_successful 0", |b| {
        sample(b, "skeletonhunter_config_last_reload_successful", &[]) == Some(0.0)
    });
    let info = node_info(&body);
    assert_eq!(info.len(), 1, "{info:?}");
    assert!(info[0].contains("tor=\"asw-b2\""), "{}", info[0]);
    a.check_running().unwrap();
}

#[test]
fn a_host_missing_from_the_map_starts_warns_and_probes() {
    if !require_privileges("a_host_missing_from_the_map_starts_warns_and_probes") {
        return;
    }
    let p = pair("extopm").unwrap();
    let dir = TempDir::new("extopm").unwrap();
    // The DaemonSet reached a new node before the map did.
    write_map(dir.path(), "hosts:\n  gpu-node-2: {tor: asw-a2}\n");
    let mut a = start(&p.a, dir.path(), "a", &config(dir.path())).unwrap();
    let body = scrape_until(&p, "probes sent", |b| {
        sample(
            b,
            "skeletonhunter_probe_sent_total",
            &["dst_node=\"198.18.1.2\""],
        )
        .is_some_and(|n| n >= 5.0)
    });
    let info = node_info(&body);
    assert!(info.len() == 1 && info[0].contains("tor=\"\""), "{info:?}");
    assert!(source_is(&body, "tor", "missing"), "{body}");
    assert!(source_is(&body, "spine", "missing"), "{body}");
    let log = a.log();
    assert_eq!(
        log.matches("has no entry for host").count(),
        1,
        "one warning at start:\n{log}"
    );
    assert!(
        log.contains("gpu-node-1") && log.contains("topology.yaml"),
        "{log}"
    );
    // The map catches up; a reload fills the topology.
    write_map(dir.path(), &format!("hosts:\n  {HOST}: {{tor: asw-a1}}\n"));
    let (status, text) = post_reload(&p);
    assert_eq!(status, 200, "{text}");
    let body = scrape(&p.a).unwrap();
    assert!(
        node_info(&body)
            .iter()
            .any(|l| l.contains("tor=\"asw-a1\"")),
        "{body}"
    );
    assert!(source_is(&body, "tor", "topology_file"), "{body}");
    assert!(source_is(&body, "spine", "unset"), "{body}");
    a.check_running().unwrap();
}

#[test]
fn a_malformed_map_at_start_exits_2_naming_file_and_line() {
    if !require_privileges("a_malformed_map_at_start_exits_2_naming_file_and_line") {
        return;
    }
    let ns = Netns::new("extopb").unwrap();
    let dir = TempDir::new("extopb").unwrap();
    write_map(
        dir.path(),
        "hosts:\n  gpu-node-1:\n    tor: asw-a1\n    spine: [a, b]\n",
    );
    let cfg = dir.path().join("a.yaml");
    std::fs::write(&cfg, config(dir.path())).unwrap();
    let bin = bin_path("skeletonhunter-exporter");
    let mut cmd = ns.command(bin.to_str().unwrap());
    cmd.arg("--config")
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let status = wait_until(
        "the exporter to exit",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || child.try_wait().ok().flatten(),
    );
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let status = status.unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&dir.path().join("topology.yaml").display().to_string())
            && stderr.contains("spine")
            && stderr.contains("line 4"),
        "{stderr}"
    );
}
