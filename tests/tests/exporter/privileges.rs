//! Least privilege: the exporter probes (UDP, TCP, ICMP), discovers peers
//! with eBPF and serves `/metrics` as `nobody` given only the capabilities
//! docs/operations.md lists, keeps only `CAP_NET_RAW` in every thread once
//! set up, and without a capability it fails naming it (exit 1). The
//! localizer needs none. The sidecar option runs with no capability at
//! all, as its manifest says. Started with `setpriv` (util-linux) under
//! `nsenter --net` (not `ip netns exec`, which remounts /sys and so hides
//! the host's tracefs).

use skeletonhunter_tests::exporter::{
    counts, pair, scrape, start, Launch, Pair, METRICS, TCP, UDP,
};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::process::{bin_path, ChildGuard};
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{wait_until, Netns};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

/// What the exporter is given: raw sockets, eBPF, and reading tracefs.
const CAPS: &str = "net_raw,bpf,perfmon,dac_read_search";
/// `CAP_NET_RAW` as a capability mask: all it keeps after set-up.
const NET_RAW: u64 = 1 << 13;

/// Exporter `a`: UDP, TCP and ICMP probes, eBPF discovery only (no static
/// peer: b must be found from the traffic).
fn config_a(mode: &str) -> String {
    format!(
        "listen: \"{METRICS}\"\n\
         identity: {{node: \"a\", host: \"host-a\", tor: \"tor1\", spine: \"s1\"}}\n\
         responder: {{udp: \"198.18.1.1:{UDP}\", tcp: \"198.18.1.1:{TCP}\"}}\n\
         probe: {{interval: 100ms, timeout: 500ms, protocols: [udp, tcp, icmp], udp_port: {UDP}, tcp_port: {TCP}}}\n\
         discovery:\n  ebpf:\n    mode: {mode}\n    window: 1s\n    min_windows: 3\n    long_lived: 2s\n    ttl: 30s\n    include_cidrs: [198.18.0.0/15]\n"
    )
}

/// `bin` where uid 65534 can reach it: a hard link (or, across file
/// systems, a copy) in `dir`, whose parents are world-searchable, unlike a
/// checkout under `/root`.
fn reachable(dir: &TempDir, bin: &str) -> std::path::PathBuf {
    let to = dir.path().join(bin);
    if !to.exists() && std::fs::hard_link(bin_path(bin), &to).is_err() {
        std::fs::copy(bin_path(bin), &to).unwrap();
    }
    searchable(dir);
    to
}

/// Let any user search `dir` (an unprivileged exporter reads its files).
fn searchable(dir: &TempDir) {
    let _ = Command::new("chmod")
        .args(["a+rx", dir.path().to_str().unwrap()])
        .status();
}

/// `setpriv` to run as `uid`:`gid` with exactly `caps` (inheritable,
/// ambient and bounding; `""` for none), up to its `--`.
fn setpriv(uid: u64, gid: u64, caps: &str) -> Vec<String> {
    let set = |flag: &str| {
        let list: String = caps
            .split(',')
            .filter(|c| !c.is_empty())
            .map(|c| format!(",+{c}"))
            .collect();
        format!("--{flag}=-all{list}")
    };
    vec![
        "setpriv".into(),
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
        set("inh-caps"),
        set("ambient-caps"),
        set("bounding-set"),
    ]
}

/// Start the exporter in `ns` as uid/gid 65534 with exactly `caps`
/// (inheritable, ambient and bounding), or as root when `caps` is `None`.
fn start_as(ns: &Netns, dir: &TempDir, name: &str, cfg: &str, caps: Option<&str>) -> ChildGuard {
    let mut wrap: Vec<String> = Vec::new();
    if let Some(caps) = caps {
        wrap = setpriv(65534, 65534, caps);
        wrap.push("--".into());
    }
    Launch::new(name)
        .within(ns)
        .net_only()
        .bin(reachable(dir, "skeletonhunter-exporter"))
        .wrap(&wrap)
        .spawn(dir.path(), cfg)
        .unwrap()
}

/// (effective, permitted, bounding, ambient) of every thread of `pid`.
fn thread_caps(pid: u32) -> Vec<(String, [u64; 4])> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = t.unwrap().path();
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        let field = |f: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{f}:\t")))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .unwrap()
        };
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        out.push((
            name.trim().to_string(),
            ["CapEff", "CapPrm", "CapBnd", "CapAmb"].map(field),
        ));
    }
    out
}

/// Wait until the exporter in `ns` serves `/metrics`.
fn serving(ns: &Netns, child: &mut ChildGuard) {
    let r = wait_until(
        "the exporter serving /metrics",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || scrape(ns).ok(),
    );
    child.check_running().unwrap();
    r.unwrap();
}

