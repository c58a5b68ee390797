//! Child processes that die with the test, and small bounded waits.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed on drop. Its stderr goes to a log file whose tail
/// is printed when the test fails, which is usually the fastest diagnosis.
pub struct ChildGuard {
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl ChildGuard {
    /// Spawn `cmd` with stdout and stderr appended to a temp log file.
    pub fn spawn(name: &str, mut cmd: Command) -> Result<ChildGuard> {
        let log = std::env::temp_dir().join(format!(
            "skeletonhunter-test-{}-{name}.log",
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
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() > deadline {
                bail!("{} did not exit within {timeout:?} of SIGTERM", self.name);
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
/// [`crate::Netns::run_in`] to reach servers in a namespace.
pub fn http_get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, String)> {
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .with_context(|| format!("read from {addr}{path}"))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("malformed HTTP status line")?;
    Ok((status, body.to_string()))
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
