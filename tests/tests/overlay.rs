//! The overlay fabric: containers on one VXLAN subnet over the routed
//! underlay, and the overlay's own faults — a container's virtual switch
//! port, a host's tunnel, a deleted forwarding entry — each breaking
//! exactly its part of the overlay while the underlay stays clean.

use skeletonhunter_tests::fabric::{reachable, DataPlane, Fabric, FabricSpec};
use skeletonhunter_tests::require_privileges;

#[test]
fn overlay_fabric_routes_and_each_overlay_fault_breaks_only_its_part() {
    if !require_privileges("overlay_fabric_routes_and_each_overlay_fault_breaks_only_its_part") {
        return;
    }
    let f = Fabric::overlay(FabricSpec::default()).expect("build the overlay fabric");
    assert_eq!(f.data_plane, DataPlane::Vxlan);
    let a = f.node("t0-h0-c0").unwrap();
    let sibling = f.node("t0-h0-c1").unwrap();
    let b = f.node("t1-h2-c0").unwrap();
    let c = f.node("t0-h1-c0").unwrap();
    let (home, far_host) = (f.host_of(a), f.host_of(b));
    // One subnet: the far container is on the link, not behind a router.
    assert_eq!(a.data_ip.octets()[..3], b.data_ip.octets()[..3]);
    assert!(reachable(&a.ns, b.data_ip).unwrap(), "cross-ToR overlay");
    assert!(reachable(&a.ns, sibling.data_ip).unwrap(), "same host");
    assert!(
        reachable(&home.ns, far_host.nic_ip).unwrap(),
        "underlay host to host"
    );

    // The container's switch port: a alone is cut, from near and far.
    f.port_loss(a, 100).unwrap();
    assert!(!reachable(&b.ns, a.data_ip).unwrap(), "port drops a");
    assert!(!reachable(&sibling.ns, a.data_ip).unwrap(), "also locally");
    assert!(
        reachable(&b.ns, sibling.data_ip).unwrap(),
        "sibling's port fine"
    );
    assert!(reachable(&f.mon, a.mgmt_ip).unwrap(), "management survives");
    f.port_loss(a, 0).unwrap();
    assert!(reachable(&b.ns, a.data_ip).unwrap(), "port fault undone");

    // The host's tunnel: its containers lose every other host, keep each
    // other, and the host's underlay answers as before.
    f.tunnel_blocked(home, true).unwrap();
    assert!(!reachable(&b.ns, a.data_ip).unwrap(), "tunnel cuts a");
    assert!(
        !reachable(&c.ns, sibling.data_ip).unwrap(),
        "and its sibling"
    );
    assert!(
        reachable(&a.ns, sibling.data_ip).unwrap(),
        "same host still"
    );
    assert!(
        reachable(&far_host.ns, home.nic_ip).unwrap(),
        "underlay still up"
    );
    assert!(
        reachable(&c.ns, b.data_ip).unwrap(),
        "other hosts unaffected"
    );
    f.tunnel_blocked(home, false).unwrap();
    assert!(reachable(&b.ns, a.data_ip).unwrap(), "tunnel unblocked");

    // A forwarding entry deleted on a's host: a and its sibling lose b;
    // b still reaches c, and c still reaches b.
    f.forwarding_entry(home, b, false).unwrap();
    assert!(!reachable(&a.ns, b.data_ip).unwrap(), "entry gone: a to b");
    assert!(!reachable(&sibling.ns, b.data_ip).unwrap(), "sibling to b");
    assert!(reachable(&c.ns, b.data_ip).unwrap(), "other host to b");
    assert!(reachable(&a.ns, c.data_ip).unwrap(), "a to others");
    assert!(
        f.forwarding_entry(home, sibling, false).is_err(),
        "a same-host container has no tunnel entry"
    );

    // clear_faults writes the entries back, as after every other fault.
    f.port_loss(b, 100).unwrap();
    f.clear_faults().unwrap();
    assert!(reachable(&a.ns, b.data_ip).unwrap(), "faults cleared");
    assert!(reachable(&b.ns, a.data_ip).unwrap(), "both ways");

    // The routed fabric refuses overlay faults instead of doing nothing.
    drop(f);
    let routed = Fabric::new(FabricSpec::default()).expect("routed fabric");
    let err = routed
        .port_loss(routed.node("t0-h0-c0").unwrap(), 100)
        .unwrap_err();
    assert!(err.to_string().contains("overlay"), "{err}");
}
