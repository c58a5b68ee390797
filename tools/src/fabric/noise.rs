//! Host noise: a busy host, not a network fault. An exporter starved of
//! CPU by a cgroup quota ([`CpuQuota`]) and one paused with SIGSTOP for a
//! moment at a steady period ([`Pauses`]). Both are guards: dropping one
//! gives the process its CPU back (out of the cgroup, the cgroup removed;
//! SIGCONT sent), so a failing test never leaves an exporter frozen.
//!
//! The quota is cgroup v2's `cpu.max` where the unified hierarchy has the
//! `cpu` controller, else cgroup v1's `cpu.cfs_quota_us` (hybrid hosts
//! bind `cpu` to v1): the same CFS bandwidth limit under either name.
//!
//! A fixed share starves a process only on a machine slow enough for it
//! to need more: on a fast one the exporter ran under 5 % of a core and
//! was never throttled. [`CpuQuota::below_demand`] measures what the
//! process uses first and grants a fraction of that.

use crate::sys::kill;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The CFS period the quota is a share of.
const PERIOD_US: u64 = 100_000;

/// The longest period [`CpuQuota::below_demand`] stretches to when the
/// demand is too small for the smallest quota: a throttled stall stays
/// shorter than a probe timeout, so peers see a slow host, not loss.
const MAX_PERIOD_US: u64 = 250_000;

/// The smallest quota the kernel takes (`cpu.max`, `cpu.cfs_quota_us`).
const MIN_QUOTA_US: u64 = 1_000;

/// CPU time used so far by `pid`, all threads (utime + stime of
/// `/proc/<pid>/stat`, read by the project's one parser of that file).
fn cpu_time(pid: u32) -> Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    let stat = skeletonhunter_common::process::parse_stat(&text)
        .with_context(|| format!("{path}: not a stat line: {text:?}"))?;
    let hz = skeletonhunter_exporter::sys::host::clock_ticks_per_second();
    Ok(Duration::from_secs_f64(stat.cpu_ticks as f64 / hz))
}

/// Where a CPU quota can be set on this machine.
#[derive(Debug, Clone)]
enum Hierarchy {
    /// cgroup v2: `cpu.max` under this root.
    V2(PathBuf),
    /// cgroup v1: `cpu.cfs_quota_us` under this `cpu` controller root.
    V1(PathBuf),
}

impl Hierarchy {
    /// The hierarchy with a usable `cpu` controller, or why there is none.
    fn find() -> std::result::Result<Hierarchy, String> {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let controllers = Path::new(root).join("cgroup.controllers");
            if let Ok(c) = std::fs::read_to_string(&controllers) {
                if c.split_whitespace().any(|x| x == "cpu") {
                    return Ok(Hierarchy::V2(root.into()));
                }
            }
        }
        for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
            if Path::new(root).join("cpu.cfs_quota_us").exists() {
                return Ok(Hierarchy::V1(root.into()));
            }
        }
        Err("no cgroup hierarchy with the cpu controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us)".into())
    }

    fn root(&self) -> &Path {
        match self {
            Hierarchy::V2(p) | Hierarchy::V1(p) => p,
        }
    }

    /// The cgroup `pid` is in now in this hierarchy (the root if unknown),
    /// from `/proc/<pid>/cgroup`.
    fn cgroup_of(&self, pid: u32) -> PathBuf {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let path = text.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let ours = match self {
                Hierarchy::V2(_) => controllers.is_empty(),
                Hierarchy::V1(_) => controllers.split(',').any(|c| c == "cpu"),
            };
            ours.then(|| path.trim_start_matches('/').to_string())
        });
        self.root().join(path.unwrap_or_default())
    }
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("write {value:?} to {}", path.display()))
}

/// A process held to a share of one CPU by a cgroup of its own.
#[derive(Debug)]
pub struct CpuQuota {
    /// The cgroup made for the process.
    dir: PathBuf,
    /// Where the process was before, and goes back to.
    before: PathBuf,
    pid: u32,
}

impl CpuQuota {
    /// Why a quota cannot be set here, if it cannot (the test then skips,
    /// or fails under `CI=true`).
    pub fn unavailable() -> Option<String> {
        Hierarchy::find().err()
    }

