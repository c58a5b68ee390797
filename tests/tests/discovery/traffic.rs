//! Traffic discovery end to end: an exporter in namespace A learns its
//! skeleton peers from real TCP connections, probes them, and forgets them
//! after the traffic stops.
//!
//! ```text
//!        B (198.18.1.2)          A keeps A -> B open (A is B's ring predecessor)
//!        |                       and C -> A open (C is A's ring predecessor);
//!   C ── A ── D (198.18.3.2)     A opens one brief connection to D.
//! (198.18.2.2)
//! ```
//!
//! Each of B, C, D runs an exporter whose UDP responder tells A who it is, so
//! A's probe series carry `dst_node="node-b"` etc. The same scenario runs on
//! the eBPF source (mode `ebpf`: failing to load is a test failure, not a
//! silent fallback) and on the polling fallback (mode `poll`). Apart, the
//! shipped defaults leave a host's control-plane connections out.

use anyhow::{Context, Result};
use skeletonhunter_tests::exporter::Launch;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::netns::veth;
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{http_get, wait_until, ChildGuard, Netns};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const METRICS: &str = "127.0.0.1:9479";
const UDP: u16 = 7477;
const TCP: u16 = 7478;
const APP: u16 = 29500;

fn exporter_config(node: &str, data_ip: &str, discovery: &str) -> String {
    format!(
        "listen: \"{METRICS}\"\n\
         identity:\n  node: \"{node}\"\n  host: \"host-{node}\"\n  tor: \"tor0\"\n\
         responder:\n  udp: \"{data_ip}:{UDP}\"\n  tcp: \"{data_ip}:{TCP}\"\n\
         probe:\n  interval: 200ms\n  timeout: 500ms\n  protocols: [udp, tcp]\n  udp_port: {UDP}\n  tcp_port: {TCP}\n\
         discovery:\n{discovery}"
    )
}

fn start_exporter(ns: &Netns, dir: &Path, name: &str, config: &str) -> Result<ChildGuard> {
    start_exporter_with(ns, dir, name, config, &[])
}

/// Start an exporter in `ns`, behind `wrap` (e.g. `setpriv` dropping
/// capabilities) when not empty.
fn start_exporter_with(
    ns: &Netns,
    dir: &Path,
    name: &str,
    config: &str,
    wrap: &[&str],
) -> Result<ChildGuard> {
    // Log files are named after the guard: keep them apart across the
    // scenarios running in parallel in this process.
    let name = format!(
        "{}-{name}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("x")
    );
    Launch::new(&name).within(ns).wrap(wrap).spawn(dir, config)
}

fn scrape(ns: &Netns) -> Option<String> {
    let addr: SocketAddr = METRICS.parse().ok()?;
    match ns.run_in(move || http_get(addr, "/metrics", Duration::from_secs(2))) {
        Ok(Ok((200, body))) => Some(body),
        _ => None,
    }
}

