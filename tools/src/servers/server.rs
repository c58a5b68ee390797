//! A real server: its options, start-up (bounded wait for `/-/ready`, the
//! log on failure), queries and lifecycle.

use super::dir::TempDir;
use super::{ALERTMANAGER_BIN, PROMETHEUS_BIN, VICTORIA_METRICS_BIN, VMAGENT_BIN};
use crate::http::{http_request, urlencode};
use crate::netns::Netns;
use crate::process::ChildGuard;
use crate::tls::{curl_request, WebAccess};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How to start a server. `config` is the main config file's text
/// (Prometheus: `prometheus.yml`; Alertmanager: `alertmanager.yml`;
/// VictoriaMetrics: a Prometheus-style scrape config, or "" for none).
#[derive(Debug, Clone)]
pub struct ServerOpts {
    /// Address the server listens on.
    pub listen: SocketAddr,
    /// The main config file's contents.
    pub config: String,
    /// Extra files written into the server's directory next to the config
    /// (relative names, e.g. rule files or templates), so the config can
    /// reference them by relative path.
    pub files: Vec<(String, String)>,
    /// Extra command-line flags appended after ours.
    pub args: Vec<String>,
    /// Name of the network namespace to run in (`None`: the caller's).
    pub netns: Option<String>,
    /// Bound on the wait for `/-/ready`.
    pub ready_timeout: Duration,
    /// A `--web.config.file` (TLS, basic auth) and how tests get through it.
    pub web: Option<(String, WebAccess)>,
}

impl ServerOpts {
    /// Options with no extra files or flags, in the caller's namespace, and a 20 s ready wait.
    pub fn new(listen: SocketAddr, config: &str) -> ServerOpts {
        ServerOpts {
            listen,
            config: config.to_string(),
            files: Vec::new(),
            args: Vec::new(),
            netns: None,
            ready_timeout: Duration::from_secs(20),
            web: None,
        }
    }

    /// Run the server inside `ns` (listen on one of its addresses).
    pub fn in_netns(mut self, ns: &Netns) -> ServerOpts {
        self.netns = Some(ns.name().to_string());
        self
    }

    /// Write `contents` to `name` in the server's directory.
    pub fn file(mut self, name: &str, contents: &str) -> ServerOpts {
        self.files.push((name.to_string(), contents.to_string()));
        self
    }

    /// Copy a file from disk (e.g. `repo_root().join("rules/x.yml")`) into
    /// the server's directory under `name`.
    pub fn copy_file(self, name: &str, from: &Path) -> Result<ServerOpts> {
        let text =
            std::fs::read_to_string(from).with_context(|| format!("read {}", from.display()))?;
        Ok(self.file(name, &text))
    }

    /// Append one command-line flag.
    pub fn arg(mut self, a: &str) -> ServerOpts {
        self.args.push(a.to_string());
        self
    }

    /// Serve behind the exporter-toolkit web configuration `yaml`
    /// (Prometheus, Alertmanager); the test's own requests use `access`.
    pub fn web_config(mut self, yaml: &str, access: WebAccess) -> ServerOpts {
        self.web = Some((yaml.to_string(), access));
        self
    }

    /// Change the bound on the wait for `/-/ready`.
    pub fn ready_timeout(mut self, t: Duration) -> ServerOpts {
        self.ready_timeout = t;
        self
    }
}

/// Which server a [`Server`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `prometheus`.
    Prometheus,
    /// `prometheus-alertmanager`.
    Alertmanager,
    /// `victoria-metrics`.
    VictoriaMetrics,
    /// `vmagent` (Debian's victoria-metrics package).
    VmAgent,
}

/// A running server: killed and its directory removed on drop.
pub struct Server {
    /// Which server this is.
    pub kind: ServerKind,
    /// Where it listens (inside its namespace, if any).
    pub addr: SocketAddr,
    netns: Option<String>,
    web: Option<WebAccess>,
    // Field order matters: the process dies before its directory goes.
    guard: ChildGuard,
    dir: TempDir,
}

