//! Unit tests of the PromQL input: query texts, topology, pair assembly.

use super::*;
use crate::clients::prometheus::Labels;
use crate::input::histograms::RttForm;
use crate::input::paths::attach_hops;
use skeletonhunter_common::Protocol;
fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
    Sample {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Labels>(),
        timestamp: 0.0,
        value,
    }
}

fn pair(src: &str, dst: &str, proto: &str, v: f64) -> Sample {
    sample(
        &[("src_node", src), ("dst_node", dst), ("protocol", proto)],
        v,
    )
}

fn info(node: &str, tor: &str) -> Sample {
    sample(
        &[
            ("node_id", node),
            ("host", &format!("h-{node}")),
            ("tor", tor),
            ("spine", "s1"),
        ],
        1.0,
    )
}

/// The counters of pair a -> b alone: `udp` and `tcp` are (sent, lost),
/// and every lost dial is a dial failure.
fn a_to_b(udp: (f64, f64), tcp: (f64, f64)) -> QueryResults {
    QueryResults {
        sent: vec![pair("a", "b", "udp", udp.0), pair("a", "b", "tcp", tcp.0)],
        lost: vec![pair("a", "b", "udp", udp.1), pair("a", "b", "tcp", tcp.1)],
        dial_failures: vec![sample(&[("src_node", "a"), ("dst_node", "b")], tcp.1)],
        ..Default::default()
    }
}

fn protos() -> Vec<Protocol> {
    vec![Protocol::Udp, Protocol::Icmp, Protocol::Rdma]
}

