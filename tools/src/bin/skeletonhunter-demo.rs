//! `skeletonhunter-demo`: the whole system on a fabric of network namespaces.
//!
//! Builds the end-to-end fabric (2 ToRs × 3 hosts × 2 containers, a spine,
//! a monitoring namespace; for `--fault link` the multipath fabric of 3
//! ToRs × 2 hosts under 3 spines, for `--fault overlay` the same fabric
//! with a VXLAN overlay between the hosts), starts an exporter per container, Prometheus
//! with the shipped rules, Alertmanager with the shipped config and the
//! localizer; waits for a healthy baseline, injects a fault, prints the
//! localization and the alert as Alertmanager holds it, removes the fault,
//! waits for the alert to resolve, and cleans up — also on Ctrl-C or error.
//!
//! Needs root (namespaces, nftables). Nothing leaves the machine: the fabric
//! has no link to the host's network namespace.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use skeletonhunter_tools::fabric::{
    link_addresses, ports, remove_namespaces_of, DataPlane, FabricSpec, Stack, StackOpts,
};
use skeletonhunter_tools::sys::{geteuid, SignalSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: skeletonhunter-demo [--fault tor|host|node|link|overlay] [--loss PERCENT] [--no-localizer]

  --fault tor    PERCENT% packet loss at ToR tor1 (default; PERCENT defaults to 30)
  --fault host   take host host-t0-h1's NIC link down
  --fault node   make container t1-h0-c1 unreachable on the data plane
  --fault link   on a multipath fabric (3 ToRs x 2 hosts under 3 spines, 15
                 probe flows per pair), drop everything on the link tor0-spine1
  --fault overlay on a fabric whose containers share a VXLAN overlay (and
                 every host probes the others host to host), block host
                 host-t0-h1's tunnel (UDP 4789): its containers lose every
                 other host, still reach each other, and its underlay answers;
                 the host's virtual switch is to blame
  --no-localizer run without the localizer: show live probe metrics only

Run as root. The binaries skeletonhunter-exporter and skeletonhunter-localizer
are taken from the directory of this program.";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Tor(u32),
    Host,
    Node,
    Link,
    Overlay,
}

/// The link of `--fault link`: (ToR, spine).
const LINK: (usize, usize) = (0, 1);

struct Args {
    fault: Fault,
    localizer: bool,
}

fn parse_args() -> Result<Args> {
    let mut kind = "tor".to_string();
    let mut loss = 30u32;
    let mut localizer = true;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--fault" => {
                kind = it
                    .next()
                    .context("--fault needs a value (tor, host, node, link or overlay)")?;
            }
            "--loss" => {
                let v = it.next().context("--loss needs a value (1..=99)")?;
                loss = v
                    .parse()
                    .ok()
                    .filter(|l| (1..=99).contains(l))
                    .with_context(|| format!("--loss {v:?}: expected an integer 1..=99"))?;
            }
            "--no-localizer" => localizer = false,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let fault = match kind.as_str() {
        "tor" => Fault::Tor(loss),
        "host" => Fault::Host,
        "node" => Fault::Node,
        "link" => Fault::Link,
        "overlay" => Fault::Overlay,
        other => bail!("--fault {other:?}: expected tor, host, node, link or overlay"),
    };
    Ok(Args { fault, localizer })
}

/// Block SIGINT/SIGTERM/SIGHUP in every thread and handle them on one
/// thread that deletes this process's namespaces (killing everything inside)
/// and temp files, then exits. Must run before any other thread starts.
fn cleanup_on_signal() {
    let set = match SignalSet::new(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("skeletonhunter-demo: cannot set up Ctrl-C clean-up: {e}");
            return;
        }
    };
    if let Err(e) = set.block() {
        eprintln!("skeletonhunter-demo: cannot set up Ctrl-C clean-up: {e}");
        return;
    }
    std::thread::spawn(move || {
        let sig = set.wait().unwrap_or(0);
        eprintln!("\nskeletonhunter-demo: signal {sig}: cleaning up");
        let pid = std::process::id();
        let n = remove_namespaces_of(pid);
        remove_temp_files_of(pid);
        eprintln!("skeletonhunter-demo: removed {n} namespaces");
        std::process::exit(130);
    });
}

