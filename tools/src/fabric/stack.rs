//! The monitoring stack on top of the fabric: an exporter per container,
//! Prometheus, Alertmanager and the localizer, started and health-checked.

use super::alerts::AlertView;
use super::config::{
    container_host_config, exporter_config, prometheus_config_of, secs, shipped_alertmanager_files,
    shipped_rule_files,
};
use super::containers::Containers;
use super::opts::{StackOpts, Timing};
use super::ports;
use super::topology::{DataPlane, Fabric, Node, WORKERS_PER_CONTAINER};
use crate::process::{wait_until, ChildGuard};
use crate::servers::{self, Server, ServerOpts, TempDir};
use crate::sink::Sink;
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The fabric with an exporter per container, and Prometheus (every shipped
/// rule file loaded, the opt-in `rules/pair-detail/` too), Alertmanager (shipped `alertmanager/` config) and the
/// localizer in the monitoring namespace. Dropping it stops everything and
/// deletes every namespace.
pub struct Stack {
    // Field order is drop order: processes first, then servers, then the
    // namespaces, then the config files.
    /// The localizer, when the options name a binary.
    pub localizer: Option<ChildGuard>,
    /// One exporter per node, in `fabric.nodes` order (without the
    /// containers of a job [`Stack::end_job`] ended), then one per host's
    /// own endpoint ([`Fabric::underlay`]); with
    /// [`StackOpts::from_containers`] only the hosts'.
    pub exporters: Vec<ChildGuard>,
    /// Prometheus in the monitoring namespace.
    pub prometheus: Server,
    /// Alertmanager in the monitoring namespace.
    pub alertmanager: Server,
    /// With [`StackOpts::from_containers`]: the containers, their
    /// processes and cgroups and their training connections.
    pub containers: Option<Containers>,
    /// What the shipped receivers were sent: a sink on their placeholder
    /// address in the monitoring namespace ([`ports::PAGER`]).
    pub pager: Sink,
    /// The namespaces everything runs in.
    pub fabric: Fabric,
    dir: TempDir,
    /// What the stack was started with, and the rule files Prometheus
    /// loads: its configuration is written again when a job ends.
    opts: StackOpts,
    rule_names: Vec<String>,
    /// The range the health check counts probes over: two scrapes at least.
    health_range: Duration,
}

/// Start an exporter in every container of `fabric` (configs written to
/// `dir`), in `fabric.nodes` order, then one for each host's own endpoint
/// (the overlay fabric's underlay probers).
pub fn start_exporters(fabric: &Fabric, opts: &StackOpts, dir: &Path) -> Result<Vec<ChildGuard>> {
    fabric
        .probers()
        .map(|node| start_exporter(fabric, node, opts, dir, None))
        .collect()
}

/// Start the exporter of `node` (its config written to `dir`); with
/// `containers`, a host's exporter probing from inside its containers.
fn start_exporter(
    fabric: &Fabric,
    node: &Node,
    opts: &StackOpts,
    dir: &Path,
    containers: Option<&Containers>,
) -> Result<ChildGuard> {
    let path = dir.join(format!("exporter-{}.yaml", node.identity.node));
    let config = match containers {
        Some(c) => {
            let pattern = c.pattern(&node.identity.node);
            container_host_config(fabric, node, opts, &pattern, &c.root)
        }
        None => exporter_config(fabric, node, opts),
    };
    std::fs::write(&path, config).with_context(|| format!("write {}", path.display()))?;
    let bin = opts.exporter_bin.to_string_lossy();
    // The cgroup tree must be visible to find containers in.
    let mut cmd = match opts.exporters_see_cgroups || containers.is_some() {
        true => node.ns.net_command(&bin),
        false => node.ns.command(&bin),
    };
    cmd.arg("--config").arg(&path);
    ChildGuard::spawn(&format!("exporter-{}", node.identity.node), cmd)
}

impl Stack {
    /// Build the fabric, start an exporter in every container, Prometheus,
    /// Alertmanager and (if given) the localizer in the monitoring
    /// namespace. Returns once every server is ready; call
    /// [`Stack::wait_healthy`] before injecting faults.
    pub fn start(opts: &StackOpts) -> Result<Stack> {
        let fabric = match opts.data_plane {
            DataPlane::Routed => Fabric::new(opts.spec)?,
            DataPlane::Vxlan => Fabric::overlay(opts.spec)?,
        };
        let dir = TempDir::new("stack")?;
        let containers = match opts.from_containers {
            false => None,
            true => {
                ensure!(
                    opts.data_plane == DataPlane::Vxlan,
                    "probing from containers needs the overlay fabric"
                );
                Some(Containers::start_jobs(&fabric)?)
            }
        };
        let exporters = match &containers {
            None => start_exporters(&fabric, opts, dir.path())?,
            Some(c) => (fabric.underlay.iter())
                .map(|u| start_exporter(&fabric, u, opts, dir.path(), Some(c)))
                .collect::<Result<_>>()?,
        };

        let pager = Sink::start_in(
            &fabric.mon,
            SocketAddr::from(([127, 0, 0, 1], ports::PAGER)),
        )?;
        let (am_config, am_files) = shipped_alertmanager_files()?;
        let mut am_opts = ServerOpts::new(
            SocketAddr::from(([127, 0, 0, 1], ports::ALERTMANAGER)),
            &am_config,
        )
        .in_netns(&fabric.mon);
        for (rel, p) in &am_files {
            am_opts = am_opts.copy_file(rel, p)?;
        }
        let alertmanager = servers::start_alertmanager(am_opts)?;

        let rules = shipped_rule_files()?;
        let names: Vec<String> = rules.iter().map(|(n, _)| n.clone()).collect();
        let mut prom_opts = ServerOpts::new(
            SocketAddr::from(([127, 0, 0, 1], ports::PROMETHEUS)),
            &prometheus_config_of(&fabric, opts, &names, &|n| runs_exporter(&fabric, opts, n)),
        )
        .in_netns(&fabric.mon);
        for (name, p) in &rules {
            prom_opts = prom_opts.copy_file(name, p)?;
        }
        let prometheus = servers::start_prometheus(prom_opts)?;

        let localizer = match &opts.localizer_bin {
            None => None,
            Some(bin) => {
                let cmd = localizer_command(&fabric, opts, bin, &prometheus, &alertmanager);
                Some(ChildGuard::spawn("localizer", cmd)?)
            }
        };
        Ok(Stack {
            localizer,
            exporters,
            prometheus,
            alertmanager,
            containers,
            pager,
            fabric,
            dir,
            opts: opts.clone(),
            rule_names: names,
            health_range: (opts.scrape_interval * 2 + Duration::from_secs(1))
                .max(Duration::from_secs(5)),
        })
    }

    /// Where the stack's generated config files are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Fail (with its log) if any process of the stack has exited.
    pub fn check_running(&mut self) -> Result<()> {
        for e in &mut self.exporters {
            e.check_running()?;
        }
        if let Some(l) = &mut self.localizer {
            l.check_running()?;
        }
        self.prometheus.check_running()?;
        self.alertmanager.check_running()
    }

    /// Number of directed skeleton pairs (each probed by its source).
    pub fn skeleton_pairs(&self) -> usize {
        self.fabric
            .probers()
            .map(|n| self.fabric.peers_of(n).len())
            .sum()
    }

    /// End the training job `tenant` as Kubernetes ends its pods: every
    /// exporter of the job's containers is stopped (SIGTERM, as at pod
    /// deletion), one every `gap` (kubelets stop a deleted job's pods
    /// seconds apart), and once all have exited their scrape targets are
    /// removed from Prometheus (its configuration written without them and
    /// reloaded), as service discovery drops a deleted pod; the other
    /// exporters and targets stay. Returns the ended containers' node
    /// names. The surviving exporters need no change: a job's skeleton
    /// peers are its own containers ([`Fabric::skeleton_peers`]), so only
    /// the job's containers still running probe the ended ones.
    pub fn end_job(&mut self, tenant: &str, gap: Duration) -> Result<Vec<String>> {
        let ends = |n: &Node| n.identity.tenant == tenant;
        if let Some(c) = &mut self.containers {
            return end_containers(&self.fabric, c, tenant, gap);
        }
        let ended: Vec<usize> = (0..self.fabric.nodes.len())
            .filter(|&i| ends(&self.fabric.nodes[i]))
            .collect();
        ensure!(!ended.is_empty(), "no container of job {tenant}");
        let mut stopping: Vec<ChildGuard> = ended
            .iter()
            .rev()
            .map(|&i| self.exporters.remove(i))
            .collect();
        for (k, e) in stopping.iter().enumerate() {
            if k > 0 {
                std::thread::sleep(gap);
            }
            let pid = i32::try_from(e.pid()).context("pid out of range")?;
            // One that exited already is reaped below.
            let _ = crate::sys::kill(pid, libc::SIGTERM);
        }
        for e in &mut stopping {
            e.terminate(Duration::from_secs(30))?;
        }
        let config =
            prometheus_config_of(&self.fabric, &self.opts, &self.rule_names, &|n| !ends(n));
        self.prometheus.write_file("prometheus.yml", &config)?;
        self.prometheus.reload()?;
        Ok(ended
            .iter()
            .map(|&i| self.fabric.nodes[i].identity.node.clone())
            .collect())
    }

    /// With [`StackOpts::from_containers`]: the container `name` ends (a
    /// pod deleted), or with `again` starts again on its host under its
    /// name (re-created by its job's controller).
    pub fn container(&mut self, name: &str, again: bool) -> Result<()> {
        let c = self.containers.as_mut().context("no containers")?;
        match again {
            false => c.end(&self.fabric, name),
            true => c.start_again(&self.fabric, name),
        }
    }

    /// The log of the exporter of `host` so far.
    pub fn exporter_log(&self, host: &str) -> Result<String> {
        let name = format!("exporter-{host}");
        let e = self.exporters.iter().find(|e| e.name == name);
        Ok(e.with_context(|| format!("no {name}"))?.log())
    }

    /// Restart the exporter at `index` of [`Stack::exporters`] as a
    /// rollout does: SIGTERM, wait for it to exit (after its departure
    /// notice), start it again with the same configuration and wait until
    /// it probes (`scheduler started` in its log), within `timeout`.
    pub fn restart_exporter(&mut self, index: usize, timeout: Duration) -> Result<()> {
        let old = self.exporters.get_mut(index).context("no such exporter")?;
        let name = old.name.clone();
        let node = self
            .fabric
            .probers()
            .find(|n| format!("exporter-{}", n.identity.node) == name)
            .with_context(|| format!("no node of {name}"))?;
        old.terminate(timeout)?;
        let containers = self.containers.as_ref();
        self.exporters[index] =
            start_exporter(&self.fabric, node, &self.opts, self.dir.path(), containers)?;
        let new = &mut self.exporters[index];
        let what = format!("{name} probing after its restart");
        wait_until(&what, timeout, Duration::from_millis(100), || {
            match new.check_running() {
                Err(e) => Some(Err(e)),
                Ok(()) => new.log().contains("scheduler started").then_some(Ok(())),
            }
        })?
    }

    /// Wait until Prometheus scrapes every exporter (and the localizer),
    /// every skeleton pair has UDP probe results, and no pair lost a probe
    /// over the last few seconds.
    pub fn wait_healthy(&mut self, timeout: Duration) -> Result<()> {
        let f = &self.fabric;
        let exporters = f.probers().filter(|n| runs_exporter(f, &self.opts, n));
        let targets = exporters.count() + usize::from(self.localizer.is_some());
        let pairs = self.skeleton_pairs();
        let deadline = std::time::Instant::now() + timeout;
        let mut last: String;
        loop {
            self.check_running()?;
            match self.health_status(targets, pairs) {
                Ok(None) => return Ok(()),
                Ok(Some(why)) => last = why,
                Err(e) => last = format!("{e:#}"),
            }
            if std::time::Instant::now() > deadline {
                bail!("stack not healthy within {timeout:?}: {last}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `None` when healthy, else what is missing.
    fn health_status(&self, targets: usize, pairs: usize) -> Result<Option<String>> {
        let up = self.prometheus.targets_up()?;
        if up < targets {
            return Ok(Some(format!("{up}/{targets} scrape targets up")));
        }
        // Probes counted over the last few scrapes for every pair: the
        // window the loss check below looks at has data for all of them.
        let range = secs(self.health_range);
        let sent = self.prometheus.query(&format!(
            "sum by (src_node, dst_node) (increase(skeletonhunter_probe_sent_total{{protocol=\"udp\"}}[{range}])) > 0",
        ))?;
        if sent.len() < pairs {
            return Ok(Some(format!(
                "{}/{pairs} skeleton pairs have UDP probe results",
                sent.len()
            )));
        }
        let lost = self.prometheus.query(&format!(
            "sum by (src_node, dst_node) (increase(skeletonhunter_probe_lost_total[{range}])) > 0 \
             or sum by (src_node, dst_node) (increase(skeletonhunter_probe_dial_failures_total[{range}])) > 0",
        ))?;
        if !lost.is_empty() {
            return Ok(Some(format!("{} pairs still losing probes", lost.len())));
        }
        Ok(None)
    }

    /// Alerts Alertmanager holds (resolved ones excluded) that carry
    /// `kind` and `component` labels: the localizer's verdicts, the rules'
    /// pair alerts and the monitoring alerts alike.
    pub fn labelled_alerts(&self) -> Result<Vec<AlertView>> {
        Ok(self
            .alertmanager
            .alerts()?
            .iter()
            .filter_map(AlertView::from_json)
            .collect())
    }

    /// Check the `jobs` annotation of the localizer's alert on ToR `tor`
    /// (by name) names each job (tenant) with exactly the ranks the fabric
    /// placed under the ToR, of all the job's ranks, as the fabric placed
    /// them; from containers, counted and numbered as their launcher's
    /// variables say ([`Fabric::ranks_of`]); and that the localizer's
    /// `/jobs` lists each job with its ranks and the ToR among what hurts
    /// it, and, from containers, the layout of its groups solved and the
    /// groups under the ToR. The error says what they say instead.
    pub fn check_jobs_under_tor(&self, tor: &str) -> Result<()> {
        let per = match self.containers {
            Some(_) => WORKERS_PER_CONTAINER,
            None => 1,
        };
        let mut placed: BTreeMap<&str, (usize, usize, Vec<usize>)> = BTreeMap::new();
        for n in &self.fabric.nodes {
            let e = placed.entry(n.identity.tenant.as_str()).or_default();
            if n.identity.tor == tor {
                e.0 += per;
                e.2.push(self.fabric.ranks_of(n).0);
            }
            e.1 += per;
        }
        let alerts = self.component_alerts()?;
        let alert = alerts
            .iter()
            .find(|a| a.kind == "tor" && a.component == tor)
            .with_context(|| format!("no alert on tor {tor}"))?;
        let jobs = alert.json["annotations"]["jobs"].as_str().unwrap_or("");
        let listed = self.localizer_jobs()?;
        for (job, (under, all, firsts)) in placed {
            let view = listed["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|j| j["job"] == job)
                .with_context(|| format!("/jobs lacks {job}: {listed}"))?;
            let by_tor = view["hurt_by"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|h| h["kind"] == "tor" && h["id"] == tor);
            ensure!(
                view["ranks"] == all && by_tor.is_some_and(|h| h["ranks_under"] == under),
                "/jobs says {view} of {job}, not {under} of {all} ranks under tor {tor}"
            );
            if self.containers.is_some() {
                // Its containers publish their ranks: its groups are
                // solved from its skeleton, on a grid of all its ranks.
                let g = &view["groups"];
                let size = ["tp", "dp", "pp"]
                    .iter()
                    .map(|k| g[k].as_u64().unwrap_or(0))
                    .product::<u64>();
                ensure!(
                    g["state"] == "inferred" && size == all as u64,
                    "/jobs says groups {g} of {job}, not a layout of its {all} ranks"
                );
            }
            let mut want = format!("{job}: {under} of {all} ranks under it");
            if self.containers.is_some() {
                want.push_str(&format!(" ({})", rank_spans(&firsts, per)));
            }
            ensure!(
                jobs.contains(&want),
                "jobs annotation {jobs:?} lacks {want:?}"
            );
            if self.containers.is_some() && under > 0 {
                // ...and says which of its groups have ranks beneath.
                let entry = jobs.split("; ").find(|e| e.starts_with(&want));
                ensure!(
                    entry.is_some_and(|e| e.contains(", groups under it: ")),
                    "jobs annotation {jobs:?} names no groups of {job} under tor {tor}"
                );
            }
        }
        Ok(())
    }

    /// The localizer's `/jobs`, from the monitoring namespace.
    pub fn localizer_jobs(&self) -> Result<serde_json::Value> {
        let addr = SocketAddr::from(([127, 0, 0, 1], ports::LOCALIZER));
        let (status, body) = self
            .fabric
            .mon
            .run_in(move || crate::process::http_get(addr, "/jobs", Duration::from_secs(5)))??;
        ensure!(status == 200, "GET /jobs: HTTP {status}: {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// Alerts that blame a fabric component (kind node, nic, host, tor,
    /// spine or pod), as the localizer posts them.
    pub fn component_alerts(&self) -> Result<Vec<AlertView>> {
        Ok(self
            .labelled_alerts()?
            .into_iter()
            .filter(AlertView::is_component)
            .collect())
    }
}
/// The localizer's command line in the monitoring namespace: against the
/// stack's servers, with the timing's own cycle flags in [`Timing::Test`].
fn localizer_command(
    fabric: &Fabric,
    opts: &StackOpts,
    bin: &std::path::Path,
    prometheus: &Server,
    alertmanager: &Server,
) -> std::process::Command {
    let mut cmd = fabric.mon.command(&bin.to_string_lossy());
    cmd.args([
        "run",
        "--prometheus",
        &prometheus.url(),
        "--alertmanager",
        &alertmanager.url(),
        "--min-latency-excess",
        &opts.min_latency_excess,
        "--web.listen-address",
        &format!("127.0.0.1:{}", ports::LOCALIZER),
    ]);
    if opts.timing == Timing::Test {
        cmd.args([
            "--interval",
            &secs(opts.localizer_interval),
            "--window",
            &secs(opts.localizer_window),
            "--scrape-interval",
            &secs(opts.scrape_interval),
        ]);
        // The flap window in cycles of this timing: 30 of 2 s, so faults a
        // scenario apart stay independent, as the shipped 60 cycles of 5 s
        // keep faults five minutes apart.
        if !opts
            .localizer_args
            .iter()
            .any(|a| a.starts_with("--flap-window-cycles"))
        {
            cmd.args(["--flap-window-cycles", "30"]);
        }
    }
    cmd.args(&opts.localizer_args);
    cmd
}

/// Whether an exporter runs for `n`: every endpoint's, or with
/// [`StackOpts::from_containers`] only the hosts' own ([`Fabric::underlay`]).
fn runs_exporter(fabric: &Fabric, opts: &StackOpts, n: &Node) -> bool {
    !opts.from_containers
        || fabric
            .underlay
            .iter()
            .any(|u| u.identity.node == n.identity.node)
}

/// [`Stack::end_job`] with one exporter per host: the job's containers end
/// (their processes, then their cgroups), one every `gap`; the hosts'
/// exporters stay and no scrape target changes.
fn end_containers(
    fabric: &Fabric,
    c: &mut Containers,
    tenant: &str,
    gap: Duration,
) -> Result<Vec<String>> {
    let ended: Vec<String> = (fabric.nodes.iter())
        .filter(|n| n.identity.tenant == tenant)
        .map(|n| n.identity.node.clone())
        .collect();
    ensure!(!ended.is_empty(), "no container of job {tenant}");
    for (k, name) in ended.iter().enumerate() {
        if k > 0 {
            std::thread::sleep(gap);
        }
        c.end(fabric, name)?;
    }
    Ok(ended)
}

/// Ranks `first..first + per` of each of `firsts` as an operator writes
/// them, runs of adjacent ranks joined: `0-3, 8-9`.
fn rank_spans(firsts: &[usize], per: usize) -> String {
    let mut sorted = firsts.to_vec();
    sorted.sort_unstable();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for f in sorted {
        match runs.last_mut() {
            Some(run) if run.1 == f => run.1 = f + per,
            _ => runs.push((f, f + per)),
        }
    }
    let span = |&(a, b): &(usize, usize)| match b - a {
        1 => a.to_string(),
        _ => format!("{a}-{}", b - 1),
    };
    runs.iter().map(span).collect::<Vec<_>>().join(", ")
}