/// A long-lived TCP connection from `a` to a server in `b`: training
/// traffic for eBPF discovery to find.
fn training_connection(p: &Pair) -> (TcpListener, TcpStream) {
    let addr: SocketAddr = "198.18.1.2:29500".parse().unwrap();
    let listener =
        p.b.run_in(move || TcpListener::bind(addr))
            .unwrap()
            .unwrap();
    let stream =
        p.a.run_in(move || TcpStream::connect_timeout(&addr, Duration::from_secs(2)))
            .unwrap()
            .unwrap();
    (listener, stream)
}

#[test]
fn nobody_with_the_listed_capabilities_probes_discovers_and_serves() {
    if !require_privileges("nobody_with_the_listed_capabilities_probes_discovers_and_serves") {
        return;
    }
    let p = pair("prv").unwrap();
    let dir = TempDir::new("prv").unwrap();
    let cfg_b =
        skeletonhunter_tests::exporter::config("b", "198.18.1.2", "100ms", "500ms", "udp", "");
    let _b = start(&p.b, dir.path(), "b", &cfg_b).unwrap();
    let mut a = start_as(&p.a, &dir, "a", &config_a("ebpf"), Some(CAPS));
    serving(&p.a, &mut a);
    let _conn = training_connection(&p);
    let body = wait_until(
        "a to discover b with eBPF and probe it over UDP, TCP and ICMP",
        Duration::from_secs(30),
        Duration::from_millis(250),
        || {
            let body = scrape(&p.a).ok()?;
            let found = sample(&body, "skeletonhunter_skeleton_peers", &["source=\"ebpf\""]);
            let answered = ["udp", "tcp", "icmp"].iter().all(|proto| {
                counts(&body, "dst_node=\"b\"", &format!("protocol=\"{proto}\"")).2 > 3.0
            });
            (found == Some(1.0) && answered).then_some(body)
        },
    )
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", a.log()));
    let log = a.log();
    assert!(log.contains("source=ebpf"), "{log}");
    assert!(body.contains("skeletonhunter_probe_sent_total"));

    // Once set up, every thread holds CAP_NET_RAW and nothing else; the
    // bounding set stays as setpriv made it (shrinking it needs CAP_SETPCAP).
    let threads = thread_caps(a.pid());
    eprintln!("threads of the unprivileged exporter: {threads:x?}");
    assert!(threads.len() >= 3, "{threads:?}");
    for (name, [eff, prm, _, amb]) in &threads {
        assert_eq!((*eff, *prm, *amb), (NET_RAW, NET_RAW, 0), "thread {name}");
    }
    assert!(log.contains("capabilities after set-up"), "{log}");
    a.check_running().unwrap();
}

#[test]
fn root_keeps_only_net_raw_in_every_thread_and_its_bounding_set() {
    if !require_privileges("root_keeps_only_net_raw_in_every_thread_and_its_bounding_set") {
        return;
    }
    let p = pair("prr").unwrap();
    let dir = TempDir::new("prr").unwrap();
    let mut a = start_as(&p.a, &dir, "a", &config_a("ebpf"), None);
    serving(&p.a, &mut a);
    let threads = wait_until(
        "every thread of the root exporter to drop its capabilities",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            let t = thread_caps(a.pid());
            t.iter().all(|(_, c)| c[1] == NET_RAW).then_some(t)
        },
    )
    .unwrap_or_else(|e| panic!("{e}: {:x?}", thread_caps(a.pid())));
    for (name, [eff, prm, bnd, amb]) in &threads {
        assert_eq!(
            [*eff, *prm, *bnd, *amb],
            [NET_RAW, NET_RAW, NET_RAW, 0],
            "thread {name}"
        );
    }
    assert!(a.log().contains("source=ebpf"), "{}", a.log());
}

/// Start the exporter without some capability and wait for it to exit:
/// status 1 and a log naming `needed`.
fn fails_naming(tag: &str, mode: &str, caps: &str, needed: &str) {
    let p = pair(tag).unwrap();
    let dir = TempDir::new(tag).unwrap();
    let mut a = start_as(&p.a, &dir, "a", &config_a(mode), Some(caps));
    let err = wait_until(
        "the exporter to exit",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || a.check_running().err(),
    )
    .unwrap();
    let msg = format!("{err:#}");
    assert!(msg.contains("exit status: 1"), "caps {caps:?}: {msg}");
    assert!(
        msg.contains("skeletonhunter-exporter: ") && msg.contains(needed),
        "caps {caps:?}: no error naming {needed}: {msg}"
    );
}

#[test]
fn without_a_listed_capability_the_exporter_fails_naming_it() {
    if !require_privileges("without_a_listed_capability_the_exporter_fails_naming_it") {
        return;
    }
    fails_naming("prn", "ebpf", "", "CAP_NET_RAW");
    fails_naming("prt", "ebpf", "net_raw,bpf,perfmon", "CAP_DAC_READ_SEARCH");
    fails_naming("prb", "ebpf", "net_raw,dac_read_search", "CAP_BPF");
    fails_naming("prp", "ebpf", "net_raw,bpf,dac_read_search", "CAP_PERFMON");
}

