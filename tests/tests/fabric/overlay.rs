//! The overlay fabric: containers on one VXLAN subnet over the routed
//! underlay, and the overlay's own faults — a container's virtual switch
//! port, a host's tunnel, a deleted forwarding entry — each breaking
//! exactly its part of the overlay while the underlay stays clean; and
//! the whole loop on it, each fault paged on its own layer.

use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::fabric::{
    container_host_config, exporter_get, reachable, reaches_within, Containers, DataPlane, Fabric,
    FabricSpec, Node, Stack, StackOpts, SETTLE,
};
use skeletonhunter_tools::netns::Netns;
use skeletonhunter_tools::process::{bin_path, ChildGuard};
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::wait_until;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::Duration;

/// Whether `ns` reaches `ip`, given the time a path that should work may
/// take to carry its first packets; a path that should not work is
/// checked once, with [`reachable`].
fn reaches(ns: &Netns, ip: Ipv4Addr) -> bool {
    reaches_within(ns, ip, SETTLE).unwrap()
}

#[test]
fn overlay_fabric_routes_and_each_overlay_fault_breaks_only_its_part() {
    if !require_privileges("overlay_fabric_routes_and_each_overlay_fault_breaks_only_its_part") {
        return;
    }
    let _turn = crate::beside_others();
    let f = Fabric::overlay(FabricSpec::default()).expect("build the overlay fabric");
    assert_eq!(f.data_plane, DataPlane::Vxlan);
    let a = f.node("t0-h0-c0").unwrap();
    let sibling = f.node("t0-h0-c1").unwrap();
    let b = f.node("t1-h2-c0").unwrap();
    let c = f.node("t0-h1-c0").unwrap();
    let (home, far_host) = (f.host_of(a), f.host_of(b));
    // One subnet: the far container is on the link, not behind a router.
    assert_eq!(a.data_ip.octets()[..3], b.data_ip.octets()[..3]);
    assert!(reaches(&a.ns, b.data_ip), "cross-ToR overlay");
    assert!(reaches(&a.ns, sibling.data_ip), "same host");
    assert!(reaches(&home.ns, far_host.nic_ip), "underlay host to host");

    // The container's switch port: a alone is cut, from near and far.
    f.port_loss(a, 100).unwrap();
    assert!(!reachable(&b.ns, a.data_ip).unwrap(), "port drops a");
    assert!(!reachable(&sibling.ns, a.data_ip).unwrap(), "also locally");
    assert!(reaches(&b.ns, sibling.data_ip), "sibling's port fine");
    assert!(reaches(&f.mon, a.mgmt_ip), "management survives");
    f.port_loss(a, 0).unwrap();
    assert!(reaches(&b.ns, a.data_ip), "port fault undone");

    // The host's tunnel: its containers lose every other host, keep each
    // other, and the host's underlay answers as before.
    f.tunnel_blocked(home, true).unwrap();
    assert!(!reachable(&b.ns, a.data_ip).unwrap(), "tunnel cuts a");
    assert!(
        !reachable(&c.ns, sibling.data_ip).unwrap(),
        "and its sibling"
    );
    assert!(reaches(&a.ns, sibling.data_ip), "same host still");
    assert!(reaches(&far_host.ns, home.nic_ip), "underlay still up");
    assert!(reaches(&c.ns, b.data_ip), "other hosts unaffected");
    f.tunnel_blocked(home, false).unwrap();
    assert!(reaches(&b.ns, a.data_ip), "tunnel unblocked");

    // A forwarding entry deleted on a's host: a and its sibling lose b;
    // b still reaches c, and c still reaches b.
    f.forwarding_entry(home, b, false).unwrap();
    assert!(!reachable(&a.ns, b.data_ip).unwrap(), "entry gone: a to b");
    assert!(!reachable(&sibling.ns, b.data_ip).unwrap(), "sibling to b");
    assert!(reaches(&c.ns, b.data_ip), "other host to b");
    assert!(reaches(&a.ns, c.data_ip), "a to others");
    assert!(
        f.forwarding_entry(home, sibling, false).is_err(),
        "a same-host container has no tunnel entry"
    );

    // clear_faults writes the entries back, as after every other fault.
    f.port_loss(b, 100).unwrap();
    f.clear_faults().unwrap();
    assert!(reaches(&a.ns, b.data_ip), "faults cleared");
    assert!(reaches(&b.ns, a.data_ip), "both ways");

    // The routed fabric refuses overlay faults instead of doing nothing.
    drop(f);
    let routed = Fabric::new(FabricSpec::default()).expect("routed fabric");
    let err = routed
        .port_loss(routed.node("t0-h0-c0").unwrap(), 100)
        .unwrap_err();
    assert!(err.to_string().contains("overlay"), "{err}");
}