/// Value of the sample whose line starts with `prefix` (name and labels).
fn sample(body: &str, prefix: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn probes_to(body: &str, node: &str) -> bool {
    let label = format!("dst_node=\"{node}\"");
    body.lines().any(|l| {
        l.starts_with("skeletonhunter_probe_sent_total") && l.contains(&label) && {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
        }
    })
}

/// A TCP server on `addr` inside `ns` that keeps every accepted connection
/// open (reading until EOF) until the connections are dropped.
struct App {
    stop: Arc<AtomicBool>,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl App {
    fn listen(ns: &Netns, addr: SocketAddr) -> Result<App> {
        let listener = ns.run_in(move || TcpListener::bind(addr))??;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(Vec::new()));
        let (s, h) = (stop.clone(), held.clone());
        std::thread::spawn(move || {
            // Bounded: the test sets `stop` (or drops App) within a minute.
            for _ in 0..1200 {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok((c, _)) = listener.accept() {
                    h.lock().unwrap().push(c);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Ok(App { stop, held })
    }

    fn close_all(&self) {
        self.held.lock().unwrap().clear();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.close_all();
    }
}

/// Connect from inside `ns` (the socket lives in that namespace).
fn connect(ns: &Netns, to: SocketAddr) -> Result<TcpStream> {
    let s = ns.run_in(move || TcpStream::connect_timeout(&to, Duration::from_secs(2)))??;
    Ok(s)
}

fn scenario(test: &str, discovery: &str, expect_source: &str, wrap: &[&str]) -> Result<()> {
    let a = Netns::new("dsa")?;
    let b = Netns::new("dsb")?;
    let c = Netns::new("dsc")?;
    let d = Netns::new("dsd")?;
    veth(&a, "a2b", "198.18.1.1/30", &b, "b2a", "198.18.1.2/30")?;
    veth(&a, "a2c", "198.18.2.1/30", &c, "c2a", "198.18.2.2/30")?;
    veth(&a, "a2d", "198.18.3.1/30", &d, "d2a", "198.18.3.2/30")?;
    let tmp = TempDir::new(test)?;
    let dir = tmp.path();
    let mut exporters = start_peers(dir, [&b, &c, &d])?;
    // A -> B is already open when the exporter starts (a job running
    // before the exporter restarts): it must be picked up too.
    let app_b = App::listen(&b, "198.18.1.2:29500".parse()?)?;
    let mut a_to_b = connect(&a, format!("198.18.1.2:{APP}").parse()?)?;
    let mut ea = start_a(&a, dir, discovery, wrap)?;

    // Training-like traffic: A -> B and C -> A stay open; A -> D is brief.
    let app_a = App::listen(&a, "198.18.2.1:29500".parse()?)?;
    let app_d = App::listen(&d, "198.18.3.2:29500".parse()?)?;
    let mut c_to_a = connect(&c, format!("198.18.2.1:{APP}").parse()?)?;
    {
        let mut brief = connect(&a, format!("198.18.3.2:{APP}").parse()?)?;
        brief.write_all(b"hello")?;
    }
    a_to_b.write_all(b"ring")?;
    c_to_a.write_all(b"ring")?;
    check_discovered(&a, &ea, expect_source)?;

    // Traffic stops: both peers expire after the TTL and their series go.
    drop(a_to_b);
    drop(c_to_a);
    app_a.close_all();
    app_b.close_all();
    drop(app_d);
    check_forgotten(&a, &ea)?;
    ea.check_running()?;
    for e in &mut exporters {
        e.check_running()?;
    }
    Ok(())
}

/// Start the exporters of B, C and D, which only answer probes (they tell A
/// who they are).
fn start_peers(dir: &Path, [b, c, d]: [&Netns; 3]) -> Result<Vec<ChildGuard>> {
    let quiet = "  ebpf: false\n";
    let mut exporters = Vec::new();
    for (ns, node, ip) in [
        (&b, "node-b", "198.18.1.2"),
        (&c, "node-c", "198.18.2.2"),
        (&d, "node-d", "198.18.3.2"),
    ] {
        exporters.push(start_exporter(
            ns,
            dir,
            node,
            &exporter_config(node, ip, quiet),
        )?);
    }
    Ok(exporters)
}

/// Start A's exporter with `discovery` (behind `wrap`) and wait until it
/// serves `/metrics`.
fn start_a(a: &Netns, dir: &Path, discovery: &str, wrap: &[&str]) -> Result<ChildGuard> {
    let mut ea = start_exporter_with(
        a,
        dir,
        "node-a",
        &exporter_config("node-a", "198.18.1.1", discovery),
        wrap,
    )?;
    wait_until(
        "exporter A serving /metrics",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || scrape(a),
    )
    .map_err(|e| anyhow::anyhow!("{e}; log:\n{}", ea.log()))?;
    ea.check_running()?;
    Ok(ea)
}

/// A discovers B and C (and not D, nor its own addresses) from the
/// traffic, probes them, and logs them with the expected source.
fn check_discovered(a: &Netns, ea: &ChildGuard, expect_source: &str) -> Result<()> {
    let body = wait_until(
        "A discovers B and C and probes them",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            let body = scrape(a)?;
            let n = sample(&body, "skeletonhunter_skeleton_peers{source=\"ebpf\"}")?;
            (n == 2.0 && probes_to(&body, "node-b") && probes_to(&body, "node-c")).then_some(body)
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}; last /metrics:\n{}\nlog of A:\n{}",
            scrape(a).unwrap_or_default(),
            ea.log()
        )
    })?;
    // D had the same time to qualify (its connection opened first) and must not.
    assert!(
        !body.contains("node-d") && !body.contains("198.18.3.2"),
        "D was discovered:\n{body}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let body = scrape(a).context("scrape A")?;
    assert_eq!(
        sample(&body, "skeletonhunter_skeleton_peers{source=\"ebpf\"}"),
        Some(2.0),
        "{body}"
    );
    assert!(!body.contains("node-d"), "D was discovered later:\n{body}");
    let log = ea.log();
    assert!(
        log.contains(&format!("source={expect_source}")),
        "wrong discovery source; log:\n{log}"
    );
    for who in ["198.18.1.2", "198.18.2.2"] {
        assert!(
            log.contains(&format!("skeleton peer {who}")),
            "no log of peer {who}:\n{log}"
        );
    }
    assert!(
        !log.contains("skeleton peer 198.18.3.2"),
        "D in log:\n{log}"
    );
    // The connections' other ends (B's and C's sockets, in other namespaces)
    // must not make A discover its own addresses.
    assert!(!log.contains("skeleton peer 198.18.1.1") && !log.contains("skeleton peer 198.18.2.1"));
    Ok(())
}

/// After the TTL A has forgotten B and C: no peers, no series to them.
fn check_forgotten(a: &Netns, ea: &ChildGuard) -> Result<()> {
    wait_until(
        "A forgets B and C after the TTL",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            let body = scrape(a)?;
            let n = sample(&body, "skeletonhunter_skeleton_peers{source=\"ebpf\"}")?;
            (n == 0.0
                && !body.contains("dst_node=\"node-b\"")
                && !body.contains("dst_node=\"node-c\""))
            .then_some(())
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}; last /metrics:\n{}\nlog of A:\n{}",
            scrape(a).unwrap_or_default(),
            ea.log()
        )
    })?;
    let body = scrape(a).context("scrape A")?;
    let up = sample(
        &body,
        "skeletonhunter_discovery_events_total{source=\"ebpf\",event=\"peer_added\"}",
    );
    assert_eq!(up, Some(2.0), "{body}");
    Ok(())
}

