use super::*;
use std::collections::BTreeSet;

#[test]
fn crosses_answers_as_the_path_does() {
    // Same host, same ToR, across ToRs (one or two spines), unknown
    // placements, and one id used for components of different kinds.
    let ends = [
        id("a", "h1", "t1", "s1"),
        id("b", "h1", "t1", "s1"),
        id("c", "h2", "t1", "s1"),
        id("d", "h3", "t2", "s1"),
        id("e", "h4", "t3", "s2"),
        id("f", "", "", ""),
        id("g", "", "t1", "s1"),
        id("h1", "t1", "h1", "s2"),
    ];
    let kinds = [
        Kind::Node,
        Kind::Nic,
        Kind::Host,
        Kind::Tor,
        Kind::Spine,
        Kind::Hop,
        Kind::Link,
        Kind::Pod,
        Kind::Tenant,
    ];
    let names: BTreeSet<&str> = ends
        .iter()
        .flat_map(|i| [&i.node, &i.nic, &i.host, &i.tor, &i.spine].map(String::as_str))
        .collect();
    let mut crossing = 0;
    for a in &ends {
        for b in &ends {
            let path = path_ids(a, b);
            for kind in kinds {
                for name in &names {
                    let want = path.contains(&(kind, *name));
                    crossing += usize::from(want);
                    assert_eq!(
                        crosses(a, b, kind, name),
                        want,
                        "{a:?} -> {b:?}: {kind:?} {name:?}"
                    );
                }
            }
        }
    }
    // Both answers were exercised.
    assert!(crossing > 0);
}

fn id(node: &str, host: &str, tor: &str, spine: &str) -> Identity {
    Identity {
        node: node.into(),
        nic: format!("nic-{node}"),
        host: host.into(),
        tor: tor.into(),
        spine: spine.into(),
        ..Default::default()
    }
}

fn kinds(p: &[Component]) -> Vec<String> {
    p.iter().map(ToString::to_string).collect()
}

/// The path from node a on h1 to node b on h2 across `switches`.
fn between_hosts(switches: &[&str]) -> Vec<String> {
    let mut p = vec!["node/a", "nic/nic-a", "host/h1"];
    p.extend_from_slice(switches);
    p.extend(["host/h2", "nic/nic-b", "node/b"]);
    p.into_iter().map(String::from).collect()
}

#[test]
fn same_host_path_has_no_switch() {
    let p = path(&id("a", "h1", "t1", "s1"), &id("b", "h1", "t1", "s1"));
    assert_eq!(
        kinds(&p),
        ["node/a", "nic/nic-a", "host/h1", "nic/nic-b", "node/b"]
    );
}

#[test]
fn same_tor_path_crosses_one_tor() {
    let p = path(&id("a", "h1", "t1", "s1"), &id("b", "h2", "t1", "s1"));
    assert_eq!(kinds(&p), between_hosts(&["tor/t1"]));
}

#[test]
fn cross_tor_path_crosses_both_tors_and_spines_once() {
    let p = path(&id("a", "h1", "t1", "s1"), &id("b", "h2", "t2", "s1"));
    assert_eq!(kinds(&p), between_hosts(&["tor/t1", "spine/s1", "tor/t2"]));
    let p = path(&id("a", "h1", "t1", "s1"), &id("b", "h2", "t2", "s2"));
    assert!(kinds(&p).contains(&"spine/s2".to_string()));
    assert_eq!(p.len(), 10);
}

#[test]
fn unknown_components_are_skipped() {
    let a = Identity {
        node: "a".into(),
        ..Default::default()
    };
    let b = Identity {
        node: "b".into(),
        ..Default::default()
    };
    assert_eq!(kinds(&path(&a, &b)), ["node/a", "node/b"]);
}

#[test]
fn kind_round_trips_and_rejects_unknown() {
    for k in Kind::ALL.into_iter().chain([Kind::Hop, Kind::Link]) {
        assert_eq!(k.as_str().parse::<Kind>().unwrap(), k);
    }
    let err = "switch".parse::<Kind>().unwrap_err();
    assert!(err.to_string().contains("switch"));
}

#[test]
fn hop_is_a_path_component_outside_the_identity() {
    assert!(Kind::Hop.is_path_component() && Kind::Link.is_path_component());
    assert!(!Kind::ALL.contains(&Kind::Hop) && !Kind::ALL.contains(&Kind::Link));
    let ident = id("a", "h1", "t1", "s1");
    assert_eq!(ident.get(Kind::Hop), "");
    assert_eq!(ident.get(Kind::Link), "");
    // The node_info label set: no name a scrape target also carries.
    let names: Vec<&str> = ident.labels().iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        [
            "node_id",
            "nic",
            "host",
            "tor",
            "spine",
            "network_pod",
            "tenant"
        ]
    );
}

#[test]
fn no_topology_label_is_a_kubernetes_target_label() {
    // Single-place labels, and the src_/dst_ pair labels.
    let kinds = Kind::ALL.into_iter().chain([Kind::Hop, Kind::Link]);
    for k in kinds {
        for name in [
            k.label_name().to_string(),
            format!("src_{}", k.as_str()),
            format!("dst_{}", k.as_str()),
        ] {
            assert!(
                !RESERVED_TARGET_LABELS.contains(&name.as_str()),
                "{name} is a target label"
            );
        }
    }
    // Kind values are label values and stay the kinds' names.
    assert_eq!(Kind::Node.as_str(), "node");
    assert_eq!(Kind::Pod.as_str(), "pod");
}

#[test]
fn node_info_encodes_the_label_names() {
    use prometheus_client::metrics::{family::Family, gauge::Gauge};
    let mut reg = prometheus_client::registry::Registry::default();
    let fam = Family::<Identity, Gauge>::default();
    reg.register("node_info", "x", fam.clone());
    let mut ident = id("a", "h1", "t1", "s1");
    ident.pod = "p1".into();
    fam.get_or_create(&ident).set(1);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
    assert!(
        text.contains(
            r#"node_info{node_id="a",nic="nic-a",host="h1",tor="t1",spine="s1",network_pod="p1",tenant=""} 1"#
        ),
        "{text}"
    );
}

#[test]
fn an_endpoint_named_by_its_host_or_nic_probes_the_underlay() {
    let mut i = id("h1", "h1", "t1", "s1");
    i.nic = "10.0.0.1".into();
    assert_eq!(Plane::of(&i), Plane::Underlay);
    i.node = "10.0.0.1".into();
    assert_eq!(Plane::of(&i), Plane::Underlay);
    i.node = "h1-c0".into();
    assert_eq!(Plane::of(&i), Plane::Overlay);
    // Unknown host and NIC: a node never equals an empty name.
    let bare = Identity {
        node: String::new(),
        ..Identity::default()
    };
    assert_eq!(Plane::of(&bare), Plane::Overlay);
}
