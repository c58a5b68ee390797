//! Unit tests of the alert life cycle and the outbox it feeds.

use super::*;
use crate::clients::alertmanager::Outbox;
use std::time::UNIX_EPOCH;

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn finding(kind: Kind, id: &str, symptom: &str) -> Finding {
    Finding {
        component: Component::new(kind, id),
        symptom: match symptom {
            "loss" => Symptom::Loss,
            "unreachable" => Symptom::Unreachable,
            _ => Symptom::Latency,
        },
        score: 0.9,
        p_value: 1e-9,
        pairs: 7,
        equivalent: vec![],
        context: BTreeMap::from([(kind.label_name().to_string(), id.to_string())]),
        evidence: vec!["a -> b: 30% loss".into()],
        jobs: Vec::new(),
        hit_pairs: vec![],
        layer: None,
    }
}

/// A book whose alerts end 40 s after their last post, without links.
fn book() -> AlertBook {
    AlertBook::new(Duration::from_secs(40), AlertLinks::default())
}

/// A book in which `id` of `kind` went from loss (at 0 s) to unreachable
/// (at 10 s), and what that second cycle posted.
fn escalated(kind: Kind, id: &str) -> (AlertBook, Vec<PostableAlert>) {
    let mut book = book();
    book.update(vec![finding(kind, id, "loss")], t(0));
    let out = book.update(vec![finding(kind, id, "unreachable")], t(10));
    (book, out)
}

fn links(generator_url: &str) -> AlertLinks {
    AlertLinks {
        generator_url: generator_url.into(),
        ..AlertLinks::default()
    }
}

#[test]
fn an_alert_names_the_jobs_it_hurts_and_none_when_there_are_none() {
    let mut f = finding(Kind::Tor, "t1", "loss");
    let a = alert_for(&f, f.symptom, t(1), t(2), &AlertLinks::default(), false);
    assert!(!a.annotations.contains_key("jobs"), "{:?}", a.annotations);
    let job = |name: &str, under, hit| crate::jobs::impact::JobImpact {
        job: name.into(),
        ranks_under: under,
        spans_under: String::new(),
        ranks_hit: hit,
        ranks: 64,
        pairs_hit: hit,
        pairs: 128,
        groups_under: None,
        under: Vec::new(),
    };
    f.jobs = (0..7)
        .map(|i| job(&format!("job-{i}"), 8 - i, 24 - i))
        .collect();
    let a = alert_for(&f, f.symptom, t(1), t(2), &AlertLinks::default(), false);
    let jobs = &a.annotations["jobs"];
    assert!(
        jobs.starts_with("job-0: 8 of 64 ranks under it, 24 hit (24 of 128 pairs); job-1: 7 of 64"),
        "{jobs}"
    );
    assert!(jobs.ends_with("; +2 more jobs"), "{jobs}");
    assert!(a.annotations["description"].contains("Jobs hurt: job-0: 8 of 64"));
}

#[test]
fn alert_links_to_its_runbook_section_and_dashboard() {
    let f = finding(Kind::Spine, "s1", "loss");
    let a = alert_for(&f, f.symptom, t(1), t(2), &AlertLinks::default(), false);
    assert_eq!(
        a.annotations["runbook_url"],
        format!("{DEFAULT_RUNBOOK_URL}#skeletonhuntercomponentfaulty-spine")
    );
    assert_eq!(a.annotations["dashboard_url"], "/d/skeletonhunter-fabric");
    let custom = AlertLinks {
        generator_url: String::new(),
        runbook_base: "https://wiki.example/sh/runbooks.html".into(),
        grafana_base: "https://grafana.example/".into(),
    };
    let a = alert_for(&f, f.symptom, t(1), t(2), &custom, true);
    assert_eq!(
        a.annotations["runbook_url"],
        "https://wiki.example/sh/runbooks.html#skeletonhuntercomponentfaulty-spine"
    );
    assert_eq!(
        a.annotations["dashboard_url"],
        "https://grafana.example/d/skeletonhunter-fabric"
    );
}

#[test]
fn alert_carries_design_labels_and_evidence() {
    let mut f = finding(Kind::Tor, "asw-1", "loss");
    f.equivalent = vec![Component::new(Kind::Nic, "10.0.0.1")];
    let a = alert_for(&f, f.symptom, t(100), t(140), &AlertLinks::default(), false);
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
    assert_eq!(
        severity(Kind::Node, Symptom::Unreachable).as_str(),
        "critical"
    );
    assert_eq!(severity(Kind::Spine, Symptom::Latency).as_str(), "warning");
    assert_eq!(severity(Kind::Node, Symptom::Loss).as_str(), "warning");
    assert_eq!(severity(Kind::Host, Symptom::Loss).as_str(), "critical");
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
    assert_eq!(node["node_id"], "a");
    assert_eq!(node["src_node"], "a");
    assert!(
        !node.contains_key("node"),
        "no Kubernetes target label: {node:?}"
    );
    let spine = context_labels(&Component::new(Kind::Spine, "s1"), &nodes);
    assert_eq!(spine.len(), 3, "{spine:?}");
    let unknown = context_labels(&Component::new(Kind::Host, "hx"), &nodes);
    assert_eq!(unknown.len(), 3);
}

