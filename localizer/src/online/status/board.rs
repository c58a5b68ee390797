//! The state the status page is rendered from, shared between the cycle
//! (which publishes) and the HTTP server (which reads). Bounded: the
//! verdicts and matrix of one cycle (the matrix capped at
//! [`MATRIX_CAP`](super::MATRIX_CAP) ToRs) and a ring of
//! [`HISTORY_CAP`] cycles.

use super::{render, CycleEntry, Matrix, PageInfo, Snapshot, Verdict, HISTORY_CAP};
use crate::jobs::roster::Roster;
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY};
use hyper::StatusCode;
use skeletonhunter_common::http::Reply;
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// The page needs no script, no frame, no form and no resource from
/// elsewhere: forbid them all (inline styles and SVG only; `data:` for the
/// empty favicon, so the browser does not ask for `/favicon.ico`).
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[derive(Debug, Default)]
struct State {
    verdicts_at: Option<SystemTime>,
    verdicts: Vec<Verdict>,
    matrix: Matrix,
    jobs: Roster,
    history: VecDeque<CycleEntry>,
}

/// What the last cycles published, for `/`.
#[derive(Debug)]
pub struct Board {
    info: PageInfo,
    state: Mutex<State>,
}

impl Board {
    /// An empty board for a service described by `info`.
    pub fn new(info: PageInfo) -> Board {
        Board {
            info,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A usable cycle at `at` concluded `verdicts` over pairs whose ToR ×
    /// ToR loss is `matrix` and whose jobs are `jobs`.
    pub fn publish(&self, at: SystemTime, verdicts: Vec<Verdict>, matrix: Matrix, jobs: Roster) {
        let mut s = self.state();
        s.verdicts_at = Some(at);
        s.verdicts = verdicts;
        s.matrix = matrix;
        s.jobs = jobs;
    }

    /// Append a cycle to the history, dropping the oldest beyond
    /// [`HISTORY_CAP`].
    pub fn record(&self, entry: CycleEntry) {
        let mut s = self.state();
        while s.history.len() >= HISTORY_CAP {
            s.history.pop_front();
        }
        s.history.push_back(entry);
    }

    /// Everything the page shows, now.
    pub fn snapshot(&self) -> Snapshot {
        let s = self.state();
        Snapshot {
            info: self.info.clone(),
            now: Some(SystemTime::now()),
            verdicts_at: s.verdicts_at,
            verdicts: s.verdicts.clone(),
            matrix: s.matrix.clone(),
            jobs: s.jobs.clone(),
            history: s.history.iter().cloned().collect(),
        }
    }

    /// `/jobs`: the jobs of the last usable cycle as JSON (`at`: when it
    /// ended, Unix seconds; null before the first).
    pub fn jobs(&self) -> Reply {
        let s = self.state();
        let at = s
            .verdicts_at
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        let body = serde_json::json!({ "at": at, "jobs": s.jobs.jobs, "omitted": s.jobs.omitted });
        Reply::json(body.to_string())
            .with_header(CACHE_CONTROL, HeaderValue::from_static("no-store"))
    }

    /// The page, with its security policy, never cached (it is live).
    pub fn page(&self) -> Reply {
        Reply::new(
            StatusCode::OK,
            "text/html; charset=utf-8",
            render(&self.snapshot()),
        )
        .with_header(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP))
        .with_header(CACHE_CONTROL, HeaderValue::from_static("no-store"))
        .with_header(
            HeaderName::from_static("x-content-type-options"),
            HeaderValue::from_static("nosniff"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::online::metrics::CycleResult;

    fn entry(n: u64) -> CycleEntry {
        CycleEntry {
            at: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(n),
            result: CycleResult::Ok,
            pairs: Some((1, 0)),
            covered: (1, 1),
            firing: 0,
            events: vec![],
            events_dropped: 0,
        }
    }

    #[test]
    fn history_is_a_bounded_ring() {
        let b = Board::new(PageInfo::default());
        for n in 0..(HISTORY_CAP as u64 + 7) {
            b.record(entry(n));
        }
        let s = b.snapshot();
        assert_eq!(s.history.len(), HISTORY_CAP);
        assert_eq!(s.history[0], entry(7));
    }

    #[test]
    fn page_forbids_scripts() {
        let r = Board::new(PageInfo::default()).page();
        assert_eq!(r.content_type, "text/html; charset=utf-8");
        let csp = r
            .headers
            .iter()
            .find(|(k, _)| *k == CONTENT_SECURITY_POLICY)
            .map(|(_, v)| v.to_str().unwrap().to_string())
            .unwrap();
        assert!(csp.starts_with("default-src 'none'"));
        assert!(!csp.contains("script-src"));
        let body = String::from_utf8_lossy(&r.body);
        assert!(!body.contains("<script"));
    }
}
