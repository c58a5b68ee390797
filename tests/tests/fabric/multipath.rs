//! Multi-flow probing on the multipath fabric (3 ToRs, 3 spines, every
//! ToR linked to every spine, Linux multipath routes hashing on L4): one
//! host's probe flows to another really take different spines, each flow
//! is mapped to its path by its own Paris trace, and a dead ToR–spine link
//! shows as 100 % loss on exactly the paths over that link — other paths
//! of the same pair, and other pairs' paths over the same spine, lose
//! nothing. The broken flows' re-traces are cut short at the dead link,
//! and their last complete path (the one naming the link) is kept.

use anyhow::{bail, ensure, Context, Result};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::fabric::{
    exporter_get, flow_traces, start_exporters, Fabric, FabricSpec, FlowTrace, StackOpts,
};
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::{bin_path, wait_until};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The coverage formula's flow count for 3 equal-cost paths.
const FLOWS: usize = 15;

/// Flow -> (spine, path id) of `src`'s complete traces towards `dst`, once
/// every flow has one.
fn mapped(f: &Fabric, src: &str, dst: Ipv4Addr) -> Option<BTreeMap<usize, (usize, String)>> {
    let traces = flow_traces(f, f.node(src).ok()?).ok()?;
    let m: BTreeMap<usize, (usize, String)> = traces
        .iter()
        .filter(|t| t.dst == dst && t.reached && !t.running)
        .filter_map(|t| Some((t.flow, (f.spine_of_trace(t)?, t.path.clone()?))))
        .collect();
    (m.len() == FLOWS).then_some(m)
}

/// The (loss ratio, probes) of each path of `src -> dst` on `src`'s /metrics.
fn path_loss(f: &Fabric, src: &str, dst: &str) -> Result<BTreeMap<String, (f64, f64)>> {
    let body = exporter_get(f, f.node(src)?, "/metrics")?;
    let pair =
        format!("skeletonhunter_path_loss_ratio{{src_node=\"{src}\",dst_node=\"{dst}\",path=\"");
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| l.starts_with(&pair)) {
        let id = &line[pair.len()..pair.len() + 8];
        let labels = [
            format!("src_node=\"{src}\""),
            format!("dst_node=\"{dst}\""),
            format!("path=\"{id}\""),
        ];
        let l: Vec<&str> = labels.iter().map(String::as_str).collect();
        let ratio = sample(&body, "skeletonhunter_path_loss_ratio", &l).context("ratio")?;
        let probes = sample(&body, "skeletonhunter_path_probes", &l).context("probes")?;
        out.insert(id.to_string(), (ratio, probes));
    }
    Ok(out)
}

