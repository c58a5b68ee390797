//! `skeletonhunter-discovery-trace`: load the exporter's discovery BPF
//! programs and print every decoded event, one line each. For operators
//! ("what does discovery see on this host?") and for the tests, which attach
//! the RDMA uprobe to a test program's own `ibv_modify_qp`.

#![forbid(unsafe_code)]

use anyhow::{Context, Result};
use clap::Parser;
use skeletonhunter_exporter::sys::ebpf::{self, EbpfSource};
use skeletonhunter_exporter::wire::discovery::Event;
use std::io::Write;
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
#[command(
    name = "skeletonhunter-discovery-trace",
    version,
    about = "Print the TCP and RDMA connection events SkeletonHunter's eBPF discovery sees."
)]
struct Args {
    /// Attach the RDMA uprobes to this binary or library instead of the
    /// system's libibverbs.so.1.
    #[arg(long)]
    uprobe_target: Option<PathBuf>,
    /// Do not attach the TCP tracepoint (RDMA events only).
    #[arg(long)]
    no_tracepoint: bool,
    /// Report TCP sockets of every network namespace, not only this one.
    #[arg(long)]
    all_namespaces: bool,
    /// Stop after this many seconds (at most 3600).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop after this many events (0 = no limit).
    #[arg(long, default_value_t = 0)]
    count: u64,
}

fn line(ev: &Event) -> String {
    match ev {
        Event::TcpUp {
            conn,
            local,
            netns,
            pid,
        } => format!(
            "tcp_up pid={pid} cgroup={} netns={netns} local={local}:{} remote={}:{}",
            conn.cgroup, conn.local_port, conn.remote, conn.remote_port
        ),
        Event::TcpDown { key, netns } => format!("tcp_down netns={netns} key={key:016x}"),
        Event::RdmaRtr {
            pid,
            cgroup,
            remote_qpn,
            local_qpn,
            dlid,
            gid,
            ..
        } => format!(
            "rdma_rtr pid={pid} cgroup={cgroup} remote_qpn={remote_qpn:#x} local_qpn={local_qpn:#x} dlid={dlid:#x} gid={}",
            Ipv6Addr::from(*gid)
        ),
        Event::RdmaDestroy { pid, .. } => format!("rdma_destroy pid={pid}"),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(args.duration > 0.0 && args.duration <= 3600.0) {
        anyhow::bail!("--duration: {} is not in (0, 3600] seconds", args.duration);
    }
    let netns = if args.all_namespaces {
        0
    } else {
        ebpf::own_netns()?
    };
    let mut src = EbpfSource::load(netns, !args.no_tracepoint)?;
    let target = args.uprobe_target.clone().or_else(ebpf::system_libibverbs);
    match &target {
        Some(t) => {
            src.attach_verbs(t)
                .with_context(|| format!("--uprobe-target {}", t.display()))?;
        }
        None => eprintln!("no libibverbs.so.1 found: RDMA events not traced"),
    }
    for n in &src.notes {
        eprintln!("{n}");
    }
    let out = std::io::stdout();
    writeln!(out.lock(), "ready")?;
    out.lock().flush()?;
    let end = Instant::now() + Duration::from_secs_f64(args.duration);
    let mut seen = 0u64;
    while Instant::now() < end && (args.count == 0 || seen < args.count) {
        src.wait(
            end.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200)),
        );
        let mut lock = out.lock();
        src.drain(|e| {
            seen += 1;
            let _ = match e {
                Ok(ev) => writeln!(lock, "{}", line(&ev)),
                Err(e) => writeln!(lock, "malformed {e:#}"),
            };
        });
        lock.flush()?;
    }
    eprintln!("dropped={}", src.dropped());
    Ok(())
}