#[test]
fn life_cycle_fires_reposts_and_resolves() {
    let mut book = AlertBook::new(Duration::from_secs(40), links("http://loc/"));
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
fn escalation_within_a_severity_keeps_one_alert() {
    let (_, out) = escalated(Kind::Tor, "t1");
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(!out[0].resolved);
    // The identity is the one it fired with; the news is in annotations.
    assert_eq!(out[0].labels["symptom"], "loss");
    assert_eq!(out[0].labels["severity"], "critical");
    assert_eq!(out[0].annotations["symptom"], "unreachable");
    assert!(out[0].annotations["summary"].contains("is unreachable"));
    assert_eq!(out[0].starts_at, rfc3339(t(0)));
}

#[test]
fn a_severity_raise_adds_an_alert_and_the_incident_ends_as_a_whole() {
    let (mut book, out) = escalated(Kind::Node, "n1");
    // The warning is not resolved (that would be a false all-clear); a
    // critical alert joins it.
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out.iter().all(|a| !a.resolved));
    let crit: Vec<_> = out
        .iter()
        .filter(|a| a.labels["severity"] == "critical")
        .collect();
    assert_eq!(crit.len(), 1);
    assert_eq!(crit[0].labels["symptom"], "unreachable");
    assert_eq!(crit[0].starts_at, rfc3339(t(10)));
    // Both end together.
    let out = book.update(vec![], t(20));
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|a| a.resolved));
}

#[test]
fn two_symptoms_of_one_severity_are_one_alert_showing_the_worse() {
    let mut book = book();
    let out = book.update(
        vec![
            finding(Kind::Node, "n1", "latency"),
            finding(Kind::Node, "n1", "loss"),
        ],
        t(0),
    );
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].annotations["symptom"], "loss");
    assert_eq!(out[0].labels["symptom"], "loss");
}

#[test]
fn outbox_keeps_resolutions_until_delivered() {
    let mut book = book();
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
    let mut book = book();
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

#[test]
fn a_component_found_flapping_resolves_its_alert_and_starts_a_flapping_one() {
    let mut book = AlertBook::new(Duration::from_secs(30), AlertLinks::default());
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let host = |s: Symptom| {
        let mut f = finding(Kind::Host, "h1", "unreachable");
        f.symptom = s;
        f
    };
    let posted = book.update(vec![host(Symptom::Unreachable)], t0);
    assert_eq!(posted.len(), 1);
    let t1 = t0 + Duration::from_secs(20);
    let posted = book.update(vec![host(Symptom::Flapping)], t1);
    let view: Vec<(&str, bool)> = posted
        .iter()
        .map(|a| (a.labels["symptom"].as_str(), a.resolved))
        .collect();
    assert_eq!(view, [("unreachable", true), ("flapping", false)]);
    assert_eq!(posted[1].starts_at, rfc3339(t1));
    assert_eq!(posted[1].labels["severity"], "critical");
    assert!(posted[1].annotations["summary"].contains("is flapping"));
    // It stays one flapping alert, whatever it is found as next.
    let posted = book.update(vec![host(Symptom::Flapping)], t1 + Duration::from_secs(1));
    assert_eq!(posted.len(), 1);
    assert!(!posted[0].resolved);
    assert_eq!(posted[0].starts_at, rfc3339(t1));
}

/// A verdict of a two-plane cycle says its layer and why; a one-plane
/// verdict says nothing of layers.
#[test]
fn alert_names_the_layer_of_a_two_plane_verdict() {
    use crate::engine::planes::{Basis, Layer, LayerNote};
    use skeletonhunter_common::topology::Plane;
    let mut f = finding(Kind::Vswitch, "host-3", "loss");
    let plain = alert_for(&f, f.symptom, t(100), t(140), &AlertLinks::default(), false);
    assert!(!plain.annotations.contains_key("layer"));
    f.layer = Some(LayerNote {
        layer: Layer::Overlay,
        basis: Basis::UnderlayClean,
        planes: vec![Plane::Overlay],
    });
    let a = alert_for(&f, f.symptom, t(100), t(140), &AlertLinks::default(), false);
    assert_eq!(a.labels["kind"], "vswitch");
    assert_eq!(a.annotations["layer"], "overlay");
    assert_eq!(a.annotations["layer_basis"], "underlay_clean");
    assert!(
        a.annotations["description"].contains("Layer: overlay (the container probes show it"),
        "{}",
        a.annotations["description"]
    );
}
