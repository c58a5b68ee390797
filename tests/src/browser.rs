//! A real browser on the localizer's status page: Debian's headless
//! `chromium`, driven through `chromium-driver` by `python3-selenium`
//! (`tests/browser/status_page.py`), optionally inside a namespace.

use crate::privilege::skip_or_fail;
use serde::Deserialize;
use skeletonhunter_tools::netns::Netns;
use skeletonhunter_tools::process::ChildGuard;
use skeletonhunter_tools::repo::repo_file;
use skeletonhunter_tools::servers::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Debian's Python, where `python3-selenium` installs (a `python3` earlier
/// on `PATH`, e.g. pyenv's, would not see it).
pub const PYTHON: &str = "/usr/bin/python3";
/// Debian's Chromium and its WebDriver.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver`.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Time for the browser to start and stop on a loaded machine, on top of
/// the time a check waits for its verdict.
const BROWSER_MARGIN: Duration = Duration::from_secs(120);

/// What to load and look for.
#[derive(Debug, Clone)]
pub struct PageCheck {
    /// The status page.
    pub url: String,
    /// A (kind, id) the verdict table must show firing.
    pub expect: Option<(String, String)>,
    /// How long to reload the page waiting for it.
    pub timeout: Duration,
    /// Where to save a PNG of the page, if anywhere.
    pub screenshot: Option<PathBuf>,
}

/// One row of the verdict table, as the browser rendered it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct SeenVerdict {
    /// `firing`, `pending` or `kept`.
    pub state: String,
    /// The component's kind.
    pub kind: String,
    /// The component's id.
    pub id: String,
}

/// What the browser saw.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct SeenPage {
    /// The document title.
    #[serde(default)]
    pub title: String,
    /// The banner text (what is alerted).
    #[serde(default)]
    pub banner: String,
    /// The verdict rows.
    #[serde(default)]
    pub verdicts: Vec<SeenVerdict>,
    /// Cells drawn in the matrix.
    #[serde(default)]
    pub matrix_cells: usize,
    /// Errors in the browser console (CSP violations, failed loads, ...).
    #[serde(default)]
    pub console_errors: Vec<String>,
}

/// Why a check did not pass.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// Selenium or Chromium cannot run here.
    #[error("no browser: {0}")]
    Unavailable(String),
    /// The page was loaded and a check failed.
    #[error("{reason}; the page showed {seen:?}")]
    Failed {
        /// What failed, as the script says it.
        reason: String,
        /// What the page showed, when the script got that far.
        seen: Option<Box<SeenPage>>,
    },
    /// The browser did not finish in time.
    #[error("the browser check did not finish within {0:?}; its output:\n{1}")]
    Timeout(Duration, String),
    /// The script could not be started or its output not read.
    #[error("cannot run the browser check: {0}")]
    Run(String),
}

/// Whether a browser test can run here: Chromium, its driver and Selenium
/// present. Skips the test (printing why) otherwise; under `CI=true` fails it.
pub fn require_browser(test: &str) -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER, PYTHON]
        .into_iter()
        .filter(|p| !Path::new(p).is_file())
        .collect();
    if !missing.is_empty() {
        return skip_or_fail(
            test,
            &format!(
                "{missing:?} missing (apt-get install chromium chromium-driver python3-selenium)"
            ),
        );
    }
    let selenium = Command::new(PYTHON)
        .args(["-c", "import selenium"])
        .output()
        .is_ok_and(|o| o.status.success());
    selenium
        || skip_or_fail(
            test,
            "python3-selenium missing (apt-get install python3-selenium)",
        )
}

/// Load `check.url` in headless Chromium (inside `ns` when given) and check
/// the page: see `tests/browser/status_page.py`.
pub fn check_page(ns: Option<&Netns>, check: &PageCheck) -> Result<SeenPage, BrowserError> {
    let script = repo_file("tests/browser/status_page.py");
    // The browser observes the system under test and must not starve it
    // (a busy 2-core machine: exporters late on their probes read as loss).
    let mut cmd = match ns {
        Some(ns) => ns.command("nice"),
        None => Command::new("nice"),
    };
    cmd.args([
        "-n",
        "19",
        PYTHON,
        &script,
        "--url",
        &check.url,
        "--timeout",
    ])
    .arg(check.timeout.as_secs().to_string())
    .args(["--chromium", CHROMIUM, "--chromedriver", CHROMEDRIVER]);
    if let Some((kind, id)) = &check.expect {
        cmd.args(["--kind", kind, "--id", id]);
    }
    if let Some(p) = &check.screenshot {
        cmd.arg("--screenshot").arg(p);
    }
    // Chromium leaves its profile and shared-memory directories in the
    // temp dir; this one goes when the check ends (after the browser).
    let scratch = TempDir::new("browser").map_err(|e| BrowserError::Run(format!("{e:#}")))?;
    cmd.env("TMPDIR", scratch.path());
    let mut child =
        ChildGuard::spawn("browser", cmd).map_err(|e| BrowserError::Run(format!("{e:#}")))?;
    let limit = check.timeout + BROWSER_MARGIN;
    let status = child
        .wait_exit(limit)
        .map_err(|e| BrowserError::Run(format!("{e:#}")))?;
    let log = child.log();
    let Some(status) = status else {
        return Err(BrowserError::Timeout(limit, log));
    };
    let seen = log
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("RESULT "))
        .and_then(|j| serde_json::from_str::<SeenPage>(j).ok());
    match (status.code(), seen) {
        (Some(0), Some(seen)) => Ok(seen),
        (Some(3), _) => Err(BrowserError::Unavailable(log.trim().to_string())),
        (_, seen) => Err(BrowserError::Failed {
            reason: log
                .lines()
                .find_map(|l| l.strip_prefix("status page check failed: "))
                .map_or_else(|| format!("exit {status}; output:\n{log}"), str::to_string),
            seen: seen.map(Box::new),
        }),
    }
}