/// What a phase of [`each_fault_is_paged_on_its_own_layer`] waits for: a
/// component alert of `kind` on `component` whose `layer` annotation is
/// `layer`.
struct Expect<'a> {
    kind: &'a str,
    component: String,
    layer: &'a str,
}

/// Wait for `want` among the localizer's alerts; fail on an alert that
/// blames one of `wrong` (kind, component) meanwhile — the other team's.
fn paged(stack: &Stack, what: &str, want: &Expect, wrong: &[(&str, String)]) {
    let t0 = std::time::Instant::now();
    let alert = wait_until(
        what,
        Duration::from_secs(90),
        Duration::from_millis(500),
        || {
            let alerts = stack.component_alerts().ok()?;
            if let Some(w) = alerts
                .iter()
                .find(|a| wrong.iter().any(|(k, c)| a.kind == *k && a.component == *c))
            {
                panic!(
                    "{what}: paged {}/{} instead: {:#}",
                    w.kind, w.component, w.json
                );
            }
            alerts
                .into_iter()
                .find(|a| a.kind == want.kind && a.component == want.component)
        },
    )
    .unwrap_or_else(|e| panic!("{e:#}; alerts: {:#?}", stack.component_alerts()));
    println!(
        "{what}: {}/{} paged after {:.1} s, layer {}",
        alert.kind,
        alert.component,
        t0.elapsed().as_secs_f64(),
        alert.json["annotations"]["layer"]
    );
    assert_eq!(
        alert.json["annotations"]["layer"], want.layer,
        "{what}: {:#}",
        alert.json
    );
}

/// Wait until no component alert is left (the fault removed).
fn quiet(stack: &Stack, what: &str) {
    let t0 = std::time::Instant::now();
    wait_until(
        what,
        Duration::from_secs(180),
        Duration::from_secs(1),
        || stack.component_alerts().ok().filter(Vec::is_empty),
    )
    .unwrap_or_else(|e| panic!("{e:#}; alerts: {:#?}", stack.component_alerts()));
    println!("{what} after {:.1} s", t0.elapsed().as_secs_f64());
}

