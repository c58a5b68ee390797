//! The multipath fabric (3 ToRs under 3 spines, flows hashed on L4 over
//! every spine): a dead ToR–spine link is the link's, spine loss the
//! spine's.

use crate::scenario::{print_times, run_scenario, Scenario};
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::bin_path;
use skeletonhunter_tools::fabric::{link_addresses, FabricSpec, Stack, StackOpts};
use std::time::{Duration, Instant};

/// A dead ToR–spine link on the multipath fabric (3 ToRs under 3 spines,
/// flows hashed on L4 over every spine): flows over that link fail while
/// other flows of the same pairs, and other pairs' flows over the same
/// spine, succeed. The link must be alerted — not the ToR, not the spine —
/// and resolve once the link is back. Either direction of the link (the
/// spine's or the ToR's ingress address) is the right component: a dead
/// link drops both.
#[test]
fn e2e_link_fault_is_blamed_on_the_link() {
    if !require_privileges("e2e_link_fault_is_blamed_on_the_link") {
        return;
    }
    let (mut stack, settle) = mapped_multipath_stack();
    let (tor, spine) = (0, 1);
    let (spine_side, tor_side) = link_addresses(spine, tor);
    let sc = Scenario {
        name: "link tor0-spine1 dead",
        inject: Box::new(move |f| f.link_fault(tor, spine, true)),
        clear: Box::new(move |f| f.link_fault(tor, spine, false)),
        expect: vec![
            ("link".into(), spine_side.to_string()),
            ("link".into(), tor_side.to_string()),
        ],
    };
    let (detected, resolved) =
        run_scenario(&mut stack, &sc, settle, &mut |_| {}).unwrap_or_else(|e| panic!("{e:#}"));
    print_times(sc.name, detected, resolved);
}

/// Loss at one spine of the multipath fabric (3 ToRs, 3 spines): the spine
/// (its block, [`Fabric::spine_name`]: the only spine name the labels
/// carry) must be paged, not its ToRs nor its links, and resolve.
#[test]
fn e2e_spine_loss_pages_the_spine() {
    if !require_privileges("e2e_spine_loss_pages_the_spine") {
        return;
    }
    // With the paths mapped, the link stage sees the spine's links lossy
    // and must hand the fault to the spine, not blame a link.
    let (mut stack, settle) = mapped_multipath_stack();
    let spine = 1;
    let sc = Scenario {
        name: "30% loss at spine1",
        inject: Box::new(move |f| f.spine_loss(spine, 30)),
        clear: Box::new(move |f| f.spine_loss(spine, 0)),
        expect: vec![("spine".into(), stack.fabric.spine_name.clone())],
    };
    let mut show = |stack: &Stack| {
        let alerts = stack.labelled_alerts().unwrap_or_default();
        for a in alerts.iter().filter(|a| sc.is_expected(a)) {
            println!("  alert while the fault stands: {}", a.json["annotations"]);
        }
    };
    let (detected, resolved) =
        run_scenario(&mut stack, &sc, settle, &mut show).unwrap_or_else(|e| panic!("{e:#}"));
    print_times(sc.name, detected, resolved);
}

/// The stack on the multipath fabric, healthy and with every pair's flows
/// mapped to paths; with the time a scenario lets it settle.
fn mapped_multipath_stack() -> (Stack, Duration) {
    let mut opts = StackOpts::new(
        bin_path("skeletonhunter-exporter"),
        Some(bin_path("skeletonhunter-localizer")),
    );
    opts.spec = FabricSpec::multipath();
    let mut stack = Stack::start(&opts).expect("start the stack");
    stack
        .wait_healthy(Duration::from_secs(90))
        .expect("healthy baseline");
    wait_paths_mapped(&stack, opts.localizer_window).expect("every pair's flows mapped to paths");
    (stack, opts.settle_time())
}

/// Wait until Prometheus holds traced paths for every skeleton pair, and
/// most of each pair's flows are mapped (the probes its paths count over
/// the flow window against the UDP probes it sent): a link can only be
/// named from the flows mapped before it broke (a flow first traced after
/// its link died goes silent before the address that names the link).
fn wait_paths_mapped(stack: &Stack, flow_window: Duration) -> anyhow::Result<()> {
    let want = stack.skeleton_pairs();
    let paths = "count(count by (src_node, dst_node) (skeletonhunter_path_loss_ratio))";
    let mapped = format!(
        "min(sum by (src_node, dst_node) (skeletonhunter_path_probes) / sum by (src_node, dst_node) \
         (increase(skeletonhunter_probe_sent_total{{protocol=\"udp\"}}[{}s])))",
        flow_window.as_secs()
    );
    let value = |q: &str| -> anyhow::Result<f64> {
        Ok(stack
            .prometheus
            .query(q)?
            .first()
            .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
            .unwrap_or(0.0))
    };
    let start = Instant::now();
    loop {
        let have = value(paths)? as usize;
        let share = if have >= want { value(&mapped)? } else { 0.0 };
        if have >= want && share >= MAPPED_SHARE {
            println!("paths mapped for {have} of {want} pairs, at least {share:.2} of each pair's probes on mapped flows");
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(180) {
            anyhow::bail!(
                "paths mapped for {have} of {want} pairs, at least {share:.2} of each pair's probes on mapped flows, after 180 s"
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Share of a pair's probes that must be on mapped flows before a link
/// fault is injected (the per-path counts cover the last three to four
/// quarters of the flow window, so all flows mapped read about 0.75-1).
const MAPPED_SHARE: f64 = 0.6;