impl Server {
    /// `http://addr`, or `https://addr` behind a web configuration
    /// (reachable from inside the server's namespace).
    pub fn url(&self) -> String {
        let scheme = if self.web.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The server's directory (config, extra files, data under `data/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Namespace name the server runs in, if any.
    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.guard.log()
    }

    /// Fail (with the log) if the server has exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.guard.check_running()
    }

    /// SIGSTOP: the server hangs (connections are accepted by the kernel
    /// and never answered) until [`Server::resume`]; a stopped server is
    /// still killed on drop.
    pub fn pause(&self) -> Result<()> {
        crate::sys::kill(self.pid() as i32, libc::SIGSTOP)?;
        Ok(())
    }

    /// SIGCONT after [`Server::pause`].
    pub fn resume(&self) -> Result<()> {
        crate::sys::kill(self.pid() as i32, libc::SIGCONT)?;
        Ok(())
    }

    /// SIGTERM and wait for exit (e.g. to simulate an outage); the directory
    /// stays until drop.
    pub fn stop(&mut self) -> Result<()> {
        self.guard.terminate(Duration::from_secs(10))?;
        Ok(())
    }

    /// HTTP request to this server, from inside its namespace when it has one.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<(u16, String)> {
        let addr = self.addr;
        let method = method.to_string();
        let path = path.to_string();
        let web = self.web.clone();
        let body = body.map(|(ct, b)| (ct.to_string(), b.to_vec()));
        in_netns(self.netns.as_deref(), move || {
            let body = body.as_ref().map(|(ct, b)| (ct.as_str(), b.as_slice()));
            let t = Duration::from_secs(10);
            match &web {
                // curl is a child process: it inherits this thread's namespace.
                Some(access) => curl_request(addr, access, &method, &path, body, t),
                None => http_request(addr, &method, &path, body, t),
            }
        })
    }

    /// GET `path`, returning (status, body).
    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        self.request("GET", path, None)
    }

    /// POST a JSON body; fails unless the status is 2xx.
    pub fn post_json(&self, path: &str, body: &Value) -> Result<String> {
        let text = serde_json::to_vec(body)?;
        let (status, resp) = self.request("POST", path, Some(("application/json", &text)))?;
        if !(200..300).contains(&status) {
            bail!("POST {}{path}: HTTP {status}: {resp}", self.url());
        }
        Ok(resp)
    }

    /// GET a JSON document; fails unless 2xx and valid JSON.
    pub fn get_json(&self, path: &str) -> Result<Value> {
        let (status, body) = self.get(path)?;
        if !(200..300).contains(&status) {
            bail!("GET {}{path}: HTTP {status}: {body}", self.url());
        }
        serde_json::from_str(&body)
            .with_context(|| format!("GET {}{path}: not JSON: {body}", self.url()))
    }

    /// PromQL instant query (Prometheus or VictoriaMetrics): the
    /// `data.result` array. Errors carry the server's error text.
    pub fn query(&self, promql: &str) -> Result<Vec<Value>> {
        let v = self.prom_api(&format!("/api/v1/query?query={}", urlencode(promql)))?;
        result_array(&v, promql)
    }

    /// PromQL range query over the last `range` ending now, one point per
    /// `step`: the `data.result` array (matrix).
    pub fn query_range(&self, promql: &str, range: Duration, step: Duration) -> Result<Vec<Value>> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs_f64();
        let path = format!(
            "/api/v1/query_range?query={}&start={:.3}&end={:.3}&step={:.3}",
            urlencode(promql),
            now - range.as_secs_f64(),
            now,
            step.as_secs_f64().max(0.001)
        );
        let v = self.prom_api(&path)?;
        result_array(&v, promql)
    }

    /// GET a Prometheus-API path and check `status == "success"`; returns the
    /// whole JSON document.
    pub fn prom_api(&self, path: &str) -> Result<Value> {
        let (status, body) = self.get(path)?;
        let v: Value = serde_json::from_str(&body)
            .with_context(|| format!("{}{path}: HTTP {status}, not JSON: {body}", self.url()))?;
        if v["status"] != "success" {
            bail!(
                "{}{path}: HTTP {status}: {}: {}",
                self.url(),
                v["errorType"].as_str().unwrap_or("?"),
                v["error"].as_str().unwrap_or(&body)
            );
        }
        Ok(v)
    }

    /// Prometheus `/api/v1/targets` active targets with `health == "up"`.
    pub fn targets_up(&self) -> Result<usize> {
        let v = self.prom_api("/api/v1/targets")?;
        Ok(v["data"]["activeTargets"]
            .as_array()
            .map(|a| a.iter().filter(|t| t["health"] == "up").count())
            .unwrap_or(0))
    }

    /// Alertmanager: the alerts it holds (`/api/v2/alerts`), including
    /// silenced and inhibited ones (see each alert's `status`).
    pub fn alerts(&self) -> Result<Vec<Value>> {
        let v = self.get_json("/api/v2/alerts")?;
        v.as_array()
            .cloned()
            .context("Alertmanager /api/v2/alerts: not a JSON array")
    }

    /// Alertmanager: post alerts (`[{labels, annotations, startsAt?, endsAt?}]`).
    pub fn post_alerts(&self, alerts: &Value) -> Result<()> {
        self.post_json("/api/v2/alerts", alerts)?;
        Ok(())
    }

    /// Ask Prometheus/Alertmanager to reload its config (`POST /-/reload`);
    /// Prometheus is started with `--web.enable-lifecycle` for this.
    pub fn reload(&self) -> Result<()> {
        let (status, body) = self.request("POST", "/-/reload", Some(("text/plain", b"")))?;
        if !(200..300).contains(&status) {
            bail!("reload {}: HTTP {status}: {body}", self.url());
        }
        Ok(())
    }

    /// Overwrite a file in the server's directory (then [`Server::reload`]).
    pub fn write_file(&self, name: &str, contents: &str) -> Result<()> {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents).with_context(|| format!("write {}", p.display()))
    }
}

