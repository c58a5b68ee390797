//! The shipped Alertmanager config on a real Alertmanager: inhibition
//! silences exactly what lies beneath a faulty ToR or spine, and the
//! notifications carry the evidence through the shipped templates.

use anyhow::Result;
use serde_json::{json, Map, Value};
use skeletonhunter_tools::servers::{self, ServerOpts};
use skeletonhunter_tools::sink::{json_strings, Sink};
use std::time::Duration;

/// Post alerts to a real Alertmanager running the shipped config and
/// check that inhibition silences exactly what it should, then that the
/// notifications carry the evidence through the templates and that nothing
/// is sent for a silenced alert.
#[test]
fn alertmanager_inhibits_alerts_beneath_a_faulty_tor_or_spine() -> Result<()> {
    let sink = Sink::start()?;
    let root = servers::repo_root();
    let config = std::fs::read_to_string(root.join("alertmanager/alertmanager.yml"))?
        // Point the placeholder receivers at the sink; notify quickly.
        .replace("127.0.0.1:9095", &sink.addr.to_string())
        .replace("group_wait: 10s", "group_wait: 1s")
        .replace("group_wait: 30s", "group_wait: 1s");
    assert!(
        config.contains(&sink.addr.to_string()),
        "placeholder URL changed?"
    );
    let mut opts = ServerOpts::new(servers::free_loopback_addr()?, &config);
    for entry in std::fs::read_dir(root.join("alertmanager/templates"))? {
        let p = entry?.path();
        let name = format!("templates/{}", p.file_name().unwrap().to_string_lossy());
        opts = opts.copy_file(&name, &p)?;
    }
    let am = servers::start_alertmanager(opts)?;
    am.post_alerts(&fabric_alerts())?;

    let suppressed_want: std::collections::BTreeSet<&str> = [
        "tor-t1-rule", // deduplicated: the localizer's own alert is active
        "node-a",
        "host-h2",
        "exporter-h1",
        "pair-a-c",
        "pair-c-a",
        "node-e",
        "loss-c-d",
    ]
    .into_iter()
    .collect();
    let active_want: std::collections::BTreeSet<&str> = [
        "tor-t1",
        "node-c",
        "pair-c-d",
        "pair-x-y",
        "spine-s2",
        "spine-s3-latency",
        "tor-t6-latency",
        "node-f",
        "host-h7",
    ]
    .into_iter()
    .collect();

    // Inhibition is computed as alerts arrive; poll briefly for all to land.
    let (suppressed, active) = skeletonhunter_tools::wait_until(
        "Alertmanager to hold every posted alert with its final state",
        Duration::from_secs(10),
        Duration::from_millis(200),
        || {
            let alerts = am.alerts().ok()?;
            let mut s = std::collections::BTreeSet::new();
            let mut a = std::collections::BTreeSet::new();
            for al in &alerts {
                let id = al["labels"]["test_id"].as_str()?.to_string();
                match al["status"]["state"].as_str()? {
                    "suppressed" => s.insert(id),
                    "active" => a.insert(id),
                    _ => return None,
                };
            }
            let done = s.len() == suppressed_want.len() && a.len() == active_want.len();
            done.then_some((s, a))
        },
    )
    .or_else(|e| -> Result<_> {
        anyhow::bail!("{e:#}; Alertmanager holds: {:#?}", am.alerts()?)
    })?;
    let suppressed: std::collections::BTreeSet<&str> =
        suppressed.iter().map(String::as_str).collect();
    let active: std::collections::BTreeSet<&str> = active.iter().map(String::as_str).collect();
    assert_eq!(suppressed, suppressed_want, "suppressed alerts");
    assert_eq!(active, active_want, "active alerts");

    // Notifications: node c (compute page) carries its evidence; node a,
    // silenced, is never sent.
    let posts = skeletonhunter_tools::wait_until(
        "notifications for node c and ToR t1",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || {
            let p = sink.posts();
            let has = |path: &str, what: &str| {
                p.iter()
                    .any(|(pa, b)| pa.ends_with(path) && json_strings(b).contains(what))
            };
            (has("/slack", "node c")
                && has("/slack", "tor t1")
                && has("/slack", "pair c->d")
                && has("/compute-page", "\"c\""))
            .then_some(p)
        },
    )?;
    // Give a straggling (wrong) notification for a silenced alert time to arrive.
    std::thread::sleep(Duration::from_secs(2));
    let posts = [posts, sink.posts()].concat();
    let slack_text: Vec<String> = posts
        .iter()
        .filter(|(p, _)| p.ends_with("/slack"))
        .map(|(_, b)| {
            let v: Value = serde_json::from_str(b).unwrap_or_default();
            v["attachments"][0]["text"]
                .as_str()
                .unwrap_or(b)
                .to_string()
        })
        .collect();
    let tor_text = slack_text
        .iter()
        .find(|t| t.contains("tor t1"))
        .expect("a notification for tor t1");
    println!("tor t1 notification:\n{tor_text}");
    for want in [
        "score 0.9300",
        "p-value 1.000e-9",
        "anomalous pairs 17",
        "indistinguishable from: nic/10.0.3.1",
        "a->c loss 31%",
        "ToR t1",
        "runbook: https://example.org/runbooks.md#skeletonhuntercomponentfaulty-tor",
        "dashboard: /d/skeletonhunter-fabric",
    ] {
        assert!(
            tor_text.contains(want),
            "tor t1 notification lacks {want:?}:\n{tor_text}"
        );
    }
    let node_text = slack_text
        .iter()
        .find(|t| t.contains("node c"))
        .expect("a notification for node c");
    for want in ["score 0.8100", "b->c lost 100%", "host h3", "ToR t2"] {
        assert!(
            node_text.contains(want),
            "node c notification lacks {want:?}:\n{node_text}"
        );
    }
    // A pair alert says where both ends are.
    assert!(
        slack_text
            .iter()
            .any(|t| t.contains("where: from c (ToR t2) to d (ToR t2)")),
        "no pair c->d notification with its location: {slack_text:#?}"
    );
    for (path, body) in &posts {
        // Label values of silenced alerts never appear as a whole string
        // (webhook payloads carry every label of every alert notified).
        let strings = json_strings(body);
        for silenced in [
            "node a is unreachable",
            "a->c",
            "c->a",
            "h2",
            "h1:9100",
            "e",
        ] {
            assert!(
                !strings.lines().any(|l| l == silenced),
                "silenced alert notified ({silenced}) on {path}: {strings}"
            );
        }
    }
    Ok(())
}

