//! The RDMA uprobe, for real: the exporter's BPF program is attached to a
//! test program's own `ibv_modify_qp`/`ibv_destroy_qp`, which have the
//! libibverbs signatures and take the real `struct ibv_qp_attr` from
//! `<infiniband/verbs.h>`. So the decoded QPN/GID also check the program's
//! field offsets against the ABI. (No RDMA NIC is needed: the uprobe fires
//! on the function entry whatever the function does.)

use anyhow::{bail, Context, Result};
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::bin_path;
use skeletonhunter_tools::servers::TempDir;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

/* Same signatures as libibverbs; never inlined, so the uprobe sees each call. */
__attribute__((noinline)) int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	__asm__ volatile("" ::: "memory");
	return qp && attr && attr_mask ? 0 : -1;
}

__attribute__((noinline)) int ibv_destroy_qp(struct ibv_qp *qp)
{
	__asm__ volatile("" ::: "memory");
	return qp ? 0 : -1;
}

/* argv[1]: seconds to keep the queue pairs before destroying qp1. */
int main(int argc, char **argv)
{
	unsigned hold = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
	struct ibv_qp qp1, qp2;
	struct ibv_qp_attr a;
	memset(&qp1, 0, sizeof(qp1));
	memset(&qp2, 0, sizeof(qp2));
	qp1.qp_num = 0x11;
	qp2.qp_num = 0x22;

	/* RESET -> INIT: not a connection yet, must not be reported. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	ibv_modify_qp(&qp1, &a, IBV_QP_STATE | IBV_QP_PORT);

	/* qp_state says RTR but the mask does not include it: not a transition. */
	a.qp_state = IBV_QPS_RTR;
	ibv_modify_qp(&qp1, &a, IBV_QP_PATH_MTU);

	/* INIT -> RTR towards a RoCE v2 peer with an IPv4-mapped GID. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = 0xabcde;
	a.ah_attr.is_global = 1;
	a.ah_attr.dlid = 0x17;
	inet_pton(AF_INET6, "::ffff:198.18.0.9", &a.ah_attr.grh.dgid);
	ibv_modify_qp(&qp1, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN);

	/* INIT -> RTR towards an IPv6 GID. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = 0x123;
	a.ah_attr.is_global = 1;
	inet_pton(AF_INET6, "fd00::42", &a.ah_attr.grh.dgid);
	ibv_modify_qp(&qp2, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN);

	if (hold)
		sleep(hold);
	ibv_destroy_qp(&qp1);
	puts("done");
	return 0;
}
"#;

fn build_program(dir: &std::path::Path) -> Result<std::path::PathBuf> {
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        bail!("<infiniband/verbs.h> is missing: install libibverbs-dev (scripts/setup.sh does)");
    }
    let src = dir.join("fake_verbs.c");
    let bin = dir.join("fake_verbs");
    std::fs::write(&src, PROGRAM)?;
    let out = Command::new("cc")
        .args(["-O0", "-g", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .context("cannot run cc (install build-essential)")?;
    if !out.status.success() {
        bail!("cc failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(bin)
}

#[test]
fn discovery_uprobe_decodes_ibv_modify_qp_rtr() {
    if !require_privileges("discovery_uprobe_decodes_ibv_modify_qp_rtr") {
        return;
    }
    let tmp = TempDir::new("uprobe").unwrap();
    let dir = tmp.path();
    let prog = build_program(dir).unwrap();

    // The tracer prints "ready" once attached, then one line per event.
    let mut tracer = Command::new(bin_path("skeletonhunter-discovery-trace"));
    tracer
        .arg("--uprobe-target")
        .arg(&prog)
        .args(["--no-tracepoint", "--duration", "20", "--count", "3"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = tracer
        .spawn()
        .expect("start skeletonhunter-discovery-trace");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let err_log = std::thread::spawn(move || {
        let mut s = String::new();
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            s.push_str(&l);
            s.push('\n');
        }
        s
    });
    let guard = scopeguard_kill(child);
    let first = rx.recv_timeout(Duration::from_secs(15));
    assert_eq!(first.as_deref(), Ok("ready"), "tracer did not attach");

    let out = Command::new(&prog).output().unwrap();
    assert!(out.status.success());
    let pid = {
        // The program has exited; its pid is in the events. Read them all.
        let mut lines = Vec::new();
        while lines.len() < 3 {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(l) => lines.push(l),
                Err(_) => break,
            }
        }
        drop(guard);
        let errs = err_log.join().unwrap_or_default();
        assert_eq!(
            lines.len(),
            3,
            "expected 3 events, got {lines:?}; tracer stderr:\n{errs}"
        );
        assert!(errs.contains("points)"), "uprobes not attached: {errs}");
        let l0 = &lines[0];
        assert!(l0.starts_with("rdma_rtr "), "first event: {l0}");
        assert!(
            l0.contains("remote_qpn=0xabcde local_qpn=0x11 dlid=0x17 gid=::ffff:198.18.0.9"),
            "{l0}"
        );
        let l1 = &lines[1];
        assert!(
            l1.contains("remote_qpn=0x123 local_qpn=0x22 dlid=0x0 gid=fd00::42"),
            "{l1}"
        );
        assert!(lines[2].starts_with("rdma_destroy "), "{}", lines[2]);
        let pid_of = |l: &str| -> String {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("pid="))
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(pid_of(l0), pid_of(&lines[2]));
        pid_of(l0)
    };
    assert!(pid.parse::<u32>().is_ok_and(|p| p > 0), "pid {pid}");
}

/// Kill the tracer when the test ends, pass or fail.
fn scopeguard_kill(child: std::process::Child) -> impl Drop {
    struct G(std::process::Child);
    impl Drop for G {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    G(child)
}

/// End to end through the exporter: a process that moves a QP to RTR towards
/// a RoCE v2 peer (GID ::ffff:198.18.0.9) and keeps it makes that peer a
/// skeleton peer; destroying the QP lets it expire after the TTL.
#[test]
fn discovery_rdma_queue_pair_becomes_a_skeleton_peer() {
    use skeletonhunter_tools::{http_get, wait_until, ChildGuard, Netns};
    if !require_privileges("discovery_rdma_queue_pair_becomes_a_skeleton_peer") {
        return;
    }
    let tmp = TempDir::new("rdma").unwrap();
    let dir = tmp.path();
    let prog = build_program(dir).unwrap();
    let ns = Netns::new("drq").unwrap();
    let cfg = format!(
        "listen: \"127.0.0.1:9479\"\nidentity: {{node: node-a}}\nresponder: {{udp: off, tcp: off}}\n\
         probe: {{interval: 500ms, timeout: 400ms, protocols: [udp]}}\n\
         discovery:\n  ebpf:\n    mode: ebpf\n    libibverbs: {}\n    window: 1s\n    long_lived: 2s\n    ttl: 2s\n    include_cidrs: [198.18.0.0/15]\n",
        prog.display()
    );
    let path = dir.join("a.yaml");
    std::fs::write(&path, cfg).unwrap();
    let mut cmd = ns.command(bin_path("skeletonhunter-exporter").to_str().unwrap());
    cmd.arg("--config").arg(&path).env("RUST_LOG", "info");
    let exporter = ChildGuard::spawn("rdma-node-a", cmd).unwrap();
    let peers = |ns: &Netns| -> Option<f64> {
        let addr = "127.0.0.1:9479".parse().unwrap();
        let body = ns
            .run_in(move || http_get(addr, "/metrics", Duration::from_secs(2)))
            .ok()?
            .ok()?
            .1;
        body.lines()
            .find(|l| l.starts_with("skeletonhunter_skeleton_peers{source=\"ebpf\"}"))?
            .rsplit(' ')
            .next()?
            .parse()
            .ok()
    };
    wait_until(
        "uprobes attached",
        Duration::from_secs(15),
        Duration::from_millis(100),
        || (exporter.log().contains("(2 points)") && peers(&ns).is_some()).then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", exporter.log()));
    assert_eq!(peers(&ns), Some(0.0));

    // Hold the QP for 6 s: long_lived (2 s) makes it a peer meanwhile.
    let mut program = Command::new(&prog)
        .arg("6")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "RDMA peer discovered",
        Duration::from_secs(6),
        Duration::from_millis(100),
        || (peers(&ns) == Some(1.0)).then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", exporter.log()));
    assert!(
        exporter.log().contains("skeleton peer 198.18.0.9"),
        "{}",
        exporter.log()
    );
    assert!(
        !exporter.log().contains("fd00::42"),
        "excluded by include_cidrs"
    );
    assert!(program.wait().unwrap().success());
    // Destroyed: gone after the TTL.
    wait_until(
        "RDMA peer expired",
        Duration::from_secs(10),
        Duration::from_millis(200),
        || (peers(&ns) == Some(0.0)).then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", exporter.log()));
}
