//! The run-time contract the deployment files state and the docs
//! document: capabilities in the kernel's spelling, the ones
//! docs/operations.md lists (for hosts, and what containers add), a systemd
//! unit's values, and the Dockerfile's `USER`, `setcap` and `EXPOSE`.

use anyhow::{bail, Context, Result};
use skeletonhunter_tools::deploy::read;
use skeletonhunter_tools::repo::repo_root;
use std::collections::BTreeSet;

/// Capability names as the kernel spells them (`CAP_NET_RAW`), sorted, from
/// any of the spellings in our files: `NET_RAW`, `cap_net_raw`, `+net_raw`.
pub fn caps(names: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<String> {
    let mut out: Vec<String> = names
        .into_iter()
        .map(|n| {
            n.as_ref()
                .trim()
                .trim_start_matches('+')
                .to_ascii_uppercase()
        })
        .filter(|n| !n.is_empty())
        .map(|n| {
            if n.starts_with("CAP_") {
                n
            } else {
                format!("CAP_{n}")
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The capabilities documented as needed at start: the `setpriv` example
/// of docs/operations.md, "Privileges".
pub fn documented_caps() -> Result<Vec<String>> {
    let doc = read("docs/operations.md")?;
    let line = doc
        .lines()
        .find(|l| l.contains("--ambient-caps="))
        .context("docs/operations.md: no setpriv --ambient-caps line")?;
    let list = line
        .split("--ambient-caps=")
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .next()
        .unwrap_or("");
    Ok(caps(list.split(',').filter(|c| c.starts_with('+'))))
}

/// The capabilities docs/operations.md adds for probing from containers:
/// every backquoted `CAP_…` on its line that starts "With `containers`".
pub fn documented_container_caps() -> Result<Vec<String>> {
    let doc = read("docs/operations.md")?;
    let mut lines = doc
        .lines()
        .skip_while(|l| !l.starts_with("With `containers`"));
    let para: Vec<&str> = lines
        .by_ref()
        .take_while(|l| !l.trim().is_empty())
        .collect();
    if para.is_empty() {
        bail!("docs/operations.md: no paragraph starting \"With `containers`\"");
    }
    let text = para.join(" ");
    let first = text.split(':').next().unwrap_or("");
    Ok(caps(
        first
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| t.starts_with("CAP_")),
    ))
}

/// The last value of `key=` in a systemd unit.
pub fn unit_value(unit: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}=");
    unit.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .next_back()
        .map(String::from)
}

/// The run-time contract the Dockerfile states.
#[derive(Debug)]
pub struct Image {
    /// Numeric user of the last `USER`.
    pub uid: u64,
    /// Numeric group of the last `USER`.
    pub gid: u64,
    /// The exporter's file capabilities (`setcap`), normalised by [`caps`].
    pub caps: Vec<String>,
    /// `EXPOSE` entries, like `9466/udp`.
    pub expose: Vec<String>,
}

/// The Dockerfile's last `USER`, its `setcap` list and its `EXPOSE` ports.
pub fn dockerfile_contract() -> Result<Image> {
    let df = read("Dockerfile")?;
    let user = df
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .context("no USER")?;
    let (u, g) = user.trim().split_once(':').context("USER uid:gid")?;
    let setcap = df.split("setcap ").nth(1).context("no setcap")?;
    let list = setcap
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches("+ep");
    Ok(Image {
        uid: u.parse().context("numeric USER uid")?,
        gid: g.parse().context("numeric USER gid")?,
        caps: caps(list.split(',')),
        expose: df
            .lines()
            .filter_map(|l| l.strip_prefix("EXPOSE "))
            .flat_map(|l| l.split_whitespace().map(String::from))
            .collect(),
    })
}

/// Every `/sys/...` path the exporter's `sys/` sources read lies under one
/// of `mounts`, but tracefs' debugfs fallback (for kernels without tracefs)
/// and the container's own cgroup (`/sys/fs/cgroup`: runtimes mount it).
pub fn check_sys_mounts(mounts: &[String]) -> Result<()> {
    let mut paths = BTreeSet::new();
    for e in std::fs::read_dir(repo_root().join("exporter/src/sys"))? {
        let path = e?.path();
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(path)?;
        for piece in text.split('"').skip(1).step_by(2) {
            if piece.starts_with("/sys/") {
                paths.insert(piece.to_string());
            }
        }
    }
    assert!(paths.contains("/sys/kernel/tracing"), "{paths:?}");
    for p in paths
        .iter()
        .filter(|p| *p != "/sys/kernel/debug/tracing" && !p.starts_with("/sys/fs/cgroup"))
    {
        assert!(
            mounts.iter().any(|m| p.starts_with(m.as_str())),
            "{p} not mounted: {mounts:?}"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_normalise_every_spelling() {
        assert_eq!(
            caps([
                "NET_RAW",
                "+bpf",
                "cap_perfmon",
                " CAP_DAC_READ_SEARCH",
                "net_raw"
            ]),
            [
                "CAP_BPF",
                "CAP_DAC_READ_SEARCH",
                "CAP_NET_RAW",
                "CAP_PERFMON"
            ]
        );
    }
}
