//! The online localizer (`skeletonhunter-localizer run`): every cycle,
//! query Prometheus, run the engine, and post / resolve component alerts
//! to Alertmanager while serving blame and health metrics.
//!
//! One file per job: [`settings`] (what the loop is told), [`cycle`] (one
//! cycle), [`queries`] (the cycle's queries: histogram form, timing),
//! [`findings`] (report to findings and blame), [`flapping`] (faults that
//! come and go become one `flapping` finding), [`confirm`] (which
//! findings may page and when they resolve), [`coverage`] (which pairs and
//! components a cycle has fresh data for), [`alerts`] (alert content and life cycle),
//! [`delivery`] (posting to every Alertmanager), [`record`] (what a cycle
//! read, decided and sent, written out in one place), [`metrics`] (the
//! served metrics), [`status`] (the status page at `/`), [`routes`] (the HTTP
//! endpoints: the page, `/metrics`, `/report`, health, readiness,
//! reload), [`service`] (runtime, ticker, SIGHUP, shutdown).

pub mod alerts;
pub mod confirm;
pub mod coverage;
mod cycle;
mod delivery;
pub mod findings;
#[cfg(test)]
mod fixtures;
pub mod flapping;
pub mod metrics;
pub mod overview;
mod queries;
mod record;
pub mod routes;
pub mod service;
pub mod settings;
mod shards;
pub mod status;

pub use service::run;
pub use settings::{ServiceError, Settings};