const TIMING: &str = "    window: 1s\n    min_windows: 3\n    long_lived: 2s\n    ttl: 3s\n    include_cidrs: [198.18.0.0/15]\n";

#[test]
fn discovery_ebpf_finds_ring_peers_and_forgets_them() {
    if !require_privileges("discovery_ebpf_finds_ring_peers_and_forgets_them") {
        return;
    }
    let cfg = format!("  ebpf:\n    mode: ebpf\n{TIMING}");
    scenario("disc-ebpf", &cfg, "ebpf", &[]).unwrap();
}

#[test]
fn discovery_poll_fallback_finds_ring_peers_and_forgets_them() {
    if !require_privileges("discovery_poll_fallback_finds_ring_peers_and_forgets_them") {
        return;
    }
    let cfg = format!("  ebpf:\n    mode: poll\n    poll_interval: 200ms\n{TIMING}");
    scenario("disc-poll", &cfg, "poll", &[]).unwrap();
}

/// `mode: auto` without the privileges BPF needs (CAP_BPF, CAP_PERFMON and
/// CAP_SYS_ADMIN removed from the bounding set, so even root lacks them)
/// falls back to polling, says why, and still finds the ring.
#[test]
fn discovery_auto_falls_back_to_polling_without_bpf_privileges() {
    if !require_privileges("discovery_auto_falls_back_to_polling_without_bpf_privileges") {
        return;
    }
    let cfg = format!("  ebpf:\n    mode: auto\n    poll_interval: 200ms\n{TIMING}");
    let wrap = ["setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin", "--"];
    scenario("disc-auto", &cfg, "poll (eBPF unavailable", &wrap).unwrap();
}

/// The cgroup v2 mount of this machine (`/sys/fs/cgroup` or, on hybrid
/// hosts, `/sys/fs/cgroup/unified`).
fn cgroup2_root() -> Result<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "cgroup2").then(|| std::path::PathBuf::from(f[1]))
        })
        .context("no cgroup2 hierarchy mounted")
}

