use super::*;

const MS: u64 = 1_000_000;

#[test]
fn split_matches_r_pingmesh_formulas() {
    // T1=1µs, T2=2µs, T3/T4 with 5µs responder delay, T5=32µs, T6=40µs.
    let (net, prober) = split_rtt(1_000, 2_000, 32_000, 40_000, 5_000).unwrap();
    assert_eq!(net, (32_000 - 2_000) - 5_000);
    assert_eq!(prober, (40_000 - 1_000) - (32_000 - 2_000));
}

#[test]
fn split_rejects_inconsistent_stamps() {
    assert_eq!(split_rtt(0, 10, 5, 100, 0), Err("rdma_stamps_out_of_order"));
    assert_eq!(
        split_rtt(0, 10, 20, 100, 50),
        Err("rdma_responder_delay_exceeds_rtt")
    );
    assert_eq!(
        split_rtt(0, 0, 1_000_000, 10_000, 0),
        Err("rdma_nic_interval_exceeds_host_interval")
    );
    // Software stamps: NIC interval == host interval is fine.
    assert_eq!(split_rtt(0, 0, 10_000, 10_000, 1_000), Ok((9_000, 0)));
}

fn full_exchange(order: &[&str]) -> Outcome<&'static str> {
    let mut p: Prober<&str> = Prober::new(77, 100 * MS, true);
    let probe = p.start("peer-b", 1_000);
    let seq = probe.seq;
    let mut r: Responder<u32> = Responder::new(16, true);
    let ack = r.on_probe(&probe, 50_000, 9).unwrap();
    let detail = r.on_send_complete(ack.wr_id, 53_000).unwrap();
    assert_eq!(detail.packet.responder_delay_ns, 3_000);
    let mut done = None;
    for step in order {
        let res = match *step {
            "send" => p.on_send_complete(seq, 2_000).map(Received::Done),
            "ack" => Some(p.on_receive(&ack.packet, 30_000, 31_000)),
            "detail" => Some(p.on_receive(&detail.packet, 30_500, 31_500)),
            _ => unreachable!(),
        };
        if let Some(Received::Done(o)) = res {
            assert!(done.is_none(), "finished twice");
            done = Some(o);
        }
    }
    assert_eq!(p.in_flight(), 0);
    done.expect("exchange finished")
}

#[test]
fn exchange_completes_in_any_completion_order() {
    let want = Outcome::Measured {
        peer: "peer-b",
        seq: 1,
        network_ns: (30_000 - 2_000) - 3_000,
        prober_delay_ns: (31_000 - 1_000) - (30_000 - 2_000),
        responder_delay_ns: 3_000,
        hardware: true,
    };
    for order in [
        ["send", "ack", "detail"],
        ["ack", "send", "detail"],
        ["ack", "detail", "send"],
        ["detail", "ack", "send"],
    ] {
        assert_eq!(full_exchange(&order), want, "order {order:?}");
    }
}

#[test]
fn lost_and_unusable_on_expiry() {
    let mut p: Prober<u8> = Prober::new(1, 10 * MS, false);
    let a = p.start(1, 0);
    let b = p.start(2, 0);
    let c = p.start(3, 5 * MS);
    p.on_send_complete(a.seq, 10);
    p.on_send_complete(b.seq, 10);
    assert_eq!(
        p.on_receive(&Packet::ack_for(&b), 100, 110),
        Received::Pending
    );
    assert!(p.expire(10 * MS - 1).is_empty());
    let mut out = p.expire(10 * MS);
    out.sort_by_key(|o| match o {
        Outcome::Lost { seq, .. } | Outcome::Unusable { seq, .. } => *seq,
        Outcome::Measured { seq, .. } => *seq,
    });
    assert_eq!(
        out,
        vec![
            Outcome::Lost {
                peer: 1,
                seq: a.seq
            },
            Outcome::Unusable {
                peer: 2,
                seq: b.seq,
                reason: "rdma_no_ack_detail",
                fallback_rtt_ns: Some(90),
            },
        ]
    );
    assert_eq!(p.in_flight(), 1);
    assert_eq!(
        p.expire(15 * MS),
        vec![Outcome::Lost {
            peer: 3,
            seq: c.seq
        }]
    );
    assert_eq!(p.in_flight(), 0);
}

#[test]
fn late_duplicate_and_foreign_packets_are_strays() {
    let mut p: Prober<u8> = Prober::new(5, 10 * MS, false);
    let probe = p.start(1, 0);
    // Another session's ACK with the same seq.
    let foreign = Packet::ack_for(&Packet::probe(6, probe.seq));
    assert_eq!(
        p.on_receive(&foreign, 1, 1),
        Received::Stray("rdma_other_session")
    );
    let ack = Packet::ack_for(&probe);
    assert_eq!(p.on_receive(&ack, 100, 100), Received::Pending);
    assert_eq!(
        p.on_receive(&ack, 200, 200),
        Received::Stray("rdma_late_or_duplicate")
    );
    assert_eq!(
        p.on_receive(&probe, 200, 200),
        Received::Stray("rdma_unexpected_probe")
    );
    // After expiry, the late detail is a stray, never a second outcome.
    assert_eq!(p.expire(10 * MS).len(), 1);
    let detail = Packet::detail_for(&probe, 1, false);
    assert_eq!(
        p.on_receive(&detail, 300, 300),
        Received::Stray("rdma_late_or_duplicate")
    );
}