    /// Measure what `pid` uses over `over`, then hold it to `share` of
    /// that (at least the kernel's smallest quota, over a period of at
    /// most [`MAX_PERIOD_US`]). Returns the guard and the demand measured,
    /// as a share of one CPU.
    pub fn below_demand(pid: u32, share: f64, over: Duration) -> Result<(CpuQuota, f64)> {
        let (t0, c0) = (Instant::now(), cpu_time(pid)?);
        std::thread::sleep(over);
        let used = cpu_time(pid)?.saturating_sub(c0);
        let demand = used.as_secs_f64() / t0.elapsed().as_secs_f64().max(1e-3);
        let wanted = demand * share.clamp(0.01, 1.0);
        // The period that makes the smallest quota `wanted` of it, if the
        // usual one is too short for that.
        let period = ((MIN_QUOTA_US as f64 / wanted).ceil() as u64).clamp(PERIOD_US, MAX_PERIOD_US);
        let guard = CpuQuota::set(pid, (period as f64 * wanted) as u64, period)?;
        Ok((guard, demand))
    }

    /// Hold process `pid` (all its threads) to `quota_us` of every
    /// `period_us` on one CPU.
    fn set(pid: u32, quota_us: u64, period_us: u64) -> Result<CpuQuota> {
        let hierarchy = Hierarchy::find().map_err(anyhow::Error::msg)?;
        let dir = hierarchy
            .root()
            .join(format!("skeletonhunter-test-{}-{pid}", std::process::id()));
        if let Hierarchy::V2(root) = &hierarchy {
            // The root's children get the cpu controller (the root cgroup
            // may hold processes and delegate at once).
            write(&root.join("cgroup.subtree_control"), "+cpu")?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let quota = quota_us.max(MIN_QUOTA_US);
        let guard = CpuQuota {
            before: hierarchy.cgroup_of(pid),
            dir,
            pid,
        };
        match &hierarchy {
            Hierarchy::V2(_) => write(&guard.dir.join("cpu.max"), &format!("{quota} {period_us}"))?,
            Hierarchy::V1(_) => {
                write(&guard.dir.join("cpu.cfs_period_us"), &period_us.to_string())?;
                write(&guard.dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            }
        }
        write(&guard.dir.join("cgroup.procs"), &pid.to_string())?;
        Ok(guard)
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // Back where it was (fails only if the process is gone), then
        // the empty cgroup can go.
        let back = self.before.join("cgroup.procs");
        let _ = std::fs::write(back, self.pid.to_string());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A process paused (SIGSTOP) for `pause` every `period`, from a thread of
/// its own, for at most `limit`; always resumed (SIGCONT) on drop.
#[derive(Debug)]
pub struct Pauses {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    pid: i32,
}

impl Pauses {
    /// Start pausing `pid`. The loop ends by itself after `limit`, so a
    /// leaked guard cannot freeze a process for ever.
    pub fn start(pid: u32, pause: Duration, period: Duration, limit: Duration) -> Result<Pauses> {
        let Ok(pid) = i32::try_from(pid) else {
            bail!("pid {pid} out of range");
        };
        let (stop, stopped) = mpsc::channel::<()>();
        let end = Instant::now() + limit;
        let thread = std::thread::spawn(move || {
            while Instant::now() < end {
                if kill(pid, libc::SIGSTOP).is_err() {
                    return;
                }
                // The pause, cut short when the guard is dropped.
                let gone = stopped.recv_timeout(pause);
                let _ = kill(pid, libc::SIGCONT);
                if !matches!(gone, Err(mpsc::RecvTimeoutError::Timeout)) {
                    return;
                }
                let rest = period.saturating_sub(pause);
                if !matches!(
                    stopped.recv_timeout(rest),
                    Err(mpsc::RecvTimeoutError::Timeout)
                ) {
                    return;
                }
            }
        });
        Ok(Pauses {
            stop: Some(stop),
            thread: Some(thread),
            pid,
        })
    }
}

impl Drop for Pauses {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = kill(self.pid, libc::SIGCONT);
    }
}
