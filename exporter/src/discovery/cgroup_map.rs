//! The configured container cgroups resolved to ids (whole subtrees), and
//! each id's owner for the log.

use super::cgroup;
use crate::config::CgroupEntry;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// The configured cgroups resolved to ids (whole subtrees), and each id's
/// owner for the log.
pub struct CgroupMap {
    /// The cgroup2 mount, when found.
    pub root: Option<PathBuf>,
    entries: Vec<CgroupEntry>,
    owner: HashMap<u64, usize>,
}

impl CgroupMap {
    /// Resolve nothing yet; call [`CgroupMap::refresh`].
    pub fn new(entries: Vec<CgroupEntry>) -> CgroupMap {
        CgroupMap {
            root: cgroup::cgroup2_root(),
            entries,
            owner: HashMap::new(),
        }
    }

    /// Re-read the subtrees (containers come and go). A cgroup that does not
    /// exist (yet) matches nothing.
    pub fn refresh(&mut self) -> HashSet<u64> {
        self.owner.clear();
        for (i, e) in self.entries.iter().enumerate() {
            match cgroup::resolve_dir(&e.path, self.root.as_deref())
                .and_then(|d| cgroup::subtree_ids(&d))
            {
                Ok(ids) => {
                    for id in ids {
                        self.owner.entry(id).or_insert(i);
                    }
                }
                Err(err) => tracing::debug!("traffic discovery: {err:#}"),
            }
        }
        let mut set: HashSet<u64> = self.owner.keys().copied().collect();
        if !self.entries.is_empty() && set.is_empty() {
            // Keep the filter restrictive: an id no socket has.
            set.insert(u64::MAX);
        }
        set
    }

    /// `cgroup ID (path, node=.., tenant=..)` for the log.
    pub fn describe(&self, id: u64) -> String {
        match self.owner.get(&id).map(|&i| &self.entries[i]) {
            Some(e) => format!(
                "cgroup {id} ({}, node={}, tenant={})",
                e.path,
                e.node.as_deref().unwrap_or("-"),
                e.tenant.as_deref().unwrap_or("-")
            ),
            None => format!("cgroup {id}"),
        }
    }
}