fn result_array(v: &Value, promql: &str) -> Result<Vec<Value>> {
    v["data"]["result"]
        .as_array()
        .cloned()
        .with_context(|| format!("query {promql:?}: no data.result array in {v}"))
}

/// Start Prometheus with `opts.config` as `prometheus.yml` (rule files may be
/// given with [`ServerOpts::file`] and referenced by relative name). Flags:
/// lifecycle API on (for reload), TSDB in the temp dir.
pub fn start_prometheus(opts: ServerOpts) -> Result<Server> {
    start(ServerKind::Prometheus, opts)
}

/// Start Alertmanager with `opts.config` as `alertmanager.yml`; clustering
/// off (it would otherwise listen on 0.0.0.0:9094).
pub fn start_alertmanager(opts: ServerOpts) -> Result<Server> {
    start(ServerKind::Alertmanager, opts)
}

/// Start single-node VictoriaMetrics; `opts.config` is a Prometheus-style
/// `scrape_configs` file for its built-in scraper, or "" to only accept
/// queries. Query-result caching is off and the latency offset is 1 s so
/// fresh samples are visible quickly, as tests need.
pub fn start_victoria_metrics(opts: ServerOpts) -> Result<Server> {
    start(ServerKind::VictoriaMetrics, opts)
}

/// Start `vmagent` with `opts.config` as its `-promscrape.config`, its
/// remote-write queue in the temp dir; `-remoteWrite.url` and the cluster
/// flags come in `opts.args`.
pub fn start_vmagent(opts: ServerOpts) -> Result<Server> {
    start(ServerKind::VmAgent, opts)
}