/// Temp files and directories of this process (`skeletonhunter-*-<pid>-*`).
fn remove_temp_files_of(pid: u32) {
    let tag = format!("-{pid}-");
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("skeletonhunter-") && name.contains(&tag) {
                let p = e.path();
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
        }
    }
}

/// A binary of this workspace next to the demo's own executable.
fn sibling_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locate the demo executable")?;
    let p = exe.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} not found: build the workspace first (cargo build --workspace)",
            p.display()
        );
    }
    Ok(p)
}

/// Whether `localizer run --help` works (the online loop is built in).
fn online_loop_available(bin: &std::path::Path) -> bool {
    std::process::Command::new(bin)
        .args(["run", "--help"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn main() {
    cleanup_on_signal();
    let code = match parse_args().and_then(run) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("skeletonhunter-demo: error: {e:#}");
            1
        }
    };
    // The stack was dropped inside `run`, so namespaces are gone; this
    // catches anything a failed start left behind.
    remove_namespaces_of(std::process::id());
    std::process::exit(code);
}

fn step(n: u32, text: &str) {
    println!("\n[{n}/6] {text}");
}

fn run(args: Args) -> Result<()> {
    if geteuid() != 0 {
        bail!("run as root (the demo creates network namespaces and nftables rules)");
    }
    let (exporter, localizer) = binaries(&args)?;
    let mut opts = StackOpts::new(exporter, localizer);
    match args.fault {
        Fault::Link => opts.spec = FabricSpec::multipath(),
        Fault::Overlay => (opts.data_plane, opts.from_containers) = (DataPlane::Vxlan, true),
        Fault::Tor(_) | Fault::Host | Fault::Node => {}
    }

    step(1, "building the fabric and starting everything");
    let started = Instant::now();
    let mut stack = Stack::start(&opts)?;
    print_fabric(&stack);

    step(
        2,
        "waiting for a healthy baseline (every skeleton pair probed, no loss)",
    );
    stack.wait_healthy(Duration::from_secs(90))?;
    println!(
        "healthy after {:.1} s: {} exporters scraped, {} skeleton pairs answering",
        started.elapsed().as_secs_f64(),
        stack.fabric.probers().count(),
        stack.skeleton_pairs()
    );
    print_pairs(&stack, "baseline")?;

    let (what, expect) = describe_fault(&stack, args.fault);
    step(3, &format!("injecting: {what}"));
    let t0 = Instant::now();
    inject(&stack, args.fault, true)?;

    if stack.localizer.is_none() {
        std::thread::sleep(Duration::from_secs(8));
        print_pairs(&stack, "with the fault")?;
        step(4, "no localizer: skipping localization and alerting");
    } else {
        show_alert(&mut stack, &opts, &expect, t0)?;
    }

    step(5, "removing the fault");
    let t1 = Instant::now();
    inject(&stack, args.fault, false)?;
    if stack.localizer.is_some() {
        skeletonhunter_tools::wait_until(
            "the alert to resolve",
            Duration::from_secs(120),
            Duration::from_millis(250),
            || {
                stack
                    .component_alerts()
                    .ok()
                    .filter(std::vec::Vec::is_empty)
            },
        )?;
        println!(
            "alert resolved {:.1} s after the fault was removed",
            t1.elapsed().as_secs_f64()
        );
    }

    step(6, "cleaning up (namespaces, processes, temp files)");
    drop(stack);
    println!("done.");
    Ok(())
}

/// The exporter binary, and the localizer's when it is wanted and has the
/// online loop.
fn binaries(args: &Args) -> Result<(PathBuf, Option<PathBuf>)> {
    let exporter = sibling_bin("skeletonhunter-exporter")?;
    let localizer = if args.localizer {
        let bin = sibling_bin("skeletonhunter-localizer")?;
        if online_loop_available(&bin) {
            Some(bin)
        } else {
            println!(
                "NOTE: this build's skeletonhunter-localizer has no working `run` \
                 subcommand: showing live probe metrics without localization"
            );
            None
        }
    } else {
        None
    };
    Ok((exporter, localizer))
}

/// What the fault is, in words, and the (kind, component) alerts that name
/// it correctly.
fn describe_fault(stack: &Stack, fault: Fault) -> (String, Vec<(&'static str, String)>) {
    match fault {
        Fault::Tor(p) => (
            format!("{p}% packet loss at ToR tor1"),
            vec![("tor", "tor1".into())],
        ),
        Fault::Host => {
            let h = &stack.fabric.hosts[1];
            (
                format!("NIC link of {} down", h.name),
                vec![("host", h.name.clone()), ("nic", h.nic_ip.to_string())],
            )
        }
        Fault::Node => (
            "container t1-h0-c1 unreachable on the data plane".into(),
            vec![("node", "t1-h0-c1".into())],
        ),
        // The hosts' own exporters show the underlay clean: the host's
        // virtual switch (its tunnel endpoint) is to blame.
        Fault::Overlay => {
            let h = &stack.fabric.hosts[1];
            (
                format!(
                    "the VXLAN tunnel of {} blocked (its containers still reach each other, its underlay answers)",
                    h.name
                ),
                vec![("vswitch", h.name.clone())],
            )
        }
        // Any verdict is shown: whether it names the link is printed.
        Fault::Link => (
            format!(
                "every packet on the link tor{}-spine{} dropped, both ways",
                LINK.0, LINK.1
            ),
            Vec::new(),
        ),
    }
}

/// Wait for the localizer's alert on an expected component, then show the
/// localization and the alert as Alertmanager holds it.
fn show_alert(
    stack: &mut Stack,
    opts: &StackOpts,
    expect: &[(&str, String)],
    t0: Instant,
) -> Result<()> {
    step(4, "waiting for the localizer's alert in Alertmanager");
    let alert = loop {
        stack.check_running()?;
        let alerts = stack.component_alerts()?;
        // Every demo fault drops packets: wait for a loss or
        // unreachable verdict, not a latency one.
        if let Some(a) = alerts.iter().find(|a| {
            a.symptom != "latency"
                && (expect.is_empty()
                    || expect
                        .iter()
                        .any(|(k, c)| *k == a.kind && *c == a.component))
        }) {
            break a.clone();
        }
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("no alert for {expect:?} within 120 s; alerts held: {alerts:#?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    println!(
        "alerted {:.1} s after injection: {} on {} {} ({})",
        t0.elapsed().as_secs_f64(),
        alert.alertname,
        alert.kind,
        alert.component,
        alert.symptom
    );
    if expect.is_empty() {
        print_link_verdict(&alert.kind, &alert.component);
    }
    // Let the localizer's window fill with the fault before showing
    // its full picture (the first alert comes from partial evidence).
    let settle = opts.localizer_window;
    println!(
        "letting the fault stand {} s so the localizer's window holds only faulty data...",
        settle.as_secs()
    );
    std::thread::sleep(settle);
    print_pairs(stack, "with the fault")?;
    println!("\nlocalization (the localizer's last analysis, GET /report):");
    println!("{}", serde_json::to_string_pretty(&localization(stack)?)?);
    // The alert as it is now (re-posted, possibly updated evidence).
    let now = stack.component_alerts()?;
    let current = now
        .iter()
        .find(|a| a.kind == alert.kind && a.component == alert.component)
        .unwrap_or(&alert);
    println!("\nthe alert as Alertmanager holds it (GET /api/v2/alerts):");
    println!("{}", serde_json::to_string_pretty(&current.json)?);
    let others: Vec<String> = now
        .iter()
        .filter(|a| !(a.kind == alert.kind && a.component == alert.component))
        .map(|a| format!("{}/{} ({}, {})", a.kind, a.component, a.symptom, a.state))
        .collect();
    if !others.is_empty() {
        println!("other component alerts held: {}", others.join(", "));
    }
    Ok(())
}

/// Whether a verdict names the faulty link: by name, or by a traced hop
/// address of the link (either router's interface on it).
fn print_link_verdict(kind: &str, component: &str) {
    let (spine_side, tor_side) = link_addresses(LINK.1, LINK.0);
    let names_link = kind.contains("link")
        || component == spine_side.to_string()
        || component == tor_side.to_string()
        || (component.contains(&format!("tor{}", LINK.0))
            && component.contains(&format!("spine{}", LINK.1)));
    if names_link {
        println!(
            "the verdict names the faulty link tor{}-spine{}",
            LINK.0, LINK.1
        );
    } else {
        println!(
            "NOTE: the verdict ({kind} {component}) does not name the link tor{}-spine{} \
             (its hop addresses are {spine_side} and {tor_side}); this localizer does \
             not localize to links",
            LINK.0, LINK.1
        );
    }
}

fn inject(stack: &Stack, fault: Fault, on: bool) -> Result<()> {
    let f = &stack.fabric;
    match fault {
        Fault::Link => f.link_fault(LINK.0, LINK.1, on),
        Fault::Tor(p) => f.tor_loss(1, if on { p } else { 0 }),
        Fault::Host => f.host_link(&f.hosts[1], !on),
        Fault::Node => f.isolate_node(f.node("t1-h0-c1")?, on),
        Fault::Overlay => f.tunnel_blocked(&f.hosts[1], on),
    }
}

fn print_fabric(stack: &Stack) {
    let f = &stack.fabric;
    println!(
        "fabric: {} ToRs x {} hosts x {} containers under {} spine(s) ({}){}; monitoring namespace {}",
        f.spec.tors,
        f.spec.hosts_per_tor,
        f.spec.containers_per_host,
        f.spec.spines,
        f.spine_name,
        if stack.containers.is_some() { ", one exporter per host probing from its containers" } else { "" },
        f.mon.name()
    );
    for n in &f.nodes {
        let id = &n.identity;
        println!(
            "  {:<10} data {:<14} mgmt {:<15} nic {:<12} {:<11} {:<5} {}",
            id.node,
            n.data_ip.to_string(),
            n.mgmt_ip.to_string(),
            id.nic,
            id.host,
            id.tor,
            id.tenant
        );
    }
    println!(
        "Prometheus {}  Alertmanager {}  (inside {})",
        stack.prometheus.url(),
        stack.alertmanager.url(),
        f.mon.name()
    );
}

/// Per-pair UDP loss (a src × dst matrix) and RTT spread over the last 5 s,
/// from Prometheus.
fn print_pairs(stack: &Stack, when: &str) -> Result<()> {
    let stats = PairStats::query(stack)?;
    let nodes: Vec<&str> = stack
        .fabric
        .nodes
        .iter()
        .map(|n| n.identity.node.as_str())
        .collect();
    println!("skeleton probe loss, src (rows) -> dst (columns), UDP over the last 5 s ({when}):");
    print!("  {:<9}", "");
    for d in &nodes {
        print!(" {d:>8}");
    }
    println!();
    let mut rtts = Vec::new();
    for src in &nodes {
        print!("  {src:<9}");
        for dst in &nodes {
            let text = if is_skeleton(stack, src, dst) {
                let (l, r) = stats.cell(src, dst);
                if r.is_finite() {
                    rtts.push(r);
                }
                if l.is_finite() {
                    format!("{:.0}%", l * 100.0)
                } else {
                    "?".to_string()
                }
            } else {
                ".".to_string()
            };
            print!(" {text:>8}");
        }
        println!();
    }
    rtts.sort_by(f64::total_cmp);
    if !rtts.is_empty() {
        println!(
            "  ('.' = not a skeleton pair)  per-pair median RTT: min {:.0} µs, median {:.0} µs, max {:.0} µs",
            rtts[0] * 1e6,
            rtts[rtts.len() / 2] * 1e6,
            rtts[rtts.len() - 1] * 1e6
        );
    }
    Ok(())
}

/// Whether `src` probes `dst` (a pair of the traffic skeleton).
fn is_skeleton(stack: &Stack, src: &str, dst: &str) -> bool {
    stack.fabric.node(src).is_ok_and(|n| {
        stack
            .fabric
            .peers_of(n)
            .iter()
            .any(|p| p.identity.node == dst)
    })
}

/// Per-pair UDP loss ratio and median RTT over the last 5 s.
struct PairStats {
    loss: Vec<Value>,
    rtt: Vec<Value>,
}

impl PairStats {
    /// Both matrices from Prometheus, as of now.
    fn query(stack: &Stack) -> Result<PairStats> {
        let loss = stack.prometheus.query(
            "sum by (src_node, dst_node) (increase(skeletonhunter_probe_lost_total{protocol=\"udp\"}[5s])) \
             / sum by (src_node, dst_node) (increase(skeletonhunter_probe_sent_total{protocol=\"udp\"}[5s]))",
        )?;
        let rtt = stack.prometheus.query(
            "histogram_quantile(0.5, sum by (src_node, dst_node, le) \
             (rate(skeletonhunter_probe_rtt_seconds_bucket{protocol=\"udp\"}[5s])))",
        )?;
        Ok(PairStats { loss, rtt })
    }

    /// (loss ratio, median RTT in seconds) of `src -> dst`; NaN when unknown.
    fn cell(&self, src: &str, dst: &str) -> (f64, f64) {
        let find = |series: &[Value]| {
            series
                .iter()
                .find(|v| {
                    v["metric"]["src_node"].as_str().unwrap_or("?") == src
                        && v["metric"]["dst_node"].as_str().unwrap_or("?") == dst
                })
                .and_then(|v| v["value"][1].as_str())
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        (find(&self.loss), find(&self.rtt))
    }
}

/// The localizer's last analysis when it serves one (`/report`: the same
/// JSON document `skeletonhunter-localizer analyze` prints, with its
/// `faults` list), else its verdict read from `/metrics`.
fn localization(stack: &Stack) -> Result<Value> {
    let addr = SocketAddr::from(([127, 0, 0, 1], ports::LOCALIZER));
    let get = move |path: &'static str| {
        stack
            .fabric
            .mon
            .run_in(move || skeletonhunter_tools::http_get(addr, path, Duration::from_secs(5)))
    };
    if let Ok(Ok((200, body))) = get("/report") {
        if let Ok(v) = serde_json::from_str::<Value>(&body) {
            if v.get("faults").is_some() {
                return Ok(v);
            }
        }
    }
    let (status, body) = get("/metrics")??;
    if status != 200 {
        bail!("localizer /metrics: HTTP {status}");
    }
    let mut blamed = Vec::new();
    let mut faulty = Vec::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let label = |name: &str| {
            series
                .split_once(&format!("{name}=\""))
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(v, _)| v.to_string())
                .unwrap_or_default()
        };
        if series.starts_with("skeletonhunter_component_blame{") && value > 0.0 {
            blamed.push(json!({"kind": label("kind"), "id": label("id"), "blame": value}));
        } else if series.starts_with("skeletonhunter_component_faulty{") && value == 1.0 {
            faulty.push(json!({"kind": label("kind"), "id": label("id")}));
        }
    }
    blamed.sort_by(|a, b| {
        b["blame"]
            .as_f64()
            .partial_cmp(&a["blame"].as_f64())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    blamed.truncate(5);
    Ok(json!({"faulty": faulty, "top_blame": blamed}))
}