/// The whole loop on the overlay fabric, deployed as the shipped DaemonSet
/// is: one exporter per host, probing host NIC to host NIC (the underlay)
/// and from inside each of its containers to the containers they hold
/// training connections with (the overlay). A host's tunnel blocked is
/// paged as its virtual switch; a container's switch port dropping
/// everything, or every other host's forwarding entry for it deleted, as
/// its virtual port — on layer `overlay`, never as the host's NIC or host;
/// the host's uplink cut, which both planes see, as its NIC on layer
/// `underlay`; 30 % loss at a ToR as the ToR, `underlay`.
#[test]
fn each_fault_is_paged_on_its_own_layer() {
    if !require_privileges("each_fault_is_paged_on_its_own_layer") {
        return;
    }
    let _turn = crate::beside_others();
    let mut opts = StackOpts::new(
        bin_path("skeletonhunter-exporter"),
        Some(bin_path("skeletonhunter-localizer")),
    );
    opts.data_plane = DataPlane::Vxlan;
    opts.from_containers = true;
    let mut stack = Stack::start(&opts).expect("start the stack");
    stack
        .wait_healthy(Duration::from_secs(90))
        .expect("healthy baseline");
    let f = &stack.fabric;
    let host = &f.hosts[1];
    let node = f.node("t1-h2-c0").expect("node");
    let (name, nic) = (host.name.clone(), host.nic_ip.to_string());
    let physical = [("host", name.clone()), ("nic", nic.clone())];

    f.tunnel_blocked(host, true).expect("block the tunnel");
    let vswitch = Expect {
        kind: "vswitch",
        component: name.clone(),
        layer: "overlay",
    };
    paged(&stack, "tunnel blocked", &vswitch, &physical);
    f.tunnel_blocked(host, false).expect("unblock");
    quiet(&stack, "the tunnel's alert resolved");

    f.port_loss(node, 100).expect("port fault");
    let vport = Expect {
        kind: "vport",
        component: node.identity.node.clone(),
        layer: "overlay",
    };
    let node_host = f.host_of(node);
    let wrong = [
        ("node", node.identity.node.clone()),
        ("host", node_host.name.clone()),
        ("nic", node_host.nic_ip.to_string()),
    ];
    paged(&stack, "switch port dropping", &vport, &wrong);
    f.port_loss(node, 0).expect("port fault undone");
    quiet(&stack, "the port's alert resolved");

    // The control plane forgets where the container lives: every other
    // host's forwarding entry for it deleted. Its underlay is clean; its
    // virtual port is the one component on every failing path.
    // Another container than the port's, which may still be flapping.
    let forgotten = f.node("t0-h0-c1").expect("node");
    let its_host = f.host_of(forgotten);
    for h in f.hosts.iter().filter(|h| h.name != its_host.name) {
        f.forwarding_entry(h, forgotten, false)
            .expect("delete the entry");
    }
    let vport = Expect {
        kind: "vport",
        component: forgotten.identity.node.clone(),
        layer: "overlay",
    };
    let wrong = [
        ("node", forgotten.identity.node.clone()),
        ("host", its_host.name.clone()),
        ("nic", its_host.nic_ip.to_string()),
    ];
    paged(&stack, "forwarding entries deleted", &vport, &wrong);
    f.clear_faults().expect("entries written back");
    quiet(&stack, "the entries' alert resolved");

    f.host_link(host, false).expect("cut the uplink");
    let nic_down = Expect {
        kind: "nic",
        component: nic,
        layer: "underlay",
    };
    let mut overlay_side = vec![("vswitch", name.clone())];
    for n in f.nodes.iter().filter(|n| n.identity.host == name) {
        overlay_side.push(("vport", n.identity.node.clone()));
    }
    paged(&stack, "uplink cut", &nic_down, &overlay_side);
    f.host_link(host, true).expect("uplink back");
    quiet(&stack, "the uplink's alert resolved");

    f.tor_loss(1, 30).expect("loss at tor1");
    let tor = Expect {
        kind: "tor",
        component: f.tors[1].name.clone(),
        layer: "underlay",
    };
    let overlay_side: Vec<(&str, String)> = f
        .hosts
        .iter()
        .filter(|h| h.tor == 1)
        .map(|h| ("vswitch", h.name.clone()))
        .collect();
    paged(&stack, "loss at a ToR", &tor, &overlay_side);
    // The jobs it hurts, their ranks counted and numbered as the
    // containers' launcher variables say.
    wait_until(
        "the ToR alert names its jobs' ranks",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || stack.check_jobs_under_tor(&tor.component).ok(),
    )
    .unwrap_or_else(|e| {
        panic!(
            "{e:#}: {:#}",
            stack.check_jobs_under_tor(&tor.component).unwrap_err()
        )
    });
    f.tor_loss(1, 0).expect("ToR loss undone");
    stack.check_running().expect("stack running");
}

/// What `exporter` counts from `src` to `dst` over UDP: (probes sent,
/// probes lost, replies timed). `None` while the series does not exist.
fn udp_pair(f: &Fabric, exporter: &Node, src: &str, dst: &str) -> Option<(f64, f64, f64)> {
    let body = exporter_get(f, exporter, "/metrics").ok()?;
    let l = [
        format!("src_node=\"{src}\""),
        format!("dst_node=\"{dst}\""),
        "protocol=\"udp\"".to_string(),
    ];
    let l: Vec<&str> = l.iter().map(String::as_str).collect();
    Some((
        sample(&body, "skeletonhunter_probe_sent_total", &l)?,
        sample(&body, "skeletonhunter_probe_lost_total", &l)?,
        sample(&body, "skeletonhunter_probe_rtt_seconds_count", &l)?,
    ))
}

