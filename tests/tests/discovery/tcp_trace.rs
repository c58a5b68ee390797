//! The TCP tracepoint program, for real: IPv4 and IPv6 connections in one
//! namespace are reported with that namespace's inode, both ends up and
//! down; a connection in another namespace is not reported (the in-kernel
//! namespace filter).

use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::{bin_path, ChildGuard, Netns};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// Open and close one connection to `addr` inside `ns`; returns the
/// listener's port.
fn one_connection(ns: &Netns, addr: &'static str) -> u16 {
    ns.run_in(move || {
        let l = TcpListener::bind(addr).expect("bind");
        let a: SocketAddr = l.local_addr().unwrap();
        let c = TcpStream::connect(a).expect("connect");
        let (s, _) = l.accept().expect("accept");
        drop(c);
        drop(s);
        a.port()
    })
    .expect("run in namespace")
}

#[test]
fn discovery_tracepoint_reports_v4_and_v6_of_its_namespace_only() {
    if !require_privileges("discovery_tracepoint_reports_v4_and_v6_of_its_namespace_only") {
        return;
    }
    let x = Netns::new("dtx").unwrap();
    let y = Netns::new("dty").unwrap();
    let inode = std::fs::metadata(format!("/run/netns/{}", x.name()))
        .unwrap()
        .ino();

    let mut cmd = x.command(bin_path("skeletonhunter-discovery-trace").to_str().unwrap());
    cmd.args(["--duration", "4"]);
    let mut tracer = ChildGuard::spawn("dtx-trace", cmd).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !tracer.log().lines().any(|l| l == "ready") {
        tracer.check_running().unwrap();
        assert!(
            Instant::now() < deadline,
            "tracer not ready:\n{}",
            tracer.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let p4 = one_connection(&x, "127.0.0.1:0");
    let p6 = one_connection(&x, "[::1]:0");
    let other = one_connection(&y, "127.0.0.1:0");

    let deadline = Instant::now() + Duration::from_secs(15);
    while !tracer.log().contains("dropped=") {
        assert!(
            Instant::now() < deadline,
            "tracer did not finish:\n{}",
            tracer.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = tracer.log();
    let ups: Vec<&str> = log.lines().filter(|l| l.starts_with("tcp_up ")).collect();
    let downs = log.lines().filter(|l| l.starts_with("tcp_down ")).count();
    let has = |needle: &str| ups.iter().any(|l| l.contains(needle));
    // Client and server socket of each connection.
    assert!(has(&format!("remote=127.0.0.1:{p4}")), "{log}");
    assert!(has(&format!("local=127.0.0.1:{p4}")), "{log}");
    assert!(has(&format!("remote=::1:{p6}")), "{log}");
    assert!(has(&format!("local=::1:{p6}")), "{log}");
    assert_eq!(ups.len(), 4, "exactly two connections' ends:\n{log}");
    assert_eq!(downs, 4, "{log}");
    assert!(
        ups.iter().all(|l| l.contains(&format!("netns={inode} "))),
        "namespace inode {inode}:\n{log}"
    );
    // (The exact count above already excludes the other namespace's two
    // ends; this names them if they show up.)
    assert!(
        !ups.iter()
            .any(|l| l.ends_with(&format!(":{other}")) && !l.contains(&format!(":{p4}"))),
        "a connection of another namespace was reported:\n{log}"
    );
    assert!(log.contains("dropped=0"), "{log}");
}
