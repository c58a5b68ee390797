//! Alerts for blamed components: what a finding is, how it becomes an
//! Alertmanager alert, and the life cycle between cycles.
//!
//! The life cycle is pure logic ([`AlertBook`]) so it is tested without a
//! server: a finding starts an alert, every cycle re-posts it with `endsAt`
//! a little in the future (so Alertmanager resolves it by itself if the
//! localizer dies), and a finding that disappears is sent once more with
//! `endsAt` = the time it cleared. Delivery (and the queue of resolutions
//! per Alertmanager) is [`crate::clients::alertmanager`]'s.

use crate::clients::alertmanager::{rfc3339, PostableAlert};
use crate::engine::model::Symptom;
use crate::engine::planes::LayerNote;
use crate::jobs::impact::{summary, JobImpact};
use skeletonhunter_common::topology::{Component, Identity, Kind};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Most jobs kept per finding (metrics series and the status page); the
/// alert's annotation names the first [`JOBS_ANNOTATED`].
pub const MAX_JOBS: usize = 20;

/// Jobs named in the `jobs` annotation (the rest are counted).
const JOBS_ANNOTATED: usize = 5;

/// Name of every component alert the localizer sends.
pub const ALERT_NAME: &str = "SkeletonHunterComponentFaulty";

/// Default of `--runbook-url`: docs/runbooks.md in the project's repository
/// (the `repository` of Cargo.toml).
pub const DEFAULT_RUNBOOK_URL: &str =
    "https://github.com/skeletonhunter/skeletonhunter/blob/main/docs/runbooks.md";

/// Uid of the dashboard a component alert links to (dashboards/*.json).
pub const DASHBOARD_UID: &str = "skeletonhunter-fabric";

/// Where an alert's links point, so an operator lands on the right runbook
/// section and dashboard from the notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertLinks {
    /// `generatorURL` of the alerts ("" leaves it out).
    pub generator_url: String,
    /// docs/runbooks.md as operators read it; a section anchor is appended.
    pub runbook_base: String,
    /// Grafana root; "" gives a path relative to the Grafana the operator uses.
    pub grafana_base: String,
}

impl Default for AlertLinks {
    fn default() -> Self {
        AlertLinks {
            generator_url: String::new(),
            runbook_base: DEFAULT_RUNBOOK_URL.to_string(),
            grafana_base: String::new(),
        }
    }
}

impl AlertLinks {
    /// The runbook section of a `kind` component alert.
    pub fn runbook_url(&self, kind: Kind) -> String {
        format!(
            "{}#{}",
            self.runbook_base.trim_end_matches('#'),
            runbook_anchor(kind)
        )
    }

    /// The dashboard of component alerts.
    pub fn dashboard_url(&self) -> String {
        format!(
            "{}/d/{DASHBOARD_UID}",
            self.grafana_base.trim_end_matches('/')
        )
    }
}

/// The docs/runbooks.md heading anchor of a `kind` component alert: one
/// section per kind under the alert's (GitHub's anchor of the heading
/// "SkeletonHunterComponentFaulty tor" is `skeletonhuntercomponentfaulty-tor`).
pub fn runbook_anchor(kind: Kind) -> String {
    format!("{}-{}", ALERT_NAME.to_lowercase(), kind.as_str())
}

/// A blamed component as the localizer sees it this cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The blamed component.
    pub component: Component,
    /// What it does to the probes.
    pub symptom: Symptom,
    /// Estimated failure probability (the engine's `score`).
    pub score: f64,
    /// The engine's p-value of the verdict.
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
    /// The jobs the component hurts, most ranks hit first (at most
    /// [`MAX_JOBS`]).
    pub jobs: Vec<JobImpact>,
    /// The anomalous pairs the fault explains (prober, responder); not
    /// posted, used to tell a new fault from leftovers of a cleared one.
    pub hit_pairs: Vec<(Identity, Identity)>,
    /// Which network it is on, when both planes were probed.
    pub layer: Option<LayerNote>,
}

/// Alertmanager identifies an alert by its label set. One incident of a
/// component is one alert per severity it reached: the symptom is not part
/// of the identity (a ToR whose loss turns into an outage stays one alert),
/// the severity is (a container whose loss becomes unreachable is paged, on
/// top of the ticket it already has). See docs/localizer-online.md.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AlertKey {
    /// The component's kind.
    pub kind: Kind,
    /// The component's id.
    pub id: String,
    /// The alert's severity.
    pub severity: Severity,
}

impl Finding {
    /// The identity of this finding's alert.
    pub fn key(&self) -> AlertKey {
        AlertKey {
            kind: self.component.kind,
            id: self.component.id.clone(),
            severity: severity(self.component.kind, self.symptom),
        }
    }
}

