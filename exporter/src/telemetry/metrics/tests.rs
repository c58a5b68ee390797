//! The metrics handle: names, label sets, series lifecycles.

use super::*;

fn ident() -> Identity {
    Identity {
        node: "a".into(),
        tor: "t1".into(),
        ..Default::default()
    }
}

#[test]
fn classic_output_names_counters_with_total_and_has_no_eof() {
    let m = Metrics::new(&ident());
    let s = m.series("10.0.0.2".parse().unwrap(), "b", Protocol::Udp);
    s.sent.inc();
    s.rtt.observe(0.000_05);
    let r = m.render(None);
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.contains("# TYPE skeletonhunter_probe_sent_total counter"));
    assert!(text.contains("# HELP skeletonhunter_probe_sent_total Probes sent"));
    assert!(text.contains(
        "skeletonhunter_probe_sent_total{src_node=\"a\",dst_node=\"b\",protocol=\"udp\"} 1"
    ));
    assert!(text.contains("skeletonhunter_probe_rtt_seconds_bucket{"));
    assert!(text.contains("skeletonhunter_node_info{node_id=\"a\",nic=\"\",host=\"\",tor=\"t1\""));
    assert!(!text.contains("# EOF"));
    let om = m.render(Some("application/openmetrics-text;version=1.0.0"));
    let om = String::from_utf8(om.body.to_vec()).unwrap();
    assert!(om.ends_with("# EOF\n"));
    // Converting the OpenMetrics text in one go gives the same result
    // as the streaming conversion.
    // (apart from the encode-time gauge, which differs per render, and
    // what is read from the host at every render: its UDP receive-buffer
    // errors and the process metrics, CPU time and memory).
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("skeletonhunter_exporter_render_seconds "))
            .filter(|l| !l.starts_with("process_"))
            .filter(|l| !l.starts_with("skeletonhunter_host_udp_receive_buffer_errors_total "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(&exposition::openmetrics_to_classic(&om)),
        strip(&text)
    );
}

#[test]
fn host_side_loss_is_present_at_zero_and_counts_socket_drops() {
    let m = Metrics::new(&ident());
    let text = |m: &Metrics| String::from_utf8(m.render(None).body.to_vec()).unwrap();
    let t = text(&m);
    for socket in ["udp_prober", "udp_responder"] {
        let line = format!("skeletonhunter_socket_receive_drops_total{{socket=\"{socket}\"}} 0");
        assert!(t.contains(&line), "{line} missing");
    }
    assert!(t.contains("# TYPE skeletonhunter_host_udp_receive_buffer_errors_total counter"));
    assert!(t.contains("\nskeletonhunter_host_udp_receive_buffer_errors_total "));
    let mut d = m.socket_drops(OwnSocket::IcmpProber);
    d.observe(Some(5));
    assert!(
        text(&m).contains("skeletonhunter_socket_receive_drops_total{socket=\"icmp_prober\"} 5")
    );
}

#[test]
fn forgetting_a_peer_removes_all_its_series() {
    let m = Metrics::new(&ident());
    let peer: IpAddr = "10.0.0.2".parse().unwrap();
    m.series(peer, "10.0.0.2", Protocol::Icmp).sent.inc();
    m.series(peer, "b", Protocol::Udp).lost.inc();
    m.dial_series(peer, "b").success.set(1);
    m.series("10.0.0.3".parse().unwrap(), "c", Protocol::Udp)
        .sent
        .inc();
    m.forget_peer(peer);
    let text = String::from_utf8(m.render(None).body.to_vec()).unwrap();
    assert!(!text.contains("dst_node=\"b\""), "{text}");
    assert!(!text.contains("dst_node=\"10.0.0.2\""));
    assert!(text.contains("dst_node=\"c\""));
}

#[test]
fn losses_in_a_row_count_until_an_answer() {
    let m = Metrics::new(&ident());
    let s = m.series("10.0.0.2".parse().unwrap(), "b", Protocol::Udp);
    let in_a_row = || {
        String::from_utf8(m.render(None).body.to_vec())
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("skeletonhunter_probe_consecutive_lost{"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(in_a_row(), Some(0.0));
    s.lost_one();
    s.lost_one();
    s.lost_one();
    assert_eq!(in_a_row(), Some(3.0));
    assert_eq!(s.lost.get(), 3, "still counted as lost");
    s.answered(50e-6);
    assert_eq!(in_a_row(), Some(0.0));
    s.lost_one();
    assert_eq!(in_a_row(), Some(1.0));
}

#[test]
fn host_stack_delays_are_per_protocol_and_stage_never_per_peer() {
    let m = Metrics::new(&ident());
    m.host_stack(Protocol::Udp, StackStage::Responder)
        .observe(0.3);
    m.host_stack(Protocol::Udp, StackStage::Responder)
        .observe(0.1);
    let t = String::from_utf8(m.render(None).body.to_vec()).unwrap();
    let count =
        "skeletonhunter_host_stack_delay_seconds_count{protocol=\"udp\",stage=\"responder\"} 2";
    assert!(t.contains(count), "{t}");
    assert!(!t.contains("skeletonhunter_host_stack_delay_seconds_count{src_node"));
}

#[test]
fn buckets_resolve_microseconds_and_seconds() {
    let b: Vec<f64> = rtt_buckets().collect();
    assert!((b[0] - 1e-6).abs() < 1e-12);
    assert!(b.iter().filter(|x| **x < 1e-4).count() >= 6);
    assert!(*b.last().unwrap() > 5.0);
}

#[test]
fn a_view_writes_beside_the_host_and_retiring_it_removes_only_its_series() {
    let host = Metrics::new(&ident());
    let ctr = host.view(&Identity {
        node: "job-worker-0".into(),
        host: "h1".into(),
        tor: "t1".into(),
        ..Default::default()
    });
    let peer: IpAddr = "10.0.0.2".parse().unwrap();
    host.series(peer, "b", Protocol::Udp).sent.inc();
    ctr.series(peer, "job-worker-1", Protocol::Udp).sent.inc();
    ctr.set_ranks(skeletonhunter_common::ranks::Ranks::new(8, 8, Some(16)));
    let text = |m: &Metrics| String::from_utf8(m.render(None).body.to_vec()).unwrap();
    let t = text(&host);
    let ctr_sent = "skeletonhunter_probe_sent_total{src_node=\"job-worker-0\",dst_node=\"job-worker-1\",protocol=\"udp\"} 1";
    assert!(t.contains(ctr_sent), "{t}");
    assert!(t.contains("node_id=\"job-worker-0\""), "{t}");
    assert!(t.contains("node_id=\"a\""), "{t}");
    let ranks = "skeletonhunter_rank_info{node_id=\"job-worker-0\",first_rank=\"8\",ranks=\"8\",world_size=\"16\"} 1";
    assert!(t.contains(ranks), "{t}");
    assert_eq!(
        t.matches("skeletonhunter_rank_info{").count(),
        1,
        "the host has none: {t}"
    );
    ctr.retire();
    let t = text(&host);
    assert!(!t.contains("job-worker"), "{t}");
    assert!(t.contains("src_node=\"a\",dst_node=\"b\""), "{t}");
    assert!(t.contains("node_id=\"a\""), "{t}");
}
