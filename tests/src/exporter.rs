//! Running the exporter binary in a namespace and reading its metrics: the
//! pieces the exporter tests share (a two-namespace link, a config, start
//! with a health wait, scrape, and sample lookup in the text exposition).

use crate::exposition::sample;
use anyhow::{bail, Context, Result};
use skeletonhunter_tools::netns::{veth, Netns};
use skeletonhunter_tools::process::{bin_path, http_get, wait_http_ok, wait_until, ChildGuard};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where every test exporter serves `/metrics`: its namespace's loopback,
/// so data-plane faults never hide the exporter itself.
pub const METRICS: &str = "127.0.0.1:9465";
/// The UDP responder port on the data plane.
pub const UDP: u16 = 7477;
/// The TCP dial port on the data plane.
pub const TCP: u16 = 7478;

/// Two namespaces `a` (198.18.1.1) and `b` (198.18.1.2) on one veth link.
pub struct Pair {
    /// The namespace at 198.18.1.1, interface `a0`.
    pub a: Netns,
    /// The namespace at 198.18.1.2, interface `b0`.
    pub b: Netns,
}

/// Create the two namespaces of a [`Pair`], named after `tag`.
pub fn pair(tag: &str) -> Result<Pair> {
    let a = Netns::new(&format!("{tag}a"))?;
    let b = Netns::new(&format!("{tag}b"))?;
    veth(&a, "a0", "198.18.1.1/24", &b, "b0", "198.18.1.2/24")?;
    Ok(Pair { a, b })
}

/// An exporter config: identity `node` (host `host-<node>`, ToR `tor1`,
/// spine `s1`), responder on `ip`, the probe settings given, and the
/// `discovery` lines after `ebpf: false` (e.g. [`static_peer`]).
pub fn config(
    node: &str,
    ip: &str,
    interval: &str,
    timeout: &str,
    protocols: &str,
    discovery: &str,
) -> String {
    format!(
        "listen: \"{METRICS}\"\n\
         identity: {{node: \"{node}\", host: \"host-{node}\", tor: \"tor1\", spine: \"s1\"}}\n\
         responder: {{udp: \"{ip}:{UDP}\", tcp: \"{ip}:{TCP}\"}}\n\
         probe: {{interval: {interval}, timeout: {timeout}, protocols: [{protocols}], udp_port: {UDP}, tcp_port: {TCP}}}\n\
         discovery:\n  ebpf: false\n{discovery}"
    )
}

/// The `discovery:` lines for one static peer at `ip`.
pub fn static_peer(ip: &str) -> String {
    format!("  static:\n    - {{address: \"{ip}\"}}\n")
}

/// The probe settings the two exporters of a [`Pair`] share.
#[derive(Debug, Clone, Copy)]
pub struct Probing<'a> {
    /// `probe.interval`, e.g. `20ms`.
    pub interval: &'a str,
    /// `probe.timeout`.
    pub timeout: &'a str,
    /// `probe.protocols`, e.g. `udp, tcp`.
    pub protocols: &'a str,
}

impl Probing<'_> {
    /// The [`config`] of exporter `node` on `ip` with these probe settings
    /// and `discovery` lines.
    pub fn config(&self, node: &str, ip: &str, discovery: &str) -> String {
        config(
            node,
            ip,
            self.interval,
            self.timeout,
            self.protocols,
            discovery,
        )
    }
}

/// Exporters `a` (198.18.1.1) and `b` (198.18.1.2) on `p` with the same
/// probe settings; `a_peers` and `b_peers` are their `discovery:` lines
/// (e.g. [`static_peer`], or empty). `b` starts first, so `a`'s first
/// probes find it answering. Returns `(a, b)` once both serve.
pub fn start_both(
    p: &Pair,
    dir: &Path,
    probing: Probing,
    a_peers: &str,
    b_peers: &str,
) -> Result<(ChildGuard, ChildGuard)> {
    start_both_with(p, dir, probing, [a_peers, b_peers], &[])
}

/// [`start_both`] with extra command-line flags for `a` (the exporter
/// under test; `b` is its plain peer). `peers` are `a`'s and `b`'s
/// `discovery:` lines. The one place the tests start an exporter pair.
pub fn start_both_with(
    p: &Pair,
    dir: &Path,
    probing: Probing,
    peers: [&str; 2],
    a_flags: &[&str],
) -> Result<(ChildGuard, ChildGuard)> {
    let [a_peers, b_peers] = peers;
    let b = start(&p.b, dir, "b", &probing.config("b", "198.18.1.2", b_peers))?;
    let a_cfg = probing.config("a", "198.18.1.1", a_peers);
    let a = start_with(&p.a, dir, "a", &a_cfg, a_flags)?;
    Ok((a, b))
}

/// How one test exporter is started: the one place the tests spawn the
/// exporter binary. In a namespace or on this machine's loopback, behind
/// an optional wrapper command (`setpriv`, `cgexec`, …), with extra flags.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    name: String,
    ns: Option<&'a Netns>,
    bin: PathBuf,
    wrap: Vec<String>,
    flags: Vec<String>,
    log_info: bool,
    net_only: bool,
}