#[test]
fn the_localizer_runs_as_nobody_without_capabilities() {
    if !require_privileges("the_localizer_runs_as_nobody_without_capabilities") {
        return;
    }
    let dir = TempDir::new("prl").unwrap();
    let sample = dir.path().join("pings.csv");
    std::fs::copy(
        skeletonhunter_tools::repo::repo_root()
            .join("localizer/tests/data/skeletonhunter_samples.csv"),
        &sample,
    )
    .unwrap();
    let bin = reachable(&dir, "skeletonhunter-localizer");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--",
        ])
        .arg(bin)
        .args(["analyze", "--pings"])
        .arg(&sample)
        .output()
        .expect("setpriv (util-linux)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["pairs_observed"], 2, "{report}");
}

/// The sidecar option as shipped (`deploy/kubernetes/sidecar`): two
/// "training pods" `a` and `b` joined by one training connection, each
/// with the sidecar's configuration, environment, user and security
/// context — no capability at all, no_new_privs — started as its
/// `command` says, through the dynamic loader, on a copy of the binary
/// carrying the image's file capabilities (which the kernel refuses to
/// execute directly with an empty bounding set). Each finds the other by
/// polling its own connections and probes it over UDP and TCP, holding no
/// capability in any thread.
#[test]
fn the_sidecar_runs_without_any_capability_and_probes_its_pods_peer() {
    use skeletonhunter_tests::contract::dockerfile_contract;
    use skeletonhunter_tools::deploy;
    if !require_privileges("the_sidecar_runs_without_any_capability_and_probes_its_pods_peer") {
        return;
    }
    let sidecar = deploy::sidecar().unwrap();
    let c = &sidecar.container;
    let sc = &c["securityContext"];
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(sc["capabilities"]["add"].is_null(), "{sc}");
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["runAsNonRoot"], true);
    let image = dockerfile_contract().unwrap();
    assert_eq!(sc["runAsUser"].as_u64(), Some(image.uid));
    let [loader, exporter] = &sidecar.command[..] else {
        panic!("command {:?}: the loader and the exporter", sidecar.command)
    };
    assert_eq!(exporter, "/usr/local/bin/skeletonhunter-exporter");

    let p = pair("psc").unwrap();
    let dir = TempDir::new("psc").unwrap();
    // The image's binary: its file capabilities as the Dockerfile sets them.
    let bin = dir.path().join("skeletonhunter-exporter");
    std::fs::copy(bin_path("skeletonhunter-exporter"), &bin).unwrap();
    let fcaps: Vec<String> = image.caps.iter().map(|c| c.to_lowercase()).collect();
    let set = Command::new("setcap")
        .arg(format!("{}+ep", fcaps.join(",")))
        .arg(&bin)
        .status()
        .expect("setcap (libcap2-bin)");
    assert!(set.success());
    searchable(&dir);
    let main = deploy::manifests().unwrap();
    let topology = deploy::shipped_topology(&main, dir.path()).unwrap();
    let cfg = sidecar.config.replace(
        "/etc/skeletonhunter-topology/topology.yaml",
        topology.to_str().unwrap(),
    );
    let start = |ns: &Netns, node: &str, nic: &str| {
        let env = deploy::downward_env(c, |field| match field {
            "metadata.name" => Some(node.to_string()),
            "status.hostIP" => Some(nic.to_string()),
            _ => None,
        })
        .unwrap();
        let mut wrap = vec!["env".to_string()];
        wrap.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        wrap.extend(setpriv(image.uid, image.gid, ""));
        wrap.extend(["--no-new-privs".into(), "--".into(), loader.clone()]);
        Launch::new(node)
            .within(ns)
            .net_only()
            .bin(bin.clone())
            .wrap(&wrap)
            .spawn(dir.path(), &cfg)
            .unwrap()
    };
    let mut a = start(&p.a, "trainer-0", "198.18.1.1");
    let mut b = start(&p.b, "trainer-1", "198.18.1.2");
    let _conn = training_connection(&p);
    wait_until(
        "each sidecar to find its pod's peer by polling and probe it over UDP and TCP",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || {
            [(&p.a, "trainer-1"), (&p.b, "trainer-0")]
                .iter()
                .all(|(ns, peer)| {
                    let Ok(body) = scrape(ns) else { return false };
                    let dst = format!("dst_node=\"{peer}\"");
                    ["udp", "tcp"]
                        .iter()
                        .all(|proto| counts(&body, &dst, &format!("protocol=\"{proto}\"")).2 > 3.0)
                })
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}; a:\n{}\nb:\n{}", a.log(), b.log()));
    for x in [&mut a, &mut b] {
        x.check_running().unwrap();
        let threads = thread_caps(x.pid());
        assert!(!threads.is_empty());
        for (thread, [eff, prm, bnd, amb]) in &threads {
            assert_eq!([*eff, *prm, *bnd, *amb], [0; 4], "thread {thread}");
        }
    }
    assert!(a.log().contains("source=poll"), "{}", a.log());
}
