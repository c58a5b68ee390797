use super::*;
use crate::online::fixtures::fabric_node;

/// Node `n` under ToR `tor<t>` in `tenant`.
fn node(n: &str, t: u32, tenant: &str) -> skeletonhunter_common::topology::Identity {
    fabric_node(n.into(), t, 0, tenant.into())
}

fn pair(
    src: (&str, u32, &str),
    dst: (&str, u32, &str),
    sent: f64,
    lost: f64,
    rtt: Option<f64>,
) -> PairStats {
    PairStats {
        src: node(src.0, src.1, src.2),
        dst: node(dst.0, dst.1, dst.2),
        sent,
        lost,
        rtt_seconds: rtt,
        rtt_samples: if rtt.is_some() { sent - lost } else { 0.0 },
        ..Default::default()
    }
}

fn area<'a>(o: &'a Overview, scope: Scope, id: &str) -> &'a Area {
    o.areas
        .iter()
        .find(|a| a.scope == scope && a.id == id)
        .unwrap_or_else(|| panic!("no {scope:?} {id} in {:?}", o.areas))
}

/// Two ToRs, spines per ToR; tenant `a` on both ToRs, `b` on tor1 only.
fn fabric() -> Vec<PairStats> {
    let mut pairs = vec![
        // Under tor0 only, tenant a: 10 % loss.
        pair(("a0", 0, "a"), ("a1", 0, "a"), 100.0, 10.0, Some(20e-6)),
        // Across the ToRs, tenant a: cut.
        pair(("a1", 0, "a"), ("a2", 1, "a"), 100.0, 100.0, None),
        // Under tor1, tenant b, clean and slow.
        pair(("b0", 1, "b"), ("b1", 1, "b"), 300.0, 0.0, Some(80e-6)),
        // Across tenants (no tenant area), clean.
        pair(("a2", 1, "a"), ("b0", 1, "b"), 100.0, 0.0, Some(40e-6)),
    ];
    // The cross-ToR pair's ends sit under different spines.
    pairs[1].dst.spine = "spine1".into();
    pairs
}

#[test]
fn areas_count_the_pairs_the_path_model_gives_them() {
    let o = overview(&fabric());
    let f = area(&o, Scope::Fabric, "");
    assert_eq!((f.pairs, f.unreachable), (4, 1));
    assert_eq!(f.loss, Some(110.0 / 600.0));
    // A pair under one ToR counts once for it; the cross pair for both.
    assert_eq!(area(&o, Scope::Tor, "tor0").pairs, 2);
    assert_eq!(area(&o, Scope::Tor, "tor1").pairs, 3);
    assert_eq!(area(&o, Scope::Tor, "tor0").loss, Some(110.0 / 200.0));
    // Spines: only the pair between two ToRs, once per spine it touches.
    assert_eq!(area(&o, Scope::Spine, "spine0").pairs, 1);
    assert_eq!(area(&o, Scope::Spine, "spine1").pairs, 1);
    assert_eq!(area(&o, Scope::Spine, "spine1").unreachable, 1);
    // Tenants: both ends in it.
    assert_eq!(area(&o, Scope::Tenant, "a").pairs, 2);
    assert_eq!(area(&o, Scope::Tenant, "b").pairs, 1);
    assert!(o
        .areas
        .iter()
        .all(|a| a.scope != Scope::Tenant || !a.id.is_empty()));
    assert_eq!(o.areas[0].scope, Scope::Fabric, "the fabric comes first");
}

#[test]
fn rtt_quantiles_spread_over_the_pairs_medians() {
    let o = overview(&fabric());
    let f = area(&o, Scope::Fabric, "");
    assert_eq!(f.rtt, vec![(0.5, 40e-6), (0.99, 80e-6)]);
    // The cut pair has no RTT: tor0's spread is its one answered pair.
    assert_eq!(
        area(&o, Scope::Tor, "tor0").rtt,
        vec![(0.5, 20e-6), (0.99, 20e-6)]
    );
    assert!(area(&o, Scope::Spine, "spine0").rtt.is_empty());
    // Cumulative counts of pairs by median RTT, +Inf holding all three.
    let count_at = |bound: f64| o.rtt_buckets.iter().find(|b| b.0 >= bound).map(|b| b.1);
    assert_eq!(count_at(16e-6), Some(0));
    assert_eq!(count_at(32e-6), Some(1));
    assert_eq!(count_at(64e-6), Some(2));
    assert_eq!(o.rtt_buckets.last(), Some(&(f64::INFINITY, 3)));
}

#[test]
fn unanswered_dials_make_a_pair_unreachable() {
    let mut p = pair(("a0", 0, "a"), ("a1", 0, "a"), 0.0, 0.0, None);
    p.rounds = 10.0;
    p.failed_dials = 10.0;
    let o = overview(&[p]);
    let f = area(&o, Scope::Fabric, "");
    assert_eq!((f.pairs, f.unreachable, f.loss), (1, 1, None));
    assert_eq!(o.worst.len(), 1);
    assert_eq!(o.worst[0].loss, 1.0);
}

#[test]
fn worst_pairs_are_the_lossiest_then_the_slowest_per_tenant() {
    let o = overview(&fabric());
    let names: Vec<(&str, &str, f64)> = o
        .worst
        .iter()
        .map(|w| (w.src.as_str(), w.dst.as_str(), w.loss))
        .collect();
    assert_eq!(
        names,
        vec![
            ("a1", "a2", 1.0),
            ("a0", "a1", 0.1),
            ("b0", "b1", 0.0),
            ("a2", "b0", 0.0)
        ]
    );
    assert_eq!(o.worst[0].tenant, "a");
    assert_eq!(o.worst[3].tenant, "", "ends in two tenants");
    assert_eq!(
        (o.worst[0].src_tor.as_str(), o.worst[0].dst_tor.as_str()),
        ("tor0", "tor1")
    );
}

#[test]
fn worst_pairs_are_bounded_per_tenant_and_in_all() {
    // 40 tenants of 20 lossy, slow pairs each: 50 + 50 fabric-wide, 5 + 5
    // per tenant at most, never more than the cap.
    let mut pairs = Vec::new();
    for t in 0..40 {
        for i in 0..20 {
            let tenant = format!("t{t}");
            let loss = f64::from(t * 20 + i + 1);
            pairs.push(pair(
                (&format!("n{t}-{i}"), 0, &tenant),
                (&format!("m{t}-{i}"), 1, &tenant),
                1000.0,
                loss,
                Some(1e-6 * f64::from(1000 - (t * 20 + i))),
            ));
        }
    }
    let o = overview(&pairs);
    assert!(o.worst.len() <= 100 + 40 * 10, "{}", o.worst.len());
    for t in 0..40 {
        let tenant = format!("t{t}");
        let mine = o.worst.iter().filter(|w| w.tenant == tenant).count();
        assert!(mine >= 5, "tenant {tenant} has {mine} of its worst pairs");
    }
    let lossiest = o.worst.first().map(|w| w.loss);
    assert_eq!(lossiest, Some(800.0 / 1000.0));
}

#[test]
fn nothing_in_nothing_out() {
    let o = overview(&[]);
    assert_eq!(o.areas.len(), 1);
    assert_eq!((o.areas[0].pairs, o.areas[0].loss), (0, None));
    assert!(o.worst.is_empty());
    assert_eq!(o.rtt_buckets.last(), Some(&(f64::INFINITY, 0)));
}
