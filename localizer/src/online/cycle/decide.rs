//! What a cycle decides from its findings: confirmation, flapping, then
//! the alert book; what fires and resolves is logged and noted for the
//! status page.

use super::Localizer;
use crate::clients::alertmanager::PostableAlert;
use crate::online::alerts::{AlertKey, Finding};
use crate::online::confirm::{Confirmer, Held, Kept};
use crate::online::coverage::CycleCoverage;
use crate::online::flapping::FlapDetector;
use crate::online::status::Event;
use skeletonhunter_common::topology::Component;
use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

impl Localizer {
    /// Confirmation, flapping, then the alert book; logs what fires and
    /// resolves, and notes it in `events` for the page.
    pub(super) fn decide(
        &mut self,
        found: Vec<Finding>,
        coverage: &CycleCoverage,
        now: SystemTime,
        events: &mut Vec<Event>,
    ) -> Vec<PostableAlert> {
        let covered = |c: &Component| coverage.is_covered(c);
        let (found, held) = gate(&mut self.confirmer, &mut self.flaps, found, &covered, now);
        log_held(&held);
        for (c, why) in self.confirmer.kept() {
            match why {
                Kept::Unknown => tracing::info!(
                    "unknown: {c} has too few pairs with fresh data; its alert stays as it was"
                ),
                Kept::Clearing { clean } => {
                    tracing::debug!("clearing: {c} clean in {clean} covered cycle(s)");
                }
                Kept::Beneath { child } => {
                    tracing::info!("not clean: {child} was reported beneath {c}; its alert stays");
                }
            }
        }
        let before: BTreeSet<AlertKey> = self.book.active_keys().cloned().collect();
        let after: HashMap<AlertKey, Finding> =
            found.iter().map(|f| (f.key(), f.clone())).collect();
        let alerts = self.book.update(found, now);
        for key in self.book.active_keys().filter(|k| !before.contains(k)) {
            events.push(Event {
                fired: true,
                kind: key.kind.as_str().to_string(),
                id: key.id.clone(),
                severity: key.severity.as_str().to_string(),
            });
            if let Some(f) = after.get(key) {
                tracing::warn!(
                    "fault: {} {} ({}, {})",
                    f.component.kind,
                    f.component.id,
                    f.symptom,
                    key.severity.as_str()
                );
            }
        }
        for a in alerts.iter().filter(|a| a.resolved) {
            let label = |k: &str| a.labels.get(k).cloned().unwrap_or_default();
            events.push(Event {
                fired: false,
                kind: label("kind"),
                id: label("component"),
                severity: label("severity"),
            });
            tracing::info!(
                "resolved: {} {} ({})",
                label("kind"),
                label("component"),
                label("severity")
            );
        }
        alerts
    }
}

/// The findings of one cycle that alert: those the confirmation admits
/// (and the ones it keeps while they resolve), then flapping over them.
/// In this order flapping counts what alerts, not what the engine
/// reported: a finding held at the edges of another fault never pages,
/// so it never flaps either.
fn gate(
    confirmer: &mut Confirmer,
    flaps: &mut FlapDetector,
    found: Vec<Finding>,
    covered: &dyn Fn(&Component) -> bool,
    now: SystemTime,
) -> (Vec<Finding>, Vec<(Finding, Held)>) {
    let (admitted, held) = confirmer.admit_covered(found, covered, now);
    (flaps.observe(admitted, covered), held)
}

/// Log why findings did not alert.
fn log_held(held: &[(Finding, Held)]) {
    for (f, why) in held {
        match why {
            Held::Unconfirmed { seen } => tracing::debug!(
                "unconfirmed: {} ({}) seen in {seen} consecutive cycle(s)",
                f.component,
                f.symptom
            ),
            Held::AfterClear { cleared } => tracing::info!(
                "held: {} ({}) until leftovers of the cleared {cleared} are out of the window",
                f.component,
                f.symptom
            ),
            Held::Beneath { parent } => tracing::info!(
                "held: {} ({}) while it may be the onset of {parent}",
                f.component,
                f.symptom
            ),
        }
    }
}

#[cfg(test)]
mod tests;
