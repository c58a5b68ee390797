//! Removing what a process left behind when its destructors could not run.

/// Delete every namespace left by process `pid` (names `sh-<tag>-<pid>-<n>`),
/// killing what runs inside, then the container cgroups it made
/// ([`super::containers::remove_cgroups_of`]). The demo calls it from its
/// signal handler so Ctrl-C leaves nothing behind even though destructors
/// do not run.
pub fn remove_namespaces_of(pid: u32) -> usize {
    let Ok(out) = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
    else {
        return 0;
    };
    let suffix = format!("-{pid}-");
    let mut removed = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if !(name.starts_with("sh-") && name.contains(&suffix)) {
            continue;
        }
        if let Ok(p) = std::process::Command::new("ip")
            .args(["netns", "pids", name])
            .output()
        {
            for pid in String::from_utf8_lossy(&p.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // It may be gone already; the namespace goes next anyway.
                    let _ = crate::sys::kill(pid, libc::SIGKILL);
                }
            }
        }
        let ok = std::process::Command::new("ip")
            .args(["netns", "del", name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        removed += usize::from(ok);
    }
    super::containers::remove_cgroups_of(pid);
    removed
}