#[test]
fn promql_durations_use_the_largest_unit() {
    assert_eq!(promql_duration(Duration::from_secs(60)), "1m");
    assert_eq!(promql_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(promql_duration(Duration::ZERO), "1ms");
}

#[test]
fn queries_use_window_and_matchers() {
    let q = Queries::new(
        Duration::from_secs(30),
        Duration::from_secs(3600),
        Some("job=\"sh\""),
        RttForm::Classic,
    );
    assert_eq!(
        q.sent,
        "sum by (src_node, dst_node, protocol) (increase(skeletonhunter_probe_sent_total{job=\"sh\"}[30s]))"
    );
    assert!(q
        .topology_recent
        .contains("last_over_time(skeletonhunter_node_info{job=\"sh\"}[1h])"));
    assert_eq!(
        q.hops,
        "max by (src_node, dst_node, address) (last_over_time(skeletonhunter_path_hop_info{job=\"sh\"}[1h]))"
    );
    assert_eq!(
        q.paths,
        "max by (src_node, dst_node, path, hop, address) (last_over_time(skeletonhunter_path_hop_info{job=\"sh\", path!=\"\"}[1h]))"
    );
    assert_eq!(
        q.path_loss,
        "max by (src_node, dst_node, path) (last_over_time(skeletonhunter_path_loss_ratio{job=\"sh\"}[30s]))"
    );
    let q = Queries::new(
        Duration::from_secs(30),
        Duration::from_secs(60),
        None,
        RttForm::Classic,
    );
    assert!(q
        .rtt_p50
        .contains("skeletonhunter_probe_rtt_seconds_bucket[30s]"));
    assert!(q
        .paths
        .contains("skeletonhunter_path_hop_info{path!=\"\"}[1m]"));
    assert!(q
        .path_probes
        .contains("last_over_time(skeletonhunter_path_probes[30s])"));
}

#[test]
fn rtt_queries_in_each_form() {
    let q = |form| {
        let q = Queries::new(
            Duration::from_secs(60),
            Duration::from_secs(3600),
            Some("job=\"sh\""),
            form,
        );
        (q.rtt_p50, q.rtt_count)
    };
    let classic = (
        "histogram_quantile(0.5, sum by (src_node, dst_node, protocol, le) (increase(skeletonhunter_probe_rtt_seconds_bucket{job=\"sh\"}[1m])))".to_string(),
        Some("sum by (src_node, dst_node, protocol) (increase(skeletonhunter_probe_rtt_seconds_count{job=\"sh\"}[1m]))".to_string()),
    );
    let native = "histogram_quantile(0.5, sum by (src_node, dst_node, protocol) (increase(skeletonhunter_probe_rtt_seconds{job=\"sh\"}[1m])))".to_string();
    assert_eq!(q(RttForm::Classic), classic);
    // No histogram_count: it costs as much as the median.
    assert_eq!(q(RttForm::Native), (native.clone(), None));
    assert_eq!(
        q(RttForm::NativeOrClassic),
        (format!("{native} or {}", classic.0), None)
    );
}

#[test]
fn traced_hops_fill_pairs_without_silent_hops_or_the_destination() {
    let b_info = sample(
        &[("node_id", "b"), ("nic", "198.18.0.2"), ("tor", "t2")],
        1.0,
    );
    let (topo, _) = topology_from(&[info("a", "t1"), b_info], &[]);
    let hop = |s: &str, d: &str, addr: &str| {
        sample(&[("src_node", s), ("dst_node", d), ("address", addr)], 1.0)
    };
    let r = QueryResults {
        sent: vec![pair("a", "b", "udp", 100.0), pair("b", "a", "udp", 100.0)],
        lost: vec![pair("a", "b", "udp", 0.0), pair("b", "a", "udp", 0.0)],
        hops: Ok(vec![
            hop("a", "b", "10.0.0.2"),
            hop("a", "b", "10.0.0.1"),
            hop("a", "b", ""),
            hop("a", "b", "198.18.0.2"),
            hop("c", "b", "10.0.0.9"),
        ]),
        ..Default::default()
    };
    let out = assemble(&r, &topo, &protos());
    let ab = out.pairs.iter().find(|p| p.src.node == "a").unwrap();
    assert_eq!(ab.hops, vec!["10.0.0.1", "10.0.0.2"]);
    let ba = out.pairs.iter().find(|p| p.src.node == "b").unwrap();
    assert!(ba.hops.is_empty());
    // Pairs kept from an earlier cycle (`--pair-shards`) lose hops the
    // answer no longer has: a -> b's trace is gone, b -> a's is new.
    let mut kept = out.pairs;
    attach_hops(&mut kept, &[hop("b", "a", "10.0.0.7")]);
    let hops = |src: &str| &kept.iter().find(|p| p.src.node == src).unwrap().hops;
    assert!(hops("a").is_empty());
    assert_eq!(hops("b"), &vec!["10.0.0.7"]);
    attach_hops(&mut kept, &[]);
    assert!(kept.iter().all(|p| p.hops.is_empty()), "no hops at all");
}

#[test]
fn topology_prefers_current_identities() {
    let now = [info("a", "t1")];
    let recent = [info("a", "t-old"), info("b", "t2")];
    let (t, conflicts) = topology_from(&now, &recent);
    assert_eq!(t["a"].tor, "t1");
    assert_eq!(t["b"].tor, "t2");
    assert!(conflicts.is_empty());
    let (t, conflicts) = topology_from(&[info("a", "t2"), info("a", "t1")], &[]);
    assert_eq!(t["a"].tor, "t1");
    assert_eq!(conflicts, vec!["a".to_string()]);
}

#[test]
fn assemble_combines_protocols_and_drops_what_it_cannot_place() {
    let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t2")], &[]);
    let r = QueryResults {
        sent: vec![
            pair("a", "b", "udp", 100.0),
            pair("a", "b", "icmp", 50.0),
            pair("b", "a", "udp", 100.0),
            pair("a", "x", "udp", 100.0), // x has no topology
        ],
        lost: vec![
            pair("a", "b", "udp", 30.0),
            pair("a", "b", "icmp", 15.0),
            pair("a", "x", "udp", 0.0),
            // b -> a lost series missing: incomplete
        ],
        rtt_p50: vec![pair("a", "b", "udp", 20e-6), pair("a", "b", "icmp", 40e-6)],
        rtt_count: Some(vec![
            pair("a", "b", "udp", 70.0),
            pair("a", "b", "icmp", 35.0),
        ]),
        ..Default::default()
    };
    let out = assemble(&r, &topo, &protos());
    assert_eq!(out.incomplete, 1);
    assert_eq!(out.no_topology, 1);
    assert_eq!(out.pairs.len(), 1);
    let p = &out.pairs[0];
    assert_eq!((p.src.node.as_str(), p.dst.node.as_str()), ("a", "b"));
    assert_eq!(p.src.tor, "t1");
    assert_eq!(
        (p.rounds, p.failed_dials, p.sent, p.lost),
        (150.0, 0.0, 150.0, 45.0)
    );
    assert_eq!(p.rtt_seconds, Some(20e-6), "udp preferred over icmp");
    assert_eq!(p.rtt_samples, 70.0);
}

#[test]
fn total_loss_is_unreachable_and_dials_count_as_rounds() {
    let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t1"), info("c", "t1")], &[]);
    let r = QueryResults {
        sent: vec![
            pair("a", "b", "udp", 40.0),
            pair("a", "c", "udp", 40.0),
            pair("a", "c", "tcp", 10.0),
        ],
        lost: vec![pair("a", "b", "udp", 40.0), pair("a", "c", "udp", 20.0)],
        dial_failures: vec![sample(&[("src_node", "a"), ("dst_node", "c")], 5.0)],
        rtt_p50: vec![pair("a", "b", "udp", f64::NAN)],
        ..Default::default()
    };
    let out = assemble(&r, &topo, &protos());
    let ab = out.pairs.iter().find(|p| p.dst.node == "b").unwrap();
    assert_eq!(
        (ab.rounds, ab.failed_dials, ab.sent, ab.lost),
        (40.0, 40.0, 0.0, 0.0)
    );
    assert_eq!(ab.rtt_seconds, None);
    let ac = out.pairs.iter().find(|p| p.dst.node == "c").unwrap();
    // Half the dials failed; packet loss is kept as measured.
    assert_eq!(
        (ac.rounds, ac.failed_dials, ac.sent, ac.lost),
        (10.0, 5.0, 40.0, 20.0)
    );
}

#[test]
fn a_cut_pair_is_found_from_answers_despite_lagging_lost_counters() {
    let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t1")], &[]);
    // 1000 probes sent, only 800 counted lost yet (200 in flight), no
    // answer; 50 dials, 45 failures counted, none succeeded.
    let mut r = QueryResults {
        rtt_count: Some(vec![pair("a", "b", "udp", 0.0), pair("a", "b", "tcp", 0.0)]),
        ..a_to_b((1000.0, 800.0), (50.0, 45.0))
    };
    let p = &assemble(&r, &topo, &protos()).pairs[0];
    assert_eq!(
        (p.rounds, p.failed_dials, p.sent, p.lost),
        (50.0, 50.0, 0.0, 0.0)
    );
    // One answer came back: lossy, not cut; counts as measured.
    r.rtt_count.as_mut().unwrap()[0].value = 1.0;
    let p = &assemble(&r, &topo, &protos()).pairs[0];
    assert_eq!(
        (p.rounds, p.failed_dials, p.sent, p.lost),
        (50.0, 45.0, 1000.0, 800.0)
    );
}

#[test]
fn without_a_count_query_answers_come_from_the_median_and_the_counters() {
    let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t1"), info("c", "t1")], &[]);
    // a -> b is cut: no answer (a NaN median: the histogram got nothing),
    // its lost counters lagging behind the in-flight probes. a -> c is
    // lossy: 40 of 1000 probes and 5 of 50 dials lost.
    let mut r = QueryResults {
        sent: vec![
            pair("a", "b", "udp", 1000.0),
            pair("a", "b", "tcp", 50.0),
            pair("a", "c", "udp", 1000.0),
            pair("a", "c", "tcp", 50.0),
        ],
        lost: vec![
            pair("a", "b", "udp", 800.0),
            pair("a", "b", "tcp", 45.0),
            pair("a", "c", "udp", 40.0),
            pair("a", "c", "tcp", 5.0),
        ],
        dial_failures: vec![
            sample(&[("src_node", "a"), ("dst_node", "b")], 45.0),
            sample(&[("src_node", "a"), ("dst_node", "c")], 5.0),
        ],
        rtt_p50: vec![
            pair("a", "b", "udp", f64::NAN),
            pair("a", "b", "tcp", f64::NAN),
            pair("a", "c", "udp", 20e-6),
            pair("a", "c", "tcp", 90e-6),
        ],
        rtt_count: None,
        ..Default::default()
    };
    let out = assemble(&r, &topo, &protos());
    let of = |dst: &str| out.pairs.iter().find(|p| p.dst.node == dst).unwrap();
    let ab = of("b");
    assert_eq!(
        (ab.rounds, ab.failed_dials, ab.sent, ab.lost),
        (50.0, 50.0, 0.0, 0.0),
        "cut, not 80 % lossy"
    );
    let ac = of("c");
    assert_eq!(
        (ac.rounds, ac.failed_dials, ac.sent, ac.lost),
        (50.0, 5.0, 1000.0, 40.0)
    );
    assert_eq!(ac.rtt_seconds, Some(20e-6));
    assert_eq!(ac.rtt_samples, 960.0, "the probes not lost");
    // One answer in the window makes a -> b lossy instead, as a counted
    // answer does.
    r.rtt_p50[0].value = 30e-6;
    let out = assemble(&r, &topo, &protos());
    let ab = out.pairs.iter().find(|p| p.dst.node == "b").unwrap();
    assert_eq!((ab.failed_dials, ab.sent, ab.lost), (45.0, 1000.0, 800.0));
    assert_eq!(ab.rtt_samples, 200.0);
}

#[test]
fn quoting_and_regex_escaping() {
    assert_eq!(quote_label_value(r#"a"b\c"#), r#""a\"b\\c""#);
    assert_eq!(regex_escape("10.0.0.1"), r"10\.0\.0\.1");
    assert_eq!(regex_escape("a|b(c)"), r"a\|b\(c\)");
}

#[test]
fn protocols_not_asked_for_or_unknown_are_not_read() {
    let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t2")], &[]);
    // A series of a protocol this build does not know (a newer exporter) and an ICMP series the flags
    // leave out carry all the loss; the UDP series alone is read.
    let r = QueryResults {
        sent: vec![
            pair("a", "b", "udp", 100.0),
            pair("a", "b", "icmp", 100.0),
            pair("a", "b", "nosuch", 100.0),
        ],
        lost: vec![
            pair("a", "b", "udp", 0.0),
            pair("a", "b", "icmp", 100.0),
            pair("a", "b", "nosuch", 100.0),
        ],
        ..Default::default()
    };
    let out = assemble(&r, &topo, &[Protocol::Udp]);
    assert_eq!(out.pairs.len(), 1);
    assert_eq!((out.pairs[0].sent, out.pairs[0].lost), (100.0, 0.0));
    let both = assemble(&r, &topo, &[Protocol::Udp, Protocol::Icmp]);
    assert_eq!((both.pairs[0].sent, both.pairs[0].lost), (200.0, 100.0));
}

#[test]
fn a_pair_silent_now_is_cut_before_its_window_says_so() {
    let (topo, _) = topology_from(&[info("a", "t1"), info("b", "t1")], &[]);
    // The window still holds answers from before the cut (60 of 100 probes
    // and 12 of 20 dials lost), but at the latest scrape both protocols
    // have lost CUT_STREAK in a row.
    let mut r = QueryResults {
        rtt_count: Some(vec![
            pair("a", "b", "udp", 40.0),
            pair("a", "b", "tcp", 8.0),
        ]),
        consecutive_lost: vec![
            pair("a", "b", "udp", CUT_STREAK),
            pair("a", "b", "tcp", CUT_STREAK + 3.0),
        ],
        ..a_to_b((100.0, 60.0), (20.0, 12.0))
    };
    let rows = |r: &QueryResults| {
        let p = &assemble(r, &topo, &protos()).pairs[0];
        (p.rounds, p.failed_dials, p.sent, p.lost)
    };
    assert_eq!(rows(&r), (20.0, 20.0, 0.0, 0.0), "cut: all rounds failed");
    // One protocol still answering (a streak below the bar): lossy, as measured.
    r.consecutive_lost[1].value = CUT_STREAK - 1.0;
    assert_eq!(rows(&r), (20.0, 12.0, 100.0, 60.0));
    // A protocol without the gauge (an older exporter) cannot say silent.
    r.consecutive_lost.truncate(1);
    assert_eq!(rows(&r), (20.0, 12.0, 100.0, 60.0));
    // Packet probes alone, silent now.
    r.sent.truncate(1);
    r.dial_failures.clear();
    assert_eq!(rows(&r), (100.0, 100.0, 0.0, 0.0));
}

#[test]
fn ranks_are_read_per_node_and_nonsense_is_left_out() {
    let r = |node: &str, first: &str, n: &str, world: &str| {
        sample(
            &[
                ("node_id", node),
                ("first_rank", first),
                ("ranks", n),
                ("world_size", world),
            ],
            1.0,
        )
    };
    let got = ranks_from(&[
        r("a", "8", "8", "64"),
        r("b", "0", "1", ""),
        // Restarted with other ranks within the lookback: the lowest stays.
        r("c", "16", "8", "64"),
        r("c", "0", "8", "64"),
        r("d", "60", "8", "64"),
        r("", "0", "1", ""),
        r("e", "x", "1", ""),
    ]);
    let want: HashMap<String, Ranks> = [
        ("a", Ranks::new(8, 8, Some(64))),
        ("b", Ranks::new(0, 1, None)),
        ("c", Ranks::new(0, 8, Some(64))),
    ]
    .map(|(n, r)| (n.to_string(), r.unwrap()))
    .into();
    assert_eq!(got, want);
    let q = Queries::new(
        Duration::from_secs(30),
        Duration::from_secs(600),
        Some("job=\"sh\""),
        RttForm::Classic,
    );
    assert_eq!(
        q.ranks,
        "max by (node_id, first_rank, ranks, world_size) (skeletonhunter_rank_info{job=\"sh\"})"
    );
}
