//! Unit tests of the ping-log reader.

use super::*;
use skeletonhunter_common::Protocol;

const HEADER: &str =
    "\u{feff}src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,src_asw,dst_asw,extra";

fn read(body: &str) -> Result<Vec<PairStats>, CsvError> {
    read_pings(
        format!("{HEADER}\n{body}").as_bytes(),
        &CsvOptions {
            packets_per_round: Some(100.0),
            ..CsvOptions::default()
        },
    )
}

/// `log`, header and all, read with the default options.
fn read_log(log: &str) -> Result<Vec<PairStats>, CsvError> {
    read_pings(log.as_bytes(), &CsvOptions::default())
}

#[test]
fn aggregates_rounds_per_pair() {
    let pairs = read(
        "a,b,success,10.0,0.02,1,t1,t2,x\n\
         a,b,success,12.0,0,2,t1,t2,x\n\
         a,b,timeout,,,3,t1,t2,x\n\
         b,a,success,30.0,0.5,4,t2,t1,\n",
    )
    .unwrap();
    assert_eq!(pairs.len(), 2);
    let ab = &pairs[0];
    assert_eq!((ab.src.node.as_str(), ab.dst.node.as_str()), ("a", "b"));
    assert_eq!(ab.src.tor, "t1");
    assert_eq!(ab.dst.tor, "t2");
    assert_eq!(ab.rounds, 3.0);
    assert_eq!(ab.failed_dials, 1.0);
    assert_eq!(ab.sent, 200.0);
    assert_eq!(ab.lost, 2.0);
    assert!((ab.rtt_seconds.unwrap() - 11e-6).abs() < 1e-9);
    assert_eq!(ab.rtt_samples, 2.0);
    assert_eq!(ab.rtt_spread_seconds, None, "two rows: no quartiles");
    // One connected row lost probes; the failed dial is not a lossy round.
    assert_eq!(ab.lossy_rounds, Some(1.0));
    assert_eq!(pairs[1].lost, 50.0);
    assert_eq!(pairs[1].lossy_rounds, Some(1.0));
}

#[test]
fn errors_name_line_and_column() {
    let e = read("a,b,success,10.0,0,1,t,t,x\na,b,success,abc,0,2,t,t,x\n").unwrap_err();
    assert_eq!(e.line, 3);
    assert_eq!(e.column.as_deref(), Some("latency"));
    assert!(e.to_string().contains("line 3, column `latency`"), "{e}");

    let e = read("a,b,success,10.0,1.5,1,t,t,x\n").unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (2, Some("loss_rate")));

    let e = read("a,b,success,10.0,0,yesterday,t,t,x\n").unwrap_err();
    assert_eq!(e.column.as_deref(), Some("ping_time"));

    let e = read(",b,success,10.0,0,1,t,t,x\n").unwrap_err();
    assert_eq!(e.column.as_deref(), Some("src_node_id"));

    let e = read("a,b,success,10.0,0,1\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("6 fields"), "{e}");
}

#[test]
fn missing_required_column_is_reported() {
    let e = read_log("src_node_id,dst_node_id,dial\na,b,success\n").unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.message.contains("latency"), "{e}");
    assert!(e.message.contains("ping_time"), "{e}");
}

#[test]
fn optional_columns_may_be_absent() {
    // (probe counts inferred: nothing lost, the default applies)
    let pairs =
        read_log("src_node_id,dst_node_id,dial,latency,loss_rate,ping_time\na,b,success,5,0,1\n")
            .unwrap();
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].src.tor, "");
}

#[test]
fn a_line_over_the_cap_is_an_error_at_its_number() {
    let long = format!("a,b,success,10.0,0,1,t,t,{}\n", "x".repeat(5000));
    let body = format!("{HEADER}\na,b,success,10.0,0,1,t,t,x\n{long}a,b,success,10.0,0,2,t,t,x\n");
    let opts = |max| CsvOptions {
        max_line_length: max,
        ..CsvOptions::default()
    };
    let e = read_pings(body.as_bytes(), &opts(4096)).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (3, None));
    assert!(e.to_string().contains("longer than 4096 bytes"), "{e}");
    assert_eq!(read_pings(body.as_bytes(), &opts(8192)).unwrap().len(), 1);
}

#[test]
fn field_errors_are_typed() {
    assert_eq!(parse_f64(b" 1.5 "), Ok(Some(1.5)));
    assert_eq!(parse_f64(b""), Ok(None));
    assert_eq!(parse_f64(b"inf"), Err(FieldError::NotANumber("inf".into())));
    assert_eq!(parse_f64(b"\xff"), Err(FieldError::NotUtf8));
}

