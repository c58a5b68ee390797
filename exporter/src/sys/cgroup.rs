//! The exporter's own CPU throttling: how long the kernel held its cgroup
//! back because the cgroup had used up its CPU quota (cgroup v2 `cpu.max`,
//! v1 `cpu.cfs_quota_us`). A throttled exporter probes, reads and echoes
//! late: host-stack noise, not network trouble. Read from `cpu.stat` of
//! the cgroup `/proc/self/cgroup` names (v2 `throttled_usec`, v1
//! `throttled_time` in ns); `None` when there is no such file (no cpu
//! controller, another cgroup namespace layout).

use skeletonhunter_common::recent::Recent;
use std::path::PathBuf;
use std::time::Duration;

/// The `cpu.stat` files that may hold this process's throttling, most
/// likely first, from the text of `/proc/self/cgroup`.
pub fn cpu_stat_paths(proc_self_cgroup: &str) -> Vec<PathBuf> {
    // v1 first: on a hybrid host the v2 tree has no cpu controller.
    let (mut v1, mut v2) = (Vec::new(), Vec::new());
    for line in proc_self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            // cgroup v2: one unified hierarchy, alone or beside v1.
            for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                v2.push(PathBuf::from(root).join(path).join("cpu.stat"));
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            let root = PathBuf::from("/sys/fs/cgroup").join(controllers);
            v1.push(root.join(path).join("cpu.stat"));
        }
    }
    v1.extend(v2);
    v1
}

/// Throttled time in ns from the text of a `cpu.stat`: v2 `throttled_usec`
/// or v1 `throttled_time` (ns); `None` when neither is there.
pub fn parse_throttled_ns(cpu_stat: &str) -> Option<u64> {
    let value = |key: &str| {
        cpu_stat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    value("throttled_usec")
        .map(|us| us.saturating_mul(1000))
        .or_else(|| value("throttled_time"))
}

/// This process's cgroup throttled time in ns, `None` when it cannot be
/// read; read at most once a second however many registries render.
pub fn cpu_throttled_ns() -> Option<u64> {
    static LAST: Recent<Option<u64>> = Recent::new(Duration::from_secs(1));
    LAST.get(|| {
        let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        cpu_stat_paths(&text).into_iter().find_map(|p| {
            let stat = std::fs::read_to_string(p).ok()?;
            parse_throttled_ns(&stat)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cpu_stat_on_v1_hybrid_and_v2_hosts() {
        let hybrid = "9:name=systemd:/\n3:cpu,cpuacct:/kubepods/pod1\n0::/\n";
        let paths = cpu_stat_paths(hybrid);
        assert_eq!(
            paths[0],
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.stat")
        );
        let v2 = cpu_stat_paths("0::/system.slice/exporter.service\n");
        assert_eq!(
            v2[0],
            PathBuf::from("/sys/fs/cgroup/system.slice/exporter.service/cpu.stat")
        );
        assert!(cpu_stat_paths("garbage\n\n").is_empty());
    }

    #[test]
    fn reads_throttled_time_in_either_version() {
        let v2 = "usage_usec 100\nnr_periods 50\nnr_throttled 3\nthrottled_usec 2500\n";
        assert_eq!(parse_throttled_ns(v2), Some(2_500_000));
        let v1 = "nr_periods 50\nnr_throttled 3\nthrottled_time 123456789\n";
        assert_eq!(parse_throttled_ns(v1), Some(123_456_789));
        assert_eq!(parse_throttled_ns("nr_periods 1\nthrottled_usec x\n"), None);
        assert_eq!(parse_throttled_ns(""), None);
    }
}
