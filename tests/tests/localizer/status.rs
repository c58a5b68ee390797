//! The localizer's status page in a real browser (Debian's headless
//! Chromium through Selenium), without the namespace fabric: the localizer
//! runs against a real Prometheus scraping the synthetic fabric
//! (`skeletonhunter_tests::localizer::FakeFabric`) and posts to a real
//! Alertmanager. The end-to-end fault test loads the same page on the
//! namespace fabric (`e2e/routed.rs`).

use anyhow::{Context, Result};
use skeletonhunter_tests::browser::{check_page, require_browser, PageCheck};
use skeletonhunter_tests::localizer::{
    start_alertmanager, start_store, tor, wait_for_only_alert, FakeFabric, Localizer, Store,
};
use skeletonhunter_tools::servers::free_loopback_addr;
use skeletonhunter_tools::wait_until;
use std::path::PathBuf;
use std::time::Duration;

/// Where to keep screenshots: `SKELETONHUNTER_SCREENSHOT_DIR`, if set.
fn screenshot(name: &str) -> Option<PathBuf> {
    std::env::var_os("SKELETONHUNTER_SCREENSHOT_DIR").map(|d| PathBuf::from(d).join(name))
}

/// Healthy: the page says nothing is alerted and draws the 2 × 2 ToR
/// matrix. 30% loss at ToR t1: once Alertmanager has the alert, the page
/// shows t1 firing, alone, in the banner and the verdict table. Neither
/// load logs a console error (the page's policy forbids scripts, so any
/// script, or any request the policy blocks, would show there).
#[test]
fn status_page_shows_the_blamed_tor_in_a_browser() {
    if !require_browser("status_page_shows_the_blamed_tor_in_a_browser") {
        return;
    }
    run().unwrap_or_else(|e| panic!("{e:#}"));
}

fn run() -> Result<()> {
    let fabric = FakeFabric::start()?;
    let db = start_store(Store::Prometheus, &fabric)?;
    let am = start_alertmanager(free_loopback_addr()?)?;
    let loc = Localizer::start(&db.url(), Some(&am.url()))?;
    let url = format!("http://{}/", loc.addr());
    wait_until(
        "a successful cycle with all 30 pairs",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || (loc.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;

    let healthy = check_page(
        None,
        &PageCheck {
            url: url.clone(),
            expect: None,
            timeout: Duration::from_secs(30),
            screenshot: screenshot("status-healthy.png"),
        },
    )?;
    println!("healthy page: {healthy:?}");
    assert_eq!(healthy.banner, "No component is alerted.", "{healthy:?}");
    assert!(healthy.verdicts.is_empty(), "{healthy:?}");
    assert_eq!(healthy.matrix_cells, 4, "two ToRs: {healthy:?}");
    assert!(healthy.console_errors.is_empty(), "{healthy:?}");

    fabric.set_fault(Some((tor("t1"), 0.3)));
    wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(60))
        .with_context(|| format!("localizer log:\n{}", loc.child.log()))?;
    let faulty = check_page(
        None,
        &PageCheck {
            url,
            expect: Some(("tor".into(), "t1".into())),
            timeout: Duration::from_secs(60),
            screenshot: screenshot("status-tor-fault.png"),
        },
    )?;
    println!("page with the fault: {faulty:?}");
    assert!(faulty.banner.contains("tor t1"), "{faulty:?}");
    assert!(
        faulty
            .verdicts
            .iter()
            .all(|v| v.kind == "tor" && v.id == "t1"),
        "only t1 is blamed: {faulty:?}"
    );
    assert!(faulty.console_errors.is_empty(), "{faulty:?}");
    Ok(())
}
