//! The localizer's one-shot commands against a real Prometheus: `rules`
//! generates recording rules that promtool accepts and that aggregate along
//! the path model, `run --once` prints the analysis of live data, and bad
//! flags fail with errors that name them. Probe data from the synthetic
//! scrape target (`skeletonhunter_tests::localizer::FakeFabric`).

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tests::localizer::{tor, FakeFabric};
use skeletonhunter_tools::servers::{self, free_loopback_addr, ServerOpts};
use skeletonhunter_tools::{bin_path, wait_until};
use std::process::Command;
use std::time::Duration;

#[test]
fn generated_rules_pass_promtool_and_evaluate() -> Result<()> {
    let fabric = FakeFabric::start()?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    let config = format!(
        "{}rule_files:\n  - 'generated*.yml'\n",
        fabric.scrape_config()
    )
    .replace("global:\n", "global:\n  evaluation_interval: 1s\n");
    let prom = servers::start_prometheus(ServerOpts::new(free_loopback_addr()?, &config))?;
    wait_until(
        "node_info scraped",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || (prom.query("skeletonhunter_node_info").ok()?.len() == 6).then_some(()),
    )?;
    let file = prom.dir().join("generated.yml");
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .args([
            "rules",
            "--prometheus",
            &prom.url(),
            "--window",
            "10s",
            "--output",
        ])
        .arg(&file)
        .output()?;
    assert!(
        out.status.success(),
        "rules failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let check = servers::promtool(&["check", "rules", file.to_str().context("path")?])?.ok()?;
    assert!(check.stdout.contains("SUCCESS"), "{}", check.stdout);
    // 2 ToRs + 1 spine + 1 tenant, each with sent, lost, loss, p50, p90, p99.
    assert!(check.stdout.contains("24 rules found"), "{}", check.stdout);
    // RTT rules over native histograms, or native-or-classic: valid too.
    for mode in ["native", "auto"] {
        let other = prom.dir().join(format!("rtt-{mode}.yml"));
        let out = Command::new(bin_path("skeletonhunter-localizer"))
            .args([
                "rules",
                "--prometheus",
                &prom.url(),
                "--histograms",
                mode,
                "--output",
            ])
            .arg(&other)
            .output()?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&other)?;
        assert!(
            text.contains("rate(skeletonhunter_probe_rtt_seconds{"),
            "{text}"
        );
        let check =
            servers::promtool(&["check", "rules", other.to_str().context("path")?])?.ok()?;
        assert!(
            check.stdout.contains("24 rules found"),
            "{mode}: {}",
            check.stdout
        );
    }

    // Loaded into the real Prometheus, the aggregates follow the path model:
    // every pair crossing t1 loses 30%; t2 carries 18 such pairs of its 24.
    prom.reload()?;
    let value = |q: &str| -> Option<f64> {
        let r = prom.query(q).ok()?;
        r.first()?["value"][1].as_str()?.parse().ok()
    };
    let (t1, t2, s1) =
        wait_until(
            "recorded aggregates",
            Duration::from_secs(20),
            Duration::from_millis(250),
            || {
                Some((
            value("tor:skeletonhunter_probe_loss:ratio_rate10s{tor=\"t1\",protocol=\"udp\"}")?,
            value("tor:skeletonhunter_probe_loss:ratio_rate10s{tor=\"t2\",protocol=\"udp\"}")?,
            value("spine:skeletonhunter_probe_loss:ratio_rate10s{spine=\"s1\",protocol=\"udp\"}")?,
        ))
            },
        )?;
    assert!((t1 - 0.3).abs() < 0.02, "t1 loss {t1}");
    assert!((t2 - 0.225).abs() < 0.02, "t2 loss {t2}");
    assert!((s1 - 0.3).abs() < 0.02, "s1 loss {s1}");
    let p50 = wait_until(
        "recorded RTT",
        Duration::from_secs(10),
        Duration::from_millis(250),
        || {
            value("tenant:skeletonhunter_probe_rtt_seconds:p50_rate10s{tenant=\"job-a\",protocol=\"udp\"}")
        },
    )?;
    assert!(p50 > 8e-6 && p50 < 32e-6, "tenant p50 RTT {p50}");

    // `run --once` prints the same JSON as `analyze`, from live data.
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .args([
            "run",
            "--once",
            "--prometheus",
            &prom.url(),
            "--window",
            "5s",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run --once failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("run --once printed no JSON; stderr: {stderr}"))?;
    assert_eq!(report["pairs_observed"], 30, "{report}");
    let faults = report["faults"].as_array().context("faults")?;
    assert_eq!(faults.len(), 1, "{report}");
    assert_eq!(
        (&faults[0]["kind"], &faults[0]["id"]),
        (&"tor".into(), &"t1".into()),
        "{report}"
    );
    Ok(())
}

#[test]
fn bad_flags_get_clear_errors() -> Result<()> {
    let run = |args: &[&str]| -> Result<(bool, String)> {
        let out = Command::new(bin_path("skeletonhunter-localizer"))
            .args(args)
            .output()?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    for (args, expect) in [
        (
            &["run", "--prometheus", "prom:9090", "--once"][..],
            "invalid URL \"prom:9090\"",
        ),
        (
            &[
                "run",
                "--prometheus",
                "http://127.0.0.2:1",
                "--interval",
                "10x",
            ][..],
            "--interval",
        ),
        (
            &[
                "run",
                "--prometheus",
                "http://127.0.0.2:1",
                "--protocol",
                "nosuch",
            ][..],
            "unknown protocol \"nosuch\"",
        ),
        (
            &[
                "run",
                "--prometheus",
                "http://127.0.0.2:1",
                "--queue-capacity",
                "0",
            ][..],
            "--queue-capacity",
        ),
        (
            &[
                "rules",
                "--prometheus",
                "http://127.0.0.2:1",
                "--window",
                "1x",
            ][..],
            "--window",
        ),
    ] {
        let (ok, stderr) = run(args)?;
        assert!(!ok, "{args:?} succeeded");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // Unreachable store with --once: one failed cycle, a clear error, no hang.
    let (ok, stderr) = run(&[
        "run",
        "--prometheus",
        "http://127.0.0.2:1",
        "--once",
        "--timeout",
        "2s",
    ])?;
    assert!(!ok);
    assert!(
        stderr.contains("cannot reach http://127.0.0.2:1/api/v1/query"),
        "{stderr}"
    );
    Ok(())
}
