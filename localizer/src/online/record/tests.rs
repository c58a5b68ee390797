use super::*;
use crate::engine::model::{Blame, Symptom};
use crate::jobs::impact::JobImpact;
use crate::online::status::PageInfo;
use skeletonhunter_common::topology::{Component, Kind};

fn text(m: &Metrics) -> String {
    String::from_utf8(m.encode(None).body.to_vec()).unwrap()
}

/// Every line of `want` is a line of the exposition.
fn assert_lines(m: &Metrics, want: &[&str]) {
    let t = text(m);
    for w in want {
        assert!(t.lines().any(|l| l == *w), "{w} missing from:\n{t}");
    }
}

fn am(url: &str) -> AlertmanagerLabels {
    AlertmanagerLabels {
        alertmanager: url.to_string(),
    }
}

fn event(id: &str) -> Event {
    Event {
        fired: true,
        kind: "tor".into(),
        id: id.into(),
        severity: "critical".into(),
    }
}

/// A usable cycle that read one shard and posted to two Alertmanagers,
/// one of which refused.
/// A job with 8 of its 64 ranks under the ToR, 24 hit.
fn llama() -> JobImpact {
    JobImpact {
        job: "llama".into(),
        ranks_under: 8,
        spans_under: "8-15".into(),
        ranks_hit: 24,
        ranks: 64,
        pairs_hit: 40,
        pairs: 128,
        groups_under: None,
        under: Vec::new(),
    }
}

fn ok_cycle() -> CycleRecord {
    let report = Report {
        pairs_observed: 30,
        pairs_anomalous: 4,
        blame: vec![Blame {
            component: Component::new(Kind::Tor, "t1"),
            symptom: Symptom::Loss,
            score: 0.25,
            p_value: 1e-6,
            faulty: true,
        }],
        ..Report::default()
    };
    CycleRecord {
        ended: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        took: Duration::from_millis(300),
        outcome: Outcome::Ok(Box::new(report)),
        read: Read {
            store: StoreReads {
                queries: vec![
                    (QueryKind::Sent, Duration::from_millis(20)),
                    (QueryKind::RttP50, Duration::from_millis(90)),
                ],
                errors: vec![],
                form: Some(RttForm::Native),
                identities: Some(Identities {
                    nodes: 12,
                    shards: 3,
                }),
            },
            pairs: Some(PairRead::Shard(1)),
            pairs_dropped: Some(2),
            pairs_with_rtt: Some(27),
            coverage: Covered {
                pairs_covered: 28,
                pairs_expected: 32,
                components_unknown: 1,
            },
            answer_bytes_peak: Some(4096),
            overview: Some(one_lossy_pair()),
        },
        decided: Decided {
            analysis: Some(Duration::from_millis(125)),
            firing: vec![AlertLabels {
                kind: "tor".into(),
                id: "t1".into(),
                symptom: "loss".into(),
                severity: "critical".into(),
            }],
            jobs: vec![(Component::new(Kind::Tor, "t1"), vec![llama()])],
            layouts: Some(vec![JobLayoutLabels {
                tenant: "llama".into(),
                tp: 8,
                dp: 4,
                pp: 2,
                determined: "true",
            }]),
            events: (0..EVENTS_CAP + 2)
                .map(|i| event(&format!("t{i}")))
                .collect(),
        },
        sent: vec![
            Sent {
                alertmanager: am("http://a:9093"),
                post: Some(Post::Accepted {
                    alerts: 3,
                    at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_001),
                }),
                queued: 0,
                dropped: 0,
            },
            Sent {
                alertmanager: am("http://b:9093"),
                post: Some(Post::Failed),
                queued: 2,
                dropped: 5,
            },
        ],
    }
}

/// The overview of one pair under ToR t1 in tenant llama losing 1 in 4.
fn one_lossy_pair() -> Overview {
    let end = |node: &str| skeletonhunter_common::topology::Identity {
        node: node.into(),
        tor: "t1".into(),
        tenant: "llama".into(),
        ..Default::default()
    };
    crate::online::overview::overview(&[crate::engine::model::PairStats {
        src: end("a"),
        dst: end("b"),
        sent: 40.0,
        lost: 10.0,
        rtt_seconds: Some(0.000_032),
        rtt_samples: 30.0,
        ..Default::default()
    }])
}

