//! Child processes that die with the test, command-line tools run to
//! completion, and small bounded waits.

use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static LOG_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A child process killed on drop. Its stderr goes to a log file whose tail
/// is printed when the test fails, which is usually the fastest diagnosis.
pub struct ChildGuard {
    /// What the child is (`exporter-t0-h1-c0`), used in its log file name
    /// and in error messages.
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl ChildGuard {
    /// Spawn `cmd` with stdout and stderr appended to a temp log file.
    pub fn spawn(name: &str, mut cmd: Command) -> Result<ChildGuard> {
        // pid + counter: two children with the same name in one test binary
        // must not share (and clobber) one log.
        let n = LOG_COUNTER.fetch_add(1, Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!(
            "skeletonhunter-test-{}-{n}-{name}.log",
            std::process::id()
        ));
        let file =
            std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("cannot start {name}: {cmd:?}"))?;
        Ok(ChildGuard {
            name: name.to_string(),
            child,
            log,
        })
    }

    /// The child's process id, e.g. to find it in `ip netns pids`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far (stdout and stderr interleaved).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fail if the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited with {status}; log:\n{}", self.name, self.log());
        }
        Ok(())
    }

    /// Send SIGTERM and wait up to `timeout` for a clean exit.
    pub fn terminate(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let pid = i32::try_from(self.child.id()).context("pid out of range")?;
        // The child may have exited already: its status is read below.
        let _ = crate::sys::kill(pid, libc::SIGTERM);
        match self.wait_exit(timeout)? {
            Some(st) => Ok(st),
            None => bail!("{} did not exit within {timeout:?} of SIGTERM", self.name),
        }
    }

    /// Wait up to `timeout` for the child to exit by itself: its status, or
    /// `None` if it still runs (it is killed on drop).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<std::process::ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(Some(st));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log();
            let tail: String = log
                .chars()
                .rev()
                .take(4000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            eprintln!(
                "---- log of {} (tail) ----\n{tail}\n---- end of log ----",
                self.name
            );
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Path of a binary of this workspace, next to the test executable's
/// `deps/` directory. `cargo build --workspace` (the test script does it)
/// must have built it.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not found: build the workspace first (cargo build --workspace)",
        path.display()
    );
    path
}

/// A plain HTTP/1.0 GET returning (status, body). Use it inside
/// [`crate::netns::Netns::run_in`] to reach servers in a namespace.
pub fn http_get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, String)> {
    crate::http::http_request(addr, "GET", path, None, timeout)
}

/// Poll `f` every `every` until it returns `Some`, or fail after `timeout`
/// with `what` in the message. Every wait in the tests is bounded.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(every);
    }
}

/// Poll `GET path` on `addr` every `every` until it answers 200 (a server
/// or exporter up and serving), or fail after `timeout` naming `what`.
pub fn wait_http_ok(
    what: &str,
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
    every: Duration,
) -> Result<()> {
    wait_until(what, timeout, every, || {
        http_get(addr, path, Duration::from_secs(2))
            .ok()
            .filter(|(s, _)| *s == 200)
            .map(|_| ())
    })
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …) in KiB, or
/// `None` once the process is gone.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.split(':').next() == Some(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Output of a command-line tool run.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// The command line, for error messages.
    pub command: String,
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl ToolOutput {
    /// Fail with the command and both outputs unless it exited 0.
    pub fn ok(self) -> Result<ToolOutput> {
        if !self.success {
            bail!(
                "`{}` failed:\n{}\n{}",
                self.command,
                self.stdout.trim(),
                self.stderr.trim()
            );
        }
        Ok(self)
    }
}

/// Run `program args...` in `cwd` (if given), capturing output. Errors only
/// if it cannot start; check [`ToolOutput::success`] or call
/// [`ToolOutput::ok`].
pub fn run_tool(program: &str, args: &[&str], cwd: Option<&Path>) -> Result<ToolOutput> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {program} (is its Debian package installed?)"))?;
    Ok(ToolOutput {
        command: format!("{program} {}", args.join(" ")),
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