fn start(kind: ServerKind, opts: ServerOpts) -> Result<Server> {
    let (tag, bin, config_name) = match kind {
        ServerKind::Prometheus => ("prometheus", PROMETHEUS_BIN, "prometheus.yml"),
        ServerKind::Alertmanager => ("alertmanager", ALERTMANAGER_BIN, "alertmanager.yml"),
        ServerKind::VictoriaMetrics => ("victoriametrics", VICTORIA_METRICS_BIN, "scrape.yml"),
        ServerKind::VmAgent => ("vmagent", VMAGENT_BIN, "scrape.yml"),
    };
    let dir = TempDir::new(tag)?;
    let config = dir.path().join(config_name);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data)?;
    write_files(dir.path(), &opts)?;
    let has_config = !(kind == ServerKind::VictoriaMetrics && opts.config.trim().is_empty());
    if has_config {
        std::fs::write(&config, &opts.config)
            .with_context(|| format!("write {}", config.display()))?;
    }
    let mut args = server_args(kind, &config, &data, opts.listen, has_config);
    if opts.web.is_some() {
        args.push("--web.config.file=web.yml".into());
    }
    args.extend(opts.args.iter().cloned());
    let mut cmd = match &opts.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, bin]);
            c
        }
        None => Command::new(bin),
    };
    cmd.args(&args).current_dir(dir.path());
    // Unique name: ChildGuard names its log file after it.
    let name = dir
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| tag.to_string());
    let guard = ChildGuard::spawn(&name, cmd)?;
    let mut server = Server {
        kind,
        addr: opts.listen,
        netns: opts.netns.clone(),
        web: opts.web.map(|(_, access)| access),
        guard,
        dir,
    };
    server.wait_ready(opts.ready_timeout)?;
    Ok(server)
}

/// The command line of `kind` with its config file, data directory and
/// listen address (`has_config`: VictoriaMetrics scrapes with the config).
fn server_args(
    kind: ServerKind,
    config: &Path,
    data: &Path,
    l: SocketAddr,
    has_config: bool,
) -> Vec<String> {
    let (c, d) = (config.display(), data.display());
    match kind {
        ServerKind::Prometheus => vec![
            format!("--config.file={c}"),
            format!("--storage.tsdb.path={d}"),
            format!("--web.listen-address={l}"),
            "--web.enable-lifecycle".into(),
            "--log.level=info".into(),
        ],
        ServerKind::Alertmanager => vec![
            format!("--config.file={c}"),
            format!("--storage.path={d}"),
            format!("--web.listen-address={l}"),
            "--cluster.listen-address=".into(),
        ],
        ServerKind::VictoriaMetrics => {
            let mut a = vec![
                format!("-storageDataPath={d}"),
                format!("-httpListenAddr={l}"),
                "-search.latencyOffset=1s".into(),
                "-search.disableCache".into(),
                "-retentionPeriod=1d".into(),
            ];
            if has_config {
                a.push(format!("-promscrape.config={c}"));
            }
            a
        }
        ServerKind::VmAgent => vec![
            format!("-promscrape.config={c}"),
            format!("-remoteWrite.tmpDataPath={d}"),
            format!("-httpListenAddr={l}"),
        ],
    }
}

/// The extra files of `opts` and its web configuration (`web.yml`).
fn write_files(dir: &Path, opts: &ServerOpts) -> Result<()> {
    let web = opts
        .web
        .iter()
        .map(|(yaml, _)| ("web.yml".to_string(), yaml.clone()));
    for (name, text) in opts.files.iter().cloned().chain(web) {
        let p = dir.join(&name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, text).with_context(|| format!("write {}", p.display()))?;
    }
    Ok(())
}

impl Server {
    /// Poll `/-/ready` until 200, failing early (with the log) if the process
    /// exits, and after `timeout` at the latest.
    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        let mut last: String;
        loop {
            self.guard.check_running()?;
            match self.get("/-/ready") {
                Ok((200, _)) => return Ok(()),
                Ok((s, b)) => last = format!("HTTP {s}: {}", b.trim()),
                Err(e) => last = format!("{e:#}"),
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "{} at {} not ready within {timeout:?} (last: {last}); log:\n{}",
                    self.guard.name,
                    self.addr,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Run `f` on a thread inside namespace `ns` (or directly when `None`).
pub fn in_netns<T: Send + 'static>(
    ns: Option<&str>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match ns {
        None => f(),
        Some(ns) => crate::netns::run_in_named(ns, f)?,
    }
}
