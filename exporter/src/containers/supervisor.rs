//! The supervisor: looks for containers every `containers.rescan` and keeps
//! one prober per selected container, stopping the ones that ended.

use super::{find, prober};
use crate::config::Config;
use crate::discovery::cgroup::cgroup2_root;
use crate::sys::netns;
use crate::telemetry::Metrics;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The running container probers, by network namespace inode. Shared with
/// the exporter's shutdown, which announces every container's departure.
#[derive(Clone, Default)]
pub struct Running(Arc<Mutex<HashMap<u64, prober::Handle>>>, prober::Names);

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, prober::Handle>> {
        skeletonhunter_common::sync::lock(&self.0)
    }

    /// Every container's replies say it is leaving (the exporter stops).
    pub fn announce_leaving(&self) {
        for h in self.lock().values() {
            h.announce_leaving();
        }
    }

    /// How many containers are probed from (or being set up); not those
    /// whose prober ended (not selected, or failed to start).
    pub fn len(&self) -> usize {
        self.lock().values().filter(|h| !h.ended()).count()
    }

    /// Whether no container is probed from.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The namespaces probed from (their prober running or starting): a
    /// rescan keeps them without asking for training traffic again.
    fn probed(&self) -> HashSet<u64> {
        let map = self.lock();
        map.iter()
            .filter(|(_, h)| !h.failed())
            .map(|(k, _)| *k)
            .collect()
    }

    fn stop_all(&self) {
        for h in self.lock().values() {
            h.stop();
        }
    }
}

/// The namespaces to stop probing from and the found containers that are
/// new, given the running set and this scan's namespaces.
pub fn plan(running: &[u64], found: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let gone = running
        .iter()
        .filter(|r| !found.contains(r))
        .copied()
        .collect();
    let new = found
        .iter()
        .filter(|f| !running.contains(f))
        .copied()
        .collect();
    (gone, new)
}

/// Where the cgroups are looked for: the configured root or the cgroup2
/// mount.
fn root(cfg: &Config) -> Option<PathBuf> {
    cfg.containers.cgroup_root.clone().or_else(cgroup2_root)
}

/// Look for containers every `containers.rescan` and keep one prober per
/// selected container until `stopped`; then stop them all.
pub async fn run(
    cfg: Arc<Config>,
    metrics: Arc<Metrics>,
    running: Running,
    stopped: impl Future<Output = ()>,
) {
    let Some(root) = root(&cfg) else {
        tracing::error!("containers: no cgroup2 hierarchy is mounted (set containers.cgroup_root); not probing from containers");
        return;
    };
    let own = netns::own_net_inode().unwrap_or(0);
    let patterns: Vec<&str> = cfg
        .containers
        .cgroups
        .iter()
        .map(glob::Pattern::as_str)
        .collect();
    tracing::info!(
        root = %root.display(),
        ?patterns,
        "containers: probing from the containers these cgroups select"
    );
    let mut tick = tokio::time::interval(cfg.containers.rescan);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            _ = tick.tick() => {}
        }
        let (r, c) = (root.clone(), cfg.clone());
        let probed = running.probed();
        let scan = move || {
            let traffic = |pid| find::has_training_traffic(pid, &c.ebpf.filter);
            find::scan(&r, &c.containers.cgroups, own, &probed, traffic)
        };
        let Ok(found) = tokio::task::spawn_blocking(scan).await else {
            continue;
        };
        rescan(&cfg, &metrics, &running, found);
    }
    running.stop_all();
}

fn rescan(cfg: &Arc<Config>, metrics: &Arc<Metrics>, running: &Running, found: Vec<find::Found>) {
    let mut map = running.lock();
    map.retain(|_, h| !h.failed());
    let keys: Vec<u64> = map.keys().copied().collect();
    let found_keys: Vec<u64> = found.iter().map(|f| f.ns.net_inode).collect();
    let (gone, new) = plan(&keys, &found_keys);
    for k in gone {
        if let Some(h) = map.remove(&k) {
            // Its prober still holds the namespace: while the network
            // lasts, its replies say it left, so its peers stop counting
            // it (as an exporter that stops does), then it stops.
            let notice = cfg.departure_notice;
            tracing::info!(
                cgroup = %h.cgroup.display(),
                notice_ms = notice.as_millis() as u64,
                "containers: container ended; its replies say it left"
            );
            h.announce_leaving();
            tokio::spawn(async move {
                tokio::time::sleep(notice).await;
                h.stop();
            });
        }
    }
    for f in found.into_iter().filter(|f| new.contains(&f.ns.net_inode)) {
        let (key, cgroup) = (f.ns.net_inode, f.cgroup.display().to_string());
        tracing::info!(%cgroup, pid = f.pid, "containers: new container");
        match prober::start(f, cfg.clone(), metrics.clone(), running.1.clone()) {
            Ok(h) => {
                map.insert(key, h);
            }
            Err(e) => tracing::warn!(%cgroup, "containers: {e:#}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plan;

    #[test]
    fn a_rescan_stops_the_ended_and_starts_the_new_only() {
        let (gone, new) = plan(&[1, 2, 3], &[2, 3, 4]);
        assert_eq!(gone, [1]);
        assert_eq!(new, [4]);
        assert_eq!(plan(&[5], &[5]), (vec![], vec![]));
    }
}