/// A cgroup removed on drop (after its processes are gone).
struct Cgroup(std::path::PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Two processes in A keep one connection each: one inside the configured
/// "training" cgroup (to B), one outside it (to C). Only B may become a
/// peer, and it is reported with the cgroup's node/tenant. `nsenter` (not
/// `ip netns exec`, which remounts /sys) keeps the cgroup mount visible.
fn cgroup_scenario(test: &str, mode: &str) -> Result<()> {
    let root = cgroup2_root()?;
    let name = format!("skeletonhunter-{test}-{}", std::process::id());
    let cg = Cgroup(root.join(&name));
    std::fs::create_dir(&cg.0).with_context(|| format!("create cgroup {}", cg.0.display()))?;
    let a = Netns::new("dga")?;
    let b = Netns::new("dgb")?;
    let c = Netns::new("dgc")?;
    veth(&a, "a2b", "198.18.1.1/30", &b, "b2a", "198.18.1.2/30")?;
    veth(&a, "a2c", "198.18.2.1/30", &c, "c2a", "198.18.2.2/30")?;
    let tmp = TempDir::new(test)?;
    let dir = tmp.path();
    let ea = start_a_for_cgroup(&a, dir, test, mode, &name)?;

    let _app_b = App::listen(&b, format!("198.18.1.2:{APP}").parse()?)?;
    let _app_c = App::listen(&c, format!("198.18.2.2:{APP}").parse()?)?;
    // bash opens the connection itself (fd 3) after moving into the cgroup,
    // so the socket belongs to it; `sleep` keeps it open.
    let procs = cg.0.join("cgroup.procs");
    let mut inside = a.net_command("bash");
    inside.arg("-c").arg(format!(
        "echo $$ > {} && exec 3<>/dev/tcp/198.18.1.2/{APP} && exec sleep 30",
        procs.display()
    ));
    let mut outside = a.net_command("bash");
    outside.arg("-c").arg(format!(
        "exec 3<>/dev/tcp/198.18.2.2/{APP} && exec sleep 30"
    ));
    let mut p_in = ChildGuard::spawn(&format!("{test}-inside"), inside)?;
    let mut p_out = ChildGuard::spawn(&format!("{test}-outside"), outside)?;
    check_cgroup_attribution(&a, &ea, mode, &mut p_in, &mut p_out)?;
    drop(p_in);
    drop(p_out);
    drop(ea);
    Ok(())
}

/// Start A's exporter in `mode` with the cgroup `/<cgroup>` as its training
/// container, and wait until it serves `/metrics`.
fn start_a_for_cgroup(
    a: &Netns,
    dir: &Path,
    test: &str,
    mode: &str,
    name: &str,
) -> Result<ChildGuard> {
    let cfg = exporter_config(
        "node-a",
        "198.18.1.1",
        &format!(
            "  ebpf:\n    mode: {mode}\n    poll_interval: 200ms\n{TIMING}    cgroups:\n      - {{path: /{name}, node: rank-0, tenant: job-7}}\n"
        ),
    );
    let ea = Launch::new(&format!("{test}-node-a"))
        .within(a)
        .net_only()
        .spawn(dir, &cfg)?;
    wait_until(
        "exporter A serving /metrics",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || scrape(a),
    )
    .map_err(|e| anyhow::anyhow!("{e}; log:\n{}", ea.log()))?;
    Ok(ea)
}

/// Only the connection made from inside the cgroup (to B) is discovered,
/// attributed to the cgroup's node and tenant; C's is filtered.
fn check_cgroup_attribution(
    a: &Netns,
    ea: &ChildGuard,
    mode: &str,
    p_in: &mut ChildGuard,
    p_out: &mut ChildGuard,
) -> Result<()> {
    let body = wait_until(
        "A discovers B",
        Duration::from_secs(20),
        Duration::from_millis(250),
        || {
            let body = scrape(a)?;
            (sample(&body, "skeletonhunter_skeleton_peers{source=\"ebpf\"}")? >= 1.0)
                .then_some(body)
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}; log of A:\n{}", ea.log()))?;
    std::thread::sleep(Duration::from_secs(2));
    p_in.check_running()?;
    p_out.check_running()?;
    let body2 = scrape(a).context("scrape A")?;
    let log = ea.log();
    assert_eq!(
        sample(&body2, "skeletonhunter_skeleton_peers{source=\"ebpf\"}"),
        Some(1.0),
        "first:\n{body}\nnow:\n{body2}\nlog:\n{log}"
    );
    assert!(log.contains(&format!("source={mode}")), "{log}");
    assert!(
        log.contains("skeleton peer 198.18.1.2") && log.contains("node=rank-0, tenant=job-7"),
        "B not attributed to the training cgroup:\n{log}"
    );
    assert!(
        !log.contains("skeleton peer 198.18.2.2"),
        "C (outside the cgroup) discovered:\n{log}"
    );
    let filtered = sample(
        &body2,
        "skeletonhunter_discovery_events_total{source=\"ebpf\",event=\"filtered\"}",
    );
    assert!(
        filtered.is_some_and(|n| n >= 1.0),
        "no filtered event:\n{body2}"
    );
    Ok(())
}

#[test]
fn discovery_ebpf_cgroup_filter_keeps_the_training_container() {
    if !require_privileges("discovery_ebpf_cgroup_filter_keeps_the_training_container") {
        return;
    }
    cgroup_scenario("disc-cg-ebpf", "ebpf").unwrap();
}

#[test]
fn discovery_poll_cgroup_filter_keeps_the_training_container() {
    if !require_privileges("discovery_poll_cgroup_filter_keeps_the_training_container") {
        return;
    }
    cgroup_scenario("disc-cg-poll", "poll").unwrap();
}

/// The shipped discovery defaults (`ebpf: true`, as the DaemonSet config
/// has it) on a host's namespace: long-lived connections to an API server
/// (6443), from a scraper of the kubelet (10250), and of a storage and a
/// CNI agent to a third host (an NFS mount, 2049; Felix's watch on Calico
/// Typha, 5473), all open before the training connection (29500), never
/// become peers; the training one does.
#[test]
fn discovery_defaults_leave_control_plane_connections_out() {
    if !require_privileges("discovery_defaults_leave_control_plane_connections_out") {
        return;
    }
    control_plane_scenario().unwrap();
}

fn control_plane_scenario() -> Result<()> {
    let (a, b, k) = (Netns::new("dpa")?, Netns::new("dpb")?, Netns::new("dpk")?);
    let s = Netns::new("dps")?;
    veth(&a, "a2b", "198.18.1.1/30", &b, "b2a", "198.18.1.2/30")?;
    veth(&a, "a2k", "198.18.2.1/30", &k, "k2a", "198.18.2.2/30")?;
    veth(&a, "a2s", "198.18.3.1/30", &s, "s2a", "198.18.3.2/30")?;
    let tmp = TempDir::new("disc-dflt")?;
    let dir = tmp.path();
    let cfg_b = exporter_config("node-b", "198.18.1.2", "  ebpf: false\n");
    let mut eb = start_exporter(&b, dir, "node-b", &cfg_b)?;
    let (_api, _kubelet) = (
        App::listen(&k, "198.18.2.2:6443".parse()?)?,
        App::listen(&a, "198.18.2.1:10250".parse()?)?,
    );
    let (_nfs, _typha) = (
        App::listen(&s, "198.18.3.2:2049".parse()?)?,
        App::listen(&s, "198.18.3.2:5473".parse()?)?,
    );
    let mut to_api = connect(&a, "198.18.2.2:6443".parse()?)?;
    let mut scraper = connect(&k, "198.18.2.1:10250".parse()?)?;
    let mut mount = connect(&a, "198.18.3.2:2049".parse()?)?;
    let mut felix = connect(&a, "198.18.3.2:5473".parse()?)?;
    let mut ea = start_a(&a, dir, "  ebpf: true\n", &[])?;
    let _app = App::listen(&b, format!("198.18.1.2:{APP}").parse()?)?;
    let mut ring = connect(&a, format!("198.18.1.2:{APP}").parse()?)?;
    for c in [&mut to_api, &mut scraper, &mut mount, &mut felix, &mut ring] {
        c.write_all(b"up")?;
    }
    // Default timing: long_lived 30s, 3 windows of 10s.
    let body = wait_until(
        "A discovers B and probes it",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || scrape(&a).filter(|body| probes_to(body, "node-b")),
    )
    .map_err(|e| anyhow::anyhow!("{e}; log of A:\n{}", ea.log()))?;
    let peers = sample(&body, "skeletonhunter_skeleton_peers{source=\"ebpf\"}");
    assert_eq!(peers, Some(1.0), "{body}");
    for host in ["198.18.2.2", "198.18.3.2"] {
        assert!(!body.contains(host), "{host} probed:\n{body}");
        let log = ea.log();
        assert!(!log.contains(&format!("skeleton peer {host}")), "{log}");
    }
    let filtered = "skeletonhunter_discovery_events_total{source=\"ebpf\",event=\"filtered\"}";
    assert!(sample(&body, filtered).is_some_and(|n| n >= 1.0), "{body}");
    ea.check_running()?;
    eb.check_running()?;
    Ok(())
}
