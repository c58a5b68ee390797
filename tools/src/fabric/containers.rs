//! Training containers as a container runtime leaves them on a host, for
//! an exporter that probes from inside each one: a process in the
//! container's network namespace and a UTS namespace of its own (its host
//! name is the container's name, as a pod's is; its job in its
//! environment, as the downward API puts it), placed in a cgroup of
//! its own under one cgroup per host — the layout the exporter's
//! `containers.cgroups` globs select. The container runtime itself cannot
//! run here; this is its result. Dropping [`Containers`] kills the
//! processes and removes the cgroups.

use super::topology::{Fabric, Node};
use crate::process::{wait_until, ChildGuard};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The cgroup2 mount of this machine.
pub fn cgroup2_root() -> Result<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
        })
        .context("no cgroup2 hierarchy is mounted")
}

/// The port every container's training connections are made to
/// (torch.distributed's rendezvous port).
pub const TRAINING_PORT: u16 = 29500;

/// The containers started, by name.
pub struct Containers {
    /// The cgroup2 mount.
    pub root: PathBuf,
    /// This set's cgroup, relative to `root`: `<base>/<host>/<container>`.
    pub base: String,
    procs: BTreeMap<String, ChildGuard>,
    /// Each container's ends of its training connections, closed when it
    /// ends (its peers then see the connection go, as from a dead rank).
    links: BTreeMap<String, Vec<TcpStream>>,
    /// Each container's listener on [`TRAINING_PORT`].
    listeners: BTreeMap<String, TcpListener>,
}

impl Containers {
    /// Start a container process for each of `nodes`.
    pub fn start(fabric: &Fabric, nodes: &[&Node]) -> Result<Containers> {
        let root = cgroup2_root()?;
        // Tests of one binary run at once, with the same host names.
        static SETS: AtomicU32 = AtomicU32::new(0);
        let n = SETS.fetch_add(1, Ordering::Relaxed);
        let base = format!("skeletonhunter-test-{}-{n}", std::process::id());
        let mut set = Containers {
            root,
            base,
            procs: BTreeMap::new(),
            links: BTreeMap::new(),
            listeners: BTreeMap::new(),
        };
        for n in nodes {
            set.start_one(fabric, n)?;
        }
        Ok(set)
    }

    /// A container for every node of `fabric`, each holding a training
    /// connection to each of its skeleton peers ([`Fabric::skeleton_peers`]),
    /// as a job's ranks do: what their probers learn their peers from.
    pub fn start_jobs(fabric: &Fabric) -> Result<Containers> {
        let nodes: Vec<&Node> = fabric.nodes.iter().collect();
        let mut set = Containers::start(fabric, &nodes)?;
        for n in &nodes {
            let ip = n.data_ip;
            let l =
                n.ns.run_in(move || TcpListener::bind((ip, TRAINING_PORT)))??;
            set.listeners.insert(n.identity.node.clone(), l);
        }
        for (i, n) in nodes.iter().enumerate() {
            for p in fabric.skeleton_peers(n) {
                // Each pair once: from the one earlier in fabric order.
                if nodes[..i]
                    .iter()
                    .all(|m| m.identity.node != p.identity.node)
                {
                    set.connect(n, p)?;
                }
            }
        }
        Ok(set)
    }

    /// A training connection from `n` to `p`, both ends held.
    fn connect(&mut self, n: &Node, p: &Node) -> Result<()> {
        let ip = p.data_ip;
        let c =
            n.ns.run_in(move || TcpStream::connect((ip, TRAINING_PORT)))??;
        let listener = (self.listeners.get(&p.identity.node))
            .with_context(|| format!("{} does not listen", p.identity.node))?;
        let (s, _) = listener.accept()?;
        self.links
            .entry(n.identity.node.clone())
            .or_default()
            .push(c);
        self.links
            .entry(p.identity.node.clone())
            .or_default()
            .push(s);
        Ok(())
    }

    /// After [`Containers::end`]: a new container of the same name starts
    /// on the same host (a pod created again by its job's controller) and
    /// connects to its skeleton peers again.
    pub fn start_again(&mut self, fabric: &Fabric, name: &str) -> Result<()> {
        let node = fabric.node(name)?;
        self.start_one(fabric, node)?;
        for p in fabric.skeleton_peers(node) {
            self.connect(node, p)?;
        }
        Ok(())
    }

