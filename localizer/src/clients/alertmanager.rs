//! Alertmanager's v2 API: the alert as it is posted, the client, and the
//! per-Alertmanager outbox that keeps resolutions until they are accepted;
//! the posting itself is a method of [`Endpoint`].
//!
//! Firing alerts need no queue because every cycle re-posts them; a
//! resolution is sent once, so it waits in the [`Outbox`] of each
//! Alertmanager until that one has accepted it and an outage loses no
//! alert. What to alert on is decided in [`crate::online::alerts`].

use super::endpoint::{auth_hint, Endpoint};
use super::http::{body_start, error_chain};
use serde::Serialize;
use skeletonhunter_common::civil::civil_from_days;
use std::collections::{BTreeMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

/// One alert as `POST /api/v2/alerts` takes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostableAlert {
    /// Identifying labels (alertname, kind, component, symptom, context).
    pub labels: BTreeMap<String, String>,
    /// Summary, description, evidence, score.
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339 start of the fault.
    #[serde(rename = "startsAt")]
    pub starts_at: String,
    /// RFC 3339 time Alertmanager resolves it without a re-post.
    #[serde(rename = "endsAt")]
    pub ends_at: String,
    /// Link shown with the alert (empty: left out).
    #[serde(rename = "generatorURL", skip_serializing_if = "String::is_empty")]
    pub generator_url: String,
    /// Whether this is a resolution (not serialized; drives the outbox).
    #[serde(skip)]
    pub resolved: bool,
}

/// Per-Alertmanager delivery state: resolutions not yet accepted.
#[derive(Debug)]
pub struct Outbox {
    pending: VecDeque<PostableAlert>,
    capacity: usize,
    /// Resolutions dropped because the queue was full (oldest first).
    pub dropped: u64,
}

impl Outbox {
    /// An empty outbox keeping at most `capacity` resolutions.
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            pending: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// Resolutions waiting for this Alertmanager.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The batch to post now: queued resolutions (unless the same alert is
    /// firing again in `current`, which supersedes them) followed by
    /// `current`. New resolutions in `current` join the queue until
    /// [`Outbox::delivered`] is called.
    pub fn batch(&mut self, current: &[PostableAlert]) -> Vec<PostableAlert> {
        let firing_again =
            |a: &PostableAlert| current.iter().any(|c| !c.resolved && c.labels == a.labels);
        self.pending.retain(|a| !firing_again(a));
        for a in current.iter().filter(|a| a.resolved) {
            self.pending.retain(|p| p.labels != a.labels);
            if self.pending.len() >= self.capacity {
                self.pending.pop_front();
                self.dropped += 1;
            }
            self.pending.push_back(a.clone());
        }
        let mut out: Vec<PostableAlert> = self.pending.iter().cloned().collect();
        out.extend(current.iter().filter(|a| !a.resolved).cloned());
        out
    }

    /// The last batch was accepted: forget the resolutions it carried.
    pub fn delivered(&mut self) {
        self.pending.clear();
    }
}

/// Why posting to Alertmanager failed.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// No HTTP answer (refused, timeout, DNS, ...).
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// The flattened error chain.
        reason: String,
    },
    /// Alertmanager answered with a non-success status.
    #[error("{url} rejected {count} alert(s) with HTTP {status}{}: {body}", auth_hint(*status))]
    Rejected {
        /// The endpoint.
        url: String,
        /// Alerts in the refused batch.
        count: usize,
        /// The HTTP status.
        status: u16,
        /// The start of the body, for the log.
        body: String,
    },
}

/// Alertmanager's API on an [`Endpoint`].
impl Endpoint {
    /// `POST /api/v2/alerts`. An empty batch is not sent.
    pub async fn post_alerts(&self, alerts: &[PostableAlert]) -> Result<(), PostError> {
        if alerts.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.timeout();
        let (url, req) = self.post("/api/v2/alerts");
        let unreachable = |reason: String| PostError::Unreachable {
            url: url.clone(),
            reason,
        };
        let mut resp = req
            .map_err(&unreachable)?
            .json(alerts)
            .send()
            .await
            .map_err(|e| unreachable(error_chain(&e)))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        // Only the start of a refusal is read: a huge or endless error
        // body costs neither memory nor more than the request's deadline.
        let body = body_start(&mut resp, 1200, deadline).await;
        Err(PostError::Rejected {
            url,
            count: alerts.len(),
            status: status.as_u16(),
            body: rejection_text(&body),
        })
    }
}

/// A refusal's body for the log: one trimmed line of at most 300 characters.
pub fn rejection_text(body: &str) -> String {
    body.trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect()
}

/// RFC 3339 UTC timestamp with milliseconds, as Alertmanager expects.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_795_000_000_123)),
            "2026-11-18T11:06:40.123Z"
        );
    }
}