#[test]
fn a_usable_cycle_sets_every_series_to_its_figures() {
    let (m, board) = (Metrics::new(), Board::new(PageInfo::default()));
    ok_cycle().write(&m, &board);
    assert_lines(
        &m,
        &[
            "skeletonhunter_localizer_query_duration_seconds_count{query=\"sent\"} 1",
            "skeletonhunter_localizer_query_duration_seconds_count{query=\"rtt_p50\"} 1",
            "skeletonhunter_localizer_histograms_info{mode=\"native\"} 1",
            "skeletonhunter_localizer_nodes 12",
            "skeletonhunter_localizer_pair_shards 3",
            "skeletonhunter_localizer_pair_reads_total{read=\"shard\"} 1",
            "skeletonhunter_localizer_pairs_dropped 2",
            "skeletonhunter_localizer_pairs_with_rtt 27",
            "skeletonhunter_localizer_pairs_covered 28",
            "skeletonhunter_localizer_pairs_expected 32",
            "skeletonhunter_localizer_components_unknown 1",
            "skeletonhunter_localizer_answer_bytes_peak 4096",
            "skeletonhunter_overview_loss_ratio{scope=\"fabric\",id=\"\"} 0.25",
            "skeletonhunter_overview_loss_ratio{scope=\"tor\",id=\"t1\"} 0.25",
            "skeletonhunter_overview_pairs{scope=\"tenant\",id=\"llama\",state=\"all\"} 1",
            "skeletonhunter_overview_pairs{scope=\"tenant\",id=\"llama\",state=\"unreachable\"} 0",
            "skeletonhunter_overview_pair_rtt_seconds{scope=\"tor\",id=\"t1\",quantile=\"0.99\"} 0.000032",
            "skeletonhunter_overview_pairs_by_rtt{le=\"0.000016\"} 0",
            "skeletonhunter_overview_pairs_by_rtt{le=\"0.000032\"} 1",
            "skeletonhunter_overview_pairs_by_rtt{le=\"+Inf\"} 1",
            "skeletonhunter_overview_worst_pair_loss_ratio{src_node=\"a\",dst_node=\"b\",src_tor=\"t1\",dst_tor=\"t1\",tenant=\"llama\"} 0.25",
            "skeletonhunter_overview_worst_pair_rtt_seconds{src_node=\"a\",dst_node=\"b\",src_tor=\"t1\",dst_tor=\"t1\",tenant=\"llama\"} 0.000032",
            "skeletonhunter_localizer_analysis_duration_seconds 0.125",
            "skeletonhunter_localizer_alerts_posted_total{alertmanager=\"http://a:9093\"} 3",
            "skeletonhunter_localizer_last_alert_post_success_timestamp_seconds{alertmanager=\"http://a:9093\"} 1700000001.0",
            "skeletonhunter_localizer_alert_post_errors_total{alertmanager=\"http://b:9093\"} 1",
            "skeletonhunter_localizer_alert_queue_length{alertmanager=\"http://b:9093\"} 2",
            "skeletonhunter_localizer_alerts_dropped_total{alertmanager=\"http://b:9093\"} 5",
            "skeletonhunter_localizer_alerts_firing 1",
            "skeletonhunter_component_alerting{kind=\"tor\",id=\"t1\",symptom=\"loss\",severity=\"critical\"} 1",
            "skeletonhunter_localizer_job_impact_ranks{kind=\"tor\",id=\"t1\",tenant=\"llama\",scope=\"under\"} 8",
            "skeletonhunter_localizer_job_impact_ranks{kind=\"tor\",id=\"t1\",tenant=\"llama\",scope=\"hit\"} 24",
            "skeletonhunter_localizer_job_impact_ranks{kind=\"tor\",id=\"t1\",tenant=\"llama\",scope=\"all\"} 64",
            "skeletonhunter_localizer_job_layout{tenant=\"llama\",tp=\"8\",dp=\"4\",pp=\"2\",determined=\"true\"} 1",
            "skeletonhunter_localizer_last_success_timestamp_seconds 1700000000.0",
            "skeletonhunter_localizer_pairs_observed 30",
            "skeletonhunter_localizer_pairs_anomalous 4",
            "skeletonhunter_component_blame{kind=\"tor\",id=\"t1\"} 0.25",
            "skeletonhunter_component_faulty{kind=\"tor\",id=\"t1\"} 1",
            "skeletonhunter_localizer_cycles_total{result=\"ok\"} 1",
            "skeletonhunter_localizer_cycle_duration_seconds_count 1",
        ],
    );
    assert!(m.since_cycle_ok().is_some(), "ready");
    assert!(
        m.report().contains("\"pairs_observed\":30"),
        "{}",
        m.report()
    );
    let history = board.snapshot().history;
    let entry = &history[0];
    assert_eq!(entry.result, CycleResult::Ok);
    assert_eq!(entry.pairs, Some((30, 4)));
    assert_eq!(entry.covered, (28, 32));
    assert_eq!(entry.firing, 1);
    assert_eq!((entry.events.len(), entry.events_dropped), (EVENTS_CAP, 2));
}