#[test]
fn latencies_and_counts_out_of_range_are_refused() {
    let e = read("a,b,success,1e308,0,1,t,t,x\n").unwrap_err();
    assert_eq!(e.column.as_deref(), Some("latency"), "{e}");
    let counted = "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,probe_count\n";
    let e = read_log(&format!("{counted}a,b,success,5,0,1,1e308\n")).unwrap_err();
    assert_eq!(e.column.as_deref(), Some("probe_count"), "{e}");
}

/// A column named twice is refused naming it and both places, whether
/// the reader uses it or not: which one is meant cannot be told.
#[test]
fn a_column_named_twice_is_refused() {
    for (header, name, at) in [
        (
            "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,latency",
            "latency",
            "columns 4 and 7",
        ),
        (
            "\u{feff}src_node_id,dst_node_id,dial,latency,loss_rate,ping_time, src_node_id",
            "src_node_id",
            "columns 1 and 7",
        ),
        (
            "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,extra,extra",
            "extra",
            "columns 7 and 8",
        ),
    ] {
        let body = format!("{header}\na,b,success,1,0,1,1,1\n");
        let e = read_log(&body).unwrap_err();
        assert_eq!((e.line, e.column.as_deref()), (1, Some(name)), "{e}");
        assert!(e.to_string().contains(at), "{e}");
    }
    // Empty names (trailing commas) name nothing and may repeat.
    let body = "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,,\na,b,success,1,0,1,,\n";
    assert_eq!(read_log(body).unwrap().len(), 1);
}

#[test]
fn a_container_that_left_costs_its_pairs_their_last_failed_round() {
    // b leaves after 40: a's probe at 50 fails and the probing stops. e is
    // down from 80 but still probed to the end of the log (90).
    let mut body = String::new();
    for t in (0..=90).step_by(10) {
        if t <= 50 {
            let dial = if t == 50 {
                "timeout,,"
            } else {
                "success,10.0,0"
            };
            body.push_str(&format!("a,b,{dial},{t},t1,t1,x\n"));
        }
        let dial = if t >= 80 {
            "timeout,,"
        } else {
            "success,10.0,0"
        };
        body.push_str(&format!("a,e,{dial},{t},t1,t1,x\n"));
    }
    let pairs = read(&body).unwrap();
    let (ab, ae) = (&pairs[0], &pairs[1]);
    assert_eq!(ab.dst.node, "b");
    assert_eq!((ab.rounds, ab.failed_dials), (5.0, 0.0), "b departed");
    assert_eq!((ae.rounds, ae.failed_dials), (10.0, 2.0), "e is down");
}

/// RDMA pings, TCP pings and traceroutes between the same containers: the
/// pair's RTT is the RDMA median (not a median of both), its rounds are
/// both protocols', and the traces are counted, not read as rounds.
#[test]
fn task_types_are_kept_apart() {
    let header = "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,task_type";
    let mut body = format!("{header}\n");
    for t in 0..5 {
        body.push_str(&format!("a,b,success,10,0,{t},RDMA_PING\n"));
        body.push_str(&format!("a,b,success,60,0,{t},TCP_PING\n"));
        body.push_str(&format!("a,b,success,900,0,{t},TRACEROUTE\n"));
    }
    // One more TCP row: pooled, the median would be a TCP one.
    body.push_str("a,b,success,60,0,6,TCP_PING\n");
    // A pair only TCP measures takes its RTT from TCP.
    body.push_str("a,c,success,70,0,1,tcp_ping\n");
    let (pairs, summary) = read_pings_counted(body.as_bytes(), &CsvOptions::default()).unwrap();
    assert_eq!(pairs.len(), 2);
    let ab = &pairs[0];
    assert_eq!(ab.rounds, 11.0);
    let us = |p: &PairStats| p.rtt_seconds.map(|s| (s * 1e6).round());
    assert_eq!(us(ab), Some(10.0));
    assert_eq!(ab.rtt_samples, 5.0);
    assert_eq!(us(&pairs[1]), Some(70.0));
    assert_eq!(summary.tasks.probes(Protocol::Rdma), 5);
    assert_eq!(summary.tasks.probes(Protocol::Tcp), 7);
    assert_eq!(summary.tasks.traceroute, 5);

    let bad = format!("{header}\na,b,success,10,0,1,RDMA_PING\na,b,success,10,0,2,HTTP\n");
    let e = read_log(&bad).unwrap_err();
    assert_eq!((e.line, e.column.as_deref()), (3, Some("task_type")), "{e}");
    assert!(e.to_string().contains("\"HTTP\""), "{e}");
}

