//! cgroup v2 ids: which container a connection belongs to.
//!
//! A cgroup v2 id is the inode number of the cgroup's directory, which is
//! what the BPF program reads from the socket (`sk_cgrp_data`). Configured
//! cgroups (a pod or container directory) match their whole subtree, since
//! sockets live in the leaf cgroups of the containers below a pod.

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the unified (v2) hierarchy is mounted: `/sys/fs/cgroup` on pure v2
/// hosts, `/sys/fs/cgroup/unified` on hybrid ones.
pub fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
    })
}

/// Resolve a configured cgroup (absolute directory, or a path relative to
/// the cgroup2 mount like `/kubepods.slice/...`) to its directory.
pub fn resolve_dir(path: &str, root: Option<&Path>) -> Result<PathBuf> {
    let p = Path::new(path);
    if p.is_dir() && p.is_absolute() && root.is_none_or(|r| p.starts_with(r)) {
        return Ok(p.to_path_buf());
    }
    let Some(root) = root else {
        bail!("cgroup `{path}`: no cgroup2 hierarchy is mounted");
    };
    let joined = root.join(path.trim_start_matches('/'));
    if joined.is_dir() {
        return Ok(joined);
    }
    bail!(
        "cgroup `{path}`: neither {} nor {} is a cgroup directory",
        p.display(),
        joined.display()
    )
}

/// The ids of `dir` and every cgroup below it.
pub fn subtree_ids(dir: &Path) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = std::fs::metadata(&d).with_context(|| format!("stat {}", d.display()))?;
        out.push(m.ino());
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    stack.push(e.path());
                }
            }
        }
    }
    Ok(out)
}

/// The cgroup id of each socket inode in `inodes`, found through the
/// processes holding them (`/proc/*/fd` and `/proc/PID/cgroup`). Used by the
/// polling source, which has no socket cgroup of its own; costly, so only
/// when cgroup filters are configured.
pub fn socket_cgroups(inodes: &[u64], root: &Path) -> HashMap<u64, u64> {
    let want: std::collections::HashSet<u64> = inodes.iter().copied().collect();
    let mut out = HashMap::new();
    let mut path_ids: HashMap<String, u64> = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut found = Vec::new();
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                let t = target.to_string_lossy();
                if let Some(n) = t
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    if want.contains(&n) && !out.contains_key(&n) {
                        found.push(n);
                    }
                }
            }
        }
        if found.is_empty() {
            continue;
        }
        let Ok(cg) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            continue;
        };
        let Some(rel) = cg.lines().find_map(|l| l.strip_prefix("0::")) else {
            continue;
        };
        let id = *path_ids.entry(rel.to_string()).or_insert_with(|| {
            std::fs::metadata(root.join(rel.trim_start_matches('/')))
                .map(|m| m.ino())
                .unwrap_or(0)
        });
        for n in found {
            out.insert(n, id);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cgroup2 mount, or None (skipping, with the reason printed)
    /// outside CI; under CI=true a missing cgroup2 mount is a failure.
    fn root_or_skip(test: &str) -> Option<PathBuf> {
        let root = cgroup2_root();
        if root.is_none() {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "{test}: no cgroup2 hierarchy mounted"
            );
            eprintln!("SKIPPED {test}: no cgroup2 hierarchy mounted");
        }
        root
    }

    #[test]
    fn resolves_own_cgroup_when_v2_is_mounted() {
        let Some(root) = root_or_skip("resolves_own_cgroup_when_v2_is_mounted") else {
            return;
        };
        let dir = resolve_dir("/", Some(&root)).unwrap();
        let ids = subtree_ids(&dir).unwrap();
        assert!(!ids.is_empty());
        assert!(resolve_dir("/no/such/cgroup-xyz", Some(&root))
            .unwrap_err()
            .to_string()
            .contains("no/such"));
    }

    #[test]
    fn finds_cgroup_of_own_socket() {
        let Some(root) = root_or_skip("finds_cgroup_of_own_socket") else {
            return;
        };
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let port = c.local_addr().unwrap().port();
        let socks = super::super::sockdiag::established(Path::new("/proc/self")).unwrap();
        let s = socks.iter().find(|s| s.local_port == port).unwrap();
        let map = socket_cgroups(&[s.inode], &root);
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let rel = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        let want = std::fs::metadata(root.join(rel.trim_start_matches('/')))
            .unwrap()
            .ino();
        assert_eq!(map.get(&s.inode), Some(&want));
    }
}
