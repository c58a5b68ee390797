//! Alerts for blamed components, posted to Alertmanager's v2 API.
//!
//! The alert life cycle is pure logic ([`AlertBook`], [`Outbox`]) so it can be
//! tested without a server: a finding starts an alert, every cycle re-posts it
//! with `endsAt` a little in the future (so Alertmanager resolves it by itself
//! if the localizer dies), and a finding that disappears is sent once more with
//! `endsAt` = the time it cleared. Resolved alerts wait in a per-Alertmanager
//! outbox until that Alertmanager has accepted them, so an outage loses no
//! alert; firing alerts need no queue because every cycle re-posts them.

use serde::Serialize;
use skeletonhunter_common::topology::{Component, Identity, Kind};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Name of every component alert the localizer sends.
pub const ALERT_NAME: &str = "SkeletonHunterComponentFaulty";

/// A blamed component as the localizer sees it this cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub component: Component,
    /// `loss`, `unreachable` or `latency`.
    pub symptom: String,
    /// Estimated failure probability (DESIGN `score`).
    pub score: f64,
    pub p_value: f64,
    /// Anomalous pairs that cross the component.
    pub pairs: usize,
    /// Components no observed pair can tell apart from this one.
    pub equivalent: Vec<Component>,
    /// Labels naming where the component sits (`tor`, `spine`, `host`, ...),
    /// so Alertmanager inhibition rules can match alerts beneath it.
    pub context: BTreeMap<String, String>,
    /// A few human-readable lines of evidence (worst pairs).
    pub evidence: Vec<String>,
    /// The anomalous pairs the fault explains (prober, responder); not
    /// posted, used to tell a new fault from leftovers of a cleared one.
    pub hit_pairs: Vec<(Identity, Identity)>,
}

/// Alertmanager identifies an alert by its label set; these are the labels
/// that can change between findings of one component.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AlertKey {
    pub kind: Kind,
    pub id: String,
    pub symptom: String,
}

impl Finding {
    pub fn key(&self) -> AlertKey {
        AlertKey {
            kind: self.component.kind,
            id: self.component.id.clone(),
            symptom: self.symptom.clone(),
        }
    }
}

/// One alert as `POST /api/v2/alerts` takes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostableAlert {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    #[serde(rename = "startsAt")]
    pub starts_at: String,
    #[serde(rename = "endsAt")]
    pub ends_at: String,
    #[serde(rename = "generatorURL", skip_serializing_if = "String::is_empty")]
    pub generator_url: String,
    /// Whether this is a resolution (not serialized; drives the outbox).
    #[serde(skip)]
    pub resolved: bool,
}

/// Severity for routing: an unreachable component or a lossy switch stalls
/// whole jobs (critical); latency, or loss on a single container, degrades
/// them (warning).
pub fn severity(kind: Kind, symptom: &str) -> &'static str {
    match symptom {
        "unreachable" => "critical",
        "latency" => "warning",
        _ if kind == Kind::Node => "warning",
        _ => "critical",
    }
}

/// Labels locating `component`, per the label convention of the shipped
/// rules and Alertmanager config: its own kind (`tor="<id>"`) and the pair
/// twins (`src_tor` = `dst_tor` = id), plus every kind above it (host, tor,
/// spine, pod, tenant) on which all nodes beneath the component agree. A ToR
/// alert thus carries `tor` (and `spine` when the ToR has one block), a node
/// alert its host, ToR, spine and tenant.
pub fn context_labels<'a>(
    component: &Component,
    nodes: impl IntoIterator<Item = &'a Identity>,
) -> BTreeMap<String, String> {
    let beneath: Vec<&Identity> = nodes
        .into_iter()
        .filter(|n| n.get(component.kind) == component.id)
        .collect();
    let mut out = BTreeMap::new();
    out.insert(component.kind.as_str().to_string(), component.id.clone());
    // Pair alerts locate both ends (`src_tor`, `dst_tor`, ...); carrying the
    // twins lets one inhibition rule per end match a component alert.
    if component.kind.is_path_component() {
        for side in ["src", "dst"] {
            out.insert(
                format!("{side}_{}", component.kind.as_str()),
                component.id.clone(),
            );
        }
    }
    if beneath.is_empty() {
        return out;
    }
    let rank = |k: Kind| Kind::ALL.iter().position(|x| *x == k).unwrap_or(0);
    for kind in Kind::ALL {
        if kind == component.kind {
            continue;
        }
        // Tenants are not network components: only endpoints belong to one.
        let above = rank(kind) > rank(component.kind)
            && (kind != Kind::Tenant || component.kind.is_path_component());
        if !above {
            continue;
        }
        let first = beneath[0].get(kind);
        if !first.is_empty() && beneath.iter().all(|n| n.get(kind) == first) {
            out.insert(kind.as_str().to_string(), first.to_string());
        }
    }
    out
}