#[test]
fn flows_spread_over_spines_and_a_link_fault_hits_only_its_paths() -> Result<()> {
    if !require_privileges("flows_spread_over_spines_and_a_link_fault_hits_only_its_paths") {
        return Ok(());
    }
    let _turn = crate::beside_others();
    let mut opts = StackOpts::new(bin_path("skeletonhunter-exporter"), None);
    opts.spec = FabricSpec::multipath();
    let f = Fabric::new(opts.spec)?;
    let dir = TempDir::new("multipath")?;
    let mut exporters = start_exporters(&f, &opts, dir.path())?;
    let (src, dst, other, far) = ("t0-h0-c0", "t1-h0-c0", "t1-h0-c0", "t2-h0-c0");
    let dst_ip = f.node(dst)?.data_ip;
    let far_ip = f.node(far)?.data_ip;
    let logs = |e: &[skeletonhunter_tools::ChildGuard]| e[0].log();

    // 1. Every flow of src -> dst (and other -> far) is mapped to a spine.
    let flows = wait_until(
        "every flow mapped",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || mapped(&f, src, dst_ip),
    )
    .map_err(|e| anyhow::anyhow!("{e}; log of {src}:\n{}", logs(&exporters)))?;
    let far_flows = wait_until(
        "every far flow mapped",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || mapped(&f, other, far_ip),
    )?;
    let spines: BTreeSet<usize> = flows.values().map(|(s, _)| *s).collect();
    eprintln!("{src} -> {dst}: flow -> (spine, path) {flows:?}");
    ensure!(
        spines.len() >= 2,
        "all {FLOWS} flows took one spine: {flows:?}"
    );
    let ids: BTreeSet<&String> = flows.values().map(|(_, p)| p).collect();
    ensure!(ids.len() == spines.len(), "one path per spine: {flows:?}");
    let body = exporter_get(&f, f.node(src)?, "/metrics")?;
    let pair = [format!("src_node=\"{src}\""), format!("dst_node=\"{dst}\"")];
    let pair: Vec<&str> = pair.iter().map(String::as_str).collect();
    assert_eq!(
        sample(&body, "skeletonhunter_probe_flows", &pair),
        Some(FLOWS as f64)
    );
    let hop_paths: BTreeSet<&str> = body
        .lines()
        .filter(|l| {
            l.starts_with("skeletonhunter_path_hop_info{") && pair.iter().all(|p| l.contains(p))
        })
        .filter_map(|l| l.split("path=\"").nth(1)?.get(..8))
        .collect();
    assert_eq!(
        hop_paths.len(),
        spines.len(),
        "hop series per path, not per flow:\n{body}"
    );

    // 2. Kill the link tor0 - spine X, X a spine some flows avoid.
    let x = *spines.iter().next().context("no spine")?;
    let over_x: BTreeSet<String> = flows
        .values()
        .filter(|(s, _)| *s == x)
        .map(|(_, p)| p.clone())
        .collect();
    let others: BTreeSet<String> = flows
        .values()
        .filter(|(s, _)| *s != x)
        .map(|(_, p)| p.clone())
        .collect();
    ensure!(
        far_flows.values().any(|(s, _)| *s == x),
        "no flow of {other} -> {far} crosses spine{x}: {far_flows:?}"
    );
    // Traces that started before this are not about the fault (a flow
    // whose first probes went out before its peer's responder was up is
    // traced as lossy at start).
    let injected = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    f.link_fault(0, x, true)?;

    // 3. Exactly the paths over the link lose everything.
    let last = std::cell::RefCell::new(String::new());
    let ok = wait_until(
        "loss on exactly the paths over the link",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || {
            let near = path_loss(&f, src, dst).ok()?;
            let far_loss = path_loss(&f, other, far).ok()?;
            *last.borrow_mut() = format!("{src}->{dst} {near:?}; {other}->{far} {far_loss:?}");
            let ids: BTreeSet<String> = near.keys().cloned().collect();
            let all: BTreeSet<String> = over_x.union(&others).cloned().collect();
            let hit = over_x
                .iter()
                .all(|p| near.get(p).is_some_and(|(r, n)| *r == 1.0 && *n > 0.0));
            let spared = others
                .iter()
                .all(|p| near.get(p).is_some_and(|(r, n)| *r == 0.0 && *n > 0.0));
            let far_ok =
                !far_loss.is_empty() && far_loss.values().all(|(r, n)| *r == 0.0 && *n > 0.0);
            (ids == all && hit && spared && far_ok).then_some(())
        },
    );
    if let Err(e) = ok {
        bail!(
            "{e}; last: {}\nlog of {src}:\n{}",
            last.borrow(),
            logs(&exporters)
        );
    }
    let body = exporter_get(&f, f.node(src)?, "/metrics")?;
    assert_eq!(
        sample(&body, "skeletonhunter_probe_worst_flow_loss_ratio", &pair),
        Some(1.0)
    );

    // 4. The broken flows were re-traced, cut short, and kept their path.
    let cut: Vec<FlowTrace> = wait_until(
        "a lossy flow re-traced",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let t: Vec<FlowTrace> = flow_traces(&f, f.node(src).ok()?)
                .ok()?
                .into_iter()
                .filter(|t| {
                    t.dst == dst_ip
                        && t.reason == "lossy_flow"
                        && t.finished
                        && !t.running
                        && t.started_unix_seconds >= injected
                })
                .collect();
            (!t.is_empty()).then_some(t)
        },
    )?;
    for t in &cut {
        assert!(
            !t.reached,
            "a flow over the dead link reached its peer: {t:?}"
        );
        let before = &flows[&t.flow].1;
        assert!(
            over_x.contains(before),
            "only flows over spine{x} lose: {t:?}"
        );
        assert_eq!(
            t.path.as_ref(),
            Some(before),
            "the last complete path is kept: {t:?}"
        );
    }
    f.link_fault(0, x, false)?;
    for e in &mut exporters {
        e.check_running()?;
    }
    Ok(())
}