impl<'a> Launch<'a> {
    /// An exporter named `name` (its config file and log are named after
    /// it), on this machine's loopback, logging at `info`.
    pub fn new(name: &str) -> Launch<'a> {
        Launch {
            name: name.to_string(),
            ns: None,
            bin: bin_path("skeletonhunter-exporter"),
            wrap: Vec::new(),
            flags: Vec::new(),
            log_info: true,
            net_only: false,
        }
    }

    /// Run it inside `ns`.
    pub fn within(mut self, ns: &'a Netns) -> Self {
        self.ns = Some(ns);
        self
    }

    /// Enter only the namespace's network ([`Netns::net_command`]).
    pub fn net_only(mut self) -> Self {
        self.net_only = true;
        self
    }

    /// Run it behind `cmd` (the exporter's path is appended to it).
    pub fn wrap<S: AsRef<str>>(mut self, cmd: &[S]) -> Self {
        self.wrap = cmd.iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// Run this copy of the binary (e.g. one an unprivileged user can reach).
    pub fn bin(mut self, path: PathBuf) -> Self {
        self.bin = path;
        self
    }

    /// Extra command-line flags after `--config`.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags = flags.iter().map(ToString::to_string).collect();
        self
    }

    /// Leave `RUST_LOG` unset: the exporter's own default level.
    pub fn default_log(mut self) -> Self {
        self.log_info = false;
        self
    }

    /// Write `cfg` to `dir/<name>.yaml` and spawn the exporter with it;
    /// returns at once (see [`start`] for one that waits until it serves).
    pub fn spawn(&self, dir: &Path, cfg: &str) -> Result<ChildGuard> {
        let path = dir.join(format!("{}.yaml", self.name));
        std::fs::write(&path, cfg).with_context(|| format!("write {}", path.display()))?;
        let bin = self.bin.to_str().context("utf-8 binary path")?;
        let (program, rest): (&str, Vec<&str>) = match self.wrap.split_first() {
            Some((first, rest)) => {
                let mut v: Vec<&str> = rest.iter().map(String::as_str).collect();
                v.push(bin);
                (first, v)
            }
            None => (bin, Vec::new()),
        };
        let mut cmd = match self.ns {
            Some(ns) if self.net_only => ns.net_command(program),
            Some(ns) => ns.command(program),
            None => std::process::Command::new(program),
        };
        cmd.args(rest).arg("--config").arg(&path).args(&self.flags);
        if self.log_info {
            cmd.env("RUST_LOG", "info");
        } else {
            cmd.env_remove("RUST_LOG");
        }
        ChildGuard::spawn(&self.name, cmd)
    }
}

/// Write `cfg` to `dir/<name>.yaml`, start the exporter with it in `ns`,
/// and return once `/healthz` answers.
pub fn start(ns: &Netns, dir: &Path, name: &str, cfg: &str) -> Result<ChildGuard> {
    start_with(ns, dir, name, cfg, &[])
}

/// [`start`] with extra command-line flags.
pub fn start_with(
    ns: &Netns,
    dir: &Path,
    name: &str,
    cfg: &str,
    flags: &[&str],
) -> Result<ChildGuard> {
    let mut child = Launch::new(name).within(ns).flags(flags).spawn(dir, cfg)?;
    wait_until(
        &format!("{name} /healthz"),
        Duration::from_secs(10),
        Duration::from_millis(50),
        || {
            let addr: SocketAddr = METRICS.parse().ok()?;
            match ns.run_in(move || http_get(addr, "/healthz", Duration::from_secs(1))) {
                Ok(Ok((200, _))) => Some(()),
                _ => None,
            }
        },
    )?;
    child.check_running()?;
    Ok(child)
}

/// Write `cfg` to `dir/<name>.yaml` and start the exporter with it in
/// this namespace (unprivileged tests on loopback); returns once its
/// `/metrics` at `listen` (the config's `listen`) answers 200.
pub fn start_on_loopback(
    dir: &Path,
    name: &str,
    cfg: &str,
    listen: SocketAddr,
) -> Result<ChildGuard> {
    let mut child = Launch::new(name).default_log().spawn(dir, cfg)?;
    let up = wait_http_ok(
        &format!("{name} /metrics"),
        listen,
        "/metrics",
        Duration::from_secs(120),
        Duration::from_millis(200),
    );
    if up.is_err() {
        child.check_running()?;
        bail!("{name}: /metrics not 200 in time; log:\n{}", child.log());
    }
    Ok(child)
}

/// The `/metrics` text of the exporter in `ns` (an error unless HTTP 200).
pub fn scrape(ns: &Netns) -> Result<String> {
    let addr: SocketAddr = METRICS.parse()?;
    let (status, body) =
        ns.run_in(move || http_get(addr, "/metrics", Duration::from_secs(2)))??;
    if status != 200 {
        bail!("/metrics returned {status}: {body}");
    }
    Ok(body)
}

/// (sent, lost, answered) of one pair and protocol.
pub fn counts(body: &str, dst: &str, proto: &str) -> (f64, f64, f64) {
    let l = [dst, proto];
    (
        sample(body, "skeletonhunter_probe_sent_total", &l).unwrap_or(0.0),
        sample(body, "skeletonhunter_probe_lost_total", &l).unwrap_or(0.0),
        sample(body, "skeletonhunter_probe_rtt_seconds_count", &l).unwrap_or(0.0),
    )
}

/// A test's own UDP socket at `addr` in `ns`, standing in for a peer: every
/// echo request it receives (magic `SKHP`, version 1, type 1, a whole
/// header) is handed to `on_request` with the socket and the sender, on a
/// thread of its own. Stopped (the thread joined) when dropped.
pub struct FakePeer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakePeer {
    /// Bind `addr` inside `ns` and start answering (or recording).
    pub fn start(
        ns: &Netns,
        addr: SocketAddr,
        mut on_request: impl FnMut(&std::net::UdpSocket, &[u8], SocketAddr) + Send + 'static,
    ) -> Result<FakePeer> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let sock = ns.run_in(move || std::net::UdpSocket::bind(addr))??;
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let done = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !done.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if n >= 40 && buf[..4] == *b"SKHP" && buf[4] == 1 && buf[5] == 1 {
                    on_request(&sock, &buf[..n], from);
                }
            }
        });
        Ok(FakePeer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for FakePeer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
