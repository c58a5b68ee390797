//! What a scrape sees: series sets replaced whole under the lock the
//! encoding also takes, the last report for `/report`, and when a cycle
//! last analyzed complete data, for `/-/ready`.

use super::{
    AlertLabels, AreaLabels, AreaPairsLabels, AreaQuantileLabels, ComponentLabels,
    HistogramsLabels, JobImpactLabels, JobLayoutLabels, LeLabels, Metrics, WorstPairLabels,
};
use crate::input::histograms::RttForm;
use crate::jobs::impact::JobImpact;
use crate::online::overview::Overview;
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

    /// Replace the overview series with a trusted cycle's figures: areas
    /// (and ToRs, spines, tenants) gone from the pairs lose their series.
    pub fn set_overview(&self, o: &Overview) {
        let _g = lock(&self.update);
        self.area_loss.clear();
        self.area_rtt.clear();
        self.worst_loss.clear();
        self.worst_rtt.clear();
        self.area_pairs.clear();
        self.pairs_by_rtt.clear();
        for a in &o.areas {
            let (scope, id) = (a.scope, a.id.clone());
            if let Some(loss) = a.loss {
                let l = AreaLabels {
                    scope,
                    id: id.clone(),
                };
                self.area_loss.get_or_create(&l).set(loss);
            }
            for (state, n) in [("all", a.pairs), ("unreachable", a.unreachable)] {
                let l = AreaPairsLabels {
                    scope,
                    id: id.clone(),
                    state,
                };
                self.area_pairs.get_or_create(&l).set(n as i64);
            }
            for &(q, rtt) in &a.rtt {
                let l = AreaQuantileLabels {
                    scope,
                    id: id.clone(),
                    quantile: q.to_string(),
                };
                self.area_rtt.get_or_create(&l).set(rtt);
            }
        }
        for &(le, n) in &o.rtt_buckets {
            let le = if le.is_finite() {
                le.to_string()
            } else {
                "+Inf".to_string()
            };
            self.pairs_by_rtt
                .get_or_create(&LeLabels { le })
                .set(n as i64);
        }
        for w in &o.worst {
            let l = WorstPairLabels {
                src_node: w.src.clone(),
                dst_node: w.dst.clone(),
                src_tor: w.src_tor.clone(),
                dst_tor: w.dst_tor.clone(),
                tenant: w.tenant.clone(),
            };
            self.worst_loss.get_or_create(&l).set(w.loss);
            if let Some(rtt) = w.rtt {
                self.worst_rtt.get_or_create(&l).set(rtt);
            }
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

    /// Replace the job layout series with `layouts` (a job that ended, or
    /// whose groups are no longer known, loses its series).
    pub fn set_job_layouts(&self, layouts: &[JobLayoutLabels]) {
        let _g = lock(&self.update);
        self.job_layout.clear();
        for l in layouts {
            self.job_layout.get_or_create(l).set(1);
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