#[test]
fn send_failure_is_not_loss() {
    let mut p: Prober<u8> = Prober::new(5, 10 * MS, false);
    let probe = p.start(4, 0);
    assert_eq!(
        p.on_send_failed(probe.seq),
        Some(Outcome::Unusable {
            peer: 4,
            seq: probe.seq,
            reason: "rdma_send_failed",
            fallback_rtt_ns: None,
        })
    );
    assert!(p.expire(u64::MAX).is_empty());
}

/// A prober whose probe to peer 4, sent at 0 with its send completion at
/// 1 µs, was acked (NIC stamp 5 µs, host 6 µs): its detail decides.
fn acked_at_6_us() -> (Prober<u8>, Packet) {
    let mut p: Prober<u8> = Prober::new(5, 10 * MS, true);
    let probe = p.start(4, 0);
    p.on_send_complete(probe.seq, 1_000);
    p.on_receive(&Packet::ack_for(&probe), 5_000, 6_000);
    (p, probe)
}

#[test]
fn inconsistent_stamps_fall_back_to_nic_rtt() {
    let (mut p, probe) = acked_at_6_us();
    // Responder claims 9 µs inside a 4 µs round trip.
    assert_eq!(
        p.on_receive(&Packet::detail_for(&probe, 9_000, true), 5_100, 6_100),
        Received::Done(Outcome::Unusable {
            peer: 4,
            seq: probe.seq,
            reason: "rdma_responder_delay_exceeds_rtt",
            fallback_rtt_ns: Some(4_000),
        })
    );
    // No send completion: the host interval stands in.
    let probe = p.start(4, 100);
    p.on_receive(&Packet::ack_for(&probe), 5_000, 7_100);
    assert_eq!(
        p.expire(u64::MAX),
        vec![Outcome::Unusable {
            peer: 4,
            seq: probe.seq,
            reason: "rdma_no_send_completion",
            fallback_rtt_ns: Some(7_000),
        }]
    );
}

#[test]
fn hardware_flag_needs_both_ends() {
    let (mut p, probe) = acked_at_6_us();
    match p.on_receive(&Packet::detail_for(&probe, 100, false), 5_100, 6_100) {
        Received::Done(Outcome::Measured { hardware, .. }) => assert!(!hardware),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn retain_peers_drops_removed_peer_probes() {
    let mut p: Prober<u8> = Prober::new(5, 10 * MS, true);
    p.start(1, 0);
    p.start(2, 0);
    p.retain_peers(|peer| *peer == 2);
    assert_eq!(p.in_flight(), 1);
    assert_eq!(p.expire(u64::MAX), vec![Outcome::Lost { peer: 2, seq: 2 }]);
}

#[test]
fn responder_is_bounded_and_tags_wr_ids() {
    let mut r: Responder<u8> = Responder::new(2, false);
    let probes: Vec<Packet> = (1..=3).map(|s| Packet::probe(9, s)).collect();
    let acks: Vec<Reply<u8>> = probes
        .iter()
        .map(|p| r.on_probe(p, 10, 1).unwrap())
        .collect();
    assert!(acks.iter().all(|a| a.wr_id & RESPONDER_WR_BIT != 0));
    assert_eq!(acks[2].packet.kind, Kind::Ack);
    assert_eq!(r.pending(), 2);
    assert_eq!(r.dropped(), 1);
    // The oldest ACK's completion no longer yields a detail.
    assert_eq!(r.on_send_complete(acks[0].wr_id, 20), None);
    let d = r.on_send_complete(acks[2].wr_id, 25).unwrap();
    assert_eq!(d.packet.kind, Kind::AckDetail);
    assert_eq!(d.packet.seq, 3);
    assert_eq!(d.packet.responder_delay_ns, 15);
    assert!(!d.packet.hw_timestamps());
    // The detail's own completion is ignored.
    assert_eq!(r.on_send_complete(d.wr_id, 30), None);
    // Non-probes are not answered.
    assert_eq!(r.on_probe(&Packet::ack_for(&probes[0]), 1, 1), None);
    r.compact();
}

#[test]
fn every_reason_literal_of_the_exchange_is_listed() {
    // The zero-valued counters start from REASONS: a reason added to the
    // code but not to the list would appear only at its first error.
    let src = include_str!("../exchange.rs");
    let code = &src[..src.find("pub const REASONS").unwrap()];
    let mut found = 0;
    for lit in code.split('"').skip(1).step_by(2) {
        if lit.starts_with("rdma_") {
            assert!(REASONS.contains(&lit), "{lit} is not in REASONS");
            found += 1;
        }
    }
    assert!(found >= REASONS.len(), "{found} literals");
}
