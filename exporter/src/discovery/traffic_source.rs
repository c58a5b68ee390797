//! Traffic discovery's source selection: eBPF when it loads (in `auto`
//! mode), else polling /proc, and the thread that runs the
//! [`Worker`](super::traffic::Worker) over it.

use super::peer_set::PeerSet;
use super::traffic::{Source, Worker};
use crate::config::{Mode, TrafficSettings};
use crate::model::traffic::Cidr;
use crate::sys::ebpf::{self, EbpfSource};
use crate::sys::sock::local_addresses;
use crate::telemetry::Metrics;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Which source ended up active, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    /// The source in use.
    pub source: SourceKind,
    /// Why (what was attached, or why eBPF was unavailable).
    pub reason: String,
}

skeletonhunter_common::labelled_enum! {
    /// Which kind of source runs; `as_str` is what the log says.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SourceKind {
        /// The eBPF programs.
        Ebpf,
        /// Polling /proc/net/tcp{,6}.
        Poll,
    }
}

/// A discovery that watches one container from inside its network
/// namespace (started from a thread that entered it): it polls the
/// namespace's connections and ends when `stop` is set.
pub struct Scope {
    /// Set to end the discovery thread.
    pub stop: Arc<AtomicBool>,
    /// The discovery thread's name.
    pub thread: String,
}

/// Select the source (eBPF first in `auto` mode) and start discovery on its
/// own thread, publishing into `peers`. Returns `None` when mode is `off`.
pub fn spawn(
    settings: TrafficSettings,
    peers: PeerSet,
    metrics: Option<Arc<Metrics>>,
) -> Result<Option<Active>> {
    spawn_in(settings, peers, metrics, None)
}

/// [`spawn`], in a container's namespace when `scope` is given: polling
/// only (the eBPF programs are the host's), through `/proc/thread-self`.
pub fn spawn_in(
    settings: TrafficSettings,
    peers: PeerSet,
    metrics: Option<Arc<Metrics>>,
    scope: Option<Scope>,
) -> Result<Option<Active>> {
    let mut settings = settings;
    // Connections to our own addresses are local, never skeleton peers.
    for ip in local_addresses() {
        if let Ok(c) = ip.to_string().parse::<Cidr>() {
            settings.filter.exclude_cidrs.push(c);
        }
    }
    let netns = ebpf::own_netns().unwrap_or(0);
    if scope.is_some() && settings.mode != Mode::Off {
        settings.mode = Mode::Poll;
        settings.all_namespaces = false;
    }
    let (source, active) = match settings.mode {
        Mode::Off => {
            tracing::info!("traffic discovery: off (discovery.ebpf is false or mode: off)");
            return Ok(None);
        }
        Mode::Poll => (
            Source::Poll,
            Active {
                source: SourceKind::Poll,
                reason: "mode=poll in the configuration".into(),
            },
        ),
        Mode::Ebpf | Mode::Auto => match load_ebpf(&settings, netns) {
            Ok(src) => {
                let reason = src.notes.join("; ");
                (
                    Source::Ebpf(Box::new(src)),
                    Active {
                        source: SourceKind::Ebpf,
                        reason,
                    },
                )
            }
            Err(e) if settings.mode == Mode::Auto => (
                Source::Poll,
                Active {
                    source: SourceKind::Poll,
                    reason: format!("eBPF unavailable: {e:#}"),
                },
            ),
            Err(e) => return Err(e.context("traffic discovery: mode=ebpf")),
        },
    };
    if active.source == SourceKind::Poll && settings.all_namespaces {
        tracing::warn!(
            "traffic discovery: all_namespaces needs eBPF; polling sees this namespace only"
        );
    }
    tracing::info!(
        "traffic discovery: source={} ({})",
        active.source.as_str(),
        active.reason
    );
    let mut worker = Worker::new(settings, peers, metrics, netns);
    let mut thread = "discovery".to_string();
    if let Some(scope) = scope {
        worker = worker.scoped(PathBuf::from("/proc/thread-self"), scope.stop);
        thread = scope.thread;
    }
    std::thread::Builder::new()
        .name(thread)
        .spawn(move || worker.run(source))
        .context("spawn the discovery thread")?;
    Ok(Some(active))
}

fn load_ebpf(settings: &TrafficSettings, netns: u32) -> Result<EbpfSource> {
    let filter_ns = if settings.all_namespaces { 0 } else { netns };
    let mut src = EbpfSource::load(filter_ns, true)?;
    let lib = settings.libibverbs.clone().or_else(ebpf::system_libibverbs);
    match lib {
        Some(lib) if lib.exists() => {
            if let Err(e) = src.attach_verbs(&lib) {
                src.notes.push(format!(
                    "RDMA uprobes not attached to {}: {e:#}",
                    lib.display()
                ));
            }
        }
        Some(lib) => src.notes.push(format!(
            "{} does not exist: RDMA peers not discovered",
            lib.display()
        )),
        None => src
            .notes
            .push("no libibverbs.so.1 on this host: RDMA peers not discovered".into()),
    }
    Ok(src)
}