/// Each protocol's rounds are their own series: a container that left
/// costs each protocol its last failed round, and a TCP series still
/// running to the end of the log keeps its failures.
#[test]
fn departures_are_read_protocol_by_protocol() {
    let header = "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,task_type";
    let mut body = format!("{header}\n");
    for t in (0..=50).step_by(10) {
        let dial = if t == 50 { "timeout,," } else { "success,10,0" };
        body.push_str(&format!("a,b,{dial},{t},RDMA_PING\n"));
    }
    for t in (0..=100).step_by(10) {
        let dial = if t >= 90 { "timeout,," } else { "success,50,0" };
        body.push_str(&format!("a,b,{dial},{t},TCP_PING\n"));
    }
    let pairs = read_log(&body).unwrap();
    assert_eq!(pairs[0].rounds, 5.0 + 11.0, "RDMA's departure dropped");
    assert_eq!(pairs[0].failed_dials, 2.0, "TCP's failures to the end stay");
}

/// A container that only others probe left mid-window: both its peers'
/// last rounds failed and then stopped, one of them too close to the end
/// of the log to tell on its own. Neither failure is evidence; a third
/// peer still probing it (failing) to the end says it is still there.
/// A container probing others is read by its own probes instead.
#[test]
fn a_container_whose_peers_all_stopped_took_their_last_failures_with_it() {
    let header = "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time";
    let log = |third: bool, probing: bool| {
        let mut body = format!("{header}\n");
        for (src, phase) in [("a", 0), ("b", 3)] {
            for round in 0..5 {
                let dial = if round == 4 {
                    "timeout,,"
                } else {
                    "success,10,0"
                };
                body.push_str(&format!("{src},x,{dial},{}\n", phase + round * 10));
            }
        }
        // The log runs to 54 s (a pair elsewhere).
        for t in (4..=54).step_by(10) {
            body.push_str(&format!("c,d,success,10,0,{t}\n"));
        }
        if third {
            for t in (4..=54).step_by(10) {
                let dial = if t > 40 { "timeout,," } else { "success,10,0" };
                body.push_str(&format!("e,x,{dial},{t}\n"));
            }
        }
        if probing {
            // x probes y every 10 s to 47 s: within a round of the end.
            for t in (7..=47).step_by(10) {
                body.push_str(&format!("x,y,success,10,0,{t}\n"));
            }
        }
        read_log(&body).unwrap()
    };
    let failed = |pairs: &[PairStats]| pairs.iter().map(|p| p.failed_dials).sum::<f64>();
    assert_eq!(failed(&log(false, false)), 0.0);
    // Then `a`'s pair, 14 s short of the end, is still read as stopped
    // on its own; `b`'s failure and the third peer's two stay.
    assert_eq!(failed(&log(true, false)), 1.0 + 2.0);
    // Nor does it count when the container probes on itself: it speaks
    // for itself, and it has not gone.
    assert_eq!(failed(&log(false, true)), 1.0);
}

/// A pair's RTT spread is its rows' interquartile range / 1.349; one
/// outlier row moves neither it nor the median.
#[test]
fn a_pairs_rtt_spread_comes_from_its_rows_quartiles() {
    let rows: String = [10.0, 11.0, 12.0, 13.0, 14.0, 500.0]
        .iter()
        .enumerate()
        .map(|(t, l)| format!("a,b,success,{l},0,{t},t1,t1,x\n"))
        .collect();
    let ab = &read(&rows).unwrap()[0];
    assert!((ab.rtt_seconds.unwrap() - 12.5e-6).abs() < 1e-12);
    // Quartiles 11.25 and 13.75 µs.
    let spread = ab.rtt_spread_seconds.unwrap();
    assert!((spread - 2.5e-6 / 1.349).abs() < 1e-12, "{spread}");
}

/// Each lossy row is kept with when it ran (seconds before the log's last
/// row) and its probes; the pair's round interval is its rows' span over
/// their count less one.
#[test]
fn a_pairs_lossy_rows_keep_their_times() {
    let pairs = read(
        "a,b,success,10.0,0,1000000000,t1,t2,x\n\
         a,b,success,10.0,0.03,4000000000,t1,t2,x\n\
         a,b,success,10.0,0,7000000000,t1,t2,x\n\
         a,b,success,10.0,0.01,10000000000,t1,t2,x\n\
         b,a,success,10.0,0,10000000000,t2,t1,x\n",
    )
    .unwrap();
    let ab = &pairs[0];
    assert_eq!(ab.round_seconds, Some(3.0));
    let rows: Vec<(f64, f64, f64)> = ab
        .lossy_rows
        .iter()
        .map(|r| (r.at_seconds, r.sent, r.lost))
        .collect();
    assert_eq!(rows, [(-6.0, 100.0, 3.0), (0.0, 100.0, 1.0)]);
    assert_eq!(ab.lost, 4.0);
    // One row: no interval, nothing lost.
    assert_eq!(pairs[1].round_seconds, None);
    assert!(pairs[1].lossy_rows.is_empty());
}
