//! Finding the containers to probe from: the cgroup directories the
//! configured globs select, one process in each, and that process's
//! network namespace. A pod's containers share one namespace, so
//! containers are keyed by it; a cgroup in the exporter's own namespace
//! (host-network pods) has no container network to probe and is skipped,
//! and so is a container without training traffic: it is probed from once
//! it holds a connection the traffic discovery's filters count (its own
//! `net/tcp{,6}`, read through its process), so a selection as wide as
//! "every pod" probes from the training pods only. The check admits; it
//! does not evict: a container already probed from stays until it ends,
//! so a rank between connections (a restart from a checkpoint) does not
//! take its series away and bring them back.

use crate::discovery::sockdiag;
use crate::model::traffic::Filter;
use crate::sys::netns::Namespaces;
use skeletonhunter_common::ranks::Ranks;
use skeletonhunter_common::Kind;
use std::collections::HashMap;
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// At most this many containers are probed from (a thread each); the
/// rest are logged and skipped until some end.
pub const MAX_CONTAINERS: usize = 256;

/// At most this many cgroup directories are read below one selected
/// directory while looking for a process (a pod's containers are its
/// children; nothing legitimate is deeper or wider).
const MAX_WALK: usize = 64;

/// A selected container, its namespaces held open.
#[derive(Debug)]
pub struct Found {
    /// The selected cgroup directory, relative to the cgroup2 mount.
    pub cgroup: PathBuf,
    /// The same directory, absolute.
    pub dir: PathBuf,
    /// A process of it (the one whose namespaces were opened).
    pub pid: u32,
    /// Its network and UTS namespaces.
    pub ns: Namespaces,
}

/// The identity fields a container may name for itself, in its processes'
/// environment under the exporter's own variable names
/// (`SKELETONHUNTER_NODE`, `SKELETONHUNTER_TENANT`; e.g. the job from the
/// training operator's job-name label through the downward API). Where it
/// sits (host, NIC, ToR, ...) is the host's to say.
pub const OWN_FIELDS: [Kind; 2] = [Kind::Node, Kind::Tenant];

/// At most this much of a process's environment is read.
const ENVIRON_CAP: u64 = 64 << 10;

/// At most this many processes of a container are asked for
/// [`OWN_FIELDS`] (a pod's pause container has none of them).
const MAX_PROCS: usize = 64;

/// The [`OWN_FIELDS`] set in `environ` (the NUL-separated `KEY=value`
/// block of `/proc/<pid>/environ`), non-empty values only, first wins.
pub fn identity_env(environ: &[u8]) -> Vec<(Kind, String)> {
    let names = OWN_FIELDS.map(|k| format!("SKELETONHUNTER_{}", k.as_str().to_ascii_uppercase()));
    let mut out: Vec<(Kind, String)> = Vec::new();
    for entry in environ.split(|b| *b == 0) {
        let Ok(entry) = std::str::from_utf8(entry) else {
            continue;
        };
        let Some((key, value)) = entry.split_once('=') else {
            continue;
        };
        let value = value.trim();
        for (k, name) in OWN_FIELDS.into_iter().zip(&names) {
            if key == name && !value.is_empty() && !out.iter().any(|(o, _)| *o == k) {
                out.push((k, value.chars().take(253).collect()));
            }
        }
    }
    out
}

/// What a container says of itself in its processes' environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Own {
    /// The [`OWN_FIELDS`] the first process that names any gives.
    pub fields: Vec<(Kind, String)>,
    /// Its ranks, from its worker processes ([`super::ranks`]).
    pub ranks: Option<Ranks>,
}

/// What `dir`'s subtree says of itself (read once, when its prober
/// starts: by then the container holds training connections, so its
/// workers run).
pub fn own(dir: &Path) -> Own {
    use std::io::Read as _;
    let mut own = Own::default();
    let mut workers = Vec::new();
    for pid in processes_in(dir).into_iter().take(MAX_PROCS) {
        let path = Path::new("/proc").join(pid.to_string()).join("environ");
        let mut buf = Vec::new();
        let Ok(f) = std::fs::File::open(path) else {
            continue;
        };
        if f.take(ENVIRON_CAP).read_to_end(&mut buf).is_err() {
            continue;
        }
        if own.fields.is_empty() {
            own.fields = identity_env(&buf);
        }
        workers.extend(super::ranks::worker(&buf));
    }
    own.ranks = super::ranks::of_workers(&workers);
    own
}

/// A process in `dir` or, breadth first, in the cgroups below it.
fn process_in(dir: &Path) -> Option<u32> {
    walk(dir, true).into_iter().next()
}

/// The processes in `dir`'s subtree, breadth first (bounded).
fn processes_in(dir: &Path) -> Vec<u32> {
    walk(dir, false)
}

/// The processes of `dir`'s subtree, breadth first, at most [`MAX_WALK`]
/// directories; with `first`, stop at the first directory that has any.
fn walk(dir: &Path, first: bool) -> Vec<u32> {
    let mut out = Vec::new();
    let mut queue = VecDeque::from([dir.to_path_buf()]);
    let mut seen = 0;
    while let Some(d) = queue.pop_front() {
        seen += 1;
        if seen > MAX_WALK || out.len() >= MAX_PROCS {
            break;
        }
        if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            if first && !out.is_empty() {
                break;
            }
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            let mut children: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            children.sort();
            queue.extend(children);
        }
    }
    out
}