/// How bad a symptom is, to pick one when a component shows several.
pub(crate) fn symptom_rank(s: Symptom) -> u8 {
    match s {
        // The host's own stack, not the network: any network symptom of
        // the same component says more.
        Symptom::HostStack => 0,
        Symptom::Latency => 1,
        Symptom::Loss => 2,
        Symptom::Unreachable => 3,
        Symptom::Flapping => 4,
    }
}

/// Whether a finding with `symptom` ends an alert opened with `opened` and
/// starts another: a component found flapping is a new incident (see
/// `flapping.rs`), the alert of its first outage resolves.
fn supersedes(symptom: Symptom, opened: Symptom) -> bool {
    symptom == Symptom::Flapping && opened != Symptom::Flapping
}

skeletonhunter_common::labelled_enum! {
    /// The `severity` label, for routing.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Severity {
        /// Stalls whole jobs.
        Critical,
        /// Degrades them.
        Warning,
    }
}

/// Severity for routing: an unreachable component or a lossy or flapping
/// switch, host or link stalls whole jobs (critical); latency, loss or
/// flapping on a single container, or a busy host stack, degrades them
/// (warning).
pub fn severity(kind: Kind, symptom: Symptom) -> Severity {
    match symptom {
        Symptom::Unreachable => Severity::Critical,
        Symptom::Latency | Symptom::HostStack => Severity::Warning,
        Symptom::Loss | Symptom::Flapping if kind == Kind::Node => Severity::Warning,
        Symptom::Loss | Symptom::Flapping => Severity::Critical,
    }
}

/// Labels locating `component`, per the label convention of the shipped
/// rules and Alertmanager config: its own kind under its label name
/// (`tor="<id>"`, `node_id="<id>"`, see `Kind::label_name`) and the pair
/// twins (`src_tor` = `dst_tor` = id), plus every kind above it (host, tor,
/// spine, network_pod, tenant) on which all nodes beneath the component
/// agree. A ToR alert thus carries `tor` (and `spine` when the ToR has one
/// block), a node alert its host, ToR, spine and tenant.
pub fn context_labels<'a>(
    component: &Component,
    nodes: impl IntoIterator<Item = &'a Identity>,
) -> BTreeMap<String, String> {
    let beneath: Vec<&Identity> = nodes
        .into_iter()
        .filter(|n| n.get(component.kind) == component.id)
        .collect();
    let mut out = BTreeMap::new();
    out.insert(
        component.kind.label_name().to_string(),
        component.id.clone(),
    );
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
            out.insert(kind.label_name().to_string(), first.to_string());
        }
    }
    out
}

/// Build the alert for a finding, in the incident `opened` with that
/// symptom: the `symptom` and `severity` labels are the opening symptom's
/// (they are the alert's identity), the annotations describe `f` as it is
/// now, its current symptom in the `symptom` annotation.
pub fn alert_for(
    f: &Finding,
    opened: Symptom,
    starts_at: SystemTime,
    ends_at: SystemTime,
    links: &AlertLinks,
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
        severity(f.component.kind, opened).as_str().into(),
    );
    labels.insert("symptom".into(), opened.as_str().into());

    let mut annotations = BTreeMap::new();
    annotations.insert("symptom".into(), f.symptom.as_str().into());
    let what = match f.symptom {
        Symptom::Unreachable => "is unreachable",
        Symptom::Latency => "adds latency",
        Symptom::Loss => "drops packets",
        Symptom::Flapping => "is flapping (its fault comes and goes)",
        Symptom::HostStack => "is busy: its own stack delays probes (not a network fault)",
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
        let eq: Vec<String> = f
            .equivalent
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        description.push_str(&format!(
            " The probes cannot tell it apart from: {}.",
            eq.join(", ")
        ));
        annotations.insert("equivalent".into(), eq.join(","));
    }
    if let Some(n) = &f.layer {
        annotate_layer(n, &mut description, &mut annotations);
    }
    if !f.jobs.is_empty() {
        let jobs = summary(&f.jobs, JOBS_ANNOTATED);
        description.push_str(&format!(" Jobs hurt: {jobs}."));
        annotations.insert("jobs".into(), jobs);
    }
    annotations.insert("description".into(), description);
    annotations.insert("pairs".into(), f.pairs.to_string());
    annotations.insert("score".into(), format!("{:.4}", f.score));
    annotations.insert("p_value".into(), format!("{:.3e}", f.p_value));
    if !f.evidence.is_empty() {
        annotations.insert("evidence".into(), f.evidence.join("\n"));
    }
    annotations.insert("runbook_url".into(), links.runbook_url(f.component.kind));
    annotations.insert("dashboard_url".into(), links.dashboard_url());
    PostableAlert {
        labels,
        annotations,
        starts_at: rfc3339(starts_at),
        ends_at: rfc3339(ends_at),
        generator_url: links.generator_url.clone(),
        resolved,
    }
}

