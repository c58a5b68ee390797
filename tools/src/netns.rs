//! Network namespaces, veth links, bridges and loss injection.

use anyhow::{bail, Context, Result};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A network namespace deleted on drop. Names are unique per process and
/// call, so tests can run in parallel.
#[derive(Debug)]
pub struct Netns {
    name: String,
    /// Deleted on drop: false for an [`Netns::alias`].
    owned: bool,
}

fn check(what: &str, out: Output) -> Result<String> {
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `cmd` with `input` on its standard input, failing with its stderr
/// (`install` says what to install when it cannot start).
fn with_input(what: &str, mut cmd: Command, input: &str, install: &str) -> Result<String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {what} ({install})"))?;
    child
        .stdin
        .take()
        .context("child stdin")?
        .write_all(input.as_bytes())?;
    check(what, child.wait_with_output()?)
}

/// Run a command on the host (not in a namespace), failing with its stderr.
pub fn host_cmd(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    check(&args.join(" "), out)
}

impl Netns {
    /// Create a namespace named `sh-<tag>-<pid>-<n>` with loopback up.
    pub fn new(tag: &str) -> Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("sh-{tag}-{}-{n}", std::process::id());
        host_cmd(&["ip", "netns", "add", &name])?;
        let ns = Netns { name, owned: true };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Another handle on the same namespace, which its drop leaves alone
    /// (the namespace goes with this one).
    pub fn alias(&self) -> Netns {
        Netns {
            name: self.name.clone(),
            owned: false,
        }
    }

    /// The name `ip netns` knows it by, for commands run from the host.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A `Command` that runs `program` inside this namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// A command running `program` with only this namespace's network
    /// (`nsenter --net`), in the caller's mount namespace: `ip netns exec`
    /// remounts `/sys`, which hides the cgroup2 hierarchy and tracefs.
    pub fn net_command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.name))
            .args(["--", program]);
        c
    }

    /// Run `args` inside the namespace and return stdout, or fail with stderr.
    pub fn exec(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command(args[0])
            .args(&args[1..])
            .output()
            .with_context(|| format!("cannot run {} in {}", args[0], self.name))?;
        check(&format!("[{}] {}", self.name, args.join(" ")), out)
    }

    /// `ip -n <ns> <args>`.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["ip", "-n", self.name.as_str()];
        full.extend_from_slice(args);
        host_cmd(&full)
    }

    /// Apply an nftables script inside the namespace (`nft -f -`).
    pub fn nft(&self, script: &str) -> Result<()> {
        let mut cmd = self.command("nft");
        cmd.args(["-f", "-"]);
        let what = format!("[{}] nft -f -", self.name);
        with_input(&what, cmd, script, "install nftables")?;
        Ok(())
    }

    /// Run `ip` or `bridge` on a batch of commands in the namespace, one
    /// per line (`<tool> -n <ns> -batch -`): hundreds of entries in one
    /// process instead of one each.
    pub fn batch(&self, tool: &str, lines: &str) -> Result<()> {
        let mut cmd = Command::new(tool);
        cmd.args(["-n", &self.name, "-batch", "-"]);
        let what = format!("[{}] {tool} -batch -", self.name);
        with_input(&what, cmd, lines, "install iproute2")?;
        Ok(())
    }

    /// Drop `percent`% (0–100) of packets arriving in this namespace that match the
    /// nftables expression `filter` (e.g. `ip saddr 198.18.0.2`; empty for
    /// all), in both the input and forward hooks. Replaces any earlier loss
    /// rule of this namespace.
    pub fn set_loss(&self, percent: u32, filter: &str) -> Result<()> {
        self.clear_loss()?;
        if percent == 0 {
            return Ok(());
        }
        // nft rejects `numgen random mod 100 < 100`: 100% is a plain drop.
        let rule = if percent >= 100 {
            format!("{filter} drop")
        } else {
            format!("{filter} numgen random mod 100 < {percent} drop")
        };
        self.nft(&format!(
            "table inet shloss {{\n chain input {{ type filter hook input priority -10; {rule}; }}\n chain forward {{ type filter hook forward priority -10; {rule}; }}\n}}\n"
        ))
    }

    /// Remove the loss rules of [`Netns::set_loss`].
    pub fn clear_loss(&self) -> Result<()> {
        // Declaring then deleting is idempotent whether the table exists or not.
        self.nft("table inet shloss {}\ndelete table inet shloss\n")
    }

    /// Set an interface of this namespace up or down.
    pub fn link_set(&self, ifname: &str, up: bool) -> Result<()> {
        self.ip(&["link", "set", ifname, if up { "up" } else { "down" }])?;
        Ok(())
    }

    /// Enable IPv4 forwarding (router and spine namespaces).
    pub fn enable_forwarding(&self) -> Result<()> {
        self.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        Ok(())
    }

    /// Run `f` on a thread that has entered this namespace, so plain std
    /// sockets (HTTP scrapes, UDP fuzzing) reach servers inside it.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        run_in_named(&self.name, f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // Kill anything still running inside, then delete the namespace.
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    let _ = crate::sys::kill(pid, libc::SIGKILL);
                }
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Run `f` on a new thread that has entered the namespace named `ns`
/// (setns affects only that thread, so the caller stays where it is).
pub fn run_in_named<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let path = format!("/run/netns/{ns}");
    let handle = std::thread::spawn(move || -> Result<T> {
        let file = std::fs::File::open(&path).with_context(|| format!("open {path}"))?;
        crate::sys::enter_netns(&file).with_context(|| format!("setns({path})"))?;
        Ok(f())
    });
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("thread in namespace {ns} panicked"))?
}

/// Join two namespaces with a veth pair: `a_if` in `a` with `a_addr` (CIDR,
/// or "" for none) and `b_if` in `b` with `b_addr`; both ends up. The pair is
/// created directly inside the namespaces and never exists in the host's.
pub fn veth(
    a: &Netns,
    a_if: &str,
    a_addr: &str,
    b: &Netns,
    b_if: &str,
    b_addr: &str,
) -> Result<()> {
    a.ip(&[
        "link",
        "add",
        a_if,
        "type",
        "veth",
        "peer",
        "name",
        b_if,
        "netns",
        b.name(),
    ])?;
    for (ns, ifname, addr) in [(a, a_if, a_addr), (b, b_if, b_addr)] {
        if !addr.is_empty() {
            ns.ip(&["addr", "add", addr, "dev", ifname])?;
        }
        ns.link_set(ifname, true)?;
    }
    Ok(())
}

/// Create a bridge `name` in `ns`, up, with `addr` (CIDR or "").
pub fn bridge(ns: &Netns, name: &str, addr: &str) -> Result<()> {
    ns.ip(&["link", "add", name, "type", "bridge"])?;
    if !addr.is_empty() {
        ns.ip(&["addr", "add", addr, "dev", name])?;
    }
    ns.link_set(name, true)
}

/// Attach interface `ifname` of `ns` to bridge `br` of the same namespace.
pub fn attach(ns: &Netns, ifname: &str, br: &str) -> Result<()> {
    ns.ip(&["link", "set", ifname, "master", br])?;
    Ok(())
}