/// Whether the network namespace of `pid` holds an established connection
/// that `filter` counts (its cgroup filter aside: the container is chosen
/// by cgroup already).
pub fn has_training_traffic(pid: u32, filter: &Filter) -> bool {
    sockdiag::established(&Path::new("/proc").join(pid.to_string()))
        .is_ok_and(|sockets| counts_any(&sockets, filter))
}

/// Whether `filter` counts one of `sockets` (its cgroup filter aside).
fn counts_any(sockets: &[sockdiag::Socket], filter: &Filter) -> bool {
    let filter = Filter {
        cgroups: Default::default(),
        ..filter.clone()
    };
    sockdiag::to_conns(sockets, 0, &HashMap::new())
        .iter()
        .any(|c| filter.check(c).is_ok())
}

/// Every container `patterns` select under `root` (the cgroup2 mount),
/// one per network namespace other than `own_net`, that is already probed
/// from (its namespace in `running`) or whose process `traffic` says has
/// training traffic ([`has_training_traffic`]), at most
/// [`MAX_CONTAINERS`]. Unreadable directories and processes that ended
/// between listing and opening are skipped (found again next scan).
pub fn scan(
    root: &Path,
    patterns: &[glob::Pattern],
    own_net: u64,
    running: &HashSet<u64>,
    traffic: impl Fn(u32) -> bool,
) -> Vec<Found> {
    let mut out = Vec::new();
    let mut namespaces = HashSet::new();
    for p in patterns {
        let full = root.join(p.as_str());
        let Ok(paths) = glob::glob(&full.to_string_lossy()) else {
            continue;
        };
        for dir in paths.flatten().filter(|d| d.is_dir()) {
            let Some(pid) = process_in(&dir) else {
                continue;
            };
            let Ok(ns) = Namespaces::of(pid) else {
                continue;
            };
            if ns.net_inode == own_net || !namespaces.insert(ns.net_inode) {
                continue;
            }
            if !running.contains(&ns.net_inode) && !traffic(pid) {
                continue;
            }
            if out.len() == MAX_CONTAINERS {
                tracing::warn!(
                    max = MAX_CONTAINERS,
                    cgroup = %dir.display(),
                    "containers: too many selected; this one is not probed from"
                );
                continue;
            }
            let cgroup = dir.strip_prefix(root).unwrap_or(&dir).to_path_buf();
            out.push(Found {
                cgroup,
                dir,
                pid,
                ns,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_names_its_node_and_job_in_its_environment_and_nothing_else() {
        let env = b"PATH=/bin\0SKELETONHUNTER_TENANT=llama-70b\0SKELETONHUNTER_TOR=asw-1\0\
SKELETONHUNTER_NODE= \0SKELETONHUNTER_TENANT=other\0\xff\xfe=x\0";
        assert_eq!(identity_env(env), [(Kind::Tenant, "llama-70b".to_string())]);
        let env = b"SKELETONHUNTER_NODE=llama-worker-3\0";
        assert_eq!(
            identity_env(env),
            [(Kind::Node, "llama-worker-3".to_string())]
        );
        assert!(identity_env(b"").is_empty());
    }

    #[test]
    fn training_traffic_is_what_the_discovery_filter_counts() {
        let sock = |remote: &str, remote_port| sockdiag::Socket {
            local: "198.18.100.10".parse().unwrap(),
            local_port: 40000,
            remote: remote.parse().unwrap(),
            remote_port,
            inode: 1,
        };
        let f = Filter {
            exclude_ports: vec!["443".parse().unwrap()],
            cgroups: [7].into(),
            ..Filter::default()
        };
        assert!(
            counts_any(&[sock("198.18.100.11", 29500)], &f),
            "cgroup filter aside"
        );
        assert!(
            !counts_any(&[sock("198.18.100.11", 443)], &f),
            "an excluded port"
        );
        assert!(!counts_any(&[sock("127.0.0.1", 29500)], &f), "loopback");
        assert!(!counts_any(&[], &f), "no connection");
    }

    #[test]
    fn a_process_is_found_in_a_child_cgroup_and_the_own_namespace_is_skipped() {
        let dir = std::env::temp_dir().join(format!("sh-find-{}", std::process::id()));
        let pod = dir.join("pods/pod-a");
        std::fs::create_dir_all(pod.join("ctr-1")).unwrap();
        std::fs::write(pod.join("cgroup.procs"), "").unwrap();
        let me = std::process::id();
        std::fs::write(pod.join("ctr-1/cgroup.procs"), format!("{me}\n")).unwrap();
        assert_eq!(process_in(&pod), Some(me));
        let pats = [glob::Pattern::new("pods/*").unwrap()];
        let own = crate::sys::netns::own_net_inode().unwrap();
        let none = HashSet::new();
        assert!(
            scan(&dir, &pats, own, &none, |_| true).is_empty(),
            "own namespace"
        );
        assert!(
            scan(&dir, &pats, own + 1, &none, |_| false).is_empty(),
            "no traffic"
        );
        let found = scan(&dir, &pats, own + 1, &none, |p| p == me);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].cgroup, Path::new("pods/pod-a"));
        assert_eq!(found[0].pid, me);
        // Probed from already: kept without traffic (admission, not
        // eviction).
        let running: HashSet<u64> = [found[0].ns.net_inode].into();
        assert_eq!(scan(&dir, &pats, own + 1, &running, |_| false).len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