    /// The glob that selects the containers of `host` (for its exporter's
    /// `containers.cgroups`).
    pub fn pattern(&self, host: &str) -> String {
        format!("{}/{host}/*", self.base)
    }

    fn dir(&self, host: &str, name: &str) -> PathBuf {
        self.root.join(&self.base).join(host).join(name)
    }

    fn start_one(&mut self, fabric: &Fabric, node: &Node) -> Result<()> {
        let name = node.identity.node.clone();
        let host = fabric.host_of(node).name.clone();
        let dir = self.dir(&host, &name);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let mut cmd = node.ns.net_command("unshare");
        let script = format!("hostname {name} && exec sleep 3600");
        cmd.args(["--uts", "sh", "-c", &script]);
        // Its job, as a pod gets it from its job-name label (downward API).
        cmd.env("SKELETONHUNTER_TENANT", &node.identity.tenant);
        // Its ranks, as torchrun gives its first worker (the exporter
        // publishes them as skeletonhunter_rank_info).
        let (first, workers, world) = fabric.ranks_of(node);
        cmd.envs([
            ("RANK", first.to_string()),
            ("LOCAL_RANK", "0".into()),
            ("LOCAL_WORLD_SIZE", workers.to_string()),
            ("WORLD_SIZE", world.to_string()),
        ]);
        let child = ChildGuard::spawn(&format!("container-{name}"), cmd)?;
        let pid = child.pid();
        // Into its cgroup only once it is in its namespaces with its name
        // set (`sleep` runs), so the exporter never sees it half made.
        let comm = Path::new("/proc").join(pid.to_string()).join("comm");
        wait_until(
            &format!("container {name} started"),
            Duration::from_secs(20),
            Duration::from_millis(20),
            || {
                let c = std::fs::read_to_string(&comm).ok()?;
                (c.trim() == "sleep").then_some(())
            },
        )?;
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("move {pid} into {}", dir.display()))?;
        self.procs.insert(name, child);
        Ok(())
    }

    /// End the container `name` (its process killed, its cgroup removed),
    /// as a finished job's container ends.
    pub fn end(&mut self, fabric: &Fabric, name: &str) -> Result<()> {
        let Some(mut child) = self.procs.remove(name) else {
            bail!("no container {name}");
        };
        child.terminate(Duration::from_secs(5))?;
        self.links.remove(name);
        let host = fabric.host_of(fabric.node(name)?).name.clone();
        remove_when_empty(&self.dir(&host, name))
    }
}

/// Remove a cgroup directory; its processes may take a moment to leave.
fn remove_when_empty(dir: &Path) -> Result<()> {
    wait_until(
        &format!("remove {}", dir.display()),
        Duration::from_secs(10),
        Duration::from_millis(50),
        || (std::fs::remove_dir(dir).is_ok() || !dir.exists()).then_some(()),
    )
}

/// Remove a set's cgroup tree `<base>/<host>/<container>`, leaves first (a
/// cgroup with children cannot be removed); its processes must be ending.
fn remove_tree(base: &Path) {
    if let Ok(hosts) = std::fs::read_dir(base) {
        for h in hosts.flatten().filter(|h| h.path().is_dir()) {
            if let Ok(ctrs) = std::fs::read_dir(h.path()) {
                for c in ctrs.flatten().filter(|c| c.path().is_dir()) {
                    let _ = remove_when_empty(&c.path());
                }
            }
            let _ = std::fs::remove_dir(h.path());
        }
    }
    let _ = std::fs::remove_dir(base);
}

/// Remove the container cgroups a process `pid` left behind (its
/// destructors did not run); its containers' processes die with the
/// namespaces they run in. Returns how many sets were removed.
pub fn remove_cgroups_of(pid: u32) -> usize {
    let Ok(root) = cgroup2_root() else {
        return 0;
    };
    let prefix = format!("skeletonhunter-test-{pid}-");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            remove_tree(&e.path());
            removed += usize::from(!e.path().exists());
        }
    }
    removed
}

impl Drop for Containers {
    fn drop(&mut self) {
        self.links.clear();
        for (_, mut c) in std::mem::take(&mut self.procs) {
            let _ = c.terminate(Duration::from_secs(5));
        }
        remove_tree(&self.root.join(&self.base));
    }
}
