//! What a scrape sees: series sets replaced whole under the lock the
//! encoding also takes, the last report for `/report`, and when a cycle
//! last analyzed complete data, for `/-/ready`.

use super::{AlertLabels, ComponentLabels, HistogramsLabels, JobImpactLabels, Metrics};
use crate::input::histograms::RttForm;
use crate::jobs::impact::JobImpact;
use skeletonhunter_common::exposition;
use skeletonhunter_common::http::Reply;
use skeletonhunter_common::topology::Component;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// `m` locked, poisoned or not: what the locks here guard (a unit, a JSON
/// text, an instant) is whole whatever panicked while holding them.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Metrics {
    /// A cycle analyzed complete data now.
    pub fn mark_cycle_ok(&self) {
        *lock(&self.last_ok) = Some(Instant::now());
    }

    /// Time since the last cycle that analyzed complete data (`None`: none
    /// yet).
    pub fn since_cycle_ok(&self) -> Option<Duration> {
        lock(&self.last_ok).map(|t| t.elapsed())
    }

    /// The RTT query form in use (one series; absent until decided).
    pub fn set_histograms(&self, mode: RttForm) {
        let _g = lock(&self.update);
        self.histograms.clear();
        self.histograms
            .get_or_create(&HistogramsLabels { mode })
            .set(1);
    }

    /// Replace the `skeletonhunter_component_alerting` series with the
    /// alerts held firing now.
    pub fn set_alerting(&self, alerts: impl IntoIterator<Item = AlertLabels>) {
        let _g = lock(&self.update);
        self.alerting.clear();
        for l in alerts {
            self.alerting.get_or_create(&l).set(1);
        }
    }

    /// Replace the job impact series with those of the alerting
    /// components (each with the jobs its latest finding touches).
    pub fn set_job_impact<'a>(
        &self,
        alerting: impl IntoIterator<Item = &'a (Component, Vec<JobImpact>)>,
    ) {
        let _g = lock(&self.update);
        self.job_impact.clear();
        for (c, jobs) in alerting {
            for j in jobs {
                for (scope, ranks) in [
                    ("under", j.ranks_under),
                    ("hit", j.ranks_hit),
                    ("all", j.ranks),
                ] {
                    let l = JobImpactLabels {
                        kind: c.kind.as_str().to_string(),
                        id: c.id.clone(),
                        tenant: j.job.clone(),
                        scope,
                    };
                    self.job_impact.get_or_create(&l).set(ranks as i64);
                }
            }
        }
    }

    /// Replace the blame series with this cycle's verdicts: `blamed` maps a
    /// component to (score, faulty).
    pub fn set_blame(&self, blamed: &BTreeMap<Component, (f64, bool)>) {
        let _g = lock(&self.update);
        self.blame.clear();
        self.faulty.clear();
        for (c, (score, faulty)) in blamed {
            let l = ComponentLabels {
                kind: c.kind.as_str().to_string(),
                id: c.id.clone(),
            };
            self.blame.get_or_create(&l).set(*score);
            self.faulty.get_or_create(&l).set(i64::from(*faulty));
        }
    }

    /// Keep the last report's JSON for `/report`.
    pub fn set_report(&self, json: String) {
        *lock(&self.report) = json;
    }

    /// The last report's JSON.
    pub fn report(&self) -> String {
        lock(&self.report).clone()
    }

    /// The exposition for a scrape with this `Accept` header.
    pub fn encode(&self, accept: Option<&str>) -> Reply {
        let _g = lock(&self.update);
        exposition::render(&self.registry, accept, 64 * 1024)
    }
}
