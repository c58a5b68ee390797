//! The `containers` section: which containers on this host the exporter
//! probes from (see docs/containers.md). Written ([`FileContainers`]) and
//! validated ([`ContainerSettings`]).

use super::error::ConfigError;
use serde::Deserialize;
use skeletonhunter_common::duration;
use std::path::PathBuf;
use std::time::Duration;

/// How often the containers are looked for when `rescan` is not given:
/// the traffic discovery's window, so a container that starts is probed
/// from within one discovery interval.
pub const DEFAULT_RESCAN: Duration = Duration::from_secs(10);

/// `containers:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileContainers {
    /// cgroup directories to probe from, as glob patterns relative to the
    /// cgroup2 mount (e.g. `kubepods.slice/*/*pod*.slice`); empty: off.
    pub cgroups: Vec<String>,
    /// Only containers whose host name (a pod's name) matches one of these
    /// globs; empty: every container the cgroups select.
    pub hostnames: Vec<String>,
    /// How often to look for containers that started or ended.
    pub rescan: Option<String>,
    /// Where the cgroup2 hierarchy is mounted (default: from /proc/self/mounts).
    pub cgroup_root: Option<PathBuf>,
}

/// `containers:` validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerSettings {
    /// Glob patterns of cgroup directories, relative to the cgroup2 mount.
    pub cgroups: Vec<glob::Pattern>,
    /// Host-name globs a container must match (empty: any).
    pub hostnames: Vec<glob::Pattern>,
    /// How often containers are looked for.
    pub rescan: Duration,
    /// The cgroup2 mount, when configured.
    pub cgroup_root: Option<PathBuf>,
}

impl ContainerSettings {
    /// Whether the exporter probes from containers at all.
    pub fn enabled(&self) -> bool {
        !self.cgroups.is_empty()
    }

    /// Whether a container named `hostname` is selected.
    pub fn selects(&self, hostname: &str) -> bool {
        self.hostnames.is_empty() || self.hostnames.iter().any(|p| p.matches(hostname))
    }
}

fn patterns(key: &str, list: &[String]) -> Result<Vec<glob::Pattern>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            let s = s.trim();
            if s.is_empty() {
                return Err(ConfigError::invalid(format!("{key}[{i}]"), "empty pattern"));
            }
            glob::Pattern::new(s.trim_start_matches('/')).map_err(|e| {
                ConfigError::invalid(format!("{key}[{i}]"), format!("{s:?} is not a glob: {e}"))
            })
        })
        .collect()
}

impl FileContainers {
    /// Validate; every error names its key.
    pub fn build(&self) -> Result<ContainerSettings, ConfigError> {
        let cgroups = patterns("containers.cgroups", &self.cgroups)?;
        if let Some(p) = cgroups
            .iter()
            .find(|p| p.as_str().split('/').any(|s| s == ".."))
        {
            return Err(ConfigError::invalid(
                "containers.cgroups",
                format!("{:?} leaves the cgroup hierarchy (`..`)", p.as_str()),
            ));
        }
        let hostnames = patterns("containers.hostnames", &self.hostnames)?;
        let rescan = match &self.rescan {
            None => DEFAULT_RESCAN,
            Some(v) => {
                duration::parse(v).map_err(|e| ConfigError::invalid("containers.rescan", e))?
            }
        };
        if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&rescan) {
            return Err(ConfigError::invalid(
                "containers.rescan",
                format!("{rescan:?} is outside 1s..10m"),
            ));
        }
        if let Some(root) = &self.cgroup_root {
            if !root.is_absolute() {
                return Err(ConfigError::invalid(
                    "containers.cgroup_root",
                    format!("{} is not an absolute path", root.display()),
                ));
            }
        }
        Ok(ContainerSettings {
            cgroups,
            hostnames,
            rescan,
            cgroup_root: self.cgroup_root.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(yaml: &str) -> FileContainers {
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn off_unless_cgroups_are_given_and_names_filter_only_when_listed() {
        let s = file("{}").build().unwrap();
        assert!(!s.enabled());
        assert_eq!(s.rescan, DEFAULT_RESCAN);
        let s = file("{cgroups: [\"/kubepods.slice/*/*pod*.slice\"], hostnames: [\"*-worker-*\"]}")
            .build()
            .unwrap();
        assert!(s.enabled());
        assert!(s.cgroups[0]
            .matches("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12.slice"));
        assert!(s.selects("llama-worker-3"));
        assert!(!s.selects("coredns-5d78c9869d-abcde"));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (yaml, key) in [
            ("{cgroups: [\"a/[b\"]}", "containers.cgroups[0]"),
            ("{cgroups: [\"\"]}", "containers.cgroups[0]"),
            ("{cgroups: [\"../etc\"]}", "containers.cgroups"),
            ("{hostnames: [\"x[\"]}", "containers.hostnames[0]"),
            ("{rescan: 10ms}", "containers.rescan"),
            ("{rescan: soon}", "containers.rescan"),
            ("{cgroup_root: sys/fs/cgroup}", "containers.cgroup_root"),
        ] {
            let e = file(yaml).build().unwrap_err().to_string();
            assert!(e.starts_with(key), "{yaml}: {e}");
        }
    }
}
