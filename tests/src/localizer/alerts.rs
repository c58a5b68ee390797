//! Reading the localizer's alerts back from Alertmanager, with bounded
//! waits that fail as soon as a wrong component is alerted.

use anyhow::{bail, Result};
use serde_json::Value;
use skeletonhunter_common::topology::{Component, Kind};
use skeletonhunter_tools::servers::Server;
use std::time::{Duration, Instant};

/// The alert name the localizer posts its verdicts under.
pub const ALERT: &str = "SkeletonHunterComponentFaulty";

/// Alertmanager's active SkeletonHunter alerts.
pub fn sh_alerts(am: &Server) -> Result<Vec<Value>> {
    Ok(am
        .alerts()?
        .into_iter()
        .filter(|a| {
            a["labels"]["alertname"]
                .as_str()
                .is_some_and(|n| n.starts_with("SkeletonHunter"))
                && a["status"]["state"] == "active"
        })
        .collect())
}

/// One line of labels per alert, for failure messages.
pub fn describe(alerts: &[Value]) -> String {
    alerts
        .iter()
        .map(|a| a["labels"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether alert `a` blames component `kind/id`.
pub fn is_component(a: &Value, kind: &str, id: &str) -> bool {
    a["labels"]["kind"] == kind && a["labels"]["component"] == id
}

/// Wait for the alert of `kind/id`, failing at once if another component is
/// alerted meanwhile.
pub fn wait_for_only_alert(am: &Server, kind: &str, id: &str, timeout: Duration) -> Result<Value> {
    let mut alerts = wait_for_alerts_among(am, &[(kind, id)], |_| true, timeout)?;
    Ok(alerts.swap_remove(0))
}

/// Wait until the active alerts satisfy `done`, failing at once if a
/// component outside `allowed` is alerted meanwhile.
pub fn wait_for_alerts_among(
    am: &Server,
    allowed: &[(&str, &str)],
    done: impl Fn(&[Value]) -> bool,
    timeout: Duration,
) -> Result<Vec<Value>> {
    let deadline = Instant::now() + timeout;
    loop {
        let alerts = sh_alerts(am)?;
        if alerts
            .iter()
            .any(|a| !allowed.iter().any(|(k, i)| is_component(a, k, i)))
        {
            bail!(
                "a component outside {allowed:?} was alerted:\n{}",
                describe(&alerts)
            );
        }
        if !alerts.is_empty() && done(&alerts) {
            return Ok(alerts);
        }
        if Instant::now() > deadline {
            bail!(
                "alerts for {allowed:?} not as expected within {timeout:?}; have:\n{}",
                describe(&alerts)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The ToR named `id`, as a fault target.
pub fn tor(id: &str) -> Component {
    Component::new(Kind::Tor, id)
}