/// The layer of a two-plane verdict: annotations `layer` and `layer_basis`,
/// and the reason in words in the description.
fn annotate_layer(
    n: &LayerNote,
    description: &mut String,
    annotations: &mut BTreeMap<String, String>,
) {
    description.push_str(&format!(
        " Layer: {} ({}).",
        n.layer.as_str(),
        n.basis.explain()
    ));
    annotations.insert("layer".into(), n.layer.as_str().into());
    annotations.insert("layer_basis".into(), n.basis.as_str().into());
}

#[derive(Debug, Clone)]
struct Active {
    starts_at: SystemTime,
    /// The symptom the alert fired with (its `symptom` label).
    opened: Symptom,
    finding: Finding,
}

/// The alerts the localizer holds as firing, and the transitions between
/// cycles.
#[derive(Debug)]
pub struct AlertBook {
    active: BTreeMap<AlertKey, Active>,
    /// How far ahead `endsAt` of a firing alert is set.
    ttl: Duration,
    links: AlertLinks,
}

impl AlertBook {
    /// Firing alerts get `endsAt = now + ttl`; `links` are their links.
    pub fn new(ttl: Duration, links: AlertLinks) -> AlertBook {
        AlertBook {
            active: BTreeMap::new(),
            ttl,
            links,
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

    /// The firing alerts as (key, symptom label), for the metrics.
    pub fn active_alerts(&self) -> impl Iterator<Item = (&AlertKey, Symptom)> {
        self.active.iter().map(|(k, a)| (k, a.opened))
    }

    /// The firing alerts' latest findings, for the job impact series.
    pub fn active_findings(&self) -> impl Iterator<Item = &Finding> {
        self.active.values().map(|a| &a.finding)
    }

    /// Apply the findings of a trusted cycle at `now`: new findings start
    /// alerts, known ones are refreshed (keeping their start and opening
    /// symptom), an alert of a severity the component no longer shows stays
    /// while the component alerts at all (an incident ends as a whole), and
    /// alerts of components with no finding any more resolve with
    /// `endsAt = now`; so do the other alerts of a component found
    /// flapping, which starts a `flapping` alert. Returns everything to post: all firing alerts plus the
    /// ones that just resolved.
    pub fn update(&mut self, findings: Vec<Finding>, now: SystemTime) -> Vec<PostableAlert> {
        let mut next: BTreeMap<AlertKey, Active> = BTreeMap::new();
        let mut worst: BTreeMap<(Kind, String), Finding> = BTreeMap::new();
        for f in findings {
            let comp = (f.component.kind, f.component.id.clone());
            if worst
                .get(&comp)
                .is_none_or(|w| symptom_rank(f.symptom) > symptom_rank(w.symptom))
            {
                worst.insert(comp, f.clone());
            }
            let key = f.key();
            if let Some(a) = next.get_mut(&key) {
                if symptom_rank(f.symptom) > symptom_rank(a.finding.symptom) {
                    if !self.active.contains_key(&key) {
                        a.opened = f.symptom;
                    }
                    a.finding = f;
                }
                continue;
            }
            let old = self
                .active
                .get(&key)
                .filter(|a| !supersedes(f.symptom, a.opened));
            next.insert(
                key,
                Active {
                    starts_at: old.map_or(now, |a| a.starts_at),
                    opened: old.map_or(f.symptom, |a| a.opened),
                    finding: f,
                },
            );
        }
        let mut out = Vec::new();
        for (key, old) in &self.active {
            let superseded = |s: Symptom| supersedes(s, old.opened);
            match next.get(key) {
                Some(n) if !superseded(n.opened) => continue,
                Some(_) => {}
                None => match worst.get(&(key.kind, key.id.clone())) {
                    Some(w) if !superseded(w.symptom) => {
                        let mut kept = old.clone();
                        kept.finding = w.clone();
                        next.insert(key.clone(), kept);
                        continue;
                    }
                    _ => {}
                },
            }
            // endsAt must not precede startsAt, even with clock steps.
            let ends = now.max(old.starts_at);
            out.push(self.post(old, ends, true));
        }
        self.active = next;
        out.extend(self.firing(now));
        out
    }

    fn post(&self, a: &Active, ends_at: SystemTime, resolved: bool) -> PostableAlert {
        alert_for(
            &a.finding,
            a.opened,
            a.starts_at,
            ends_at,
            &self.links,
            resolved,
        )
    }

    /// The firing alerts, re-posted with `endsAt = now + ttl`. Used on its own
    /// when a cycle had no trustworthy data: the localizer neither raises nor
    /// clears anything it cannot see, it only keeps what it knew alive.
    pub fn firing(&self, now: SystemTime) -> Vec<PostableAlert> {
        self.active
            .values()
            .map(|a| self.post(a, now + self.ttl, false))
            .collect()
    }
}

#[cfg(test)]
mod tests;