/// The localizer's alert name, as the fixtures spell it.
const CF: &str = "SkeletonHunterComponentFaulty";

/// An alert to post: its labels and annotations.
fn alert(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Value {
    let l: Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    let a: Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    json!({"labels": l, "annotations": a})
}

/// Alerts as the localizer and the shipped Prometheus rules produce them,
/// named by a `test_id` label so the assertions can find them.
fn fabric_alerts() -> Value {
    Value::Array(
        [
            tor_t1_verdicts(),
            beneath_tor_t1(),
            beneath_tor_t1_pairs(),
            beneath_tor_t2(),
            spine_alerts(),
            latency_verdicts(),
            pair_alerts(),
        ]
        .concat(),
    )
}

/// The localizer's verdict on ToR t1 and the rule's copy of it.
fn tor_t1_verdicts() -> Vec<Value> {
    vec![
        // The localizer's verdict on ToR t1 (its labels: tor with its pair
        // twins, and spine context).
        alert(
            &[
                ("test_id", "tor-t1"),
                ("alertname", CF),
                ("kind", "tor"),
                ("component", "t1"),
                ("tor", "t1"),
                ("src_tor", "t1"),
                ("dst_tor", "t1"),
                ("spine", "s1"),
                ("severity", "critical"),
                ("symptom", "loss"),
            ],
            &[
                (
                    "summary",
                    "tor t1 drops packets: 17 anomalous probe pair(s) cross it",
                ),
                ("pairs", "17"),
                ("score", "0.9300"),
                ("p_value", "1.000e-9"),
                ("equivalent", "nic/10.0.3.1"),
                ("evidence", "a->c loss 31%"),
                (
                    "runbook_url",
                    "https://example.org/runbooks.md#skeletonhuntercomponentfaulty-tor",
                ),
                ("dashboard_url", "/d/skeletonhunter-fabric"),
            ],
        ),
        // The Prometheus rule's copy of the same verdict, with pair location
        // labels but no symptom (the blame metric has none): it silences
        // nothing, only the localizer's own loss/unreachable verdicts do.
        alert(
            &[
                ("test_id", "tor-t1-rule"),
                ("alertname", CF),
                ("kind", "tor"),
                ("component", "t1"),
                ("id", "t1"),
                ("tor", "t1"),
                ("src_tor", "t1"),
                ("dst_tor", "t1"),
                ("severity", "critical"),
                ("origin", "prometheus"),
            ],
            &[("summary", "SkeletonHunter blames tor t1")],
        ),
    ]
}

/// Endpoint alerts beneath the faulty ToR t1: all silenced.
fn beneath_tor_t1() -> Vec<Value> {
    vec![
        // Beneath t1: silenced.
        alert(
            &[
                ("test_id", "node-a"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "a"),
                ("node_id", "a"),
                ("host", "h1"),
                ("tor", "t1"),
                ("spine", "s1"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[("summary", "node a is unreachable")],
        ),
        alert(
            &[
                ("test_id", "host-h2"),
                ("alertname", CF),
                ("kind", "host"),
                ("component", "h2"),
                ("host", "h2"),
                ("tor", "t1"),
                ("severity", "critical"),
                ("symptom", "loss"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "exporter-h1"),
                ("alertname", "SkeletonHunterExporterDown"),
                ("kind", "exporter"),
                ("component", "h1:9100"),
                ("instance", "h1:9100"),
                ("host", "h1"),
                ("tor", "t1"),
                ("severity", "warning"),
            ],
            &[],
        ),
    ]
}

/// Pair alerts beneath the faulty ToR t1: silenced.
fn beneath_tor_t1_pairs() -> Vec<Value> {
    vec![
        alert(
            &[
                ("test_id", "pair-a-c"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "a->c"),
                ("src_node", "a"),
                ("dst_node", "c"),
                ("src_tor", "t1"),
                ("dst_tor", "t2"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "pair-c-a"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "c->a"),
                ("src_node", "c"),
                ("dst_node", "a"),
                ("src_tor", "t2"),
                ("dst_tor", "t1"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
    ]
}

/// Alerts beneath ToR t2 (same spine, not faulty) and without topology: not silenced.
fn beneath_tor_t2() -> Vec<Value> {
    vec![
        // Beneath t2 (another ToR, same spine s1): NOT silenced.
        alert(
            &[
                ("test_id", "node-c"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "c"),
                ("node_id", "c"),
                ("host", "h3"),
                ("tor", "t2"),
                ("spine", "s1"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[
                ("summary", "node c is unreachable"),
                ("pairs", "4"),
                ("score", "0.8100"),
                ("p_value", "2.000e-6"),
                ("evidence", "b->c lost 100%\nd->c lost 100%"),
            ],
        ),
        alert(
            &[
                ("test_id", "pair-c-d"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "c->d"),
                ("src_node", "c"),
                ("dst_node", "d"),
                ("src_tor", "t2"),
                ("dst_tor", "t2"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        // A pair alert with no topology must not be silenced by accident.
        alert(
            &[
                ("test_id", "pair-x-y"),
                ("alertname", "SkeletonHunterPairUnreachable"),
                ("kind", "pair"),
                ("component", "x->y"),
                ("src_node", "x"),
                ("dst_node", "y"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
    ]
}

/// A spine fault and an alert beneath that spine.
fn spine_alerts() -> Vec<Value> {
    vec![
        // A spine fault silences what is beneath that spine only.
        alert(
            &[
                ("test_id", "spine-s2"),
                ("alertname", CF),
                ("kind", "spine"),
                ("component", "s2"),
                ("spine", "s2"),
                ("severity", "critical"),
                ("symptom", "loss"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "node-e"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "e"),
                ("node_id", "e"),
                ("host", "h5"),
                ("tor", "t5"),
                ("spine", "s2"),
                ("severity", "warning"),
                ("symptom", "loss"),
            ],
            &[],
        ),
    ]
}

/// Latency verdicts on switches and unreachable endpoints beneath them.
fn latency_verdicts() -> Vec<Value> {
    vec![
        // A latency verdict on a switch silences nothing: a slow spine or ToR
        // still forwards, so an unreachable node or host beneath it is news.
        alert(
            &[
                ("test_id", "spine-s3-latency"),
                ("alertname", CF),
                ("kind", "spine"),
                ("component", "s3"),
                ("spine", "s3"),
                ("src_spine", "s3"),
                ("dst_spine", "s3"),
                ("severity", "warning"),
                ("symptom", "latency"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "tor-t6-latency"),
                ("alertname", CF),
                ("kind", "tor"),
                ("component", "t6"),
                ("tor", "t6"),
                ("src_tor", "t6"),
                ("dst_tor", "t6"),
                ("spine", "s3"),
                ("severity", "warning"),
                ("symptom", "latency"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "node-f"),
                ("alertname", CF),
                ("kind", "node"),
                ("component", "f"),
                ("node_id", "f"),
                ("host", "h6"),
                ("tor", "t6"),
                ("spine", "s3"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
        alert(
            &[
                ("test_id", "host-h7"),
                ("alertname", CF),
                ("kind", "host"),
                ("component", "h7"),
                ("host", "h7"),
                ("tor", "t6"),
                ("spine", "s3"),
                ("severity", "critical"),
                ("symptom", "unreachable"),
            ],
            &[],
        ),
    ]
}

/// A lossy pair that is also unreachable.
fn pair_alerts() -> Vec<Value> {
    vec![
        // Unreachable silences lossy for the same pair.
        alert(
            &[
                ("test_id", "loss-c-d"),
                ("alertname", "SkeletonHunterPairLoss"),
                ("kind", "pair"),
                ("component", "c->d"),
                ("src_node", "c"),
                ("dst_node", "d"),
                ("src_tor", "t2"),
                ("dst_tor", "t2"),
                ("severity", "warning"),
                ("symptom", "loss"),
            ],
            &[],
        ),
    ]
}