/// Build the alert for a finding.
pub fn alert_for(
    f: &Finding,
    starts_at: SystemTime,
    ends_at: SystemTime,
    generator_url: &str,
    resolved: bool,
) -> PostableAlert {
    let mut labels = BTreeMap::new();
    // Context first so the fixed labels below always win a name clash.
    for (k, v) in &f.context {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert("alertname".into(), ALERT_NAME.into());
    labels.insert("kind".into(), f.component.kind.as_str().into());
    labels.insert("component".into(), f.component.id.clone());
    labels.insert(
        "severity".into(),
        severity(f.component.kind, &f.symptom).into(),
    );
    labels.insert("symptom".into(), f.symptom.clone());

    let mut annotations = BTreeMap::new();
    let what = match f.symptom.as_str() {
        "unreachable" => "is unreachable",
        "latency" => "adds latency",
        _ => "drops packets",
    };
    annotations.insert(
        "summary".into(),
        format!(
            "{} {} {what}: {} anomalous probe pair(s) cross it (score {:.2}, p-value {:.1e})",
            f.component.kind, f.component.id, f.pairs, f.score, f.p_value
        ),
    );
    let mut description = format!(
        "SkeletonHunter localized a {} fault to {} {} from {} anomalous skeleton probe pair(s).",
        f.symptom, f.component.kind, f.component.id, f.pairs
    );
    if !f.equivalent.is_empty() {
        let eq: Vec<String> = f.equivalent.iter().map(|c| c.to_string()).collect();
        description.push_str(&format!(
            " The probes cannot tell it apart from: {}.",
            eq.join(", ")
        ));
        annotations.insert("equivalent".into(), eq.join(","));
    }
    annotations.insert("description".into(), description);
    annotations.insert("pairs".into(), f.pairs.to_string());
    annotations.insert("score".into(), format!("{:.4}", f.score));
    annotations.insert("p_value".into(), format!("{:.3e}", f.p_value));
    if !f.evidence.is_empty() {
        annotations.insert("evidence".into(), f.evidence.join("\n"));
    }
    PostableAlert {
        labels,
        annotations,
        starts_at: rfc3339(starts_at),
        ends_at: rfc3339(ends_at),
        generator_url: generator_url.to_string(),
        resolved,
    }
}

#[derive(Debug, Clone)]
struct Active {
    starts_at: SystemTime,
    finding: Finding,
}

/// The alerts the localizer holds as firing, and the transitions between
/// cycles.
#[derive(Debug)]
pub struct AlertBook {
    active: BTreeMap<AlertKey, Active>,
    /// How far ahead `endsAt` of a firing alert is set.
    ttl: Duration,
    generator_url: String,
}

impl AlertBook {
    pub fn new(ttl: Duration, generator_url: &str) -> AlertBook {
        AlertBook {
            active: BTreeMap::new(),
            ttl,
            generator_url: generator_url.to_string(),
        }
    }

    /// Number of firing alerts.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Keys of the firing alerts.
    pub fn active_keys(&self) -> impl Iterator<Item = &AlertKey> {
        self.active.keys()
    }

    /// Apply the findings of a trusted cycle at `now`: new findings start
    /// alerts, known ones are refreshed (keeping their start), and alerts with
    /// no finding any more resolve with `endsAt = now`. Returns everything to
    /// post: all firing alerts plus the ones that just resolved.
    pub fn update(&mut self, findings: Vec<Finding>, now: SystemTime) -> Vec<PostableAlert> {
        let mut next: BTreeMap<AlertKey, Active> = BTreeMap::new();
        for f in findings {
            let key = f.key();
            let starts_at = self
                .active
                .get(&key)
                .map(|a| a.starts_at)
                .or_else(|| next.get(&key).map(|a| a.starts_at))
                .unwrap_or(now);
            next.insert(
                key,
                Active {
                    starts_at,
                    finding: f,
                },
            );
        }
        let mut out = Vec::new();
        for (key, old) in &self.active {
            if !next.contains_key(key) {
                // endsAt must not precede startsAt, even with clock steps.
                let ends = now.max(old.starts_at);
                out.push(alert_for(
                    &old.finding,
                    old.starts_at,
                    ends,
                    &self.generator_url,
                    true,
                ));
            }
        }
        self.active = next;
        out.extend(self.firing(now));
        out
    }

    /// The firing alerts, re-posted with `endsAt = now + ttl`. Used on its own
    /// when a cycle had no trustworthy data: the localizer neither raises nor
    /// clears anything it cannot see, it only keeps what it knew alive.
    pub fn firing(&self, now: SystemTime) -> Vec<PostableAlert> {
        self.active
            .values()
            .map(|a| {
                alert_for(
                    &a.finding,
                    a.starts_at,
                    now + self.ttl,
                    &self.generator_url,
                    false,
                )
            })
            .collect()
    }
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
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            pending: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

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
#[derive(Debug)]
pub struct PostError(pub String);

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PostError {}

/// Client for one Alertmanager.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    pub fn new(base: &str, timeout: Duration) -> anyhow::Result<Client> {
        let base = crate::prometheus::validate_base_url(base)?;
        let http = crate::prometheus::http_client(timeout)?;
        Ok(Client { base, http })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// `POST /api/v2/alerts`. An empty batch is not sent.
    pub async fn post(&self, alerts: &[PostableAlert]) -> Result<(), PostError> {
        if alerts.is_empty() {
            return Ok(());
        }
        let url = format!("{}/api/v2/alerts", self.base);
        let resp = self
            .http
            .post(&url)
            .json(alerts)
            .send()
            .await
            .map_err(|e| {
                PostError(format!(
                    "cannot reach {url}: {}",
                    crate::prometheus::error_chain(&e)
                ))
            })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body = resp.text().await.unwrap_or_default();
        let body: String = body.trim().chars().take(300).collect();
        Err(PostError(format!(
            "{url} rejected {} alert(s) with HTTP {}: {body}",
            alerts.len(),
            status.as_u16()
        )))
    }
}

/// RFC 3339 UTC timestamp with milliseconds, as Alertmanager expects.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
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

    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn finding(kind: Kind, id: &str, symptom: &str) -> Finding {
        Finding {
            component: Component::new(kind, id),
            symptom: symptom.into(),
            score: 0.9,
            p_value: 1e-9,
            pairs: 7,
            equivalent: vec![],
            context: BTreeMap::from([(kind.as_str().to_string(), id.to_string())]),
            evidence: vec!["a -> b: 30% loss".into()],
            hit_pairs: vec![],
        }
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

    #[test]
    fn alert_carries_design_labels_and_evidence() {
        let mut f = finding(Kind::Tor, "asw-1", "loss");
        f.equivalent = vec![Component::new(Kind::Nic, "10.0.0.1")];
        let a = alert_for(&f, t(100), t(140), "", false);
        assert_eq!(a.labels["alertname"], ALERT_NAME);
        assert!(a.labels["alertname"].starts_with("SkeletonHunter"));
        assert_eq!(a.labels["kind"], "tor");
        assert_eq!(a.labels["component"], "asw-1");
        assert_eq!(a.labels["tor"], "asw-1");
        assert_eq!(a.labels["severity"], "critical");
        assert_eq!(a.labels["symptom"], "loss");
        assert_eq!(a.annotations["pairs"], "7");
        assert_eq!(a.annotations["score"], "0.9000");
        assert_eq!(a.annotations["p_value"], "1.000e-9");
        assert_eq!(a.annotations["equivalent"], "nic/10.0.0.1");
        assert!(a.annotations["summary"].contains("tor asw-1 drops packets"));
        let json = serde_json::to_value(vec![a]).unwrap();
        assert_eq!(json[0]["startsAt"], "1970-01-01T00:01:40.000Z");
        assert_eq!(json[0]["endsAt"], "1970-01-01T00:02:20.000Z");
        assert!(json[0].get("generatorURL").is_none());
        assert!(json[0].get("resolved").is_none());
    }

    #[test]
    fn severity_follows_symptom_and_kind() {
        assert_eq!(severity(Kind::Node, "unreachable"), "critical");
        assert_eq!(severity(Kind::Spine, "latency"), "warning");
        assert_eq!(severity(Kind::Node, "loss"), "warning");
        assert_eq!(severity(Kind::Host, "loss"), "critical");
    }

    #[test]
    fn context_labels_keep_only_what_all_nodes_share() {
        let n = |node: &str, host: &str, tor: &str, spine: &str, tenant: &str| Identity {
            node: node.into(),
            host: host.into(),
            tor: tor.into(),
            spine: spine.into(),
            tenant: tenant.into(),
            ..Default::default()
        };
        let nodes = [
            n("a", "h1", "t1", "s1", "job1"),
            n("b", "h2", "t1", "s1", "job2"),
            n("c", "h3", "t2", "s1", "job1"),
        ];
        let tor = context_labels(&Component::new(Kind::Tor, "t1"), &nodes);
        assert_eq!(
            tor,
            BTreeMap::from([
                ("tor".into(), "t1".into()),
                ("src_tor".into(), "t1".into()),
                ("dst_tor".into(), "t1".into()),
                ("spine".into(), "s1".into())
            ])
        );
        let node = context_labels(&Component::new(Kind::Node, "a"), &nodes);
        assert_eq!(node["host"], "h1");
        assert_eq!(node["tor"], "t1");
        assert_eq!(node["tenant"], "job1");
        assert!(!node.contains_key("nic"), "unknown nic left out: {node:?}");
        assert_eq!(node["src_node"], "a");
        let spine = context_labels(&Component::new(Kind::Spine, "s1"), &nodes);
        assert_eq!(spine.len(), 3, "{spine:?}");
        let unknown = context_labels(&Component::new(Kind::Host, "hx"), &nodes);
        assert_eq!(unknown.len(), 3);
    }

    #[test]
    fn life_cycle_fires_reposts_and_resolves() {
        let mut book = AlertBook::new(Duration::from_secs(40), "http://loc/");
        // Cycle 1: a ToR fault appears.
        let out = book.update(vec![finding(Kind::Tor, "t1", "loss")], t(100));
        assert_eq!(out.len(), 1);
        assert!(!out[0].resolved);
        assert_eq!(out[0].starts_at, rfc3339(t(100)));
        assert_eq!(out[0].ends_at, rfc3339(t(140)));
        assert_eq!(out[0].generator_url, "http://loc/");
        // Cycle 2: still there: re-posted, same start, later end.
        let out = book.update(vec![finding(Kind::Tor, "t1", "loss")], t(110));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].starts_at, rfc3339(t(100)));
        assert_eq!(out[0].ends_at, rfc3339(t(150)));
        // No data: held, not resolved.
        let out = book.firing(t(120));
        assert_eq!(out.len(), 1);
        assert!(!out[0].resolved);
        // Cycle 3: cleared: one resolution with endsAt = now.
        let out = book.update(vec![], t(130));
        assert_eq!(out.len(), 1);
        assert!(out[0].resolved);
        assert_eq!(out[0].ends_at, rfc3339(t(130)));
        assert_eq!(book.active_len(), 0);
        // Cycle 4: nothing to say.
        assert!(book.update(vec![], t(140)).is_empty());
    }

    #[test]
    fn symptom_change_resolves_the_old_alert_and_fires_a_new_one() {
        let mut book = AlertBook::new(Duration::from_secs(40), "");
        book.update(vec![finding(Kind::Node, "n1", "loss")], t(0));
        let out = book.update(vec![finding(Kind::Node, "n1", "unreachable")], t(10));
        assert_eq!(out.len(), 2);
        assert!(out[0].resolved && out[0].labels["symptom"] == "loss");
        assert!(!out[1].resolved && out[1].labels["symptom"] == "unreachable");
        assert_eq!(out[1].starts_at, rfc3339(t(10)));
    }

    #[test]
    fn outbox_keeps_resolutions_until_delivered() {
        let mut book = AlertBook::new(Duration::from_secs(40), "");
        let mut outbox = Outbox::new(100);
        // Fires and clears while Alertmanager is down (never delivered).
        let cur = book.update(vec![finding(Kind::Tor, "t1", "loss")], t(0));
        assert_eq!(outbox.batch(&cur).len(), 1);
        let cur = book.update(vec![finding(Kind::Host, "h1", "loss")], t(10));
        let batch = outbox.batch(&cur);
        assert_eq!(batch.len(), 2, "resolution of t1 plus firing h1");
        assert_eq!(outbox.pending_len(), 1);
        // Still down next cycle: the resolution is offered again.
        let cur = book.update(vec![finding(Kind::Host, "h1", "loss")], t(20));
        let batch = outbox.batch(&cur);
        assert_eq!(batch.len(), 2);
        assert!(batch[0].resolved && batch[0].labels["component"] == "t1");
        // Back up: delivered, the queue empties.
        outbox.delivered();
        let cur = book.update(vec![finding(Kind::Host, "h1", "loss")], t(30));
        assert_eq!(outbox.batch(&cur).len(), 1);
    }

    #[test]
    fn outbox_drops_resolutions_superseded_by_firing_and_bounds_its_size() {
        let mut book = AlertBook::new(Duration::from_secs(40), "");
        let mut outbox = Outbox::new(2);
        let cur = book.update(vec![finding(Kind::Tor, "t1", "loss")], t(0));
        outbox.batch(&cur);
        let cur = book.update(vec![], t(10));
        outbox.batch(&cur);
        assert_eq!(outbox.pending_len(), 1);
        // Fires again before delivery: only the firing alert goes out.
        let cur = book.update(vec![finding(Kind::Tor, "t1", "loss")], t(20));
        let batch = outbox.batch(&cur);
        assert_eq!(batch.len(), 1);
        assert!(!batch[0].resolved);
        assert_eq!(outbox.pending_len(), 0);
        // Capacity 2: a third resolution evicts the oldest.
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let cur = book.update(vec![finding(Kind::Node, id, "loss")], t(30 + 20 * i as u64));
            outbox.batch(&cur);
            let cur = book.update(vec![], t(40 + 20 * i as u64));
            outbox.batch(&cur);
        }
        assert_eq!(outbox.pending_len(), 2);
        assert!(outbox.dropped >= 1);
    }
}