/// One exporter per host, as the DaemonSet runs it, probing from inside
/// each training container: the container on host A finds its peer on
/// host B from its own open connection and probes it across the overlay
/// under its own name, beside the host's underlay probes; a fault on the
/// container's switch port shows on its series only; a container without
/// training connections is not probed from; and when the container ends
/// its series leave the exporter.
#[test]
fn one_exporter_per_host_probes_from_inside_each_container() {
    if !require_privileges("one_exporter_per_host_probes_from_inside_each_container") {
        return;
    }
    let _turn = crate::beside_others();
    let f = Fabric::overlay(FabricSpec::default()).expect("build the overlay fabric");
    let (a, b) = (f.node("t0-h0-c0").unwrap(), f.node("t1-h2-c0").unwrap());
    // a's sibling holds no connection: not a training container.
    let idle = f.node("t0-h0-c1").unwrap();
    let mut ctrs = Containers::start(&f, &[a, b, idle]).expect("start the containers");
    // A training connection, b to a, held open for the whole test.
    let a_ip = a.data_ip;
    let listener =
        a.ns.run_in(move || TcpListener::bind((a_ip, 29500)))
            .unwrap()
            .unwrap();
    let _client =
        b.ns.run_in(move || TcpStream::connect((a_ip, 29500)))
            .unwrap()
            .unwrap();
    let _server = listener.accept().expect("accept");

    let opts = StackOpts::new(bin_path("skeletonhunter-exporter"), None);
    let dir = TempDir::new("containers").unwrap();
    let underlay = |n: &Node| {
        let host = &f.host_of(n).name;
        f.underlay
            .iter()
            .find(|u| &u.identity.node == host)
            .unwrap()
    };
    let (host_a, host_b) = (underlay(a), underlay(b));
    let mut exporters = Vec::new();
    for u in [host_a, host_b] {
        let name = &u.identity.node;
        let path = dir.path().join(format!("{name}.yaml"));
        let yaml = container_host_config(&f, u, &opts, &ctrs.pattern(name), &ctrs.root);
        std::fs::write(&path, yaml).unwrap();
        let mut cmd = u.ns.net_command(&opts.exporter_bin.to_string_lossy());
        cmd.arg("--config").arg(&path);
        exporters.push(ChildGuard::spawn(&format!("exporter-{name}"), cmd).unwrap());
    }
    let (an, bn) = (a.identity.node.as_str(), b.identity.node.as_str());
    let answered = |src: &str, dst: &str, at: &Node| {
        wait_until(
            &format!("{src} -> {dst} answered, counted by {}", at.identity.node),
            Duration::from_secs(60),
            Duration::from_millis(250),
            || udp_pair(&f, at, src, dst).filter(|(_, _, rtt)| *rtt >= 10.0),
        )
        .unwrap_or_else(|e| panic!("{e:#}; log: {}", exporters[0].log()))
    };
    // Each side finds the other from the one connection (its own end).
    answered(an, bn, host_a);
    answered(bn, an, host_b);
    // The host's own probes, host to host, run beside them.
    let (ha, hb) = (host_a.identity.node.as_str(), host_b.identity.node.as_str());
    answered(ha, hb, host_a);
    let body = exporter_get(&f, host_a, "/metrics").unwrap();
    assert!(
        body.contains(&format!("node_id=\"{an}\"")),
        "container node info"
    );

    // Its switch port dropping everything: a's overlay probes are lost,
    // the host's underlay probes are not.
    let (_, lost_before, _) = udp_pair(&f, host_a, an, bn).unwrap();
    let (_, under_lost_before, _) = udp_pair(&f, host_a, ha, hb).unwrap();
    f.port_loss(a, 100).expect("port fault");
    wait_until(
        "a's overlay probes lost",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || udp_pair(&f, host_a, an, bn).filter(|(_, lost, _)| *lost >= lost_before + 10.0),
    )
    .unwrap();
    let (_, under_lost, _) = udp_pair(&f, host_a, ha, hb).unwrap();
    assert_eq!(under_lost, under_lost_before, "the underlay lost probes");
    f.port_loss(a, 0).expect("port fault undone");

    // The container ends: its prober and every series it had go.
    ctrs.end(&f, an).expect("end the container");
    wait_until(
        "a's series removed",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || {
            let body = exporter_get(&f, host_a, "/metrics").ok()?;
            (!body.contains(&format!("\"{an}\""))).then_some(())
        },
    )
    .unwrap();
    for e in &mut exporters {
        e.check_running().expect("exporter running");
    }
    for line in exporters[0]
        .log()
        .lines()
        .filter(|l| l.contains("containers:"))
    {
        println!("{line}");
    }
}