#[test]
fn a_failed_cycle_counts_its_errors_and_leaves_the_last_usable_figures() {
    let (m, board) = (Metrics::new(), Board::new(PageInfo::default()));
    ok_cycle().write(&m, &board);
    let failed = CycleRecord {
        outcome: Outcome::QueryFailed,
        read: Read {
            store: StoreReads {
                queries: vec![(QueryKind::Sent, Duration::from_secs(2))],
                errors: vec![(QueryKind::Sent, QueryFailure::Timeout)],
                ..StoreReads::default()
            },
            coverage: Covered {
                pairs_covered: 0,
                pairs_expected: 32,
                components_unknown: 5,
            },
            ..Read::default()
        },
        decided: Decided::default(),
        sent: vec![],
        ..ok_cycle()
    };
    let slowest = failed.slowest_query();
    assert_eq!(slowest, Some((QueryKind::Sent, Duration::from_secs(2))));
    failed.write(&m, &board);
    assert_lines(
        &m,
        &[
            "skeletonhunter_localizer_query_errors_total{query=\"sent\",reason=\"timeout\"} 1",
            "skeletonhunter_localizer_query_duration_seconds_count{query=\"sent\"} 2",
            "skeletonhunter_localizer_cycles_total{result=\"query_failed\"} 1",
            "skeletonhunter_localizer_cycles_total{result=\"ok\"} 1",
            "skeletonhunter_localizer_pairs_covered 0",
            "skeletonhunter_localizer_components_unknown 5",
            "skeletonhunter_localizer_alerts_firing 0",
            // Not come to: as the usable cycle left them.
            "skeletonhunter_localizer_pairs_observed 30",
            "skeletonhunter_localizer_pairs_with_rtt 27",
            "skeletonhunter_localizer_pair_reads_total{read=\"shard\"} 1",
            "skeletonhunter_localizer_nodes 12",
            "skeletonhunter_localizer_histograms_info{mode=\"native\"} 1",
            "skeletonhunter_localizer_alerts_posted_total{alertmanager=\"http://a:9093\"} 3",
            "skeletonhunter_localizer_job_layout{tenant=\"llama\",tp=\"8\",dp=\"4\",pp=\"2\",determined=\"true\"} 1",
        ],
    );
    assert!(!text(&m).contains("skeletonhunter_component_alerting{"));
    assert!(!text(&m).contains("skeletonhunter_localizer_job_impact_ranks{"));
    let history = board.snapshot().history;
    assert_eq!(history[1].result, CycleResult::QueryFailed);
    assert_eq!((history[1].pairs, history[1].covered), (None, (0, 32)));
    assert!(failed.into_report().is_none());
    // A usable cycle without the job (it ended): its series goes.
    let mut ended = ok_cycle();
    ended.decided.layouts = Some(vec![]);
    ended.write(&m, &board);
    assert!(!text(&m).contains("skeletonhunter_localizer_job_layout{"));
}

#[test]
fn the_start_exports_one_shard_and_a_given_form() {
    let m = Metrics::new();
    StoreReads::at_start(None).write(&m);
    assert_lines(
        &m,
        &[
            "skeletonhunter_localizer_pair_shards 1",
            "skeletonhunter_localizer_nodes 0",
        ],
    );
    assert!(!text(&m).contains("histograms_info{"), "auto: not yet");
    StoreReads::at_start(Some(RttForm::Classic)).write(&m);
    assert_lines(
        &m,
        &["skeletonhunter_localizer_histograms_info{mode=\"classic\"} 1"],
    );
}
